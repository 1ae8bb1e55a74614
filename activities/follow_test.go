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
	"go.temporal.io/sdk/temporal"
	sdktestsuite "go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/internal/poll"
	"github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// runFollow runs followWorkflow against srv (started here with opts and
// the environment's clock) with conv for its origin.
func runFollow(t *testing.T, async testsuite.Async, conv func(base string) activities.Convention, fo workflows.FollowOptions) (*testsuite.Server, *workflows.Response, error) {
	t.Helper()
	srv := testsuite.StartServer(t, testsuite.Options{Async: &async})
	cfg := activities.Config{Conventions: map[string]activities.Convention{srv.URL: conv(srv.URL)}}
	env := testsuite.Register(t, nil, srv, cfg)
	env.RegisterWorkflow(followWorkflow)
	env.ExecuteWorkflow(followWorkflow, srv.URL+"/transfers", fo)
	require.True(t, env.IsWorkflowCompleted())
	var resp *workflows.Response
	err := env.GetWorkflowError()
	if err == nil {
		require.NoError(t, env.GetWorkflowResult(&resp))
	}
	return srv, resp, err
}

// TestFollowConventions: each convention the reference server plays is
// followed to the record it made, with one start request and one record.
func TestFollowConventions(t *testing.T) {
	for _, tc := range []struct {
		style testsuite.AsyncStyle
		conv  func(string) activities.Convention
		state string
	}{
		{testsuite.AsyncLocation, preset(activities.AcceptedLocation), ""},
		{testsuite.AsyncSeeOther, preset(activities.AcceptedLocation), ""},
		{testsuite.AsyncAzure, preset(activities.AzureAsyncOperation), "Succeeded"},
		{testsuite.AsyncOperationLocation, preset(activities.OperationLocation), "Succeeded"},
		{testsuite.AsyncGoogle, google, "done: true"},
	} {
		t.Run(string(tc.style), func(t *testing.T) {
			srv, resp, err := runFollow(t, testsuite.Async{Style: tc.style, Duration: 30 * time.Second, RetryAfter: 2}, tc.conv, workflows.FollowOptions{})
			require.NoError(t, err)
			assert.Equal(t, http.StatusOK, resp.Status)
			var rec testsuite.Record
			require.NoError(t, json.Unmarshal(resp.Body, &rec), string(resp.Body))
			assert.Equal(t, "rec_1", rec.ID)
			require.NotNil(t, resp.Accepted)
			assert.Equal(t, tc.state, resp.Accepted.State)
			assert.Contains(t, []int{http.StatusOK, http.StatusAccepted}, resp.Accepted.StartStatus, "the start answer's status, kept through the polls")
			st := srv.Stats()
			assert.Equal(t, 1, st.Records)
			assert.Equal(t, 1, st.Operations)
			// 30 s at Retry-After 2: a poll every 2 s, the result GET
			// included for the styles that have one.
			assert.InDelta(t, 16, st.Polls, 2)
			assert.InDelta(t, 15, resp.Accepted.Polls, 1)
		})
	}
}

// TestFollowOutcomes: a failed or cancelled operation, and one still
// running at the deadline, fail with their own types carrying the
// operation; the running one resumes with FollowAccepted.
func TestFollowOutcomes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		async   testsuite.Async
		conv    func(string) activities.Convention
		errType string
		body    string
	}{
		{"azure failed", testsuite.Async{Style: testsuite.AsyncAzure, State: workflows.StateFailed, Duration: 5 * time.Second}, preset(activities.AzureAsyncOperation), workflows.ErrTypeOperationFailed, "failed the operation as told"},
		{"azure canceled", testsuite.Async{Style: testsuite.AsyncAzure, State: workflows.StateCanceled}, preset(activities.AzureAsyncOperation), workflows.ErrTypeOperationCanceled, ""},
		{"google canceled", testsuite.Async{Style: testsuite.AsyncGoogle, State: workflows.StateCanceled}, google, workflows.ErrTypeOperationCanceled, "CANCELLED"},
		{"google failed", testsuite.Async{Style: testsuite.AsyncGoogle, State: workflows.StateFailed}, google, workflows.ErrTypeOperationFailed, `"code":9`},
		{"location failed", testsuite.Async{Style: testsuite.AsyncLocation, State: workflows.StateFailed}, preset(activities.AcceptedLocation), workflows.ErrTypeHTTPClientError, "failed the operation"},
		{"never ends", testsuite.Async{Style: testsuite.AsyncOperationLocation, Endless: true, RetryAfter: 10}, preset(activities.OperationLocation), workflows.ErrTypeOperationStillRunning, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, _, err := runFollow(t, tc.async, tc.conv, workflows.FollowOptions{Timeout: 5 * time.Minute})
			require.Error(t, err)
			f, ok := workflows.AsFailure(err)
			require.True(t, ok, "%v", err)
			assert.Equal(t, tc.errType, f.Type, f.Message)
			assert.False(t, f.Retryable)
			require.NotNil(t, f.Accepted, "the failure carries the operation")
			assert.Contains(t, f.Accepted.Monitor, "/operations/op_1")
			assert.NotZero(t, f.Accepted.StartStatus, "the start answer's status")
			assert.Contains(t, f.Body, tc.body)
			assert.Equal(t, 1, srv.Stats().Records)
			if tc.errType == workflows.ErrTypeOperationStillRunning {
				// Retry-After 10 for 5 min: about 30 polls, never past the deadline.
				assert.InDelta(t, 30, srv.Stats().Polls, 2)
				assert.True(t, f.OutcomeUnknown)
			}
		})
	}
}

