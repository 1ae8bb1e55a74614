package workflows_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	sdktestsuite "go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/internal/idemkey"
	"github.com/idemhttp/temporal-idempotent-http/internal/input"
	"github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// chargeAPI is a provider whose POST /charges starts a charge (201, status
// processing) and whose GET /charges/ch_1 reports status() then.
type chargeAPI struct {
	*httptest.Server
	starts, polls atomic.Int32
	status        atomic.Value // string
}

func newChargeAPI(t *testing.T, status string) *chargeAPI {
	a := &chargeAPI{}
	a.status.Store(status)
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/charges":
			a.starts.Add(1)
			w.WriteHeader(http.StatusCreated)
			fmt.Fprint(w, `{"id":"ch_1","status":"processing"}`)
		case r.Method == http.MethodGet && r.URL.Path == "/charges/ch_1":
			a.polls.Add(1)
			fmt.Fprintf(w, `{"id":"ch_1","status":%q}`, a.status.Load())
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(a.Close)
	return a
}

// TestWebhookOutcome: the workflow takes the first terminal state, from a
// notification or the fallback poll, and refuses duplicates and late
// notifications without recording them.
func TestWebhookOutcome(t *testing.T) {
	pollAfter := time.Minute
	for _, tc := range []struct {
		name       string
		status     string // the resource's status when polled
		poll       bool
		timeout    time.Duration
		deliveries []delivery
		wantSource workflows.Source
		wantState  workflows.State
		wantErr    string
		wantID     string
		wantPolls  bool
		// confirm sets WebhookPoll.Confirm; pollPath replaces the poll
		// URL's path.
		confirm       bool
		pollPath      string
		wantConfirmed bool
		// wantMessage is in the failure's message.
		wantMessage string
	}{
		{name: "webhook before the poll", status: "processing", poll: true,
			deliveries: []delivery{{at: 10 * time.Second, n: notify("evt_1", "charge.succeeded")}},
			wantSource: workflows.SourceWebhook, wantState: workflows.StateSucceeded, wantID: "evt_1"},
		{name: "during the start request", status: "processing", poll: true,
			deliveries: []delivery{{at: 0, n: notify("evt_1", "charge.succeeded")}},
			wantSource: workflows.SourceWebhook, wantState: workflows.StateSucceeded, wantID: "evt_1"},
		{name: "progress, duplicate, then terminal", status: "processing", poll: true,
			deliveries: []delivery{
				{at: 5 * time.Second, n: notify("evt_p", "charge.processing")},
				{at: 6 * time.Second, n: notify("evt_p", "charge.processing"), rejected: true},
				{at: 7 * time.Second, n: notify("evt_2", "charge.succeeded")},
			},
			wantSource: workflows.SourceWebhook, wantState: workflows.StateSucceeded, wantID: "evt_2"},
		{name: "failed by webhook", status: "processing", poll: true,
			deliveries: []delivery{{at: 3 * time.Second, n: notify("evt_f", "charge.failed")}},
			wantSource: workflows.SourceWebhook, wantState: workflows.StateFailed, wantErr: workflows.ErrTypeOperationFailed, wantID: "evt_f"},
		{name: "another operation's", status: "succeeded", poll: true,
			deliveries: []delivery{{at: 3 * time.Second, n: func() workflows.Notification {
				n := notify("evt_x", "charge.succeeded")
				n.Operation = "refund"
				return n
			}(), rejected: true}},
			wantSource: workflows.SourcePoll, wantState: workflows.StateSucceeded, wantPolls: true},
		{name: "no webhook: the poll", status: "succeeded", poll: true,
			wantSource: workflows.SourcePoll, wantState: workflows.StateSucceeded, wantPolls: true},
		{name: "no webhook: the poll says failed", status: "failed", poll: true,
			wantSource: workflows.SourcePoll, wantState: workflows.StateFailed, wantErr: workflows.ErrTypeOperationFailed, wantPolls: true},
		{name: "webhook while polling", status: "processing", poll: true,
			deliveries: []delivery{{at: pollAfter + 30*time.Second, n: notify("evt_1", "charge.succeeded")}},
			wantSource: workflows.SourceWebhook, wantState: workflows.StateSucceeded, wantID: "evt_1", wantPolls: true},
		{name: "nothing ends it", status: "processing", poll: false, timeout: 10 * time.Minute,
			wantErr: workflows.ErrTypeOperationStillRunning},
		{name: "polling until the deadline", status: "processing", poll: true, timeout: 3 * time.Minute,
			wantErr: workflows.ErrTypeOperationStillRunning, wantPolls: true},
		{name: "confirmed by the resource", status: "succeeded", poll: true, confirm: true,
			deliveries: []delivery{{at: 10 * time.Second, n: notify("evt_1", "charge.succeeded")}},
			wantSource: workflows.SourceWebhook, wantState: workflows.StateSucceeded, wantID: "evt_1", wantPolls: true, wantConfirmed: true},
		{name: "contradicted by the resource", status: "failed", poll: true, confirm: true,
			deliveries: []delivery{{at: 10 * time.Second, n: notify("evt_1", "charge.succeeded")}},
			wantSource: workflows.SourceWebhook, wantState: workflows.StateFailed, wantErr: workflows.ErrTypeOperationFailed, wantID: "evt_1", wantPolls: true, wantConfirmed: true},
		{name: "not confirmed: the resource unreadable", status: "succeeded", poll: true, confirm: true, pollPath: "/missing/{id}",
			deliveries: []delivery{{at: 10 * time.Second, n: notify("evt_1", "charge.succeeded")}},
			wantSource: workflows.SourceWebhook, wantState: workflows.StateSucceeded, wantErr: workflows.ErrTypeOperationStillRunning, wantID: "evt_1"},
		// A type or operation that nothing signed ends nothing by itself:
		// the resource's state does, as with Confirm.
		{name: "unsigned type: the resource contradicts it", status: "failed", poll: true,
			deliveries: []delivery{{at: 10 * time.Second, n: unsigned("evt_1", "charge.succeeded", false)}},
			wantSource: workflows.SourceWebhook, wantState: workflows.StateFailed, wantErr: workflows.ErrTypeOperationFailed, wantID: "evt_1", wantPolls: true, wantConfirmed: true},
		{name: "unsigned type: the resource confirms it", status: "succeeded", poll: true,
			deliveries: []delivery{{at: 10 * time.Second, n: unsigned("evt_1", "charge.succeeded", false)}},
			wantSource: workflows.SourceWebhook, wantState: workflows.StateSucceeded, wantID: "evt_1", wantPolls: true, wantConfirmed: true},
		{name: "unbound operation: the resource contradicts it", status: "failed", poll: true,
			deliveries: []delivery{{at: 10 * time.Second, n: unsigned("evt_1", "charge.succeeded", true)}},
			wantSource: workflows.SourceWebhook, wantState: workflows.StateFailed, wantErr: workflows.ErrTypeOperationFailed, wantID: "evt_1", wantPolls: true, wantConfirmed: true},
		{name: "unsigned type, resource unreadable: fails closed", status: "succeeded", poll: true, pollPath: "/missing/{id}",
			deliveries: []delivery{{at: 10 * time.Second, n: unsigned("evt_1", "charge.succeeded", false)}},
			wantErr:    workflows.ErrTypeOperationStillRunning, wantMessage: "event evt_1"},
		{name: "unsigned type without a poll ends nothing", poll: false, timeout: 10 * time.Minute,
			deliveries: []delivery{{at: 10 * time.Second, n: unsigned("evt_1", "charge.succeeded", false)}},
			wantErr:    workflows.ErrTypeOperationStillRunning, wantMessage: "set WebhookOptions.Poll"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := newChargeAPI(t, tc.status)
			env := testsuite.Register(t, nil, &testsuite.Server{URL: api.URL}, activities.Config{})
			opts := workflows.WebhookOptions{Succeeded: []string{"charge.succeeded"}, Failed: []string{"charge.failed"}, Timeout: tc.timeout}
			if tc.poll {
				path := "/charges/{id}"
				if tc.pollPath != "" {
					path = tc.pollPath
				}
				opts.Poll = &workflows.WebhookPoll{URL: api.URL + path, After: pollAfter, Confirm: tc.confirm,
					Succeeded: []string{"succeeded"}, Failed: []string{"failed"}}
			}
			var rejected, accepted []string
			for _, d := range tc.deliveries {
				env.RegisterDelayedCallback(func() {
					// A distinct update ID each: the workflow itself must refuse
					// a duplicate event (Temporal's dedup by update ID is the
					// first guard, not the only one).
					env.UpdateWorkflow(input.WebhookUpdate("charge"), fmt.Sprintf("u%d", d.at), &sdktestsuite.TestUpdateCallback{
						OnReject:   func(error) { rejected = append(rejected, d.n.ID) },
						OnAccept:   func() { accepted = append(accepted, d.n.ID) },
						OnComplete: func(any, error) {},
					}, d.n)
				}, d.at)
			}
			env.ExecuteWorkflow(workflows.WorkflowName, workflows.Request{Operation: "charge", Method: "POST", URL: api.URL + "/charges",
				Body: []byte(`{"amount":100}`), Webhook: &opts})
			require.True(t, env.IsWorkflowCompleted())
			var want []string
			for _, d := range tc.deliveries {
				if d.rejected {
					want = append(want, d.n.ID)
				}
			}
			assert.Equal(t, want, rejected, "rejected notifications")
			assert.Equal(t, int32(1), api.starts.Load(), "start requests")
			if tc.wantPolls {
				assert.Positive(t, api.polls.Load(), "polls")
			} else {
				assert.Zero(t, api.polls.Load(), "polls")
			}
			var out *workflows.Outcome
			if tc.wantErr != "" {
				f, ok := workflows.AsFailure(env.GetWorkflowError())
				require.True(t, ok, "%v", env.GetWorkflowError())
				assert.Equal(t, tc.wantErr, f.Type, f.Message)
				assert.Contains(t, f.Message, tc.wantMessage)
				assert.Equal(t, idemkey.Derive("default-test-namespace", "default-test-workflow-id", "charge"), f.IdempotencyKey, "the failure names the call's key")
				out = f.Outcome
				if tc.wantState == "" {
					assert.Nil(t, out)
					return
				}
			} else {
				require.NoError(t, env.GetWorkflowError())
				var resp workflows.Response
				require.NoError(t, env.GetWorkflowResult(&resp))
				out = resp.Outcome
				if tc.wantSource == workflows.SourceWebhook && !tc.wantConfirmed {
					assert.Equal(t, 201, resp.Status, "the start answer carries the webhook's outcome")
				} else {
					assert.Contains(t, string(resp.Body), `"succeeded"`, "the poll's answer")
				}
			}
			require.NotNil(t, out)
			assert.Equal(t, tc.wantSource, out.Source)
			assert.Equal(t, tc.wantState, out.State)
			assert.Equal(t, tc.wantConfirmed, out.Confirmed)
			assert.False(t, out.At.IsZero())
			if tc.wantID != "" {
				require.NotNil(t, out.Notification)
				assert.Equal(t, tc.wantID, out.Notification.ID)
				assert.JSONEq(t, string(notify(tc.wantID, out.Notification.Type).Body), string(out.Notification.Body))
			} else {
				assert.Nil(t, out.Notification)
			}
			if tc.wantSource == workflows.SourcePoll || tc.wantConfirmed {
				assert.Positive(t, out.Polls, "the polls that decided")
			}
		})
	}
}

