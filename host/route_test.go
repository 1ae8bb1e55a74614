package host

import (
	"context"
	"os"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/idemhttp/temporal-idempotent-http/internal/httpurl"
	"github.com/idemhttp/temporal-idempotent-http/internal/input"
	"github.com/idemhttp/temporal-idempotent-http/internal/poll"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// TestRoute: this package's HTTP activities scheduled on the base queue
// go to the queue of the origin they call, when the worker allows it; a
// request on another queue (its own TaskQueue, or OriginQueue already),
// another activity, or an origin the worker does not allow stays where
// it is.
func TestRoute(t *testing.T) {
	const api, other = "https://api.example.com", "https://other.example"
	on := true
	r := newRouting("orders", newOriginQueues("orders", []string{api, "HTTPS://Status.Example:443"}).queues, func() bool { return on })
	in := input.Input{URL: api + "/charges"}
	mon := poll.Monitor{Accepted: poll.Accepted{URL: api + "/exports", Monitor: "https://status.example/op/1"}}
	tests := []struct {
		name, queue, activity string
		args                  []any
		want                  string // "" for no move
	}{
		{"a start on the workflow's queue", "", input.ActivityName, []any{in}, "orders@https://api.example.com"},
		{"a start set on the base queue", "orders", input.ActivityName, []any{&in}, "orders@https://api.example.com"},
		{"a poll: the monitor's origin", "", poll.ActivityName, []any{mon}, "orders@https://status.example"},
		{"a poll without a monitor: the start's", "", poll.ActivityName, []any{poll.Monitor{Accepted: poll.Accepted{URL: api + "/x"}}}, "orders@https://api.example.com"},
		{"a request on its own task queue", "payments", input.ActivityName, []any{in}, ""},
		{"a request already on its origin's queue", "orders@https://api.example.com", input.ActivityName, []any{in}, ""},
		{"an origin the worker does not allow", "", input.ActivityName, []any{input.Input{URL: other + "/x"}}, ""},
		{"another activity", "", "SendEmail", []any{in}, ""},
		{"a callback URL's local activity", "", input.CallbackActivityName, []any{"charge"}, ""},
		{"no input", "", input.ActivityName, nil, ""},
		{"an input of another type", "", input.ActivityName, []any{"http://x"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := r.route(tt.queue, "orders", tt.activity, tt.args)
			assert.Equal(t, tt.want != "", ok)
			assert.Equal(t, tt.want, got)
		})
	}
	// Until Start finds the shared rate in force (or where it is not),
	// nothing moves.
	on = false
	_, ok := r.route("", "orders", input.ActivityName, []any{in})
	assert.False(t, ok, "routed without the shared rate in force")
}

// TestRoutingReplaysRecordedHistories: histories recorded before routing
// (every HTTP activity scheduled on the workflow's queue) replay without
// non-determinism with the routing interceptor installed, which schedules
// the same activities on their origin's queue, and the same histories
// with the activities on the origin's queue replay without it: the SDK
// does not compare an activity's task queue.
func TestRoutingReplaysRecordedHistories(t *testing.T) {
	tests := []struct {
		file, workflowID, base, origin string
		activities                     int
	}{
		{"../workflows/testdata/seed_history_v2.json", "histgen-seed-order-1", "histgen", "http://127.0.0.1:36547", 1},
		{"../workflows/testdata/declined_history.json", "histgen-declined-order-2", "histgen", "http://127.0.0.1:44281", 1},
		{"../workflows/testdata/follow_first_wait_history.json", "histgen-follow-order-3", "histgen-follow", "http://127.0.0.1:33483", 2},
		{"../workflows/testdata/follow_cancel_first_wait_history.json", "histgen-follow-cancel-order-4", "histgen-follow", "http://127.0.0.1:46227", 1},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			raw, err := os.ReadFile(tt.file)
			require.NoError(t, err)
			var hist historypb.History
			require.NoError(t, protojson.Unmarshal(raw, &hist))
			var recordedQueues []string
			for _, ev := range hist.Events {
				if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
					recordedQueues = append(recordedQueues, a.GetTaskQueue().GetName())
				}
			}
			require.Len(t, recordedQueues, tt.activities)
			for _, q := range recordedQueues {
				require.Equal(t, tt.base, q, "recorded before routing: on the workflow's queue")
			}

			rec := &queueRecorder{}
			routing := newRouting(tt.base, newOriginQueues(tt.base, []string{tt.origin}).queues, func() bool { return true })
			r, err := worker.NewWorkflowReplayerWithOptions(worker.WorkflowReplayerOptions{
				Interceptors: []interceptor.WorkerInterceptor{rec, routing},
			})
			require.NoError(t, err)
			workflows.Register(r)
			require.NoError(t, r.ReplayWorkflowExecution(t.Context(), historyService{history: &hist}, nil, "default",
				workflow.Execution{ID: tt.workflowID, RunID: "recorded"}))
			want := make([]string, tt.activities)
			for i := range want {
				want[i] = httpurl.OriginQueue(tt.base, tt.origin)
			}
			assert.Equal(t, want, rec.queues(), "the replayed commands run on the origin's queue")

			// And back: the history as routing records it (the activities
			// on the origin's queue) replays on a worker without routing
			// (--shared-rate=false, or one that may not write the config).
			for _, ev := range hist.Events {
				if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
					a.GetTaskQueue().Name = httpurl.OriginQueue(tt.base, tt.origin)
				}
			}
			plain := worker.NewWorkflowReplayer()
			workflows.Register(plain)
			require.NoError(t, plain.ReplayWorkflowExecution(t.Context(), historyService{history: &hist}, nil, "default",
				workflow.Execution{ID: tt.workflowID, RunID: "recorded"}))
		})
	}
}

// historyService serves one recorded history to the replayer.
type historyService struct {
	workflowservice.WorkflowServiceClient
	history *historypb.History
}

func (h historyService) GetWorkflowExecutionHistory(context.Context, *workflowservice.GetWorkflowExecutionHistoryRequest, ...grpc.CallOption) (*workflowservice.GetWorkflowExecutionHistoryResponse, error) {
	return &workflowservice.GetWorkflowExecutionHistoryResponse{History: h.history}, nil
}

// queueRecorder records the task queue of every activity the workflow
// schedules, as the interceptors after it leave it.
type queueRecorder struct {
	interceptor.WorkerInterceptorBase
	mu  sync.Mutex
	got []string
}

func (q *queueRecorder) queues() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.got
}

func (q *queueRecorder) InterceptWorkflow(_ workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	return &recordInbound{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}, q: q}
}

type recordInbound struct {
	interceptor.WorkflowInboundInterceptorBase
	q *queueRecorder
}

func (i *recordInbound) Init(outbound interceptor.WorkflowOutboundInterceptor) error {
	return i.Next.Init(&recordOutbound{WorkflowOutboundInterceptorBase: interceptor.WorkflowOutboundInterceptorBase{Next: outbound}, q: i.q})
}

type recordOutbound struct {
	interceptor.WorkflowOutboundInterceptorBase
	q *queueRecorder
}

func (o *recordOutbound) ExecuteActivity(ctx workflow.Context, activityType string, args ...any) workflow.Future {
	o.q.mu.Lock()
	o.q.got = append(o.q.got, workflow.GetActivityOptions(ctx).TaskQueue)
	o.q.mu.Unlock()
	return o.Next.ExecuteActivity(ctx, activityType, args...)
}
