package lastbeat

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/grpc"
)

const service = "/temporal.api.workflowservice.v1.WorkflowService/"

// call passes req through ic to an invoker that answers reply (for a
// poll) and records what reached it.
func call(t *testing.T, ic grpc.UnaryClientInterceptor, method string, req, reply any) {
	t.Helper()
	require.NoError(t, ic(context.Background(), service+method, req, reply, nil,
		func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error { return nil }))
}

func poll(t *testing.T, ic grpc.UnaryClientInterceptor, token string) {
	t.Helper()
	call(t, ic, "PollActivityTaskQueue", &workflowservice.PollActivityTaskQueueRequest{},
		&workflowservice.PollActivityTaskQueueResponse{TaskToken: []byte(token)})
}

type progress struct {
	Attempt int32 `json:"attempt"`
	Monitor string
}

func TestCarrier(t *testing.T) {
	tests := []struct {
		name string
		// run polls, holds and responds; it returns what Hold said and
		// the failure request that reached the server.
		run      func(t *testing.T, c *Carrier, ic grpc.UnaryClientInterceptor) (bool, *workflowservice.RespondActivityTaskFailedRequest)
		wantHeld bool
		want     *progress // decoded from the failure's LastHeartbeatDetails
	}{
		{
			name: "held details ride on the failure",
			run: func(t *testing.T, c *Carrier, ic grpc.UnaryClientInterceptor) (bool, *workflowservice.RespondActivityTaskFailedRequest) {
				poll(t, ic, "a")
				ok := c.Hold(context.Background(), []byte("a"), progress{Attempt: 1})
				ok = c.Hold(context.Background(), []byte("a"), progress{Attempt: 2, Monitor: "m"}) && ok
				r := &workflowservice.RespondActivityTaskFailedRequest{TaskToken: []byte("a")}
				call(t, ic, "RespondActivityTaskFailed", r, &workflowservice.RespondActivityTaskFailedResponse{})
				return ok, r
			},
			wantHeld: true, want: &progress{Attempt: 2, Monitor: "m"},
		},
		{
			name: "a task not polled through the interceptor is not held",
			run: func(t *testing.T, c *Carrier, ic grpc.UnaryClientInterceptor) (bool, *workflowservice.RespondActivityTaskFailedRequest) {
				poll(t, ic, "a")
				ok := c.Hold(context.Background(), []byte("b"), progress{Attempt: 1})
				r := &workflowservice.RespondActivityTaskFailedRequest{TaskToken: []byte("b")}
				call(t, ic, "RespondActivityTaskFailed", r, &workflowservice.RespondActivityTaskFailedResponse{})
				return ok, r
			},
		},
		{
			name: "eager tasks on a workflow task's response are held",
			run: func(t *testing.T, c *Carrier, ic grpc.UnaryClientInterceptor) (bool, *workflowservice.RespondActivityTaskFailedRequest) {
				call(t, ic, "RespondWorkflowTaskCompleted", &workflowservice.RespondWorkflowTaskCompletedRequest{},
					&workflowservice.RespondWorkflowTaskCompletedResponse{ActivityTasks: []*workflowservice.PollActivityTaskQueueResponse{{TaskToken: []byte("e")}}})
				ok := c.Hold(context.Background(), []byte("e"), progress{Attempt: 3})
				r := &workflowservice.RespondActivityTaskFailedRequest{TaskToken: []byte("e")}
				call(t, ic, "RespondActivityTaskFailed", r, &workflowservice.RespondActivityTaskFailedResponse{})
				return ok, r
			},
			wantHeld: true, want: &progress{Attempt: 3},
		},
		{
			name: "a completed task is forgotten: a later Hold of its token is refused",
			run: func(t *testing.T, c *Carrier, ic grpc.UnaryClientInterceptor) (bool, *workflowservice.RespondActivityTaskFailedRequest) {
				poll(t, ic, "a")
				call(t, ic, "RespondActivityTaskCompleted", &workflowservice.RespondActivityTaskCompletedRequest{TaskToken: []byte("a")}, &workflowservice.RespondActivityTaskCompletedResponse{})
				ok := c.Hold(context.Background(), []byte("a"), progress{Attempt: 1})
				r := &workflowservice.RespondActivityTaskFailedRequest{TaskToken: []byte("a")}
				call(t, ic, "RespondActivityTaskFailed", r, &workflowservice.RespondActivityTaskFailedResponse{})
				return ok, r
			},
		},
		{
			name: "details the SDK set are kept",
			run: func(t *testing.T, c *Carrier, ic grpc.UnaryClientInterceptor) (bool, *workflowservice.RespondActivityTaskFailedRequest) {
				poll(t, ic, "a")
				ok := c.Hold(context.Background(), []byte("a"), progress{Attempt: 1})
				own, err := converter.GetDefaultDataConverter().ToPayloads(progress{Attempt: 9})
				require.NoError(t, err)
				r := &workflowservice.RespondActivityTaskFailedRequest{TaskToken: []byte("a"), LastHeartbeatDetails: own}
				call(t, ic, "RespondActivityTaskFailed", r, &workflowservice.RespondActivityTaskFailedResponse{})
				return ok, r
			},
			wantHeld: true, want: &progress{Attempt: 9},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := New()
			held, r := tt.run(t, c, c.Interceptor(nil))
			assert.Equal(t, tt.wantHeld, held)
			if tt.want == nil {
				assert.Nil(t, r.LastHeartbeatDetails)
				return
			}
			var got progress
			require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(r.LastHeartbeatDetails, &got))
			assert.Equal(t, *tt.want, got)
			assert.Empty(t, c.tasks, "a responded task is forgotten")
		})
	}
}

func TestCarrierSweepsOldTasks(t *testing.T) {
	c := New()
	now := time.Unix(1e9, 0)
	c.now = func() time.Time { return now }
	ic := c.Interceptor(nil)
	poll(t, ic, "old")
	now = now.Add(maxAge + time.Minute)
	poll(t, ic, "new")
	assert.False(t, c.Hold(context.Background(), []byte("old"), progress{}), "a task never responded to is swept after maxAge")
	assert.True(t, c.Hold(context.Background(), []byte("new"), progress{}))
	assert.Len(t, c.tasks, 1)
}

func TestNilCarrierHoldsNothing(t *testing.T) {
	var c *Carrier
	assert.False(t, c.Hold(context.Background(), []byte("a"), progress{}))
}
