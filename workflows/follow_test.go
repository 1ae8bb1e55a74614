package workflows_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// TestFollowRefusesBadOptions: follow options that Temporal would refuse
// (a negative timeout fails the workflow task, and the workflow would not
// move) and an empty operation are InvalidRequest, before anything is
// scheduled.
func TestFollowRefusesBadOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		wf   func(ctx workflow.Context) (*workflows.Response, error)
		want string
	}{
		{"negative deadline", func(ctx workflow.Context) (*workflows.Response, error) {
			return workflows.Call(ctx, workflows.Request{Operation: "t", URL: "https://api.example.com/t", Follow: &workflows.FollowOptions{Timeout: -time.Second}})
		}, "Request.Follow: Timeout"},
		{"negative interval", func(ctx workflow.Context) (*workflows.Response, error) {
			return workflows.Call(ctx, workflows.Request{Operation: "t", URL: "https://api.example.com/t", Follow: &workflows.FollowOptions{Interval: -1}})
		}, "must be 0 (the default) or more"},
		{"resume without a monitor", func(ctx workflow.Context) (*workflows.Response, error) {
			return workflows.FollowAccepted(ctx, workflows.Accepted{}, workflows.FollowOptions{})
		}, "needs Accepted.Monitor"},
		{"resume with a negative deadline", func(ctx workflow.Context) (*workflows.Response, error) {
			return workflows.FollowAccepted(ctx, workflows.Accepted{URL: "https://a.example/x", Monitor: "https://a.example/op/1"}, workflows.FollowOptions{Timeout: -1})
		}, "FollowAccepted: Request.Follow"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := new(testsuite.WorkflowTestSuite).NewTestWorkflowEnvironment()
			started := 0
			env.SetOnActivityStartedListener(func(*activity.Info, context.Context, converter.EncodedValues) { started++ })
			env.RegisterWorkflow(tc.wf)
			env.ExecuteWorkflow(tc.wf)
			f, ok := workflows.AsFailure(env.GetWorkflowError())
			require.True(t, ok, "%v", env.GetWorkflowError())
			assert.Equal(t, workflows.ErrTypeInvalidRequest, f.Type)
			assert.Contains(t, f.Message, tc.want)
			assert.Zero(t, started)
		})
	}
	require.NoError(t, workflows.Request{Operation: "t", URL: "https://a.example/x", Follow: &workflows.FollowOptions{}}.Validate())
	require.Error(t, workflows.Request{Operation: "t", URL: "https://a.example/x", Follow: &workflows.FollowOptions{Timeout: -1}}.Validate())
}
