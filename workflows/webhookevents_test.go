package workflows_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/log"
	sdktestsuite "go.temporal.io/sdk/testsuite"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/internal/input"
	"github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// syncBuffer is a bytes.Buffer safe for the logger's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// seamRun is what runSeam saw: the workflow's result or failure, the
// notifications the validator refused, and the logs.
type seamRun struct {
	resp     *workflows.Response
	failure  *workflows.Failure
	err      error
	rejected []string
	logs     string
}

// runSeam runs the ready workflow with opts against handler (POST
// /charges starts the charge), sending the deliveries at their times.
func runSeam(t *testing.T, handler http.HandlerFunc, opts workflows.WebhookOptions, deliveries ...delivery) seamRun {
	t.Helper()
	api := httptest.NewServer(handler)
	t.Cleanup(api.Close)
	if opts.Poll != nil {
		p := *opts.Poll
		p.URL = api.URL + p.URL
		opts.Poll = &p
	}
	var s sdktestsuite.WorkflowTestSuite
	var logs syncBuffer
	s.SetLogger(log.NewStructuredLogger(slog.New(slog.NewJSONHandler(&logs, nil))))
	env := s.NewTestWorkflowEnvironment()
	testsuite.Register(t, env, &testsuite.Server{URL: api.URL}, activities.Config{})
	var r seamRun
	for i, d := range deliveries {
		env.RegisterDelayedCallback(func() {
			env.UpdateWorkflow(input.WebhookUpdate("charge"), fmt.Sprint(i), &sdktestsuite.TestUpdateCallback{
				OnReject: func(error) { r.rejected = append(r.rejected, d.n.ID) }, OnAccept: func() {}, OnComplete: func(any, error) {}}, d.n)
		}, d.at)
	}
	env.ExecuteWorkflow(workflows.WorkflowName, workflows.Request{Operation: "charge", Method: "POST", URL: api.URL + "/charges",
		Body: []byte(`{"amount":100}`), Webhook: &opts})
	require.True(t, env.IsWorkflowCompleted())
	if r.err = env.GetWorkflowError(); r.err == nil {
		r.resp = new(workflows.Response)
		require.NoError(t, env.GetWorkflowResult(r.resp))
	} else if f, ok := workflows.AsFailure(r.err); ok {
		r.failure = &f
	}
	r.logs = logs.String()
	return r
}

// charges answers POST /charges with start (after delay, status 201 unless
// startStatus) and GET /charges/ch_1 with status.
func charges(start string, startStatus int, delay time.Duration, status string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/charges":
			time.Sleep(delay)
			w.WriteHeader(startStatus)
			fmt.Fprint(w, start)
		case r.Method == http.MethodGet && r.URL.Path == "/charges/ch_1":
			fmt.Fprintf(w, `{"id":"ch_1","status":%q}`, status)
		default:
			http.NotFound(w, r)
		}
	}
}

