package workflows_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/internal/backoff"
	"github.com/idemhttp/temporal-idempotent-http/internal/defaults"
	"github.com/idemhttp/temporal-idempotent-http/internal/idemkey"
	"github.com/idemhttp/temporal-idempotent-http/internal/input"
	"github.com/idemhttp/temporal-idempotent-http/internal/rules"
	idemtest "github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// ChargeOrder is a business workflow as users write it: two operations,
// two keys, no retry loop.
func ChargeOrder(ctx workflow.Context, baseURL string, amount int) (string, error) {
	charge, err := workflows.Post(ctx, "charge", baseURL+"/payments", map[string]any{"amount": amount})
	if err != nil {
		return "", err
	}
	if _, err := workflows.Post(ctx, "receipt", baseURL+"/receipts", json.RawMessage(`{"send":true}`)); err != nil {
		return "", err
	}
	var rec struct{ ID string }
	if err := json.Unmarshal(charge.Body, &rec); err != nil {
		return "", err
	}
	return rec.ID, nil
}

// TestSeedScenario: 503, then 429 with Retry-After: 1, then 201 → 3 requests,
// one key, exactly one record; the wait before the third attempt is the
// Retry-After, on the test environment's clock. Then a 400 fails at once.
func TestSeedScenario(t *testing.T) {
	srv := idemtest.StartServer(t, idemtest.Options{})
	srv.Script(idemtest.Fail(503), idemtest.Fail(429, "1"))
	h := newHarness(t, srv, activities.Config{}, "order-1")
	resp, err := h.call(charge(srv))
	require.NoError(t, err)

	st := srv.Stats()
	assert.Equal(t, 3, st.Requests)
	assert.Equal(t, 1, st.DistinctKeys)
	assert.Equal(t, 1, st.Records)
	assert.Equal(t, 201, resp.Status)
	assert.Equal(t, int32(3), resp.Attempt)
	assert.False(t, resp.Replayed)
	want := idemkey.Derive(testNamespace, "order-1", "charge")
	assert.Equal(t, []string{want, want, want}, h.keys, "one key for every attempt")
	for _, l := range srv.Log() {
		assert.Equal(t, want, l.IdempotencyKey)
	}
	require.Len(t, h.starts, 3)
	assert.LessOrEqual(t, h.starts[1].Sub(h.starts[0]), backoff.DefaultInitialInterval, "first wait is full jitter in [0, base]")
	assert.Equal(t, time.Second, h.starts[2].Sub(h.starts[1]), "second wait is the server's Retry-After")

	// Then a 400 fails immediately.
	srv.Script(idemtest.Fail(400))
	h2 := newHarness(t, srv, activities.Config{}, "order-2")
	_, err = h2.call(charge(srv))
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "got %v", err)
	assert.Equal(t, workflows.ErrTypeHTTPClientError, appErr.Type())
	assert.True(t, appErr.NonRetryable())
	assert.Equal(t, 4, srv.Stats().Requests, "exactly one more request")
	assert.Len(t, h2.starts, 1)
	d, ok := workflows.AsFailure(err)
	require.True(t, ok)
	assert.Equal(t, 400, d.Status)
	assert.Equal(t, int32(1), d.Attempt)
}