// TestWebhookRefusesBadOptions: options that could never end the wait are
// InvalidRequest before the start request is sent.
func TestWebhookRefusesBadOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  workflows.Request
		want string
	}{
		{"no event types", workflows.Request{Operation: "c", URL: "https://a.example/c", Webhook: &workflows.WebhookOptions{}}, "name the event types"},
		{"no operation", workflows.Request{IdempotencyKey: "k-1234567890", URL: "https://a.example/c", Webhook: &workflows.WebhookOptions{Succeeded: []string{"x"}}}, "needs Request.Operation"},
		{"with follow", workflows.Request{Operation: "c", URL: "https://a.example/c", Follow: &workflows.FollowOptions{}, Webhook: &workflows.WebhookOptions{Succeeded: []string{"x"}}}, "exclude each other"},
		{"poll without states", workflows.Request{Operation: "c", URL: "https://a.example/c", Webhook: &workflows.WebhookOptions{Succeeded: []string{"x"}, Poll: &workflows.WebhookPoll{URL: "https://a.example/c/{id}"}}}, "WebhookPoll.Succeeded"},
		{"poll URL not absolute", workflows.Request{Operation: "c", URL: "https://a.example/c", Webhook: &workflows.WebhookOptions{Succeeded: []string{"x"}, Poll: &workflows.WebhookPoll{URL: "/c/{id}", Succeeded: []string{"ok"}}}}, "WebhookPoll.URL"},
		{"negative timeout", workflows.Request{Operation: "c", URL: "https://a.example/c", Webhook: &workflows.WebhookOptions{Succeeded: []string{"x"}, Timeout: -1}}, "Timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.req.Validate()
			require.Error(t, err)
			assert.True(t, strings.Contains(err.Error(), tc.want), "%v", err)
		})
	}
}

