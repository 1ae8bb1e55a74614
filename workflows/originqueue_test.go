package workflows_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	idemtest "github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// TestOriginQueue: Request.OriginQueue runs the activity on the origin's
// own task queue, named from the queue it would run on otherwise; without
// it the activity stays there.
func TestOriginQueue(t *testing.T) {
	srv := idemtest.StartServer(t, idemtest.Options{})
	for _, tt := range []struct {
		name      string
		taskQueue string
		origin    bool
		want      string
	}{
		{"default: the workflow's queue", "", false, "default-test-taskqueue"},
		{"origin queue of the workflow's", "", true, "default-test-taskqueue@" + srv.URL},
		{"origin queue of Request.TaskQueue", "payments", true, "payments@" + srv.URL},
		{"Request.TaskQueue alone", "payments", false, "payments"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, srv, activities.Config{}, "")
			var queues []string
			h.env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
				queues = append(queues, info.TaskQueue)
			})
			req := charge(srv)
			req.TaskQueue, req.OriginQueue = tt.taskQueue, tt.origin
			_, err := h.call(req)
			require.NoError(t, err)
			assert.Equal(t, []string{tt.want}, queues)
		})
	}
	q, err := workflows.OriginTaskQueue("payments", srv.URL+"/charges?x=1")
	require.NoError(t, err)
	assert.Equal(t, "payments@"+srv.URL, q)
	_, err = workflows.OriginTaskQueue("payments", "ftp://x")
	assert.Error(t, err)
}

// TestOnOriginQueue: Post's option puts the request on its origin's queue.
func TestOnOriginQueue(t *testing.T) {
	srv := idemtest.StartServer(t, idemtest.Options{})
	h := newHarness(t, srv, activities.Config{}, "")
	var queues []string
	h.env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		queues = append(queues, info.TaskQueue)
	})
	h.env.RegisterWorkflow(postOnOriginQueue)
	h.env.ExecuteWorkflow(postOnOriginQueue, srv.URL)
	require.NoError(t, h.env.GetWorkflowError())
	assert.Equal(t, []string{"default-test-taskqueue@" + srv.URL}, queues)
}

func postOnOriginQueue(ctx workflow.Context, url string) error {
	_, err := workflows.Call(ctx, workflows.Request{Operation: "charge", URL: url + "/payments", Body: json.RawMessage(`{"amount":1}`), OriginQueue: true})
	return err
}
