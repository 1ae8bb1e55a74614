package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"

	"go.temporal.io/sdk/activity"
	sdklog "go.temporal.io/sdk/log"
	sdktestsuite "go.temporal.io/sdk/testsuite"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/harness/registered"
	"github.com/idemhttp/temporal-idempotent-http/internal/input"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// stopwatch is the part of a benchmark timer the overhead loops use:
// *testing.B satisfies it under go test, and the bench command times the
// same loops with a [meter]. A loop calls ResetTimer after its set-up and
// StopTimer before its tear-down.
type stopwatch interface {
	ResetTimer()
	StopTimer()
}

// overhead compares one attempt of the HTTP activity with a raw net/http
// POST and body read against the same loopback server (okHandler), each
// with its own client on an identical Transport (see newTransport). Each of
// its loops runs n operations and times them on a stopwatch.
type overhead struct {
	srv       *httptest.Server
	acts      *activities.Activities
	attempt   func(context.Context, input.Input) (*workflows.Response, error) // acts' HTTP activity
	rawClient *http.Client
	req       input.Input
	url       string
	body      []byte
}

// newOverhead starts the loopback server. Close it when done.
func newOverhead() (*overhead, error) {
	o := &overhead{srv: httptest.NewServer(okHandler())}
	o.url = o.srv.URL + "/charges"
	o.body = []byte(`{"amount":42,"currency":"EUR"}`)
	var err error
	o.acts, err = activities.New(activities.Config{
		AllowedOrigins: []string{o.srv.URL},
		HTTPClient:     &http.Client{Transport: newTransport()},
		// Admission on, at a rate that never makes an attempt wait: its
		// per-attempt bookkeeping is measured, not the slow start's ramp
		// from 10 requests/s (which would hold the first round's attempts).
		Admission: activities.Admission{InitialRate: 1e9},
	})
	if err != nil {
		o.srv.Close()
		return nil, err
	}
	o.attempt = registered.Of(o.acts).Do
	o.rawClient = &http.Client{Transport: newTransport()}
	o.req = input.Input{
		Operation: "charge", Method: http.MethodPost, URL: o.url, Body: o.body,
		IdempotencyKey: "5f0c2f3e-8a55-5d2c-9a77-2b1f3c4d5e6f",
	}
	return o, nil
}

// Close stops the server.
func (o *overhead) Close() { o.srv.Close() }

// raw is the baseline with context.Background(): NewRequestWithContext,
// Content-Type and Idempotency-Key headers, Do, io.ReadAll of the body,
// Close, status check.
func (o *overhead) raw(sw stopwatch, n int) error {
	ctx := context.Background()
	sw.ResetTimer()
	for range n {
		if err := o.rawPost(ctx); err != nil {
			return err
		}
	}
	sw.StopTimer()
	return nil
}

// rawInActivity is the same raw POST n times inside one activity execution,
// with the activity's context, as a hand-written activity would send it:
// the baseline that differs from doInActivity only by Do's own work.
func (o *overhead) rawInActivity(sw stopwatch, n int) error {
	return o.inActivity(sw, n, slog.LevelInfo, o.rawPost)
}

func (o *overhead) rawPost(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, o.url, bytes.NewReader(o.body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(activities.IdempotencyKeyHeader, o.req.IdempotencyKey)
	resp, err := o.rawClient.Do(req)
	if err != nil {
		return err
	}
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusCreated || len(data) == 0 {
		return fmt.Errorf("raw POST: %v, status %d", err, resp.StatusCode)
	}
	return nil
}

func (o *overhead) do(ctx context.Context) error {
	resp, err := o.attempt(ctx, o.req)
	if err != nil {
		return err
	}
	if resp.Status != http.StatusCreated {
		return fmt.Errorf("status %d", resp.Status)
	}
	return nil
}

// benchLogger formats every record at level or above as JSON, as
// cmd/worker's logger does, but throws it away: the activity's logging costs
// what it costs in production.
func benchLogger(level slog.Level) sdklog.Logger {
	return sdklog.NewStructuredLogger(slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: level})))
}

// doInActivity is Activities.Do's whole work for one attempt (validate,
// build the request, send, read and cap the body, classify, build the
// result, log and count), called n times inside one activity execution of
// Temporal's TestActivityEnvironment: Do gets a real activity context
// (activity.GetInfo, logger, metrics handler) while the environment's own
// cost (payload encoding, a goroutine per execution) stays outside the
// timed loop. This is the lightest honest way to run Do: it cannot run
// without an activity context. The logger is at Info, as cmd/worker's
// default, so Do's "HTTP request succeeded" line is formatted.
func (o *overhead) doInActivity(sw stopwatch, n int) error {
	return o.inActivity(sw, n, slog.LevelInfo, o.do)
}

// doInActivityWarn is doInActivity with the logger at Warn: Do's one Info
// line per successful attempt is not formatted. The difference is what that
// line costs.
func (o *overhead) doInActivityWarn(sw stopwatch, n int) error {
	return o.inActivity(sw, n, slog.LevelWarn, o.do)
}

// inActivity runs op n times inside one activity execution.
func (o *overhead) inActivity(sw stopwatch, n int, level slog.Level, op func(context.Context) error) error {
	var s sdktestsuite.WorkflowTestSuite
	s.SetLogger(benchLogger(level))
	env := s.NewTestActivityEnvironment()
	env.RegisterActivityWithOptions(func(ctx context.Context) error {
		if activity.GetInfo(ctx).ActivityType.Name == "" {
			return fmt.Errorf("no activity context")
		}
		sw.ResetTimer()
		for range n {
			if err := op(ctx); err != nil {
				return err
			}
		}
		sw.StopTimer()
		return nil
	}, activity.RegisterOptions{Name: "BenchLoop"})
	_, err := env.ExecuteActivity("BenchLoop")
	return err
}

// doPerExecution runs one TestActivityEnvironment.ExecuteActivity of the
// registered activity per operation: Do plus the test environment's own
// per-execution work (encoding the input, running the activity on a new
// goroutine, decoding the result). It is not what a worker pays per attempt
// (a worker has its own, different, per-task cost, measured by the
// throughput run); it shows how much of a naive measurement is the harness.
func (o *overhead) doPerExecution(sw stopwatch, n int) error {
	var s sdktestsuite.WorkflowTestSuite
	s.SetLogger(benchLogger(slog.LevelInfo))
	env := s.NewTestActivityEnvironment()
	o.acts.Register(env)
	sw.ResetTimer()
	for range n {
		v, err := env.ExecuteActivity(input.ActivityName, o.req)
		if err != nil {
			return err
		}
		var resp workflows.Response
		if err := v.Get(&resp); err != nil || resp.Status != http.StatusCreated {
			return fmt.Errorf("activity: %v, status %d", err, resp.Status)
		}
	}
	sw.StopTimer()
	return nil
}
