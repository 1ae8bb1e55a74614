package interop_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// scenario is one row of the table.
type scenario struct {
	name  string
	title string
	setup setup
	// testEnvSetup, if set, replaces setup in Temporal's test environment,
	// where retry waits take no time: a processing time counted in 409s.
	testEnvSetup *setup
	// keyHeader, if set, is the key header of the worker's convention for
	// the server, instead of the one the server reads.
	keyHeader string
	run       func(t *testing.T, c *cell)
}

// cell is one scenario against one server in one environment.
type cell struct {
	srv  server
	tg   target
	exec execFunc
	wfID string
	row  *row
}

const (
	bodyA = `{"amount":4200,"currency":"EUR"}`
	bodyB = `{"amount":9900,"currency":"EUR"}`
)

// request is the payment request of the scenarios.
func (c *cell) request(body string, mod func(*workflows.Request)) workflows.Request {
	req := workflows.Request{
		Operation:              "charge",
		URL:                    c.tg.PaymentsURL(),
		Body:                   json.RawMessage(body),
		StartToCloseTimeout:    5 * time.Second,
		ScheduleToCloseTimeout: 60 * time.Second,
	}
	if mod != nil {
		mod(&req)
	}
	return req
}

// call runs the workflow and adds its outcome to the row.
func (c *cell) call(t *testing.T, req workflows.Request) (*workflows.Response, result, error) {
	t.Helper()
	start := time.Now()
	r := c.exec(t, c.wfID, req)
	c.row.addOutcome(describe(r.resp, r.err), time.Since(start), r.activity)
	if r.err != nil {
		t.Logf("workflow %s: %v", c.wfID, r.err)
	}
	return r.resp, r, r.err
}

// counts settles the server and puts its counts in the row.
func (c *cell) counts(t *testing.T, wait time.Duration) (requests, records int) {
	t.Helper()
	requests, records, statuses := settle(t, c.tg, wait)
	c.row.Requests, c.row.Records, c.row.Statuses = requests, records, statuses
	return requests, records
}

func wantSuccess(t *testing.T, err error) bool {
	t.Helper()
	if err != nil {
		t.Errorf("want success, got %v", err)
		return false
	}
	return true
}

func wantErrType(t *testing.T, err error, typ string, nonRetry bool) {
	t.Helper()
	switch {
	case err == nil:
		t.Errorf("want a failure of type %s, got success", typ)
	case errType(err) != typ:
		t.Errorf("want error type %s, got %q: %v", typ, errType(err), err)
	case nonRetry && !nonRetryable(err):
		t.Errorf("want %s non-retryable, got a retryable one: %v", typ, err)
	}
}