// TestWebhookLateNotification: once the operation ended, a later
// notification, even of another terminal type, is refused (and so leaves
// nothing in history) and changes nothing.
func TestWebhookLateNotification(t *testing.T) {
	api := newChargeAPI(t, "processing")
	env := testsuite.Register(t, nil, &testsuite.Server{URL: api.URL}, activities.Config{})
	wf := func(ctx workflow.Context) (*workflows.Outcome, error) {
		resp, err := workflows.Call(ctx, workflows.Request{Operation: "charge", URL: api.URL + "/charges", Body: json.RawMessage(`{"amount":100}`),
			Webhook: &workflows.WebhookOptions{Succeeded: []string{"charge.succeeded"}, Failed: []string{"charge.failed"}}})
		if err != nil {
			return nil, err
		}
		// The workflow goes on: a late notification must not reach it.
		return resp.Outcome, workflow.Sleep(ctx, time.Hour)
	}
	env.RegisterWorkflow(wf)
	var got []string
	for i, n := range []workflows.Notification{notify("evt_1", "charge.succeeded"), notify("evt_2", "charge.failed"), notify("evt_1", "charge.succeeded")} {
		env.RegisterDelayedCallback(func() {
			env.UpdateWorkflow(input.WebhookUpdate("charge"), fmt.Sprint(i), &sdktestsuite.TestUpdateCallback{
				OnReject: func(err error) { got = append(got, n.ID+" rejected: "+err.Error()) },
				OnAccept: func() { got = append(got, n.ID+" accepted") }, OnComplete: func(any, error) {},
			}, n)
		}, time.Duration(i+1)*time.Minute)
	}
	env.ExecuteWorkflow(wf)
	require.NoError(t, env.GetWorkflowError())
	var out workflows.Outcome
	require.NoError(t, env.GetWorkflowResult(&out))
	assert.Equal(t, workflows.StateSucceeded, out.State)
	assert.Equal(t, "evt_1", out.Notification.ID)
	require.Len(t, got, 3)
	assert.Equal(t, "evt_1 accepted", got[0])
	assert.Contains(t, got[1], "evt_2 rejected: ")
	assert.Contains(t, got[1], "already ended")
	assert.Contains(t, got[2], "evt_1 rejected: ")
}