// hostile answers the start request with a 202 naming monitor, and
// records every request's headers.
type hostile struct {
	mu      sync.Mutex
	headers []http.Header
	paths   []string
}

func (h *hostile) handler(monitor string, poll http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.headers = append(h.headers, r.Header.Clone())
		h.paths = append(h.paths, r.Method+" "+r.URL.RequestURI())
		h.mu.Unlock()
		if r.Method == http.MethodPost {
			w.Header().Set("Location", monitor)
			w.WriteHeader(http.StatusAccepted)
			return
		}
		poll(w, r)
	}
}

// TestFollowRefusesMonitors: a monitor on another origin, with user info
// or with a query value that would reach history is refused after the one
// start request, its secret parts nowhere in the error.
func TestFollowRefusesMonitors(t *testing.T) {
	other := newRecorder(t, status(200, `{}`))
	for _, tc := range []struct {
		name, monitor, secret string
	}{
		{"another origin", other.URL + "/operations/1", ""},
		{"user info", "http://user:pa55w0rd-secret@127.0.0.1:1/operations/1", "pa55w0rd-secret"},
		{"signed query", "/operations/1?sig=s3cr3t-signature-value", "s3cr3t-signature-value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h hostile
			srv := newRecorder(t, h.handler(tc.monitor, status(200, `{}`)))
			env := testsuite.Register(t, nil, &testsuite.Server{URL: srv.URL}, activities.Config{AllowedOrigins: []string{other.URL}})
			env.RegisterWorkflow(followWorkflow)
			env.ExecuteWorkflow(followWorkflow, srv.URL+"/transfers", workflows.FollowOptions{})
			err := env.GetWorkflowError()
			f, ok := workflows.AsFailure(err)
			require.True(t, ok, "%v", err)
			assert.Equal(t, workflows.ErrTypeMonitorNotFollowed, f.Type)
			assert.True(t, f.OutcomeUnknown)
			assert.Equal(t, 1, srv.count(), "one start request, no poll")
			assert.Equal(t, 0, other.count())
			if tc.secret != "" {
				enc, _ := json.Marshal(f)
				assert.NotContains(t, f.Message+string(enc), tc.secret)
			}
		})
	}
}

// TestPollsCarryNoKeyAndOwnCredentials: polls send no idempotency key, and
// a monitor on another allowed origin gets that origin's credentials only.
func TestPollsCarryNoKeyAndOwnCredentials(t *testing.T) {
	var mh hostile
	polls := 0
	mon := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		mh.mu.Lock()
		mh.headers = append(mh.headers, r.Header.Clone())
		polls++
		n := polls
		mh.mu.Unlock()
		if n < 3 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Write([]byte(`{"id":"done"}`))
	})
	var h hostile
	srv := newRecorder(t, h.handler(mon.URL+"/operations/1", status(200, `{}`)))
	conv := activities.IETFConvention()
	conv.LongRunning.MonitorOrigins = []string{mon.URL}
	env := testsuite.Register(t, nil, &testsuite.Server{URL: srv.URL}, activities.Config{
		AllowedOrigins: []string{mon.URL},
		Conventions:    map[string]activities.Convention{srv.URL: conv},
		Credentials: map[string]activities.Credential{
			srv.URL: {Header: http.Header{"Authorization": {"Bearer start-origin-token-1234"}}},
			mon.URL: {Header: http.Header{"X-Api-Key": {"monitor-origin-key-5678"}}},
		},
	})
	env.RegisterWorkflow(followWorkflow)
	env.ExecuteWorkflow(followWorkflow, srv.URL+"/transfers", workflows.FollowOptions{})
	require.NoError(t, env.GetWorkflowError())
	var resp workflows.Response
	require.NoError(t, env.GetWorkflowResult(&resp))
	assert.JSONEq(t, `{"id":"done"}`, string(resp.Body))
	require.Len(t, mh.headers, 3)
	for _, hd := range mh.headers {
		assert.Empty(t, hd.Get("Idempotency-Key"))
		assert.Empty(t, hd.Get("Authorization"), "the start origin's credentials stay there")
		assert.Equal(t, "monitor-origin-key-5678", hd.Get("X-Api-Key"))
	}
	assert.Equal(t, "Bearer start-origin-token-1234", h.headers[0].Get("Authorization"))
	assert.NotEmpty(t, h.headers[0].Get("Idempotency-Key"))
}