func TestRetryPolicyLimits(t *testing.T) {
	tests := []struct {
		name         string
		opts         idemtest.Options
		req          func(workflows.Request) workflows.Request
		wantType     string
		wantRequests int
		maxElapsed   time.Duration
	}{
		{
			name:         "attempts run out",
			opts:         idemtest.Options{FailureRate: 1},
			req:          func(r workflows.Request) workflows.Request { return r },
			wantType:     workflows.ErrTypeHTTPRetryableStatus,
			wantRequests: defaults.MaximumAttempts,
			maxElapsed:   time.Minute,
		},
		{
			name:         "custom attempts",
			opts:         idemtest.Options{FailureRate: 1, FailureStatus: 502},
			req:          func(r workflows.Request) workflows.Request { r.Retry.MaximumAttempts = 2; return r },
			wantType:     workflows.ErrTypeHTTPRetryableStatus,
			wantRequests: 2,
			maxElapsed:   time.Minute,
		},
		{
			name: "Retry-After beyond the deadline fails at once",
			opts: idemtest.Options{FailureRate: 1, FailureRetryAfter: "3600"},
			req: func(r workflows.Request) workflows.Request {
				r.ScheduleToCloseTimeout = 30 * time.Second
				r.Retry.MaximumAttempts = 100
				return r
			},
			wantType:     workflows.ErrTypeRetryWouldExceedDeadline,
			wantRequests: 1,
			maxElapsed:   time.Second,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := idemtest.StartServer(t, tt.opts)
			cfg := activities.Config{MaxRetryAfter: 2 * time.Hour}
			h := newHarness(t, srv, cfg, "")
			start := h.env.Now()
			_, err := h.call(tt.req(charge(srv)))
			var appErr *temporal.ApplicationError
			require.True(t, errors.As(err, &appErr), "got %v", err)
			assert.Equal(t, tt.wantType, appErr.Type())
			assert.Equal(t, tt.wantRequests, srv.Stats().Requests)
			assert.Less(t, h.env.Now().Sub(start), tt.maxElapsed, "test-clock time spent")
			if tt.wantType == workflows.ErrTypeRetryWouldExceedDeadline {
				assert.True(t, appErr.NonRetryable())
				assert.Contains(t, appErr.Message(), "remain before the schedule-to-close deadline")
				assert.Contains(t, appErr.Message(), `Retry-After "3600"`)
				assert.Contains(t, appErr.Message(), "503")
			}
		})
	}
}

func TestKeys(t *testing.T) {
	srv := idemtest.StartServer(t, idemtest.Options{})
	h := newHarness(t, srv, activities.Config{}, "order-7")
	h.env.ExecuteWorkflow(ChargeOrder, srv.URL, 100)
	require.NoError(t, h.env.GetWorkflowError())
	var id string
	require.NoError(t, h.env.GetWorkflowResult(&id))
	assert.Equal(t, "rec_1", id)
	require.Len(t, h.keys, 2)
	assert.NotEqual(t, h.keys[0], h.keys[1], "two operations, two keys")
	assert.Equal(t, idemkey.Derive(testNamespace, "order-7", "charge"), h.keys[0])
	assert.Equal(t, idemkey.Derive(testNamespace, "order-7", "receipt"), h.keys[1])
	assert.Equal(t, 2, srv.Stats().Records)

	// A re-run of the same business workflow ID gets the same keys and the
	// server's stored responses: no new work.
	again := newHarness(t, srv, activities.Config{}, "order-7")
	again.env.ExecuteWorkflow(ChargeOrder, srv.URL, 100)
	require.NoError(t, again.env.GetWorkflowError())
	assert.Equal(t, h.keys, again.keys)
	assert.Equal(t, 2, srv.Stats().Records)
	assert.Equal(t, 2, srv.Stats().Replays)

	// Another workflow ID: other keys.
	other := newHarness(t, srv, activities.Config{}, "order-8")
	other.env.ExecuteWorkflow(ChargeOrder, srv.URL, 100)
	require.NoError(t, other.env.GetWorkflowError())
	assert.NotEqual(t, h.keys[0], other.keys[0])
	assert.Equal(t, 4, srv.Stats().Records)
}

func TestRerunAfterFailureKeepsKey(t *testing.T) {
	srv := idemtest.StartServer(t, idemtest.Options{})
	srv.Script(idemtest.Fail(503), idemtest.Fail(503))
	req := charge(srv)
	req.Retry.MaximumAttempts = 2
	first := newHarness(t, srv, activities.Config{}, "invoice-9")
	_, err := first.call(req)
	require.Error(t, err)
	second := newHarness(t, srv, activities.Config{}, "invoice-9")
	resp, err := second.call(req)
	require.NoError(t, err)
	assert.Equal(t, first.keys[0], resp.IdempotencyKey)
	assert.Equal(t, 1, srv.Stats().Records)
}

