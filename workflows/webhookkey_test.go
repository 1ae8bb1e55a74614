package workflows_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/interceptor"
	sdktestsuite "go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/internal/idemkey"
	"github.com/idemhttp/temporal-idempotent-http/internal/input"
	"github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// keyMatchChangeID is the GetVersion change ID of a webhook call telling
// its events from those of an earlier call of the same operation under
// another key: renaming it breaks the histories that hold its marker.
const keyMatchChangeID = "webhook-events-match-the-call-by-key"

// refundAPI is a provider whose POST /refunds starts refund re_N (N
// counting the starts; 201, status pending) and whose GET /refunds/re_N
// reports status[N-1].
func refundAPI(t *testing.T, status ...string) *httptest.Server {
	var mu sync.Mutex
	starts := 0
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		mu.Lock()
		defer mu.Unlock()
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/refunds":
			starts++
			w.WriteHeader(http.StatusCreated)
			fmt.Fprintf(w, `{"id":"re_%d","status":"pending"}`, starts)
		case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/refunds/re_"):
			var n int
			if _, err := fmt.Sscanf(r.URL.Path, "/refunds/re_%d", &n); err != nil || n < 1 || n > len(status) {
				http.NotFound(w, r)
				return
			}
			fmt.Fprintf(w, `{"id":"re_%d","status":%q}`, n, status[n-1])
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(api.Close)
	return api
}

// refundEvent is a verified event of operation "refund" about resource
// res; key, when set, is the call's idempotency key its delivery names
// (a callback URL's, or WebhookMetadata's).
func refundEvent(id, typ, res, key string) workflows.Notification {
	n := workflows.Notification{ID: id, Type: typ, Operation: "refund", Scheme: "stripe", Received: time.Unix(1700000000, 0),
		Body: []byte(`{"id":"` + id + `","type":"` + typ + `","data":{"object":{"id":"` + res + `"}}}`)}
	if key != "" {
		n.KeyDigest = idemkey.Digest(key)
	}
	return n
}

// refundResult is how one call of refundsWorkflow ended.
type refundResult struct {
	Err       string          `json:"err,omitempty"` // the failure's type
	State     workflows.State `json:"state,omitempty"`
	Event     string          `json:"event,omitempty"` // the outcome's notification
	Confirmed bool            `json:"confirmed,omitempty"`
}

