package activities_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/internal/poll"
	"github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// TestFollowTimeoutBoundsFirstWait: FollowOptions.Timeout bounds the
// following from the start answer on, the Retry-After wait before the
// first poll included: an operation whose start answer asks for a wait
// longer than the timeout ends at the timeout with OperationStillRunning,
// resumable with FollowAccepted.
func TestFollowTimeoutBoundsFirstWait(t *testing.T) {
	for _, tc := range []struct {
		name       string
		retryAfter int
		timeout    time.Duration
		polls      int
	}{
		{"Retry-After past the timeout", 300, 10 * time.Second, 0},
		{"Retry-After within the timeout", 4, 10 * time.Second, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := testsuite.StartServer(t, testsuite.Options{Async: &testsuite.Async{Style: testsuite.AsyncGoogle, Endless: true, RetryAfter: tc.retryAfter}})
			env := testsuite.Register(t, nil, srv, activities.Config{Conventions: map[string]activities.Convention{srv.URL: google(srv.URL)}})
			var took time.Duration
			wf := func(ctx workflow.Context) error {
				start := workflow.Now(ctx)
				_, err := followWorkflow(ctx, srv.URL+"/transfers", workflows.FollowOptions{Timeout: tc.timeout})
				took = workflow.Now(ctx).Sub(start)
				return err
			}
			env.RegisterWorkflow(wf)
			env.ExecuteWorkflow(wf)
			f, ok := workflows.AsFailure(env.GetWorkflowError())
			require.True(t, ok, "%v", env.GetWorkflowError())
			assert.Equal(t, workflows.ErrTypeOperationStillRunning, f.Type, f.Message)
			assert.True(t, f.OutcomeUnknown)
			require.NotNil(t, f.Accepted, "resumable with FollowAccepted")
			assert.Equal(t, srv.URL+"/v1/operations/op_1", f.Accepted.Monitor)
			assert.LessOrEqual(t, took, tc.timeout+time.Second, "workflow time from the start to the end of the call")
			assert.Equal(t, tc.polls, srv.Stats().Polls)
		})
	}
}

// timerSummaries records the summary of every timer the workflow starts.
type timerSummaries struct {
	interceptor.WorkerInterceptorBase
	mu  sync.Mutex
	got []string
}

func (s *timerSummaries) InterceptWorkflow(ctx workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	return &timerInbound{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}, s: s}
}

type timerInbound struct {
	interceptor.WorkflowInboundInterceptorBase
	s *timerSummaries
}

func (i *timerInbound) Init(outbound interceptor.WorkflowOutboundInterceptor) error {
	return i.Next.Init(&timerOutbound{WorkflowOutboundInterceptorBase: interceptor.WorkflowOutboundInterceptorBase{Next: outbound}, s: i.s})
}

type timerOutbound struct {
	interceptor.WorkflowOutboundInterceptorBase
	s *timerSummaries
}

func (o *timerOutbound) NewTimerWithOptions(ctx workflow.Context, d time.Duration, opts workflow.TimerOptions) workflow.Future {
	o.s.mu.Lock()
	o.s.got = append(o.s.got, opts.Summary)
	o.s.mu.Unlock()
	return o.Next.NewTimerWithOptions(ctx, d, opts)
}

// TestFollowFirstWaitTimerSummary: the Retry-After wait before the first
// poll is a timer named for what it is in the Web UI, with the monitor's
// host and path and nothing of its query.
func TestFollowFirstWaitTimerSummary(t *testing.T) {
	env := testsuite.NewEnv(t)
	rec := &timerSummaries{}
	env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{rec}})
	srv := testsuite.StartServer(t, testsuite.Options{Async: &testsuite.Async{Style: testsuite.AsyncAzure, Duration: 10 * time.Second, RetryAfter: 5}, Now: env.Now})
	testsuite.Register(t, env, srv, activities.Config{Conventions: map[string]activities.Convention{srv.URL: preset(activities.AzureAsyncOperation)(srv.URL)}})
	env.RegisterWorkflow(followWorkflow)
	env.ExecuteWorkflow(followWorkflow, srv.URL+"/transfers", workflows.FollowOptions{})
	require.NoError(t, env.GetWorkflowError())
	host := strings.TrimPrefix(srv.URL, "http://")
	rec.mu.Lock()
	defer rec.mu.Unlock()
	assert.Equal(t, []string{"Retry-After wait before polling " + host + "/operations/op_1"}, rec.got)
}

// TestWebhookTimeoutBoundsFirstWait: WebhookOptions.Timeout bounds the
// wait before the fallback's first poll too (it shares no code with
// following's first wait, so it is checked on its own): an After past the
// timeout ends at the timeout (after one last read of the resource, given
// poll.MinInterval), OperationStillRunning.
func TestWebhookTimeoutBoundsFirstWait(t *testing.T) {
	srv := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			w.WriteHeader(http.StatusCreated)
		}
		_, _ = w.Write([]byte(`{"id":"ch_1","status":"processing"}`))
	})
	env := testsuite.Register(t, nil, &testsuite.Server{URL: srv.URL}, activities.Config{})
	var took time.Duration
	wf := func(ctx workflow.Context) error {
		start := workflow.Now(ctx)
		_, err := workflows.Call(ctx, workflows.Request{Operation: "charge", URL: srv.URL + "/charges", Body: json.RawMessage(`{}`), Webhook: &workflows.WebhookOptions{
			Succeeded: []string{"charge.succeeded"}, Timeout: time.Minute,
			Poll: &workflows.WebhookPoll{URL: srv.URL + "/charges/{id}", After: 10 * time.Minute, Succeeded: []string{"succeeded"}}}})
		took = workflow.Now(ctx).Sub(start)
		return err
	}
	env.RegisterWorkflow(wf)
	env.ExecuteWorkflow(wf)
	f, ok := workflows.AsFailure(env.GetWorkflowError())
	require.True(t, ok, "%v", env.GetWorkflowError())
	assert.Equal(t, workflows.ErrTypeOperationStillRunning, f.Type, f.Message)
	assert.LessOrEqual(t, took, time.Minute+poll.MinInterval, "workflow time from the start to the end of the call")
}
