package workflows_test

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/internal/poll"
	idemtest "github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// firstWaitChangeID is the GetVersion change ID of FollowOptions.Timeout
// bounding the first Retry-After wait, as recorded in
// follow_first_wait_history_v2.json: renaming it breaks those histories.
const firstWaitChangeID = "follow-timeout-bounds-first-wait"

// TestReplayFollowFirstWait replays histories recorded on a real dev server
// (harness/histgen) of a call following an operation whose start answer's
// Retry-After (3 s) passes FollowOptions.Timeout (2 s):
// follow_first_wait_history.json with the code before the timeout bounded
// the first wait (7500d85: a 3 s timer, then the poll activity, then the
// result; no version marker) and follow_first_wait_history_v2.json with
// today's (the version marker, a 2 s timer, no poll, OperationStillRunning).
// The current code replays both without non-determinism: the first only
// through its GetVersion branch that replays the old behaviour.
func TestReplayFollowFirstWait(t *testing.T) {
	tests := []struct {
		file    string
		marker  bool            // the history holds the version marker (version 1)
		timer   time.Duration   // the first wait's timer
		polled  bool            // the poll activity is scheduled after the timer fired
		outcome enums.EventType // the workflow's last event
	}{
		{"testdata/follow_first_wait_history.json", false, 3 * time.Second, true, enums.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED},
		{"testdata/follow_first_wait_history_v2.json", true, 2 * time.Second, false, enums.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			hist := recordedHistory(t, tt.file)

			var in workflows.Request
			require.NoError(t, json.Unmarshal(hist.Events[0].GetWorkflowExecutionStartedEventAttributes().GetInput().GetPayloads()[0].GetData(), &in))
			require.NotNil(t, in.Follow)
			assert.Equal(t, 2*time.Second, in.Follow.Timeout)

			var markers []string
			var timers []time.Duration
			var timerFired, pollScheduled int64
			for _, ev := range hist.Events {
				if a := ev.GetMarkerRecordedEventAttributes(); a != nil && a.GetMarkerName() == "Version" {
					var id string
					var version int
					require.NoError(t, json.Unmarshal(a.GetDetails()["change-id"].GetPayloads()[0].GetData(), &id))
					require.NoError(t, json.Unmarshal(a.GetDetails()["version"].GetPayloads()[0].GetData(), &version))
					assert.Equal(t, 1, version)
					markers = append(markers, id)
				}
				if a := ev.GetTimerStartedEventAttributes(); a != nil {
					timers = append(timers, a.GetStartToFireTimeout().AsDuration())
				}
				if ev.GetTimerFiredEventAttributes() != nil {
					timerFired = ev.GetEventId()
				}
				if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == poll.ActivityName {
					pollScheduled = ev.GetEventId()
				}
			}
			if tt.marker {
				assert.Equal(t, []string{firstWaitChangeID}, markers)
			} else {
				assert.Empty(t, markers)
			}
			assert.Equal(t, []time.Duration{tt.timer}, timers, "one timer: the first wait")
			require.NotZero(t, timerFired, "the first wait's timer fired")
			if tt.polled {
				assert.Greater(t, pollScheduled, timerFired, "the poll activity is scheduled after the timer")
			} else {
				assert.Zero(t, pollScheduled, "no poll")
			}
			assert.Equal(t, tt.outcome, hist.Events[len(hist.Events)-1].GetEventType())

			r := worker.NewWorkflowReplayer()
			workflows.Register(r)
			svc := historyService{history: hist}
			require.NoError(t, r.ReplayWorkflowExecution(t.Context(), svc, nil, "default", workflow.Execution{ID: "histgen-follow-order-3", RunID: "recorded"}))
		})
	}
}

// versionCalls records every workflow.GetVersion call and its result.
type versionCalls struct {
	interceptor.WorkerInterceptorBase
	mu  sync.Mutex
	got []string
}

func (v *versionCalls) InterceptWorkflow(ctx workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	return &versionInbound{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}, v: v}
}

type versionInbound struct {
	interceptor.WorkflowInboundInterceptorBase
	v *versionCalls
}

func (i *versionInbound) Init(outbound interceptor.WorkflowOutboundInterceptor) error {
	return i.Next.Init(&versionOutbound{WorkflowOutboundInterceptorBase: interceptor.WorkflowOutboundInterceptorBase{Next: outbound}, v: i.v})
}

type versionOutbound struct {
	interceptor.WorkflowOutboundInterceptorBase
	v *versionCalls
}