// TestWebhookMatchesEventsToTheCallByKey: a run that refunds twice, the
// operation "refund" each time with its own idempotency key, one after
// the other. The first call ends by its event; then a late event of the
// first call (a success) comes while the second waits, before the
// second's own (a failure). The late event never ends the second call:
// one that names the first call's key is refused by the validator; one
// that names no key is refused when WebhookOptions.Resource binds events
// to the second call's resource, only starts the resource's read with a
// WebhookPoll, and otherwise ends nothing (nor does the second's own
// event without a key). The first call, the only one of its operation
// then, takes a keyless event as before. A history recorded before this
// rule (no version marker) replays as it ran: the late keyless event
// ended the second call.
func TestWebhookMatchesEventsToTheCallByKey(t *testing.T) {
	const key1, key2 = "refund-order-7-first", "refund-order-7-second"
	for _, tc := range []struct {
		name string
		// keyed: the events name their call's key.
		keyed      bool
		resource   bool // WebhookOptions.Resource binds by the refund's ID
		poll       bool // WebhookOptions.Poll reads the refund
		oldHistory bool // GetVersion answers DefaultVersion
		wantReject []string
		want       []refundResult
		// wantVersion: the version markers the run asked for.
		wantVersion []string
	}{
		{name: "a late event naming the first call's key is refused", keyed: true,
			wantReject: []string{"evt_1_late"},
			want: []refundResult{{State: workflows.StateSucceeded, Event: "evt_1"},
				{Err: workflows.ErrTypeOperationFailed, State: workflows.StateFailed, Event: "evt_2"}},
			wantVersion: []string{keyMatchChangeID + "=1"}},
		{name: "no key, bound by the resource: the late event is refused", resource: true,
			wantReject: []string{"evt_1_late"},
			want: []refundResult{{State: workflows.StateSucceeded, Event: "evt_1"},
				{Err: workflows.ErrTypeOperationFailed, State: workflows.StateFailed, Event: "evt_2"}},
			wantVersion: []string{keyMatchChangeID + "=1"}},
		{name: "no key, with a poll: the resource decides", poll: true,
			want: []refundResult{{State: workflows.StateSucceeded, Event: "evt_1"},
				{Err: workflows.ErrTypeOperationFailed, State: workflows.StateFailed, Event: "evt_1_late", Confirmed: true}},
			wantVersion: []string{keyMatchChangeID + "=1"}},
		{name: "no key, nothing to tell them apart: no event ends the second call",
			want: []refundResult{{State: workflows.StateSucceeded, Event: "evt_1"},
				{Err: workflows.ErrTypeOperationStillRunning}},
			wantVersion: []string{keyMatchChangeID + "=1"}},
		{name: "no key, recorded before: the late event ended the second call", oldHistory: true,
			want: []refundResult{{State: workflows.StateSucceeded, Event: "evt_1"},
				{State: workflows.StateSucceeded, Event: "evt_1_late"}},
			wantVersion: []string{keyMatchChangeID + "=-1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := refundAPI(t, "succeeded", "failed")
			opts := workflows.WebhookOptions{Succeeded: []string{"refund.succeeded"}, Failed: []string{"refund.failed"}, Timeout: 10 * time.Minute}
			if tc.resource {
				opts.Resource = &workflows.WebhookResource{Start: "id", Event: "data.object.id"}
			}
			if tc.poll {
				opts.Poll = &workflows.WebhookPoll{URL: api.URL + "/refunds/{id}", After: 5 * time.Minute,
					Succeeded: []string{"succeeded"}, Failed: []string{"failed"}}
			}
			wf := func(ctx workflow.Context) ([]refundResult, error) {
				var out []refundResult
				for _, key := range []string{key1, key2} {
					resp, err := workflows.Call(ctx, workflows.Request{Operation: "refund", IdempotencyKey: key, URL: api.URL + "/refunds",
						Body: []byte(`{"amount":100}`), Webhook: &opts})
					var r refundResult
					o := (*workflows.Outcome)(nil)
					if err != nil {
						f, ok := workflows.AsFailure(err)
						if !ok {
							return nil, err
						}
						r.Err, o = f.Type, f.Outcome
					} else {
						o = resp.Outcome
					}
					if o != nil {
						r.State, r.Confirmed = o.State, o.Confirmed
						if o.Notification != nil {
							r.Event = o.Notification.ID
						}
					}
					out = append(out, r)
				}
				return out, nil
			}
			env := testsuite.Register(t, nil, &testsuite.Server{URL: api.URL}, activities.Config{})
			rec := &versionCalls{}
			env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{rec}})
			if tc.oldHistory {
				env.OnGetVersion(keyMatchChangeID, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
			}
			env.RegisterWorkflow(wf)
			named := func(key string) string {
				if tc.keyed {
					return key
				}
				return ""
			}
			var rejected []string
			for i, d := range []delivery{
				{at: time.Minute, n: refundEvent("evt_1", "refund.succeeded", "re_1", named(key1))},
				// The first call has ended: its late event comes while the
				// second call waits.
				{at: 2 * time.Minute, n: refundEvent("evt_1_late", "refund.succeeded", "re_1", named(key1))},
				{at: 3 * time.Minute, n: refundEvent("evt_2", "refund.failed", "re_2", named(key2))},
			} {
				env.RegisterDelayedCallback(func() {
					env.UpdateWorkflow(input.WebhookUpdate("refund"), fmt.Sprint("u", i), &sdktestsuite.TestUpdateCallback{
						OnReject: func(error) { rejected = append(rejected, d.n.ID) }, OnAccept: func() {}, OnComplete: func(any, error) {}}, d.n)
				}, d.at)
			}
			env.ExecuteWorkflow(wf)
			require.True(t, env.IsWorkflowCompleted())
			require.NoError(t, env.GetWorkflowError())
			var got []refundResult
			require.NoError(t, env.GetWorkflowResult(&got))
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.wantReject, rejected, "refused by the validator")
			rec.mu.Lock()
			defer rec.mu.Unlock()
			assert.Equal(t, tc.wantVersion, rec.got, "the version marker, once the run awaits the operation under a second key")
		})
	}
}

// TwoRefundsInput is the input of twoRefunds.
type TwoRefundsInput struct {
	URL     string        `json:"url"`
	Keys    []string      `json:"keys"`
	Timeout time.Duration `json:"timeout"`
}

