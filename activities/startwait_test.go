package activities_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktestsuite "go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// TestStartWaitsAShortRetryAfter: a followed start answer's wait before
// the first poll is spent inside the start request's attempt, up to what
// the workflow asked (input.Input.StartWait), when the origin's admission
// would spend a wait that long there (at most Admission.MaxWait, 1 s by
// default), and Accepted.Waited says so, for the workflow to take off its
// timer (an action); a longer one, any with admission off, or any the
// workflow did not ask for (a workflow of an earlier version, which times
// the whole wait itself) is left to the workflow's timer.
func TestStartWaitsAShortRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		name       string
		retryAfter []string // the start answer's Retry-After header, if any
		firstWait  time.Duration
		admission  activities.Admission
		waited     time.Duration
	}{
		{"no Retry-After: the 1 s floor", nil, 24 * time.Hour, activities.Admission{}, time.Second},
		{"Retry-After: 1", []string{"Retry-After", "1"}, 24 * time.Hour, activities.Admission{}, time.Second},
		{"Retry-After: 2, above MaxWait", []string{"Retry-After", "2"}, 24 * time.Hour, activities.Admission{}, 0},
		{"Retry-After: 2 within a MaxWait of 2 s", []string{"Retry-After", "2"}, 24 * time.Hour, activities.Admission{MaxWait: 2 * time.Second}, 2 * time.Second},
		{"Retry-After: 1, the workflow asks 300 ms", []string{"Retry-After", "1"}, 300 * time.Millisecond, activities.Admission{}, 300 * time.Millisecond},
		{"Retry-After: 1, the workflow asks none", []string{"Retry-After", "1"}, 0, activities.Admission{}, 0},
		{"admission off", []string{"Retry-After", "1"}, 24 * time.Hour, activities.Admission{Off: true}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newRecorder(t, status(202, `{}`, append([]string{"Location", "/operations/1"}, tc.retryAfter...)...))
			in := req(srv.URL + "/transfers")
			in.Follow, in.StartWait = true, tc.firstWait
			start := time.Now()
			resp, _, err := run(t, activities.Config{AllowedOrigins: []string{srv.URL}, Admission: tc.admission}, in)
			took := time.Since(start)
			require.NoError(t, err)
			require.NotNil(t, resp.Accepted)
			assert.Equal(t, tc.waited, resp.Accepted.Waited)
			assert.GreaterOrEqual(t, took, tc.waited, "the attempt returned before the wait it reports")
			assert.Equal(t, 1, srv.count())
		})
	}
}

// TestStartWaitNotWithAHeartbeatTimeout: a caller whose activity options
// set a HeartbeatTimeout gets no wait inside the start request's attempt
// (which sends no heartbeat meanwhile, after a request that may have used
// most of that timeout): the workflow's timer waits it, and the followed
// call's final Accepted says what the start waited.
func TestStartWaitNotWithAHeartbeatTimeout(t *testing.T) {
	for _, tc := range []struct {
		name      string
		heartbeat time.Duration
		waited    time.Duration
		timers    int
	}{
		{"no heartbeat timeout", 0, time.Second, 0},
		{"heartbeat timeout 30 s", 30 * time.Second, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodPost {
					w.Header().Set("Location", "/operations/1")
					w.WriteHeader(http.StatusAccepted)
					return
				}
				_, _ = w.Write([]byte(`{"id":"tr_1"}`))
			})
			env := new(sdktestsuite.WorkflowTestSuite).NewTestWorkflowEnvironment()
			a, err := activities.New(activities.Config{AllowedOrigins: []string{srv.URL}})
			require.NoError(t, err)
			a.Register(env)
			timers := 0
			env.SetOnTimerScheduledListener(func(string, time.Duration) { timers++ })
			wf := func(ctx workflow.Context) (*workflows.Response, error) {
				ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second, HeartbeatTimeout: tc.heartbeat})
				return workflows.Call(ctx, workflows.Request{Operation: "transfer", URL: srv.URL + "/transfers", Follow: &workflows.FollowOptions{}})
			}
			env.RegisterWorkflow(wf)
			env.ExecuteWorkflow(wf)
			require.NoError(t, env.GetWorkflowError())
			var resp workflows.Response
			require.NoError(t, env.GetWorkflowResult(&resp))
			require.NotNil(t, resp.Accepted)
			assert.Equal(t, tc.waited, resp.Accepted.Waited)
			assert.Equal(t, tc.timers, timers, "timers before the first poll")
			assert.Equal(t, 200, resp.Status)
			assert.Equal(t, 2, srv.count(), "the start and one poll")
		})
	}
}
