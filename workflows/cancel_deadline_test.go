package workflows_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	sdktestsuite "go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/internal/poll"
	"github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// cancelDeadlineChangeID is the GetVersion change ID of scheduling no
// cancel request when the workflow's deadline leaves no time for one:
// renaming it breaks the histories that hold its marker.
const cancelDeadlineChangeID = "follow-cancel-within-workflow-deadline"

// TestCancelOperationWithinWorkflowDeadline: with
// FollowOptions.CancelOperation, asking the server to cancel never holds
// the workflow past its own deadline (the run's or the execution's
// timeout, less a margin to record its end): a cancel endpoint that
// answers 503 with Retry-After: 240 gets its 3 requests (8 min) when the
// workflow has time, fewer when its deadline comes first, and none when
// no time is left, which is logged and recorded as a version marker. The
// workflow ends cancelled in each; a history recorded before (no marker)
// asks as it did.
func TestCancelOperationWithinWorkflowDeadline(t *testing.T) {
	const retryAfter = 240 // the cancel endpoint's, s
	for _, tc := range []struct {
		name string
		// run and execution are the workflow's timeouts (0: none).
		run, execution time.Duration
		cancelAt       time.Duration
		wantCancels    int
		// wantEndBy bounds when the workflow ended, from its start.
		wantEndBy time.Duration
		wantLog   bool // "no time left" is logged
		// oldHistory: GetVersion answers DefaultVersion, as in a history
		// recorded before the deadline bounded the asking, which asked
		// whatever time was left; the workflow is then timed out.
		oldHistory  bool
		wantVersion []string
	}{
		{name: "no workflow timeout: all 3 requests", cancelAt: 5 * time.Minute,
			wantCancels: 3, wantEndBy: 5*time.Minute + 2*retryAfter*time.Second + time.Minute},
		{name: "the run's timeout bounds the asking", run: 20 * time.Minute, cancelAt: 15 * time.Minute,
			wantCancels: 2, wantEndBy: 20*time.Minute - 10*time.Second},
		{name: "the execution's timeout bounds the asking", execution: 20 * time.Minute, cancelAt: 15 * time.Minute,
			wantCancels: 2, wantEndBy: 20*time.Minute - 10*time.Second},
		{name: "the shorter of both", run: time.Hour, execution: 20 * time.Minute, cancelAt: 15 * time.Minute,
			wantCancels: 2, wantEndBy: 20*time.Minute - 10*time.Second},
		// Between two polls (every 5 s), 8 s before the deadline.
		{name: "no time left: no cancel request", run: 20 * time.Minute, cancelAt: 20*time.Minute - 8*time.Second,
			wantCancels: 0, wantEndBy: 20 * time.Minute, wantLog: true, wantVersion: []string{cancelDeadlineChangeID + "=1"}},
		{name: "no time left, recorded before: asked as recorded", run: 20 * time.Minute, cancelAt: 20*time.Minute - 8*time.Second,
			oldHistory: true, wantCancels: 1, wantEndBy: 20 * time.Minute, wantVersion: []string{cancelDeadlineChangeID + "=-1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			cancels := 0
			api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch {
				case r.Method == http.MethodPost && r.URL.Path == "/transfers":
					fmt.Fprint(w, `{"name":"operations/1","done":false}`)
				case r.Method == http.MethodPost && r.URL.Path == "/v1/operations/1:cancel":
					mu.Lock()
					cancels++
					mu.Unlock()
					w.Header().Set("Retry-After", fmt.Sprint(retryAfter))
					w.WriteHeader(http.StatusServiceUnavailable)
				default:
					w.Header().Set("Retry-After", "5")
					fmt.Fprint(w, `{"name":"operations/1","done":false}`)
				}
			}))
			t.Cleanup(api.Close)
			var logs syncBuffer
			var s sdktestsuite.WorkflowTestSuite
			s.SetLogger(log.NewStructuredLogger(slog.New(slog.NewJSONHandler(&logs, nil))))
			env := s.NewTestWorkflowEnvironment()
			conv := activities.IETFConvention()
			conv.LongRunning = activities.GoogleOperation(api.URL + "/v1/")
			testsuite.Register(t, env, &testsuite.Server{URL: api.URL}, activities.Config{Conventions: map[string]activities.Convention{api.URL: conv}})
			env.SetStartWorkflowOptions(client.StartWorkflowOptions{WorkflowExecutionTimeout: tc.execution})
			// The test environment enforces the run's timeout as a server
			// does: a workflow still open then fails.
			if tc.run > 0 {
				env.SetWorkflowRunTimeout(tc.run)
			}
			env.RegisterDelayedCallback(env.CancelWorkflow, tc.cancelAt)
			rec := &versionCalls{}
			env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{rec}})
			if tc.oldHistory {
				env.OnGetVersion(cancelDeadlineChangeID, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
			}
			start := env.Now()
			env.ExecuteWorkflow(workflows.WorkflowName, workflows.Request{Operation: "transfer", URL: api.URL + "/transfers",
				Body: []byte(`{"amount":100}`), Follow: &workflows.FollowOptions{CancelOperation: true}})
			require.True(t, env.IsWorkflowCompleted())
			if tc.oldHistory {
				var te *temporal.TimeoutError
				require.ErrorAs(t, env.GetWorkflowError(), &te, "timed out while asking")
			} else {
				var ce *temporal.CanceledError
				require.ErrorAs(t, env.GetWorkflowError(), &ce, "the workflow ends cancelled, not timed out")
			}
			ended := env.Now().Sub(start)
			assert.LessOrEqual(t, ended, tc.wantEndBy, "when the workflow ended")
			assert.GreaterOrEqual(t, ended, tc.cancelAt)
			mu.Lock()
			assert.Equal(t, tc.wantCancels, cancels, "cancel requests sent")
			mu.Unlock()
			skipped := bytes.Contains([]byte(logs.String()), []byte("not asking the server to cancel the operation"))
			assert.Equal(t, tc.wantLog, skipped, "the log says why no cancel request was sent")
			rec.mu.Lock()
			defer rec.mu.Unlock()
			assert.Equal(t, tc.wantVersion, rec.got, "the version marker, only where no cancel request is scheduled")
		})
	}
}

