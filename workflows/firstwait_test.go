package workflows_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/workflow"

	"github.com/idemhttp/temporal-idempotent-http/internal/input"
	"github.com/idemhttp/temporal-idempotent-http/internal/poll"
	"github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// TestFollowTimerWaitsWhatTheStartDidNot: the workflow's timer before the
// first poll waits the start answer's Retry-After less what the start
// request's attempt waited already (Accepted.Waited): none when it waited
// it all, so a followed call whose start answer asked for a short wait
// costs no timer (an action); the whole wait when it waited none, as in
// histories recorded before.
func TestFollowTimerWaitsWhatTheStartDidNot(t *testing.T) {
	for _, tc := range []struct {
		name               string
		retryAfter, waited time.Duration
		maxRetryAfter      time.Duration
		timers             []time.Duration
	}{
		{"waited in the start", time.Second, time.Second, 0, nil},
		{"too long to wait there", 3 * time.Second, 0, 0, []time.Duration{3 * time.Second}},
		{"cut short by the worker stopping", 3 * time.Second, 1200 * time.Millisecond, 0, []time.Duration{1800 * time.Millisecond}},
		{"the call's cap, then what was waited", 5 * time.Second, time.Second, 2 * time.Second, []time.Duration{time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := testsuite.NewEnv(t)
			env.RegisterActivityWithOptions(func(context.Context, input.Input) (*workflows.Response, error) {
				return &workflows.Response{Status: 202, IdempotencyKey: "k", Attempt: 1, Accepted: &workflows.Accepted{
					URL: "https://api.example.com/transfers", Monitor: "https://api.example.com/operations/1", IdempotencyKey: "k",
					StartStatus: 202, RetryAfter: tc.retryAfter, Waited: tc.waited}}, nil
			}, activity.RegisterOptions{Name: input.ActivityName})
			polls := 0
			env.RegisterActivityWithOptions(func(_ context.Context, in poll.Monitor) (*workflows.Response, error) {
				polls++
				return &workflows.Response{Status: 200, IdempotencyKey: in.IdempotencyKey, Attempt: 1}, nil
			}, activity.RegisterOptions{Name: poll.ActivityName})
			var timers []time.Duration
			env.SetOnTimerScheduledListener(func(_ string, d time.Duration) { timers = append(timers, d) })
			wf := func(ctx workflow.Context) (*workflows.Response, error) {
				return workflows.Call(ctx, workflows.Request{Operation: "transfer", URL: "https://api.example.com/transfers",
					Follow: &workflows.FollowOptions{MaxRetryAfter: tc.maxRetryAfter}})
			}
			env.RegisterWorkflow(wf)
			env.ExecuteWorkflow(wf)
			require.NoError(t, env.GetWorkflowError())
			assert.Equal(t, tc.timers, timers)
			assert.Equal(t, 1, polls)
		})
	}
}