// TestWebhookUnconfirmableTakesNoEndSlot: a notification that cannot decide
// alone (its type or operation unsigned) only starts the confirming poll:
// a later event that decides alone still ends the operation, the outcome's
// State never comes from the unsigned one, and a failed start keeps its
// own error.
func TestWebhookUnconfirmableTakesNoEndSlot(t *testing.T) {
	poll := &workflows.WebhookPoll{URL: "/charges/{id}", After: time.Minute, Succeeded: []string{"succeeded"}, Failed: []string{"failed"}}
	unreadable := &workflows.WebhookPoll{URL: "/missing/{id}", After: time.Minute, Succeeded: []string{"succeeded"}, Failed: []string{"failed"}}
	started := `{"id":"ch_1","status":"processing"}`
	for _, tc := range []struct {
		name        string
		handler     http.HandlerFunc
		poll        *workflows.WebhookPoll
		timeout     time.Duration
		deliveries  []delivery
		wantErr     string // "" : succeeded
		wantID      string // the notification of the outcome
		wantNoState bool   // the failure carries no outcome State
	}{
		{name: "a later signed event still ends it", handler: charges(started, 201, 0, "processing"), poll: poll, timeout: time.Hour,
			deliveries: []delivery{
				{at: 10 * time.Second, n: unsigned("evt_u", "charge.failed", false)},
				{at: 20 * time.Second, n: notify("evt_s", "charge.succeeded")},
			},
			wantID: "evt_s"},
		{name: "a later signed event still ends it, operation unbound", handler: charges(started, 201, 0, "processing"), poll: poll, timeout: time.Hour,
			deliveries: []delivery{
				{at: 10 * time.Second, n: unsigned("evt_u", "charge.failed", true)},
				{at: 3 * time.Minute, n: notify("evt_s", "charge.succeeded")},
			},
			wantID: "evt_s"},
		{name: "a failed read: no State from the unsigned event", handler: charges(started, 201, 0, "processing"), poll: unreadable, timeout: time.Hour,
			deliveries: []delivery{{at: 10 * time.Second, n: unsigned("evt_u", "charge.succeeded", false)}},
			wantErr:    workflows.ErrTypeOperationStillRunning, wantNoState: true},
		{name: "the deadline: no State from the unsigned event", handler: charges(started, 201, 0, "processing"), poll: poll, timeout: 5 * time.Minute,
			deliveries: []delivery{{at: 10 * time.Second, n: unsigned("evt_u", "charge.succeeded", false)}},
			wantErr:    workflows.ErrTypeOperationStillRunning, wantNoState: true},
		{name: "a definitive start error stays the call's", handler: charges(`{"error":"bad amount"}`, 400, 100*time.Millisecond, "processing"), poll: poll, timeout: time.Hour,
			deliveries: []delivery{{at: 0, n: unsigned("evt_u", "charge.succeeded", false)}},
			wantErr:    workflows.ErrTypeHTTPClientError, wantNoState: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runSeam(t, tc.handler, workflows.WebhookOptions{Succeeded: []string{"charge.succeeded"}, Failed: []string{"charge.failed"},
				Timeout: tc.timeout, Poll: tc.poll}, tc.deliveries...)
			assert.Empty(t, r.rejected, "refused notifications")
			if tc.wantErr == "" {
				require.NoError(t, r.err)
				require.NotNil(t, r.resp.Outcome)
				assert.Equal(t, workflows.StateSucceeded, r.resp.Outcome.State)
				assert.Equal(t, workflows.SourceWebhook, r.resp.Outcome.Source)
				require.NotNil(t, r.resp.Outcome.Notification)
				assert.Equal(t, tc.wantID, r.resp.Outcome.Notification.ID)
				return
			}
			require.NotNil(t, r.failure, "%v", r.err)
			assert.Equal(t, tc.wantErr, r.failure.Type, r.failure.Message)
			if tc.wantNoState && r.failure.Outcome != nil {
				assert.Empty(t, r.failure.Outcome.State, "nothing that decides gave a State")
			}
		})
	}
}