// TestReplayCancelWithinWorkflowDeadline replays histories recorded on a
// real dev server (harness/histgen) of a call with
// FollowOptions{CancelOperation: true} to a Google-style operation,
// cancelled while it polls: follow_cancel_deadline_history.json (a 60 s
// run cancelled 5 s in) and follow_cancel_no_time_history.json (a 15 s run
// cancelled 8 s in), both recorded with the code before the workflow's
// deadline bounded the asking (9ebb7c4: a cancel request scheduled with
// the server's cap, the run's whole timeout, answered, no version
// marker), and follow_cancel_no_time_history_v2.json, the second recorded
// with today's code (the version marker, no cancel request). Today's code
// replays all three: the first although it asks for a schedule-to-close
// timeout of 45 s, not 60 s (the SDK compares an activity's ID and type on
// replay, not its timeouts), the second through its GetVersion branch
// that schedules the cancel request as recorded.
func TestReplayCancelWithinWorkflowDeadline(t *testing.T) {
	for _, tt := range []struct {
		file   string
		run    time.Duration
		marker bool          // the history holds the version marker
		cancel time.Duration // the cancel request's recorded schedule-to-close timeout; 0: none
	}{
		{"testdata/follow_cancel_deadline_history.json", time.Minute, false, time.Minute},
		{"testdata/follow_cancel_no_time_history.json", 15 * time.Second, false, 15 * time.Second},
		{"testdata/follow_cancel_no_time_history_v2.json", 15 * time.Second, true, 0},
	} {
		t.Run(tt.file, func(t *testing.T) {
			hist := recordedHistory(t, tt.file)
			started := hist.Events[0].GetWorkflowExecutionStartedEventAttributes()
			assert.Equal(t, tt.run, started.GetWorkflowRunTimeout().AsDuration())
			var in workflows.Request
			require.NoError(t, json.Unmarshal(started.GetInput().GetPayloads()[0].GetData(), &in))
			require.NotNil(t, in.Follow)
			assert.True(t, in.Follow.CancelOperation)
			var markers []string
			var cancels []time.Duration
			cancelRequested := false
			for _, ev := range hist.Events {
				if a := ev.GetMarkerRecordedEventAttributes(); a != nil && a.GetMarkerName() == "Version" {
					var id string
					require.NoError(t, json.Unmarshal(a.GetDetails()["change-id"].GetPayloads()[0].GetData(), &id))
					markers = append(markers, id)
				}
				if ev.GetWorkflowExecutionCancelRequestedEventAttributes() != nil {
					cancelRequested = true
				}
				if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == poll.ActivityName {
					var m poll.Monitor
					require.NoError(t, json.Unmarshal(a.GetInput().GetPayloads()[0].GetData(), &m))
					if m.Cancel {
						cancels = append(cancels, a.GetScheduleToCloseTimeout().AsDuration())
					}
				}
			}
			assert.True(t, cancelRequested, "the workflow was cancelled")
			if tt.marker {
				assert.Equal(t, []string{cancelDeadlineChangeID}, markers)
			} else {
				assert.Empty(t, markers)
			}
			if tt.cancel > 0 {
				assert.Equal(t, []time.Duration{tt.cancel}, cancels, "one cancel request, its recorded schedule-to-close timeout")
			} else {
				assert.Empty(t, cancels, "no cancel request")
			}
			assert.Equal(t, enums.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED, hist.Events[len(hist.Events)-1].GetEventType())

			r := worker.NewWorkflowReplayer()
			workflows.Register(r)
			// Not ReplayWorkflowExecution with the recorded namespace: the
			// SDK checks the commands after the workflow's code has
			// returned (the cancel request, here) only under the replay
			// namespace, and the key (from the namespace) is in no
			// command it compares.
			require.NoError(t, r.ReplayWorkflowHistory(nil, hist))
		})
	}
}
