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

// TestFollowTimerWaitsWhatTheStartDidNot: a followed call asks the start
// request's attempt to wait at most the first wait it would time itself
// (input.Input.StartWait: FollowOptions.Timeout, MaxRetryAfter), and its
// timer before the first poll then waits the start answer's Retry-After
// less what that attempt waited (Accepted.Waited): none when it waited it
// all, so a followed call whose start answer asked for a short wait costs
// no timer (an action); the whole wait when it waited none, as in
// histories recorded before, or when the workflow did not ask the start
// to wait (CancelOperation: a cancellation during the wait asks the
// server to cancel). At most a fifth of the attempt's start-to-close
// timeout is asked. The timeout counts from the start answer on, the
// start's wait included. A start that waited its whole Retry-After, as
// recorded, leaves no timer even where the options now ask for no wait:
// a replay after they changed takes the recorded path.
func TestFollowTimerWaitsWhatTheStartDidNot(t *testing.T) {
	waited := func(w, asked time.Duration, recorded bool) time.Duration {
		if recorded {
			return w
		}
		return min(w, asked)
	}
	for _, tc := range []struct {
		name               string
		opts               workflows.FollowOptions
		retryAfter, waited time.Duration
		startWait          time.Duration // the input's StartWait
		timers             []time.Duration
		polls              int
		// recorded: the start's result as recorded under options that
		// asked for its wait (a replay after the options changed).
		recorded bool
	}{
		{"waited in the start", workflows.FollowOptions{}, time.Second, time.Second, 2 * time.Second, nil, 1, false},
		{"too long to wait there", workflows.FollowOptions{}, 3 * time.Second, 0, 2 * time.Second, []time.Duration{3 * time.Second}, 1, false},
		{"cut short by the worker stopping", workflows.FollowOptions{}, 3 * time.Second, 1200 * time.Millisecond, 2 * time.Second, []time.Duration{1800 * time.Millisecond}, 1, false},
		{"not asked: CancelOperation", workflows.FollowOptions{CancelOperation: true}, time.Second, time.Second, 0, []time.Duration{time.Second}, 1, false},
		{"recorded, then CancelOperation: still no timer", workflows.FollowOptions{CancelOperation: true}, time.Second, time.Second, 0, nil, 1, true},
		{"the call's cap", workflows.FollowOptions{MaxRetryAfter: 2 * time.Second}, 5 * time.Second, 2 * time.Second, 2 * time.Second, nil, 1, false},
		{"the call's timeout, waited in the start", workflows.FollowOptions{Timeout: 500 * time.Millisecond}, time.Second, 500 * time.Millisecond, 500 * time.Millisecond, nil, 0, false},
		{"the call's timeout, on the timer", workflows.FollowOptions{Timeout: 500 * time.Millisecond}, time.Second, 0, 500 * time.Millisecond, []time.Duration{500 * time.Millisecond}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := testsuite.NewEnv(t)
			var asked time.Duration
			env.RegisterActivityWithOptions(func(_ context.Context, in input.Input) (*workflows.Response, error) {
				// As the HTTP activity: it waits at most what it is asked.
				asked = in.StartWait
				return &workflows.Response{Status: 202, IdempotencyKey: "k", Attempt: 1, Accepted: &workflows.Accepted{
					URL: "https://api.example.com/transfers", Monitor: "https://api.example.com/operations/1", IdempotencyKey: "k",
					StartStatus: 202, RetryAfter: tc.retryAfter, Waited: waited(tc.waited, in.StartWait, tc.recorded)}}, nil
			}, activity.RegisterOptions{Name: input.ActivityName})
			polls := 0
			env.RegisterActivityWithOptions(func(_ context.Context, in poll.Monitor) (*workflows.Response, error) {
				polls++
				return &workflows.Response{Status: 200, IdempotencyKey: in.IdempotencyKey, Attempt: 1}, nil
			}, activity.RegisterOptions{Name: poll.ActivityName})
			var timers []time.Duration
			env.SetOnTimerScheduledListener(func(_ string, d time.Duration) { timers = append(timers, d) })
			wf := func(ctx workflow.Context) (*workflows.Response, error) {
				return workflows.Call(ctx, workflows.Request{Operation: "transfer", URL: "https://api.example.com/transfers", Follow: &tc.opts})
			}
			env.RegisterWorkflow(wf)
			env.ExecuteWorkflow(wf)
			assert.Equal(t, tc.startWait, asked, "the input's StartWait")
			assert.Equal(t, tc.timers, timers)
			assert.Equal(t, tc.polls, polls)
			if tc.polls == 0 {
				f, ok := workflows.AsFailure(env.GetWorkflowError())
				require.True(t, ok, "%v", env.GetWorkflowError())
				assert.Equal(t, workflows.ErrTypeOperationStillRunning, f.Type)
				return
			}
			require.NoError(t, env.GetWorkflowError())
		})
	}
}