func TestExplicitKey(t *testing.T) {
	srv := idemtest.StartServer(t, idemtest.Options{})
	h := newHarness(t, srv, activities.Config{}, "")
	req := charge(srv)
	req.IdempotencyKey = "order-123-charge"
	resp, err := h.call(req)
	require.NoError(t, err)
	assert.Equal(t, "order-123-charge", resp.IdempotencyKey)
	assert.Equal(t, "order-123-charge", srv.Records()[0].IdempotencyKey)
}

func TestSameKeyDifferentBodyIsRejected(t *testing.T) {
	srv := idemtest.StartServer(t, idemtest.Options{})
	req := charge(srv)
	_, err := newHarness(t, srv, activities.Config{}, "order-5").call(req)
	require.NoError(t, err)
	req.Body = json.RawMessage(`{"amount":9999}`)
	_, err = newHarness(t, srv, activities.Config{}, "order-5").call(req)
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr))
	assert.Equal(t, workflows.ErrTypeIdempotencyKeyReused, appErr.Type(), "a key reused with another body is a bug of the caller, told apart from a rejection")
	assert.True(t, appErr.NonRetryable())
	d, _ := workflows.AsFailure(err)
	assert.Equal(t, http.StatusUnprocessableEntity, d.Status)
	assert.Equal(t, 1, srv.Stats().Records)
}

func TestInvalidWorkflowInputSendsNothing(t *testing.T) {
	srv := idemtest.StartServer(t, idemtest.Options{})
	tests := []struct {
		name string
		wf   func(ctx workflow.Context) error
		want string
	}{
		{"missing operation", func(ctx workflow.Context) error {
			_, err := workflows.Call(ctx, workflows.Request{URL: srv.URL})
			return err
		}, "Operation is required"},
		{"body that does not encode", func(ctx workflow.Context) error {
			_, err := workflows.Post(ctx, "op", srv.URL, map[string]any{"c": make(chan int)})
			return err
		}, "does not encode as JSON"},
		{"raw body not JSON", func(ctx workflow.Context) error {
			_, err := workflows.Post(ctx, "op", srv.URL, []byte(`{"a":`))
			return err
		}, "not valid JSON"},
		{"relative URL", func(ctx workflow.Context) error {
			_, err := workflows.Post(ctx, "op", "/payments", nil)
			return err
		}, "not an absolute URL"},
		{"credential header", func(ctx workflow.Context) error {
			_, err := workflows.Call(ctx, workflows.Request{Operation: "op", URL: srv.URL, Headers: map[string]string{"X-Ok": "1", "Authorization": "Bearer sk_live"}})
			return err
		}, "looks like a credential"},
		{"credential-like header in any spelling", func(ctx workflow.Context) error {
			_, err := workflows.Call(ctx, workflows.Request{Operation: "op", URL: srv.URL, Headers: map[string]string{"x-auth-token": "t0k3n-t0k3n"}})
			return err
		}, "looks like a credential"},
		{"user info in the URL", func(ctx workflow.Context) error {
			_, err := workflows.Post(ctx, "op", strings.Replace(srv.URL, "http://", "http://user:hunter2hunter2@", 1), nil)
			return err
		}, "user info"},
		{"header value with a control character", func(ctx workflow.Context) error {
			_, err := workflows.Call(ctx, workflows.Request{Operation: "op", URL: srv.URL, Headers: map[string]string{"X-Note": "a\x1bb"}})
			return err
		}, "control character"},
		{"header names differing in case", func(ctx workflow.Context) error {
			_, err := workflows.Call(ctx, workflows.Request{Operation: "op", URL: srv.URL, Headers: map[string]string{"X-Note": "a", "X-NOTE": "b"}})
			return err
		}, "differ only in case"},
		{"body over the bound", func(ctx workflow.Context) error {
			_, err := workflows.Post(ctx, "op", srv.URL, map[string]string{"a": strings.Repeat("x", 300<<10)})
			return err
		}, "at most 262144"},
		{"body not UTF-8", func(ctx workflow.Context) error {
			_, err := workflows.Post(ctx, "op", srv.URL, []byte("\"\xff\""))
			return err
		}, "UTF-8"},
		{"operation with a NUL byte", func(ctx workflow.Context) error {
			_, err := workflows.Post(ctx, "a\x00b", srv.URL, nil)
			return err
		}, "NUL"},
		{"unicode host", func(ctx workflow.Context) error {
			_, err := workflows.Post(ctx, "op", "https://bücher.example/pay", nil)
			return err
		}, "punycode"},
		{"ExecuteChild without an operation", func(ctx workflow.Context) error {
			_, err := workflows.ExecuteChild(ctx, workflows.Request{URL: srv.URL, IdempotencyKey: "k-1"})
			return err
		}, "needs Request.Operation"},
		{"bad key", func(ctx workflow.Context) error {
			_, err := workflows.Call(ctx, workflows.Request{URL: srv.URL, IdempotencyKey: "has space"})
			return err
		}, "printable ASCII"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, srv, activities.Config{}, "")
			h.env.RegisterWorkflowWithOptions(tt.wf, workflow.RegisterOptions{Name: "bad"})
			h.env.ExecuteWorkflow("bad")
			err := h.env.GetWorkflowError()
			var appErr *temporal.ApplicationError
			require.True(t, errors.As(err, &appErr), "got %v", err)
			assert.Equal(t, workflows.ErrTypeInvalidRequest, appErr.Type())
			assert.Contains(t, appErr.Message(), tt.want)
			assert.Empty(t, h.starts, "no activity scheduled")
			assert.Equal(t, 0, srv.Stats().Requests)
		})
	}
}