// TestWebhookOutcomeFromResourceAndPollQueue: a webhook call ends as its
// resource says (a 303 to a failed one, a start failed after the webhook
// ended it, a resource not yet readable), notifications that end nothing
// are bounded, and polls run on the request's task queue; the defects an
// adversarial review found on the workflow side, each a case that failed
// before its fix.
func TestWebhookOutcomeFromResourceAndPollQueue(t *testing.T) {
	type run struct {
		resp *workflows.Response
		err  error
		// queues are the task queues the activities ran on.
		queues []string
	}
	// execute runs the ready workflow with req against handler, sending
	// the notifications at their times.
	execute := func(t *testing.T, handler http.HandlerFunc, req func(url string) workflows.Request, deliveries ...delivery) run {
		api := httptest.NewServer(handler)
		t.Cleanup(api.Close)
		env := testsuite.Register(t, nil, &testsuite.Server{URL: api.URL}, activities.Config{})
		var r run
		env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
			r.queues = append(r.queues, info.ActivityType.Name+"@"+info.TaskQueue)
		})
		for i, d := range deliveries {
			env.RegisterDelayedCallback(func() {
				env.UpdateWorkflow(input.WebhookUpdate("charge"), fmt.Sprint(i), &sdktestsuite.TestUpdateCallback{
					OnReject: func(error) {}, OnAccept: func() {}, OnComplete: func(any, error) {}}, d.n)
			}, d.at)
		}
		env.ExecuteWorkflow(workflows.WorkflowName, req(api.URL))
		require.True(t, env.IsWorkflowCompleted())
		if r.err = env.GetWorkflowError(); r.err == nil {
			r.resp = new(workflows.Response)
			require.NoError(t, env.GetWorkflowResult(r.resp))
		}
		return r
	}
	charge := func(poll *workflows.WebhookPoll) func(string) workflows.Request {
		return func(url string) workflows.Request {
			if poll != nil {
				p := *poll
				p.URL = url + p.URL
				poll = &p
			}
			return workflows.Request{Operation: "charge", Method: "POST", URL: url + "/charges", Body: []byte(`{}`),
				Webhook: &workflows.WebhookOptions{Succeeded: []string{"charge.succeeded"}, Failed: []string{"charge.failed"}, Poll: poll}}
		}
	}
	poll := &workflows.WebhookPoll{URL: "/charges/{id}", After: time.Minute, Succeeded: []string{"succeeded"}, Failed: []string{"failed"}}

	t.Run("a resource that answers 303 to a failed one is failed", func(t *testing.T) {
		r := execute(t, func(w http.ResponseWriter, req *http.Request) {
			switch req.URL.Path {
			case "/charges":
				w.WriteHeader(201)
				fmt.Fprint(w, `{"id":"ch_1","status":"processing"}`)
			case "/charges/ch_1":
				http.Redirect(w, req, "/v2/charges/ch_1", http.StatusSeeOther)
			default:
				fmt.Fprint(w, `{"id":"ch_1","status":"failed"}`)
			}
		}, charge(poll))
		f, ok := workflows.AsFailure(r.err)
		require.True(t, ok, "%v", r.err)
		assert.Equal(t, workflows.ErrTypeOperationFailed, f.Type)
		assert.Equal(t, workflows.StateFailed, f.Outcome.State)
	})
	t.Run("a start that failed after the webhook ended it succeeded", func(t *testing.T) {
		r := execute(t, func(w http.ResponseWriter, req *http.Request) {
			time.Sleep(50 * time.Millisecond)
			w.WriteHeader(503)
		}, func(url string) workflows.Request {
			req := charge(nil)(url)
			req.Retry = workflows.RetryOptions{MaximumAttempts: 2}
			return req
		}, delivery{at: 0, n: notify("evt_1", "charge.succeeded")})
		require.NoError(t, r.err)
		assert.Equal(t, workflows.SourceWebhook, r.resp.Outcome.Source)
		assert.Equal(t, workflows.StateSucceeded, r.resp.Outcome.State)
	})
	t.Run("notifications that end nothing are bounded", func(t *testing.T) {
		var ds []delivery
		for i := range 40 {
			ds = append(ds, delivery{at: time.Duration(i+1) * time.Second, n: notify(fmt.Sprintf("evt_p%d", i), "charge.processing")})
		}
		ds = append(ds, delivery{at: time.Minute, n: notify("evt_end", "charge.succeeded")})
		r := execute(t, func(w http.ResponseWriter, req *http.Request) {
			w.WriteHeader(201)
			fmt.Fprint(w, `{"id":"ch_1"}`)
		}, charge(nil), ds...)
		require.NoError(t, r.err)
		assert.Equal(t, 33, r.resp.Outcome.Notifications, "32 progress events, then the terminal one")
		assert.Equal(t, "evt_end", r.resp.Outcome.Notification.ID)
	})
	t.Run("polls run on the request's task queue", func(t *testing.T) {
		r := execute(t, func(w http.ResponseWriter, req *http.Request) {
			if req.Method == http.MethodPost {
				w.WriteHeader(201)
			}
			fmt.Fprint(w, `{"id":"ch_1","status":"succeeded"}`)
		}, func(url string) workflows.Request {
			req := charge(poll)(url)
			req.TaskQueue = "payments"
			return req
		})
		require.NoError(t, r.err)
		assert.Equal(t, []string{"IdempotentHTTPRequest@payments", "IdempotentHTTPPoll@payments"}, r.queues)
	})
	t.Run("confirm waits out a resource not yet readable", func(t *testing.T) {
		var gets atomic.Int32
		confirm := *poll
		confirm.Confirm = true
		r := execute(t, func(w http.ResponseWriter, req *http.Request) {
			if req.Method == http.MethodPost {
				w.WriteHeader(201)
				fmt.Fprint(w, `{"id":"ch_1"}`)
				return
			}
			if gets.Add(1) == 1 {
				http.NotFound(w, req) // not readable yet
				return
			}
			fmt.Fprint(w, `{"id":"ch_1","status":"succeeded"}`)
		}, charge(&confirm), delivery{at: 5 * time.Minute, n: notify("evt_1", "charge.succeeded")})
		require.NoError(t, r.err)
		assert.True(t, r.resp.Outcome.Confirmed)
		assert.Equal(t, workflows.SourceWebhook, r.resp.Outcome.Source)
		assert.Equal(t, int32(2), gets.Load())
	})
}

