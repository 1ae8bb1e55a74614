package integration_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/grpc"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// TestProgressRidesOnFailure checks, on a real server, that with
// activities.Activities.ProgressInterceptor on the worker's client a
// retry's and a poll's progress reaches the next attempt without a
// heartbeat call (a Temporal action of its own), and that a client
// without it heartbeats as before. What shows the progress arrived: the
// 429s' attempts count against MaximumAttempts and are known not to have
// been processed (Failure.OutcomeUnknown false: an attempt that left no
// progress would count as one of unknown outcome); a followed operation
// ends after as many polls as the server saw.
func TestProgressRidesOnFailure(t *testing.T) {
	var throttled, failed atomic.Int32
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/throttled":
			throttled.Add(1)
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
		case "/failing":
			if failed.Add(1) <= 3 {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			w.WriteHeader(http.StatusCreated)
		}
	}))
	t.Cleanup(api.Close)
	async := testsuite.StartServer(t, testsuite.Options{Async: &testsuite.Async{Duration: 4 * time.Second, RetryAfter: 1}})

	tests := []struct {
		name  string
		carry bool
		req   workflows.Request
		// wantBeats is how many heartbeat calls the worker made.
		wantBeats int32
		check     func(t *testing.T, resp *workflows.Response, err error)
	}{
		{
			name: "retries carried", carry: true, wantBeats: 0,
			req: workflows.Request{Method: "POST", URL: api.URL + "/failing", Body: []byte(`{}`), Retry: workflows.RetryOptions{InitialInterval: 200 * time.Millisecond, MaximumAttempts: 5}},
			check: func(t *testing.T, resp *workflows.Response, err error) {
				if err != nil || resp.Status != http.StatusCreated {
					t.Fatalf("got %+v, %v; want 201 after three 503s", resp, err)
				}
			},
		},
		{
			name: "budget spent on throttles carried", carry: true, wantBeats: 0,
			req:   workflows.Request{Method: "POST", URL: api.URL + "/throttled", Body: []byte(`{}`), Retry: workflows.RetryOptions{MaximumAttempts: 3}},
			check: checkThrottledOut,
		},
		{
			name: "budget spent on throttles heartbeated", carry: false, wantBeats: 2,
			req:   workflows.Request{Method: "POST", URL: api.URL + "/throttled", Body: []byte(`{}`), Retry: workflows.RetryOptions{MaximumAttempts: 3}},
			check: checkThrottledOut,
		},
		{
			name: "polls carried", carry: true, wantBeats: 0,
			req: workflows.Request{Method: "POST", URL: async.URL + "/orders", Body: []byte(`{}`), Follow: &workflows.FollowOptions{Timeout: time.Minute}},
			check: func(t *testing.T, resp *workflows.Response, err error) {
				if err != nil || resp.Status/100 != 2 {
					t.Fatalf("got %+v, %v; want the operation's result", resp, err)
				}
				if st := async.Stats(); st.Polls < 3 {
					t.Errorf("the monitor saw %d polls; want at least 3 (an operation of 4 s, Retry-After 1)", st.Polls)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			throttled.Store(0)
			failed.Store(0)
			tq := uniqueName(t, "tq")
			beats := startCountingWorker(t, tq, tt.carry, api.URL, async.URL)
			ctx := ctxT(t, 2*time.Minute)
			tt.req.Operation = "charge"
			_, resp, err := call(t, ctx, tq, uniqueName(t, "wf"), tt.req)
			tt.check(t, resp, err)
			if got := beats.Load(); got != tt.wantBeats {
				t.Errorf("the worker made %d heartbeat calls; want %d", got, tt.wantBeats)
			}
		})
	}
}

// checkThrottledOut checks a call whose three attempts were all
// throttled: it failed for want of attempts, known not processed.
func checkThrottledOut(t *testing.T, _ *workflows.Response, err error) {
	t.Helper()
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) {
		t.Fatalf("got %v; want the call's ApplicationError", err)
	}
	var f workflows.Failure
	if derr := appErr.Details(&f); derr != nil {
		t.Fatalf("reading the failure's details: %v", derr)
	}
	if f.Attempt != 3 || f.OutcomeUnknown {
		t.Errorf("failure after attempt %d, OutcomeUnknown %v; want attempt 3, false (every attempt's progress reached the next): %v", f.Attempt, f.OutcomeUnknown, err)
	}
	if !strings.Contains(err.Error(), "last of 3 attempts") {
		t.Errorf("got %v; want the budget spent", err)
	}
}

// startCountingWorker runs the activities and the ready workflow on tq in
// the test process, on a client dialed with the activities'
// ProgressInterceptor when carry, and returns the count of its heartbeat
// calls.
func startCountingWorker(t *testing.T, tq string, carry bool, origins ...string) *atomic.Int32 {
	t.Helper()
	acts, err := activities.New(activities.Config{AllowedOrigins: origins})
	if err != nil {
		t.Fatal(err)
	}
	beats := new(atomic.Int32)
	count := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if strings.HasSuffix(method, "/RecordActivityTaskHeartbeat") {
			beats.Add(1)
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	var logs syncBuffer
	opts := client.Options{Logger: sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})))}
	dial := []grpc.DialOption{grpc.WithChainUnaryInterceptor(count)}
	if carry {
		dial = append(dial, grpc.WithChainUnaryInterceptor(acts.ProgressInterceptor(nil)))
	}
	opts.ConnectionOptions.DialOptions = dial
	c, err := dev.Dial(opts)
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, c, acts, tq, uniqueName(t, "worker"), &logs)
	return beats
}