func (o *versionOutbound) GetVersion(ctx workflow.Context, changeID string, minSupported, maxSupported workflow.Version) workflow.Version {
	got := o.Next.GetVersion(ctx, changeID, minSupported, maxSupported)
	o.v.mu.Lock()
	defer o.v.mu.Unlock()
	o.v.got = append(o.v.got, fmt.Sprintf("%s=%d", changeID, got))
	return got
}

// TestFollowFirstWaitVersion: a new run records the first-wait version
// (version 1) only where the start answer's Retry-After passes
// FollowOptions.Timeout, and then ends at the timeout without polling;
// within the timeout it asks for no version. A run on DefaultVersion (a
// history recorded before) waits the whole Retry-After and polls.
func TestFollowFirstWaitVersion(t *testing.T) {
	tests := []struct {
		name        string
		retryAfter  int
		oldHistory  bool // GetVersion answers DefaultVersion, as in a history recorded before
		wantVersion []string
		wantPolls   bool
	}{
		{"Retry-After past the timeout", 3, false, []string{firstWaitChangeID + "=1"}, false},
		{"Retry-After within the timeout", 1, false, nil, true},
		{"Retry-After past the timeout, recorded before", 3, true, []string{firstWaitChangeID + "=-1"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := idemtest.NewEnv(t)
			rec := &versionCalls{}
			env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{rec}})
			srv := idemtest.StartServer(t, idemtest.Options{Async: &idemtest.Async{Style: idemtest.AsyncLocation, RetryAfter: tt.retryAfter}, Now: env.Now})
			idemtest.Register(t, env, srv, activities.Config{})
			if tt.oldHistory {
				env.OnGetVersion(firstWaitChangeID, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
			}
			env.ExecuteWorkflow(workflows.WorkflowName, workflows.Request{
				Operation: "export", URL: srv.URL + "/exports", Body: json.RawMessage(`{"order":"order-3"}`),
				Follow: &workflows.FollowOptions{Timeout: 2 * time.Second},
			})
			err := env.GetWorkflowError()
			if tt.wantPolls {
				require.NoError(t, err)
				assert.Positive(t, srv.Stats().Polls)
			} else {
				f, ok := workflows.AsFailure(err)
				require.True(t, ok, "%v", err)
				assert.Equal(t, workflows.ErrTypeOperationStillRunning, f.Type)
				assert.Zero(t, srv.Stats().Polls)
			}
			rec.mu.Lock()
			defer rec.mu.Unlock()
			assert.Equal(t, tt.wantVersion, rec.got)
		})
	}
}

// cancelFirstWaitChangeID is the GetVersion change ID of asking the server
// to cancel (FollowOptions.CancelOperation) when the workflow is cancelled
// during the first Retry-After wait: renaming it breaks recorded histories.
const cancelFirstWaitChangeID = "follow-cancel-during-first-wait"

// TestReplayFollowCancelFirstWait replays a history recorded on a real dev
// server (a scratch recorder at 7500d85, before a cancellation during the
// first wait asked the server to cancel) of a call with
// FollowOptions{CancelOperation: true} to a Google-style operation whose
// start answer said Retry-After: 60, cancelled 2 s into that wait: the
// timer started and was cancelled, no cancel request, the workflow
// cancelled. Today's code must replay it as recorded.
func TestReplayFollowCancelFirstWait(t *testing.T) {
	hist := recordedHistory(t, "testdata/follow_cancel_first_wait_history.json")

	var in workflows.Request
	require.NoError(t, json.Unmarshal(hist.Events[0].GetWorkflowExecutionStartedEventAttributes().GetInput().GetPayloads()[0].GetData(), &in))
	require.NotNil(t, in.Follow)
	assert.True(t, in.Follow.CancelOperation)
	var timers, markers, polls int
	for _, ev := range hist.Events {
		if a := ev.GetTimerStartedEventAttributes(); a != nil {
			timers++
			assert.Equal(t, time.Minute, a.GetStartToFireTimeout().AsDuration())
		}
		if ev.GetMarkerRecordedEventAttributes() != nil {
			markers++
		}
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == poll.ActivityName {
			polls++
		}
	}
	assert.Equal(t, 1, timers, "the first wait's timer")
	assert.Zero(t, markers, "no version marker")
	assert.Zero(t, polls, "no poll or cancel request")
	assert.Equal(t, enums.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED, hist.Events[len(hist.Events)-1].GetEventType())

	r := worker.NewWorkflowReplayer()
	workflows.Register(r)
	svc := historyService{history: hist}
	require.NoError(t, r.ReplayWorkflowExecution(t.Context(), svc, nil, "default", workflow.Execution{ID: "histgen-follow-cancel-order-4", RunID: "recorded"}))
}