// TestWebhookEventsBelongToTheOperation: a terminal event that an earlier
// call's handler took (the call failed with its outcome unknown, its start
// unanswered) is the outcome of the workflow's retry of that operation
// (the same key); a call for another key starts afresh.
func TestWebhookEventsBelongToTheOperation(t *testing.T) {
	for _, tc := range []struct {
		name string
		// retryStatus is what the retry's start gets.
		retryStatus int
		// otherKey: the second call is another operation (its own key).
		otherKey   bool
		wantErr    string
		wantState  workflows.State
		wantStarts int32
	}{
		{name: "the retry's start answered", retryStatus: 201, wantState: workflows.StateSucceeded, wantStarts: 3},
		{name: "the retry's start unanswered too", retryStatus: 503, wantState: workflows.StateSucceeded, wantStarts: 4},
		{name: "another key: its own events only", retryStatus: 201, otherKey: true, wantErr: workflows.ErrTypeOperationStillRunning},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var starts atomic.Int32
			api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if starts.Add(1) <= 2 {
					w.WriteHeader(503) // the provider did the work; the answer was lost
					return
				}
				w.WriteHeader(tc.retryStatus)
				fmt.Fprint(w, `{"id":"ch_1","status":"processing"}`)
			}))
			t.Cleanup(api.Close)
			env := testsuite.Register(t, nil, &testsuite.Server{URL: api.URL}, activities.Config{})
			req := workflows.Request{Operation: "charge", URL: api.URL + "/charges", Body: json.RawMessage(`{"amount":100}`),
				Webhook: &workflows.WebhookOptions{Succeeded: []string{"charge.succeeded"}, Failed: []string{"charge.failed"}, Timeout: time.Hour},
				Retry:   workflows.RetryOptions{MaximumAttempts: 2}}
			var firstErr error
			wf := func(ctx workflow.Context) (*workflows.Response, error) {
				_, firstErr = workflows.Call(ctx, req)
				if f, ok := workflows.AsFailure(firstErr); !ok || !f.OutcomeUnknown {
					return nil, fmt.Errorf("the first call: %v, want its outcome unknown", firstErr)
				}
				// The README's retry: wait, then call again with the same
				// operation (the same key).
				if err := workflow.Sleep(ctx, 10*time.Minute); err != nil {
					return nil, err
				}
				again := req
				if tc.otherKey {
					again.IdempotencyKey = "another-operation-key-1234"
				}
				return workflows.Call(ctx, again)
			}
			env.RegisterWorkflow(wf)
			var took []string
			env.RegisterDelayedCallback(func() {
				// Between the calls: the first call's handler takes it.
				env.UpdateWorkflow(input.WebhookUpdate("charge"), "u1", &sdktestsuite.TestUpdateCallback{
					OnReject: func(err error) { took = append(took, "rejected: "+err.Error()) },
					OnAccept: func() { took = append(took, "accepted") }, OnComplete: func(any, error) {},
				}, notify("evt_1", "charge.succeeded"))
			}, 5*time.Minute)
			env.ExecuteWorkflow(wf)
			require.True(t, env.IsWorkflowCompleted())
			assert.Equal(t, []string{"accepted"}, took, "the receiver answers 2xx: some call must see it")
			if tc.wantErr != "" {
				f, ok := workflows.AsFailure(env.GetWorkflowError())
				require.True(t, ok, "%v", env.GetWorkflowError())
				assert.Equal(t, tc.wantErr, f.Type, f.Message)
				return
			}
			require.NoError(t, env.GetWorkflowError())
			var resp workflows.Response
			require.NoError(t, env.GetWorkflowResult(&resp))
			require.NotNil(t, resp.Outcome)
			assert.Equal(t, tc.wantState, resp.Outcome.State)
			assert.Equal(t, workflows.SourceWebhook, resp.Outcome.Source)
			require.NotNil(t, resp.Outcome.Notification)
			assert.Equal(t, "evt_1", resp.Outcome.Notification.ID)
			assert.Equal(t, tc.wantStarts, starts.Load(), "two unanswered starts, then the retry's")
		})
	}
}