var scenarios = []scenario{
	{
		name:  "seed",
		title: "seed: 503, 429 (Retry-After: 1), then processed",
		run: func(t *testing.T, c *cell) {
			c.tg.Script(t, "503,429:1")
			resp, _, err := c.call(t, c.request(bodyA, nil))
			if wantSuccess(t, err) && resp.Status != 201 {
				t.Errorf("status %d, want 201", resp.Status)
			}
			if req, rec := c.counts(t, 5*time.Second); req != 3 || rec != 1 {
				t.Errorf("%d requests and %d records, want 3 and 1", req, rec)
			}
		},
	},
	{
		name:  "rerun",
		title: "re-run of the workflow ID: same key, stored response",
		run: func(t *testing.T, c *cell) {
			first, _, err := c.call(t, c.request(bodyA, nil))
			if !wantSuccess(t, err) {
				return
			}
			second, _, err := c.call(t, c.request(bodyA, nil))
			if wantSuccess(t, err) {
				if second.IdempotencyKey != first.IdempotencyKey {
					t.Errorf("key %s on the re-run, %s on the first run", second.IdempotencyKey, first.IdempotencyKey)
				}
				if c.srv.marksReplay && !second.Replayed {
					t.Errorf("the re-run's response is not marked replayed")
				}
				if !bytes.Equal(second.Body, first.Body) {
					t.Errorf("the re-run got %s, the first run %s: want the stored response", second.Body, first.Body)
				}
			}
			if req, rec := c.counts(t, 5*time.Second); req != 2 || rec != 1 {
				t.Errorf("%d requests and %d records, want 2 and 1", req, rec)
			}
		},
	},
	{
		name:  "other-body",
		title: "same key, another body (re-run with a changed request)",
		run: func(t *testing.T, c *cell) {
			_, _, err := c.call(t, c.request(bodyA, nil))
			if !wantSuccess(t, err) {
				return
			}
			_, _, err = c.call(t, c.request(bodyB, nil))
			wantErrType(t, err, workflows.ErrTypeIdempotencyKeyReused, true)
			if req, rec := c.counts(t, 5*time.Second); req != 2 || rec != 1 {
				t.Errorf("%d requests and %d records, want 2 and 1", req, rec)
			}
		},
	},
	{
		name:  "in-flight",
		title: "in-flight duplicate: processing 3 s, 1 s per attempt",
		setup: setup{Delay: 3 * time.Second},
		// The first request outlasts its attempt and 2 duplicates.
		testEnvSetup: &setup{ReleaseAfter409: 2},
		run: func(t *testing.T, c *cell) {
			_, _, err := c.call(t, c.request(bodyA, func(r *workflows.Request) {
				r.StartToCloseTimeout = time.Second
				r.Retry.InitialInterval = 200 * time.Millisecond
			}))
			wantSuccess(t, err)
			if req, rec := c.counts(t, 5*time.Second); req < 2 || rec != 1 {
				t.Errorf("%d requests and %d records, want at least 2 and 1", req, rec)
			}
		},
	},
	{
		name:  "budget",
		title: "slower than the attempt budget: processing 8 s, 2 attempts of 1 s",
		setup: setup{Delay: 8 * time.Second},
		// The first request outlasts its attempt and 4 duplicates, more than
		// the 2 attempts of the budget.
		testEnvSetup: &setup{ReleaseAfter409: 4},
		run: func(t *testing.T, c *cell) {
			_, _, err := c.call(t, c.request(bodyA, func(r *workflows.Request) {
				r.StartToCloseTimeout = time.Second
				r.Retry.MaximumAttempts = 2
				r.Retry.InitialInterval = 200 * time.Millisecond
			}))
			wantSuccess(t, err)
			if _, rec := c.counts(t, 5*time.Second); rec != 1 {
				t.Errorf("%d records, want 1", rec)
			}
		},
	},
	{
		name:  "orphaned",
		title: "orphaned lock: the first request never answers (20 s budget)",
		setup: setup{Hang: true},
		run: func(t *testing.T, c *cell) {
			const budget = 20 * time.Second
			_, r, err := c.call(t, c.request(bodyA, func(r *workflows.Request) {
				r.StartToCloseTimeout = 2 * time.Second
				r.ScheduleToCloseTimeout = budget
				r.Retry.InitialInterval = 200 * time.Millisecond
			}))
			// The activity gives up itself: a schedule-to-close timeout
			// would fail it with a TimeoutError, or with the last attempt's
			// IdempotencyKeyInFlight.
			wantErrType(t, err, workflows.ErrTypeIdempotencyKeyLocked, false)
			if r.activity >= budget {
				t.Errorf("the activity ended %s after it was scheduled: want before the %s schedule-to-close deadline", r.activity.Round(time.Millisecond), budget)
			}
			if _, rec := c.counts(t, 0); rec != 0 {
				t.Errorf("%d records, want 0", rec)
			}
		},
	},
	{
		name:      "missing-key",
		title:     "missing key: the worker sends X-Idempotency-Key, the server reads Idempotency-Key; run twice",
		keyHeader: "X-Idempotency-Key",
		run: func(t *testing.T, c *cell) {
			_, _, err1 := c.call(t, c.request(bodyA, nil))
			if c.srv.keyOptional {
				// The server processes what it sees as a keyless request, every
				// time: both runs succeed and the re-run pays twice. The key
				// protects nothing when the two sides disagree on its header.
				_, _, err2 := c.call(t, c.request(bodyA, nil))
				wantSuccess(t, err1)
				wantSuccess(t, err2)
				if req, rec := c.counts(t, 5*time.Second); req != 2 || rec != 2 {
					t.Errorf("%d requests and %d records, want 2 and 2 (a duplicate)", req, rec)
				}
				return
			}
			// The server refuses a request without its key: 400, at once.
			wantErrType(t, err1, workflows.ErrTypeHTTPClientError, true)
			if req, rec := c.counts(t, 5*time.Second); req != 1 || rec != 0 {
				t.Errorf("%d requests and %d records, want 1 and 0", req, rec)
			}
		},
	},
}

// runSuite runs every scenario against every server in one environment,
// all in parallel, each against servers of its own.
func runSuite(t *testing.T, r runner) {
	starts := make([]func(t *testing.T, s setup) target, len(servers))
	for i, srv := range servers {
		starts[i] = srv.boot(t)
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			for i, srv := range servers {
				t.Run(strings.ReplaceAll(srv.name, "/", "-"), func(t *testing.T) {
					t.Parallel()
					row := results.add(r.name(), sc, srv.name)
					t.Cleanup(func() { row.finish(t.Failed()) })
					su := sc.setup
					if _, ok := r.(testEnv); ok && sc.testEnvSetup != nil {
						su = *sc.testEnvSetup
					}
					tg := starts[i](t, su)
					conv := srv.conv
					if sc.keyHeader != "" {
						conv.KeyHeader = sc.keyHeader
					}
					o := origin(t, tg.PaymentsURL())
					cfg := activities.Config{
						AllowedOrigins: []string{o},
						Conventions:    map[string]activities.Convention{o: conv},
					}
					c := &cell{srv: srv, tg: tg, exec: r.prepare(t, cfg), wfID: uniqueName(t, "wf"), row: row}
					sc.run(t, c)
				})
			}
		})
	}
}

// TestTestEnv runs the suite in Temporal's test environment.
func TestTestEnv(t *testing.T) {
	t.Parallel()
	runSuite(t, testEnv{})
}

// TestDevServer runs the suite on the Temporal dev server.
func TestDevServer(t *testing.T) {
	t.Parallel()
	runSuite(t, devServer{})
}