// TestWebhookResourceNeverBindsPlaceholders: a resource ID the start
// answer or an event hides (a credential-like name, redacted; a body
// omitted) binds nothing: the call says so and what to do.
func TestWebhookResourceNeverBindsPlaceholders(t *testing.T) {
	// event is a signed event without metadata whose body is body.
	event := func(id, typ, body string) workflows.Notification {
		n := unsigned(id, typ, true)
		n.Body = []byte(body)
		return n
	}
	omitted := event("evt_o", "charge.succeeded", "")
	omitted.Body, omitted.BodyOmitted = nil, true
	for _, tc := range []struct {
		name       string
		start      string
		resource   workflows.WebhookResource
		deliveries []delivery
		wantLog    []string
	}{
		{name: "the start answer's ID is redacted", start: `{"payment_token":"tok_1","status":"processing"}`,
			resource:   workflows.WebhookResource{Start: "payment_token", Event: "data.payment_token"},
			deliveries: []delivery{{at: 10 * time.Second, n: event("evt_1", "charge.succeeded", `{"data":{"payment_token":"[REDACTED]"}}`)}},
			wantLog:    []string{"WebhookOptions.Resource", "redacted"}},
		{name: "both redacted, held during the start", start: `{"payment_token":"tok_1","status":"processing"}`,
			resource:   workflows.WebhookResource{Start: "payment_token", Event: "data.payment_token"},
			deliveries: []delivery{{at: 0, n: event("evt_1", "charge.succeeded", `{"data":{"payment_token":"[REDACTED]"}}`)}},
			wantLog:    []string{"WebhookOptions.Resource", "redacted"}},
		{name: "the event's ID is redacted", start: `{"id":"[redacted]","status":"processing"}`,
			resource:   workflows.WebhookResource{Start: "id", Event: "data.object.id"},
			deliveries: []delivery{{at: 10 * time.Second, n: event("evt_1", "charge.succeeded", `{"data":{"object":{"id":"[redacted]"}}}`)}},
			wantLog:    []string{"WebhookOptions.Resource", "redacted"}},
		{name: "held events that do not bind are logged", start: `{"id":"ch_1","status":"processing"}`,
			resource: workflows.WebhookResource{Start: "id", Event: "data.object.id"},
			deliveries: []delivery{
				{at: 0, n: event("evt_1", "charge.succeeded", `{"data":{"object":{"id":"[redacted]"}}}`)},
				{at: 0, n: omitted},
			},
			wantLog: []string{"evt_1", "evt_o", "WebhookOptions.Resource"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runSeam(t, charges(tc.start, 201, 100*time.Millisecond, "processing"),
				workflows.WebhookOptions{Succeeded: []string{"charge.succeeded"}, Failed: []string{"charge.failed"}, Timeout: 10 * time.Minute, Resource: &tc.resource},
				tc.deliveries...)
			require.NotNil(t, r.failure, "a placeholder bound the event: %v", r.resp)
			assert.Equal(t, workflows.ErrTypeOperationStillRunning, r.failure.Type, r.failure.Message)
			assert.Nil(t, r.failure.Outcome)
			for _, want := range tc.wantLog {
				assert.Contains(t, r.logs, want)
			}
			assert.NotContains(t, r.logs, "tok_1", "the redacted value never reaches a log")
		})
	}
}

// TestWebhookHeldEventsTakeNoSlots: before the start answer, foreign
// signed events (held, or counted) never take the slots the operation's
// terminal event needs: it is never refused, and it ends the call.
func TestWebhookHeldEventsTakeNoSlots(t *testing.T) {
	foreign := func(id, typ, res string) workflows.Notification {
		n := unsigned(id, typ, true)
		n.Body = []byte(`{"id":"` + id + `","type":"` + typ + `","data":{"object":{"id":"` + res + `"}}}`)
		return n
	}
	for _, typ := range []string{"charge.failed", "charge.processing"} {
		t.Run(typ, func(t *testing.T) {
			var ds []delivery
			for i := range 40 {
				ds = append(ds, delivery{at: 0, n: foreign(fmt.Sprintf("evt_x%d", i), typ, "ch_9")})
			}
			ds = append(ds, delivery{at: 0, n: foreign("evt_B", "charge.succeeded", "ch_1")})
			r := runSeam(t, charges(`{"id":"ch_1","status":"processing"}`, 201, 300*time.Millisecond, "processing"),
				workflows.WebhookOptions{Succeeded: []string{"charge.succeeded"}, Failed: []string{"charge.failed"}, Timeout: 10 * time.Minute,
					Resource: &workflows.WebhookResource{Start: "id", Event: "data.object.id"}}, ds...)
			assert.NotContains(t, r.rejected, "evt_B", "the operation's terminal event is never refused for slots")
			require.NoError(t, r.err)
			require.NotNil(t, r.resp.Outcome)
			assert.Equal(t, workflows.StateSucceeded, r.resp.Outcome.State)
			require.NotNil(t, r.resp.Outcome.Notification)
			assert.Equal(t, "evt_B", r.resp.Outcome.Notification.ID)
			if typ == "charge.processing" {
				assert.Len(t, r.rejected, 40-32, "progress events past the 32 slots are refused")
			}
		})
	}
}