// TestTokenNeverInInputResultOrError: the worker's token reaches the API but
// not the workflow's input, result or error, even from a server echoing it.
func TestTokenNeverInInputResultOrError(t *testing.T) {
	const token = "sk_live_51HxQw9"
	for _, code := range []int{201, 400} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			srv := idemtest.StartServer(t, idemtest.Options{Work: func(r *http.Request, _ []byte) (int, []byte) {
				return code, fmt.Appendf(nil, `{"auth":%q}`, r.Header.Get("Authorization"))
			}})
			cfg := activities.Config{Credentials: map[string]activities.Credential{srv.URL: {Header: http.Header{"Authorization": {"Bearer " + token}}}}}
			cfg.AllowedOrigins = []string{srv.URL}
			h := newHarness(t, srv, cfg, "")
			var inputs []string
			h.env.SetOnActivityStartedListener(func(_ *activity.Info, _ context.Context, args converter.EncodedValues) {
				var in input.Input
				_ = args.Get(&in)
				b, _ := json.Marshal(in)
				inputs = append(inputs, string(b))
			})
			resp, err := h.call(charge(srv))
			assert.True(t, srv.Log()[0].Authorization, "the token reached the API")
			require.NotEmpty(t, inputs)
			for _, in := range inputs {
				assert.NotContains(t, in, token)
			}
			if err != nil {
				assert.NotContains(t, err.Error(), token)
				d, _ := workflows.AsFailure(err)
				b, _ := json.Marshal(d)
				assert.NotContains(t, string(b), token)
				assert.Contains(t, d.Body, "[REDACTED]")
				return
			}
			b, _ := json.Marshal(resp)
			assert.NotContains(t, string(b), token)
			assert.Contains(t, string(b), "[REDACTED]")
		})
	}
}

// keyRecorder captures the activity input each time the workflow schedules
// the HTTP activity, during replay too.
type keyRecorder struct {
	interceptor.WorkerInterceptorBase
	keys *[]string
}

func (k *keyRecorder) InterceptWorkflow(ctx workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	in := &keyInbound{keys: k.keys}
	in.Next = next
	return in
}

type keyInbound struct {
	interceptor.WorkflowInboundInterceptorBase
	keys *[]string
}

func (k *keyInbound) Init(outbound interceptor.WorkflowOutboundInterceptor) error {
	return k.Next.Init(&keyOutbound{WorkflowOutboundInterceptorBase: interceptor.WorkflowOutboundInterceptorBase{Next: outbound}, keys: k.keys})
}

type keyOutbound struct {
	interceptor.WorkflowOutboundInterceptorBase
	keys *[]string
}