// TestWebhookResourceBinding: with WebhookOptions.Resource, a callback's
// signed event that carries no metadata (OperationUnsigned) is the
// operation's when its resource is the one the start answer named: it
// ends the call by its type; another resource's event is refused.
func TestWebhookResourceBinding(t *testing.T) {
	// foreign is a signed event of resource res, no metadata in it.
	foreign := func(id, typ, res string) workflows.Notification {
		n := unsigned(id, typ, true)
		n.Body = []byte(`{"id":"` + id + `","type":"` + typ + `","data":{"object":{"id":"` + res + `"}}}`)
		return n
	}
	for _, tc := range []struct {
		name          string
		start         string // WebhookResource.Start
		poll          bool
		deliveries    []delivery
		wantErr       string
		wantState     workflows.State
		wantID        string
		wantConfirmed bool
	}{
		{name: "its own resource's event ends it", start: "id",
			deliveries: []delivery{{at: 10 * time.Second, n: foreign("evt_B", "charge.succeeded", "ch_1")}},
			wantState:  workflows.StateSucceeded, wantID: "evt_B"},
		{name: "another resource's event is refused", start: "id",
			deliveries: []delivery{
				{at: 10 * time.Second, n: foreign("evt_A", "charge.failed", "ch_9"), rejected: true},
				{at: 20 * time.Second, n: foreign("evt_B", "charge.succeeded", "ch_1")},
			},
			wantState: workflows.StateSucceeded, wantID: "evt_B"},
		{name: "during the start: held, then bound", start: "id",
			deliveries: []delivery{
				{at: 0, n: foreign("evt_A", "charge.failed", "ch_9")},
				{at: 0, n: foreign("evt_B", "charge.succeeded", "ch_1")},
			},
			wantState: workflows.StateSucceeded, wantID: "evt_B"},
		{name: "no resource in the start answer: the resource decides", start: "missing", poll: true,
			deliveries: []delivery{{at: 10 * time.Second, n: foreign("evt_B", "charge.succeeded", "ch_1")}},
			wantState:  workflows.StateFailed, wantErr: workflows.ErrTypeOperationFailed, wantID: "evt_B", wantConfirmed: true},
		{name: "no resource in the start answer, no poll: nothing ends it", start: "missing",
			deliveries: []delivery{{at: 10 * time.Second, n: foreign("evt_B", "charge.succeeded", "ch_1")}},
			wantErr:    workflows.ErrTypeOperationStillRunning},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := newChargeAPI(t, "failed")
			env := testsuite.Register(t, nil, &testsuite.Server{URL: api.URL}, activities.Config{})
			opts := workflows.WebhookOptions{Succeeded: []string{"charge.succeeded"}, Failed: []string{"charge.failed"}, Timeout: 10 * time.Minute,
				Resource: &workflows.WebhookResource{Start: tc.start, Event: "data.object.id"}}
			if tc.poll {
				opts.Poll = &workflows.WebhookPoll{URL: api.URL + "/charges/{id}", After: 5 * time.Minute, Succeeded: []string{"succeeded"}, Failed: []string{"failed"}}
			}
			var rejected, want []string
			for i, d := range tc.deliveries {
				if d.rejected {
					want = append(want, d.n.ID)
				}
				env.RegisterDelayedCallback(func() {
					env.UpdateWorkflow(input.WebhookUpdate("charge"), fmt.Sprint(i), &sdktestsuite.TestUpdateCallback{
						OnReject: func(error) { rejected = append(rejected, d.n.ID) }, OnAccept: func() {}, OnComplete: func(any, error) {},
					}, d.n)
				}, d.at)
			}
			env.ExecuteWorkflow(workflows.WorkflowName, workflows.Request{Operation: "charge", Method: "POST", URL: api.URL + "/charges",
				Body: []byte(`{"amount":100}`), Webhook: &opts})
			require.True(t, env.IsWorkflowCompleted())
			assert.Equal(t, want, rejected, "rejected notifications")
			var out *workflows.Outcome
			if tc.wantErr != "" {
				f, ok := workflows.AsFailure(env.GetWorkflowError())
				require.True(t, ok, "%v", env.GetWorkflowError())
				assert.Equal(t, tc.wantErr, f.Type, f.Message)
				if out = f.Outcome; tc.wantState == "" {
					return
				}
			} else {
				require.NoError(t, env.GetWorkflowError())
				var resp workflows.Response
				require.NoError(t, env.GetWorkflowResult(&resp))
				out = resp.Outcome
			}
			require.NotNil(t, out)
			assert.Equal(t, tc.wantState, out.State)
			assert.Equal(t, tc.wantConfirmed, out.Confirmed)
			require.NotNil(t, out.Notification)
			assert.Equal(t, tc.wantID, out.Notification.ID)
		})
	}
}