// twoRefunds is harness/histgen's workflow of the same name, which
// recorded the webhook_two_keys histories: the same code, for the
// replayer (change both together).
func twoRefunds(ctx workflow.Context, in TwoRefundsInput) ([]string, error) {
	var out []string
	for _, key := range in.Keys {
		resp, err := workflows.Call(ctx, workflows.Request{Operation: "refund", IdempotencyKey: key, URL: in.URL, Body: []byte(`{"amount":100}`),
			Webhook: &workflows.WebhookOptions{Succeeded: []string{"refund.succeeded"}, Failed: []string{"refund.failed"}, Timeout: in.Timeout}})
		f, isFailure := workflows.AsFailure(err)
		switch {
		case err == nil && resp.Outcome != nil && resp.Outcome.Notification != nil:
			out = append(out, string(resp.Outcome.State)+" by "+resp.Outcome.Notification.ID)
		case err == nil:
			out = append(out, "succeeded")
		case isFailure:
			out = append(out, f.Type)
		default:
			return nil, err
		}
	}
	return out, nil
}

// TestReplayWebhookEventsOfTwoKeys replays histories recorded on a real
// dev server of a run that refunds twice with operation "refund", each
// call with its own key: webhook_two_keys_history.json, recorded with the
// code before events were matched by key (a scratch recorder at 9ebb7c4:
// events naming no key, the first call's late event taken by the second
// call and ending it, no version marker), and
// webhook_two_keys_history_v2.json, recorded by harness/histgen with
// today's (the marker; events naming their key; the first call's late
// event naming its key refused, so not in history; one naming no key
// taken but ending nothing; the second call ended by its own). Today's
// code replays both, the first through the GetVersion branch that takes a
// keyless event as before.
func TestReplayWebhookEventsOfTwoKeys(t *testing.T) {
	for _, tt := range []struct {
		file    string
		marker  bool
		updates []string // the accepted updates' notifications
		result  []string
	}{
		{"testdata/webhook_two_keys_history.json", false, []string{"evt_1", "evt_1_late"},
			[]string{"succeeded by evt_1", "succeeded by evt_1_late"}},
		{"testdata/webhook_two_keys_history_v2.json", true, []string{"evt_1", "evt_1_unnamed", "evt_2"},
			[]string{"succeeded by evt_1", workflows.ErrTypeOperationFailed}},
	} {
		t.Run(tt.file, func(t *testing.T) {
			hist := recordedHistory(t, tt.file)
			var markers, updates []string
			for _, ev := range hist.Events {
				if a := ev.GetMarkerRecordedEventAttributes(); a != nil && a.GetMarkerName() == "Version" {
					var id string
					require.NoError(t, json.Unmarshal(a.GetDetails()["change-id"].GetPayloads()[0].GetData(), &id))
					markers = append(markers, id)
				}
				if a := ev.GetWorkflowExecutionUpdateAcceptedEventAttributes(); a != nil {
					var n workflows.Notification
					require.NoError(t, json.Unmarshal(a.GetAcceptedRequest().GetInput().GetArgs().GetPayloads()[0].GetData(), &n))
					updates = append(updates, n.ID)
					if tt.marker && n.ID != "evt_1_unnamed" {
						assert.NotEmpty(t, n.KeyDigest, "%s names its call", n.ID)
					}
				}
			}
			if tt.marker {
				assert.Equal(t, []string{keyMatchChangeID}, markers)
			} else {
				assert.Empty(t, markers)
			}
			assert.Equal(t, tt.updates, updates)
			last := hist.Events[len(hist.Events)-1]
			require.Equal(t, enums.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED, last.GetEventType())
			var result []string
			require.NoError(t, json.Unmarshal(last.GetWorkflowExecutionCompletedEventAttributes().GetResult().GetPayloads()[0].GetData(), &result))
			assert.Equal(t, tt.result, result)

			r := worker.NewWorkflowReplayer()
			r.RegisterWorkflowWithOptions(twoRefunds, workflow.RegisterOptions{Name: "HistgenTwoRefunds"})
			// Under the replay namespace, which checks the commands after
			// the workflow's code returned too (the keys are explicit).
			require.NoError(t, r.ReplayWorkflowHistory(nil, hist))
		})
	}
}