func (k *keyOutbound) ExecuteActivity(ctx workflow.Context, activityType string, args ...any) workflow.Future {
	if in, ok := args[0].(input.Input); ok {
		*k.keys = append(*k.keys, in.IdempotencyKey)
	}
	return k.Next.ExecuteActivity(ctx, activityType, args...)
}

// TestReplayKeepsKey replays histories recorded on a real dev server (made
// by harness/histgen): seed_history.json with the input format before
// (durations as nanoseconds, the body as JSON) and seed_history_v2.json with
// today's (durations as strings, the body as its exact text). The current
// code replays both without non-determinism, derives the key each recorded
// run sent, and reads the recorded input.
func TestReplayKeepsKey(t *testing.T) {
	tests := []struct {
		file, wantBody string
	}{
		{"testdata/seed_history.json", `{"order":"order-1","amount":4200}`},
		{"testdata/seed_history_v2.json", `{ "order": "order-1", "amount": 4200, "note": "<b>&</b>" }`},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			hist := recordedHistory(t, tt.file)

			var recorded, replayed []string
			for _, ev := range hist.Events {
				if attrs := ev.GetActivityTaskScheduledEventAttributes(); attrs != nil {
					var in input.Input
					require.NoError(t, json.Unmarshal(attrs.GetInput().GetPayloads()[0].GetData(), &in))
					recorded = append(recorded, in.IdempotencyKey)
					assert.Equal(t, tt.wantBody, string(in.Body), "the body as the caller gave it")
				}
				if attrs := ev.GetWorkflowExecutionStartedEventAttributes(); attrs != nil {
					var in workflows.Request
					require.NoError(t, json.Unmarshal(attrs.GetInput().GetPayloads()[0].GetData(), &in))
					assert.Equal(t, "charge", in.Operation)
				}
			}
			wfID := "histgen-seed-order-1"
			require.Equal(t, []string{idemkey.Derive("default", wfID, "charge")}, recorded)

			r, err := worker.NewWorkflowReplayerWithOptions(worker.WorkflowReplayerOptions{
				Interceptors: []interceptor.WorkerInterceptor{&keyRecorder{keys: &replayed}},
			})
			require.NoError(t, err)
			workflows.Register(r)
			// ReplayWorkflowExecution replays in the recorded namespace, as a
			// worker does; the file replay functions use a placeholder namespace.
			svc := historyService{history: hist}
			require.NoError(t, r.ReplayWorkflowExecution(t.Context(), svc, nil, "default", workflow.Execution{ID: wfID, RunID: "recorded"}))
			assert.Equal(t, recorded, replayed, "the replay derives the recorded key")
		})
	}
}

// TestFinalFailureLogsOnce: one log line with what is needed to investigate
// and replay the call, and no secret.
func TestFinalFailureLogsOnce(t *testing.T) {
	const token = "sk_test_logs_123"
	srv := idemtest.StartServer(t, idemtest.Options{FailureRate: 1})
	var logs bytes.Buffer
	var s testsuite.WorkflowTestSuite
	s.SetLogger(log.NewStructuredLogger(slog.New(slog.NewJSONHandler(&logs, nil))))
	env := s.NewTestWorkflowEnvironment()
	idemtest.Register(t, env, srv, activities.Config{Credentials: map[string]activities.Credential{srv.URL: {Header: http.Header{"Authorization": {"Bearer " + token}}}}, AllowedOrigins: []string{srv.URL}})
	req := charge(srv)
	req.Retry.MaximumAttempts = 3
	env.ExecuteWorkflow(workflows.WorkflowName, req)
	require.Error(t, env.GetWorkflowError())

	var lines []map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m))
		if m["msg"] == "idempotent HTTP call failed" {
			lines = append(lines, m)
		}
	}
	require.Len(t, lines, 1, "logged once")
	l := lines[0]
	assert.Equal(t, rules.BodyHash(req.Body), l["body_sha256"])
	assert.Equal(t, req.URL, l["url"])
	assert.Equal(t, "POST", l["method"])
	assert.Equal(t, idemkey.Derive(testNamespace, "default-test-workflow-id", "charge"), l["key"])
	assert.EqualValues(t, 3, l["attempts"])
	assert.EqualValues(t, 503, l["last_status"])
	assert.Equal(t, workflows.ErrTypeHTTPRetryableStatus, l["error_type"])
	assert.NotContains(t, logs.String(), token)
}

