package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/internal/backoff"
	"github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// GapStats summarises gaps between a failed request and its retry, as the
// server saw them.
type GapStats struct {
	Name string          `json:"name"`
	Want time.Duration   `json:"want_ns"`
	Gaps []time.Duration `json:"gaps_ns"`
	Min  time.Duration   `json:"min_ns"`
	P50  time.Duration   `json:"p50_ns"`
	Max  time.Duration   `json:"max_ns"`
}

func gapStats(name string, want time.Duration, gaps []time.Duration) GapStats {
	g := GapStats{Name: name, Want: want, Gaps: gaps}
	if len(gaps) == 0 {
		return g
	}
	s := append([]time.Duration(nil), gaps...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	g.Min, g.P50, g.Max = s[0], s[len(s)/2], s[len(s)-1]
	return g
}

// gapCase is one retry-spacing measurement through Temporal: the server
// answers the first request with Status (and RetryAfter, if set), the
// workflow retries with Retry, and the gap to the second request is kept.
type gapCase struct {
	Name       string
	Want       time.Duration
	Status     int
	RetryAfter string
	Retry      workflows.RetryOptions
}

// retryAfterCases are the cases runGap measures: the Retry-After: 1 target,
// an immediate retry (Retry-After: 0, so NextRetryDelay is the 1 ms floor)
// and Temporal's own 200 ms interval (JitterNone sets no NextRetryDelay).
func retryAfterCases() []gapCase {
	return []gapCase{
		{Name: "Retry-After: 1 (NextRetryDelay 1 s)", Want: time.Second, Status: http.StatusServiceUnavailable, RetryAfter: "1"},
		{Name: "Retry-After: 0 (NextRetryDelay 1 ms)", Want: backoff.MinRetryDelay, Status: http.StatusServiceUnavailable, RetryAfter: "0"},
		{Name: "Temporal's own interval 200 ms (JitterNone)", Want: 200 * time.Millisecond, Status: http.StatusServiceUnavailable,
			Retry: workflows.RetryOptions{InitialInterval: 200 * time.Millisecond, Jitter: backoff.JitterNone}},
	}
}

// runGap runs c n times, one workflow at a time, on h.
func runGap(ctx context.Context, h *harness, c gapCase, n int, tag string) (GapStats, error) {
	srv := testsuite.NewServer(testsuite.Options{})
	h.Target.Set(srv)
	defer h.Target.Set(okHandler())
	var gaps []time.Duration
	for i := range n {
		srv.Script(testsuite.Fail(c.Status, c.RetryAfter), testsuite.Step{})
		before := len(srv.Log())
		run, err := h.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
			ID: fmt.Sprintf("gap-%s-%d-%d", tag, time.Now().UnixNano(), i), TaskQueue: h.TaskQueue,
		}, workflows.WorkflowName, workflows.Request{
			Operation: "charge", URL: h.Target.URL + "/charges", Body: []byte(`{"amount":42}`), Retry: c.Retry,
		})
		if err != nil {
			return GapStats{}, err
		}
		var resp workflows.Response
		if err := run.Get(ctx, &resp); err != nil {
			return GapStats{}, fmt.Errorf("%s: %w", c.Name, err)
		}
		log := srv.Log()[before:]
		if len(log) != 2 || resp.Attempt != 2 {
			return GapStats{}, fmt.Errorf("%s: want 2 requests and success on attempt 2, got %d requests, attempt %d", c.Name, len(log), resp.Attempt)
		}
		gaps = append(gaps, log[1].Time.Sub(log[0].Time))
	}
	return gapStats(c.Name, c.Want, gaps), nil
}

// runSleepFloor is the floor for the Retry-After: 1 gap: a plain Go loop
// that POSTs, gets the 503, sleeps d with time.Sleep and POSTs again, n times,
// against the same kind of server, measured the same way (server side).
func runSleepFloor(ctx context.Context, target *targetServer, d time.Duration, n int) (GapStats, error) {
	srv := testsuite.NewServer(testsuite.Options{})
	target.Set(srv)
	defer target.Set(okHandler())
	c := &http.Client{Transport: newTransport()}
	post := func(key string) (int, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, target.URL+"/charges", bytes.NewReader([]byte(`{"amount":42}`)))
		if err != nil {
			return 0, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(activities.IdempotencyKeyHeader, key)
		resp, err := c.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, nil
	}
	var gaps []time.Duration
	for i := range n {
		srv.Script(testsuite.Fail(http.StatusServiceUnavailable, "1"), testsuite.Step{})
		before := len(srv.Log())
		key := fmt.Sprintf("sleep-floor-%d-%d", time.Now().UnixNano(), i)
		if st, err := post(key); err != nil || st != http.StatusServiceUnavailable {
			return GapStats{}, fmt.Errorf("sleep floor: first request: %v, status %d", err, st)
		}
		time.Sleep(d)
		if st, err := post(key); err != nil || st != http.StatusCreated {
			return GapStats{}, fmt.Errorf("sleep floor: retry: %v, status %d", err, st)
		}
		log := srv.Log()[before:]
		gaps = append(gaps, log[1].Time.Sub(log[0].Time))
	}
	return gapStats(fmt.Sprintf("Go loop: time.Sleep(%s)", d), d, gaps), nil
}