// TestNoFollowReturnsTheAcceptance: without Follow, a 202 is the result,
// as before.
func TestNoFollowReturnsTheAcceptance(t *testing.T) {
	srv := testsuite.StartServer(t, testsuite.Options{Async: &testsuite.Async{Duration: time.Minute}})
	env := testsuite.Register(t, nil, srv, activities.Config{})
	env.RegisterWorkflow(func(ctx workflow.Context) (*workflows.Response, error) {
		return workflows.Post(ctx, "transfer", srv.URL+"/transfers", map[string]int{"amount": 1})
	})
	env.ExecuteWorkflow("func1")
	var resp workflows.Response
	require.NoError(t, env.GetWorkflowResult(&resp))
	assert.Equal(t, http.StatusAccepted, resp.Status)
	assert.Nil(t, resp.Accepted)
	assert.Equal(t, 0, srv.Stats().Polls)
}

var _ = strings.Contains
var _ = temporal.NewApplicationError

// TestFollowCancel: cancelling the workflow stops polling; with
// CancelOperation and a convention that has a cancel request, the server
// is asked to cancel once.
func TestFollowCancel(t *testing.T) {
	for _, tc := range []struct {
		name    string
		style   testsuite.AsyncStyle
		conv    func(string) activities.Convention
		ask     bool
		cancels int
	}{
		{"google, asked", testsuite.AsyncGoogle, google, true, 1},
		{"google, not asked", testsuite.AsyncGoogle, google, false, 0},
		{"location has no cancel request", testsuite.AsyncLocation, preset(activities.AcceptedLocation), true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := testsuite.StartServer(t, testsuite.Options{Async: &testsuite.Async{Style: tc.style, Endless: true, RetryAfter: 5}})
			env := testsuite.Register(t, nil, srv, activities.Config{Conventions: map[string]activities.Convention{srv.URL: tc.conv(srv.URL)}})
			env.RegisterWorkflow(followWorkflow)
			env.RegisterDelayedCallback(env.CancelWorkflow, time.Minute)
			env.ExecuteWorkflow(followWorkflow, srv.URL+"/transfers", workflows.FollowOptions{CancelOperation: tc.ask})
			var ce *temporal.CanceledError
			require.ErrorAs(t, env.GetWorkflowError(), &ce)
			polls := srv.Stats().Polls
			assert.InDelta(t, 12, polls, 2, "a poll every 5 s for a minute, then none")
			assert.Equal(t, tc.cancels, srv.Stats().Cancels)
		})
	}
}

// TestFollowResume: an operation still running at the deadline is
// resumed with FollowAccepted and the Failure's Accepted operation, with
// no second start request.
func TestFollowResume(t *testing.T) {
	srv := testsuite.StartServer(t, testsuite.Options{Async: &testsuite.Async{Style: testsuite.AsyncAzure, Duration: 10 * time.Minute, RetryAfter: 30}})
	env := testsuite.Register(t, nil, srv, activities.Config{Conventions: map[string]activities.Convention{srv.URL: preset(activities.AzureAsyncOperation)(srv.URL)}})
	env.RegisterWorkflow(func(ctx workflow.Context) (*workflows.Response, error) {
		_, err := workflows.Call(ctx, workflows.Request{Operation: "provision", URL: srv.URL + "/vms", Body: json.RawMessage(`{"size":"xl"}`),
			Follow: &workflows.FollowOptions{Timeout: 2 * time.Minute}})
		f, ok := workflows.AsFailure(err)
		if !ok || f.Type != workflows.ErrTypeOperationStillRunning {
			return nil, err
		}
		return workflows.FollowAccepted(ctx, *f.Accepted, workflows.FollowOptions{Timeout: time.Hour})
	})
	env.ExecuteWorkflow("func1")
	var resp workflows.Response
	require.NoError(t, env.GetWorkflowResult(&resp))
	var rec testsuite.Record
	require.NoError(t, json.Unmarshal(resp.Body, &rec))
	assert.Equal(t, "/vms", rec.Path)
	assert.Equal(t, "Succeeded", resp.Accepted.State)
	st := srv.Stats()
	assert.Equal(t, 1, st.Records)
	assert.Equal(t, 1, st.Operations)
	assert.Equal(t, 1, st.DistinctKeys)
}

