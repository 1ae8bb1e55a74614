package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.temporal.io/sdk/activity"
	sdklog "go.temporal.io/sdk/log"
	sdktestsuite "go.temporal.io/sdk/testsuite"

	"github.com/idemhttp/temporal-idempotent-http/activities"
)

// Overhead compares one attempt of the HTTP activity with a raw net/http
// POST and body read against the same loopback server (OKHandler), each
// with its own client on an identical Transport (see [Transport]).
type Overhead struct {
	srv  *httptest.Server
	acts *activities.Activities
	raw  *http.Client
	req  activities.Request
	url  string
	body []byte
}

// NewOverhead starts the loopback server. Close it when done.
func NewOverhead() (*Overhead, error) {
	o := &Overhead{srv: httptest.NewServer(OKHandler())}
	o.url = o.srv.URL + "/charges"
	o.body = []byte(`{"amount":42,"currency":"EUR"}`)
	var err error
	o.acts, err = activities.New(activities.Config{
		AllowedOrigins: []string{o.srv.URL},
		HTTPClient:     &http.Client{Transport: Transport()},
	})
	if err != nil {
		o.srv.Close()
		return nil, err
	}
	o.raw = &http.Client{Transport: Transport()}
	o.req = activities.Request{
		Operation: "charge", Method: http.MethodPost, URL: o.url, Body: o.body,
		IdempotencyKey: "5f0c2f3e-8a55-5d2c-9a77-2b1f3c4d5e6f",
	}
	return o, nil
}

// Close stops the server.
func (o *Overhead) Close() { o.srv.Close() }

// Raw is the baseline with context.Background(): NewRequestWithContext,
// Content-Type and Idempotency-Key headers, Do, io.ReadAll of the body,
// Close, status check.
func (o *Overhead) Raw(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if err := o.rawPost(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}

// RawInActivity is the same raw POST b.N times inside one activity
// execution, with the activity's context, as a hand-written activity would
// send it: the baseline that differs from DoInActivity only by Do's own work.
func (o *Overhead) RawInActivity(b *testing.B) {
	o.inActivity(b, slog.LevelInfo, o.rawPost)
}

func (o *Overhead) rawPost(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, o.url, bytes.NewReader(o.body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(activities.IdempotencyKeyHeader, o.req.IdempotencyKey)
	resp, err := o.raw.Do(req)
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

func (o *Overhead) do(ctx context.Context) error {
	resp, err := o.acts.Do(ctx, o.req)
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

// DoInActivity is Activities.Do's whole work for one attempt (validate,
// build the request, send, read and cap the body, classify, build the
// result, log and count), called b.N times inside one activity execution of
// Temporal's TestActivityEnvironment: Do gets a real activity context
// (activity.GetInfo, logger, metrics handler) while the environment's own
// cost (payload encoding, a goroutine per execution) stays outside the
// timed loop. This is the lightest honest way to run Do: it cannot run
// without an activity context. The logger is at Info, as cmd/worker's
// default, so Do's "HTTP request succeeded" line is formatted.
func (o *Overhead) DoInActivity(b *testing.B) { o.inActivity(b, slog.LevelInfo, o.do) }

// DoInActivityWarn is DoInActivity with the logger at Warn: Do's one Info
// line per successful attempt is not formatted. The difference is what that
// line costs.
func (o *Overhead) DoInActivityWarn(b *testing.B) { o.inActivity(b, slog.LevelWarn, o.do) }

// inActivity runs op b.N times inside one activity execution.
func (o *Overhead) inActivity(b *testing.B, level slog.Level, op func(context.Context) error) {
	var s sdktestsuite.WorkflowTestSuite
	s.SetLogger(benchLogger(level))
	env := s.NewTestActivityEnvironment()
	env.RegisterActivityWithOptions(func(ctx context.Context) error {
		if activity.GetInfo(ctx).ActivityType.Name == "" {
			return fmt.Errorf("no activity context")
		}
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			if err := op(ctx); err != nil {
				return err
			}
		}
		b.StopTimer()
		return nil
	}, activity.RegisterOptions{Name: "BenchLoop"})
	if _, err := env.ExecuteActivity("BenchLoop"); err != nil {
		b.Fatal(err)
	}
}

// DoPerExecution runs one TestActivityEnvironment.ExecuteActivity of the
// registered activity per iteration: Do plus the test environment's own
// per-execution work (encoding the input, running the activity on a new
// goroutine, decoding the result). It is not what a worker pays per attempt
// (a worker has its own, different, per-task cost, measured by the
// throughput run); it shows how much of a naive measurement is the harness.
func (o *Overhead) DoPerExecution(b *testing.B) {
	var s sdktestsuite.WorkflowTestSuite
	s.SetLogger(benchLogger(slog.LevelInfo))
	env := s.NewTestActivityEnvironment()
	o.acts.Register(env)
	b.ReportAllocs()
	for b.Loop() {
		v, err := env.ExecuteActivity(activities.ActivityName, o.req)
		if err != nil {
			b.Fatal(err)
		}
		var resp activities.Response
		if err := v.Get(&resp); err != nil || resp.Status != http.StatusCreated {
			b.Fatalf("activity: %v, status %d", err, resp.Status)
		}
	}
}