// TestExecuteChild: the ready workflow as a child gets a stable ID and the
// parent's key.
func TestExecuteChild(t *testing.T) {
	srv := idemtest.StartServer(t, idemtest.Options{})
	h := newHarness(t, srv, activities.Config{}, "order-11")
	var childIDs []string
	h.env.SetOnChildWorkflowStartedListener(func(info *workflow.Info, _ workflow.Context, _ converter.EncodedValues) {
		childIDs = append(childIDs, info.WorkflowExecution.ID)
	})
	parent := func(ctx workflow.Context) (string, error) {
		resp, err := workflows.ExecuteChild(ctx, charge(srv))
		if err != nil {
			return "", err
		}
		return resp.IdempotencyKey, nil
	}
	h.env.RegisterWorkflowWithOptions(parent, workflow.RegisterOptions{Name: "parent"})
	h.env.ExecuteWorkflow("parent")
	require.NoError(t, h.env.GetWorkflowError())
	var key string
	require.NoError(t, h.env.GetWorkflowResult(&key))
	assert.Equal(t, idemkey.Derive(testNamespace, "order-11", "charge"), key, "the parent's key, not the child's")
	assert.Equal(t, []string{"order-11/charge"}, childIDs)
	assert.Equal(t, 1, srv.Stats().Records)
}

// TestReplayReadsRecordedFailure replays a call the API declined with a
// 402, recorded by harness/histgen: declined_history.json with the code
// before API v1 (when the details type was activities.FailureDetails),
// declined_history_v2.json with today's. The workflow replays without
// non-determinism, and AsFailure reads the recorded failure, from the
// activity's and from the workflow's failure events, as the one Failure
// type.
func TestReplayReadsRecordedFailure(t *testing.T) {
	for _, file := range []string{"testdata/declined_history.json", "testdata/declined_history_v2.json"} {
		t.Run(file, func(t *testing.T) { replayDeclined(t, file) })
	}
}

func replayDeclined(t *testing.T, file string) {
	hist := recordedHistory(t, file)
	const wfID = "histgen-declined-order-2"
	fc := temporal.GetDefaultFailureConverter()

	var failures []error
	for _, ev := range hist.Events {
		if attrs := ev.GetActivityTaskFailedEventAttributes(); attrs != nil {
			failures = append(failures, fc.FailureToError(attrs.GetFailure()))
		}
		if attrs := ev.GetWorkflowExecutionFailedEventAttributes(); attrs != nil {
			failures = append(failures, fc.FailureToError(attrs.GetFailure()))
		}
	}
	require.Len(t, failures, 2, "the activity's failure and the workflow's")
	for _, err := range failures {
		f, ok := workflows.AsFailure(err)
		require.True(t, ok, "AsFailure(%v)", err)
		assert.Equal(t, workflows.ErrTypeHTTPClientError, f.Type)
		assert.False(t, f.Retryable)
		assert.Equal(t, http.StatusPaymentRequired, f.Status)
		assert.Equal(t, int32(1), f.Attempt)
		assert.Equal(t, "charge", f.Operation)
		assert.Equal(t, idemkey.Derive("default", wfID, "charge"), f.IdempotencyKey)
		assert.Contains(t, f.Message, "402")
		assert.Contains(t, f.Body, "Payment Required")
		assert.False(t, f.OutcomeUnknown)
	}

	r, err := worker.NewWorkflowReplayerWithOptions(worker.WorkflowReplayerOptions{})
	require.NoError(t, err)
	workflows.Register(r)
	svc := historyService{history: hist}
	require.NoError(t, r.ReplayWorkflowExecution(t.Context(), svc, nil, "default", workflow.Execution{ID: wfID, RunID: "recorded"}))
}