// TestFollowFlakyMonitor: a monitor that fails every third poll with 503
// is polled through to the result.
func TestFollowFlakyMonitor(t *testing.T) {
	srv, resp, err := runFollow(t, testsuite.Async{Style: testsuite.AsyncOperationLocation, Duration: 20 * time.Second, RetryAfter: 2, FlakyPolls: 3},
		preset(activities.OperationLocation), workflows.FollowOptions{})
	require.NoError(t, err)
	assert.Equal(t, "Succeeded", resp.Accepted.State)
	assert.Greater(t, srv.Stats().Polls, 10)
	assert.Equal(t, 1, srv.Stats().Records)
}

// TestFollowPollFailures: a monitor that answers a final status fails
// the following with that status's type, the operation attached and its
// outcome unknown; one that is gone for a while is polled until it
// answers.
func TestFollowPollFailures(t *testing.T) {
	for _, tc := range []struct {
		name    string
		poll    []int
		errType string
		polls   int
	}{
		{"404 is final", []int{404}, workflows.ErrTypeHTTPClientError, 1},
		{"500s then the result", []int{500, 502, 429, 200}, "", 4},
		{"a 307 to the same origin is followed", []int{307, 200}, "", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			n := 0
			var h hostile
			srv := newRecorder(t, h.handler("/operations/1", func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				st := tc.poll[min(n, len(tc.poll)-1)]
				n++
				mu.Unlock()
				if st == 307 {
					w.Header().Set("Location", "/operations/1")
				}
				w.WriteHeader(st)
				if st == 200 {
					w.Write([]byte(`{"ok":true}`))
				}
			}))
			env := testsuite.Register(t, nil, &testsuite.Server{URL: srv.URL}, activities.Config{})
			env.RegisterWorkflow(followWorkflow)
			env.ExecuteWorkflow(followWorkflow, srv.URL+"/transfers", workflows.FollowOptions{})
			err := env.GetWorkflowError()
			if tc.errType == "" {
				require.NoError(t, err)
			} else {
				f, ok := workflows.AsFailure(err)
				require.True(t, ok, "%v", err)
				assert.Equal(t, tc.errType, f.Type)
				assert.True(t, f.OutcomeUnknown)
				require.NotNil(t, f.Accepted)
			}
			assert.Equal(t, tc.polls, n)
		})
	}
}

// TestRunningPollIsBenign: a poll that finds the operation still running
// ends its attempt with a benign ApplicationError (the SDK logs it at
// Debug, not as an "Activity error." at Error, and does not count it as a
// failed activity); a poll the monitor answers 503 stays an ordinary
// retryable error.
func TestRunningPollIsBenign(t *testing.T) {
	polls := 0
	var mu sync.Mutex
	srv := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		polls++
		n := polls
		mu.Unlock()
		w.Header().Set("Retry-After", "2")
		if n == 1 {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	a, err := activities.New(activities.Config{AllowedOrigins: []string{srv.URL}, Admission: activities.Admission{Off: true}})
	require.NoError(t, err)
	in := poll.Monitor{Accepted: poll.Accepted{Operation: "transfer", Method: http.MethodPost, URL: srv.URL + "/transfers", Monitor: srv.URL + "/operations/1"}}
	for _, want := range []struct {
		errType string
		benign  bool
	}{{workflows.ErrTypeOperationRunning, true}, {workflows.ErrTypeHTTPRetryableStatus, false}} {
		var s sdktestsuite.WorkflowTestSuite
		env := s.NewTestActivityEnvironment()
		a.Register(env)
		_, err := env.ExecuteActivity(poll.ActivityName, in)
		appErr := appError(t, err)
		assert.Equal(t, want.errType, appErr.Type())
		assert.False(t, appErr.NonRetryable())
		assert.Equal(t, 2*time.Second, appErr.NextRetryDelay())
		assert.Equal(t, want.benign, appErr.Category() == temporal.ApplicationErrorCategoryBenign, want.errType)
	}
}
