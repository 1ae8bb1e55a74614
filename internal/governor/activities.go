package governor

import (
	"context"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/grpc/codes"
)

// Activities holds the governor's local activity and what it needs.
type Activities struct {
	// Client is the client the activity calls the server with.
	Client client.Client
}

// Register registers the governor workflow (as [WorkflowName]) and the
// SetRate local activity (as [SetRateName]) on r, a worker polling the
// governor's task queue:
//
//	w := worker.New(c, "idemhttp-governor", worker.Options{})
//	(&governor.Activities{Client: c}).Register(w)
func (a *Activities) Register(r worker.Registry) {
	r.RegisterWorkflowWithOptions(Workflow, workflow.RegisterOptions{Name: WorkflowName})
	r.RegisterActivityWithOptions(a.SetRate, activity.RegisterOptions{Name: SetRateName})
}

// SetRateRequest asks for a queue rate limit.
type SetRateRequest struct {
	// Namespace and TaskQueue name the activity task queue.
	Namespace string `json:"namespace"`
	TaskQueue string `json:"taskQueue"`
	// Rate is the limit to set, requests per second.
	Rate float64 `json:"rate"`
	// Reason is stored with the limit.
	Reason string `json:"reason"`
}

// SetRateResult is the queue's rate limit as the server reported it.
type SetRateResult struct {
	// Written is true when the limit was written; false when someone
	// else's limit was found and left alone.
	Written bool `json:"written"`
	// Limited is true when a queue rate limit is in force, InForce its rate.
	Limited bool    `json:"limited"`
	InForce float64 `json:"inForce"`
	// Owner is the identity that set the queue rate limit ("" if none).
	Owner string `json:"owner"`
	// Reason is the reason stored with it.
	Reason string `json:"reason,omitempty"`
}

// Overridden reports whether r shows a limit set by someone other than the
// governor.
func (r SetRateResult) Overridden() bool { return r.Limited && r.Owner != Identity }

// SetRate reads the queue's config; unless someone else set its rate limit,
// it writes req.Rate (UpdateTaskQueueConfig on the ACTIVITY queue, with
// identity [Identity]) and returns the config the server stored. It fails with a
// non-retryable ApplicationError of type [ErrTypeUnsupported] when the
// server refuses the call for good; any other error is transient.
func (a *Activities) SetRate(ctx context.Context, req SetRateRequest) (SetRateResult, error) {
	before, err := a.describe(ctx, req)
	if err != nil {
		return SetRateResult{}, classify("DescribeTaskQueue", err)
	}
	if before.Overridden() {
		return before, nil
	}
	resp, err := a.Client.WorkflowService().UpdateTaskQueueConfig(ctx, &workflowservice.UpdateTaskQueueConfigRequest{
		Namespace:     req.Namespace,
		Identity:      Identity,
		TaskQueue:     req.TaskQueue,
		TaskQueueType: enumspb.TASK_QUEUE_TYPE_ACTIVITY,
		UpdateQueueRateLimit: &workflowservice.UpdateTaskQueueConfigRequest_RateLimitUpdate{
			RateLimit: &taskqueuepb.RateLimit{RequestsPerSecond: float32(req.Rate)},
			Reason:    truncate(req.Reason, 1000),
		},
	})
	if err != nil {
		return SetRateResult{}, classify("UpdateTaskQueueConfig", err)
	}
	// The config the server stored comes with the answer; a describe
	// right after may not show it yet (seen on the dev server).
	after := queueLimit(resp.GetConfig())
	if resp.GetConfig() == nil {
		if after, err = a.describe(ctx, req); err != nil {
			return SetRateResult{}, classify("DescribeTaskQueue", err)
		}
	}
	after.Written = true
	return after, nil
}

// describe reads the queue rate limit of req's activity task queue.
func (a *Activities) describe(ctx context.Context, req SetRateRequest) (SetRateResult, error) {
	resp, err := a.Client.WorkflowService().DescribeTaskQueue(ctx, &workflowservice.DescribeTaskQueueRequest{
		Namespace:     req.Namespace,
		TaskQueue:     &taskqueuepb.TaskQueue{Name: req.TaskQueue, Kind: enumspb.TASK_QUEUE_KIND_NORMAL},
		TaskQueueType: enumspb.TASK_QUEUE_TYPE_ACTIVITY,
		ReportConfig:  true,
	})
	if err != nil {
		return SetRateResult{}, err
	}
	return queueLimit(resp.GetConfig()), nil
}

// queueLimit extracts the queue rate limit of cfg.
func queueLimit(cfg *taskqueuepb.TaskQueueConfig) SetRateResult {
	q := cfg.GetQueueRateLimit()
	r := SetRateResult{Owner: q.GetMetadata().GetUpdateIdentity(), Reason: q.GetMetadata().GetReason()}
	if rl := q.GetRateLimit(); rl != nil {
		r.Limited, r.InForce = true, float64(rl.GetRequestsPerSecond())
	}
	return r
}

// classify turns a refusal for good into a non-retryable ApplicationError
// of type ErrTypeUnsupported and leaves other errors alone.
func classify(call string, err error) error {
	switch code := serviceerror.ToStatus(err).Code(); code {
	case codes.PermissionDenied, codes.Unimplemented, codes.InvalidArgument:
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("%s: %s: %v", call, code, err), ErrTypeUnsupported, err)
	}
	return fmt.Errorf("%s: %w", call, err)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
