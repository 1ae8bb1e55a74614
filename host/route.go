package host

import (
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/workflow"

	"github.com/idemhttp/temporal-idempotent-http/internal/httpurl"
	"github.com/idemhttp/temporal-idempotent-http/internal/input"
	"github.com/idemhttp/temporal-idempotent-http/internal/poll"
)

// routing is the workflow interceptor of the shared rate: it runs this
// package's HTTP activities (input.ActivityName and
// poll.ActivityName: every request to an origin, a start, a poll,
// a cancel request, the read of a result) that a workflow schedules on
// the worker's base task queue on the queue of the origin they call,
// when the worker allows that origin (it polls its queue), as
// workflows.Request.OriginQueue does. A request that set another task
// queue stays there.
//
// Histories replay across the switch: the SDK matches a recorded
// ActivityTaskScheduled event by activity ID and type, not by task queue
// (internal_task_handlers.go, isCommandMatchEvent).
type routing struct {
	interceptor.WorkerInterceptorBase
	base   string
	queues map[string]string // canonical origin → its task queue
	on     func() bool       // whether the shared rate is in force
}

// newRouting routes the activities scheduled on base to the queues of
// the origins of queues (task queue → origin, as originQueues has them),
// while on reports true.
func newRouting(base string, queues map[string]string, on func() bool) *routing {
	r := &routing{base: base, queues: map[string]string{}, on: on}
	for tq, origin := range queues {
		r.queues[origin] = tq
	}
	return r
}

// InterceptWorkflow is interceptor.WorkerInterceptor's.
func (r *routing) InterceptWorkflow(_ workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	return &routeInbound{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}, r: r}
}

type routeInbound struct {
	interceptor.WorkflowInboundInterceptorBase
	r *routing
}

// Init is interceptor.WorkflowInboundInterceptor's.
func (i *routeInbound) Init(outbound interceptor.WorkflowOutboundInterceptor) error {
	return i.Next.Init(&routeOutbound{WorkflowOutboundInterceptorBase: interceptor.WorkflowOutboundInterceptorBase{Next: outbound}, r: i.r})
}

type routeOutbound struct {
	interceptor.WorkflowOutboundInterceptorBase
	r *routing
}

// ExecuteActivity is interceptor.WorkflowOutboundInterceptor's: it
// schedules the activity on its origin's queue when route says so, with
// eager execution off (the server does not rate-limit eager activities).
func (o *routeOutbound) ExecuteActivity(ctx workflow.Context, activityType string, args ...any) workflow.Future {
	ao := workflow.GetActivityOptions(ctx)
	if tq, ok := o.r.route(ao.TaskQueue, workflow.GetInfo(ctx).TaskQueueName, activityType, args); ok {
		ao.TaskQueue, ao.DisableEagerExecution = tq, true
		ctx = workflow.WithActivityOptions(ctx, ao)
	}
	return o.Next.ExecuteActivity(ctx, activityType, args...)
}

// route returns the task queue an activity of activityType with args,
// set to run on taskQueue ("": the workflow's, wfQueue), runs on instead,
// and whether it moves: an HTTP activity of this package on the base
// queue, whose origin the worker allows.
func (r *routing) route(taskQueue, wfQueue, activityType string, args []any) (string, bool) {
	if taskQueue == "" {
		taskQueue = wfQueue
	}
	if taskQueue != r.base || len(args) == 0 || !r.on() {
		return "", false
	}
	var urls []string
	switch activityType {
	case input.ActivityName, input.ActivityNameV2:
		switch in := args[0].(type) {
		case input.Input:
			urls = []string{in.URL}
		case *input.Input:
			urls = []string{in.URL}
		}
	case poll.ActivityName:
		switch in := args[0].(type) {
		case poll.Monitor:
			urls = pollURLs(in)
		case *poll.Monitor:
			urls = pollURLs(*in)
		}
	}
	for _, u := range urls {
		if origin, err := httpurl.Origin(u); err == nil {
			tq, ok := r.queues[origin]
			return tq, ok
		}
	}
	return "", false
}

// pollURLs are the URLs whose origin a poll's requests are paced by,
// the first absolute one's: the monitor's (a poll and a cancel request go
// there, the result most often), else the start request's.
func pollURLs(m poll.Monitor) []string {
	return []string{m.Monitor, m.URL}
}