// TestOutcomeJSONUnchangedByTypedConstants: State and Source are typed
// strings; in JSON (history, results) they are the same strings as when
// they were plain strings, both ways.
func TestOutcomeJSONUnchangedByTypedConstants(t *testing.T) {
	at := time.Date(2026, 12, 6, 5, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		out  workflows.Outcome
		want string
	}{
		{"webhook succeeded", workflows.Outcome{State: workflows.StateSucceeded, Source: workflows.SourceWebhook, At: at},
			`{"state":"succeeded","source":"webhook","at":"2026-12-06T05:00:00Z"}`},
		{"poll failed", workflows.Outcome{State: workflows.StateFailed, Source: workflows.SourcePoll, At: at},
			`{"state":"failed","source":"poll","at":"2026-12-06T05:00:00Z"}`},
		{"poll canceled", workflows.Outcome{State: workflows.StateCanceled, Source: workflows.SourcePoll, At: at},
			`{"state":"canceled","source":"poll","at":"2026-12-06T05:00:00Z"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(tc.out)
			require.NoError(t, err)
			assert.Equal(t, tc.want, string(b), "byte for byte")
			var back workflows.Outcome
			require.NoError(t, json.Unmarshal([]byte(tc.want), &back))
			assert.Equal(t, tc.out, back)
		})
	}
}
