package activities_test

import (
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	sdktestsuite "go.temporal.io/sdk/testsuite"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/internal/input"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// heldOrigin is a Google-convention origin whose worker admits requests
// (Config.Admission on, on the workflow environment's clock), and which
// the test can hold back: holdAt opens its breaker by a failed request
// and makes a request that never gets an answer its probe, so that every
// other request to the origin waits for the probe, in hops of 100 ms
// (MaxWait 1 ms: none is spent inside an attempt), until the probe
// times out 10 s later and the next request is the probe.
type heldOrigin struct {
	t   *testing.T
	env *sdktestsuite.TestWorkflowEnvironment
	a   *activities.Activities
	srv *recorder

	mu      sync.Mutex
	cancels int
	polls   int
	// got is closed when the request that hangs has reached the server.
	got     chan struct{}
	release chan struct{}
	wg      sync.WaitGroup
}

// newHeldOrigin starts the origin: the start request is answered with a
// Google operation and startRetryAfter; polls with done (or not);
// cancel requests with cancelStatus.
func newHeldOrigin(t *testing.T, startRetryAfter int, done bool, cancelStatus int) *heldOrigin {
	h := &heldOrigin{t: t, env: new(sdktestsuite.WorkflowTestSuite).NewTestWorkflowEnvironment(),
		got: make(chan struct{}), release: make(chan struct{})}
	h.srv = newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/transfers":
			w.Header().Set("Retry-After", strconv.Itoa(startRetryAfter))
			_, _ = w.Write([]byte(`{"name":"operations/1","done":false}`))
		case r.URL.Path == "/charges":
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"id":"ch_1","status":"processing"}`))
		case r.URL.Path == "/charges/ch_1":
			h.mu.Lock()
			h.polls++
			h.mu.Unlock()
			_, _ = w.Write([]byte(`{"id":"ch_1","status":"succeeded"}`))
		case r.URL.Path == "/fail":
			w.WriteHeader(http.StatusServiceUnavailable)
		case r.URL.Path == "/hang":
			close(h.got)
			<-h.release
			w.WriteHeader(http.StatusOK)
		case r.URL.Path == "/v1/operations/1:cancel":
			h.mu.Lock()
			h.cancels++
			h.mu.Unlock()
			w.WriteHeader(cancelStatus)
			_, _ = w.Write([]byte(`{}`))
		default:
			h.mu.Lock()
			h.polls++
			h.mu.Unlock()
			_, _ = w.Write([]byte(`{"name":"operations/1","done":` + strconv.FormatBool(done) + `,"response":{"id":"rec_1"}}`))
		}
	})
	t.Cleanup(func() {
		close(h.release)
		h.wg.Wait()
	})
	a, err := activities.New(activities.Config{
		AllowedOrigins: []string{h.srv.URL}, Now: h.env.Now,
		Conventions: map[string]activities.Convention{h.srv.URL: google(h.srv.URL)},
		Admission:   activities.Admission{MaxWait: time.Millisecond, Breaker: activities.Breaker{MinFailures: 1}},
	})
	require.NoError(t, err)
	h.a = a
	a.Register(h.env)
	workflows.Register(h.env)
	h.env.RegisterWorkflow(followWorkflow)
	return h
}

// holdAt holds the origin back from at on (workflow time): a request
// answered 503 opens its breaker (for Breaker.OpenTime, 1 s), and once it
// is half open a request that hangs is its probe.
func (h *heldOrigin) holdAt(at time.Duration) {
	h.env.RegisterDelayedCallback(func() {
		_, err := h.activity().ExecuteActivity(input.ActivityName, req(h.srv.URL+"/fail"))
		require.Error(h.t, err, "the request that opens the breaker")
	}, at)
	h.env.RegisterDelayedCallback(func() {
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			r := req(h.srv.URL + "/hang")
			r.IdempotencyKey = "key-hang"
			_, _ = h.activity().ExecuteActivity(input.ActivityName, r)
		}()
		select {
		case <-h.got:
		case <-time.After(10 * time.Second):
			h.t.Error("the probe that hangs never reached the server")
		}
	}, at+1100*time.Millisecond)
}

// activity is an environment for a request of another workflow to the
// same origin, through the same worker's admission.
func (h *heldOrigin) activity() *sdktestsuite.TestActivityEnvironment {
	var s sdktestsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	h.a.Register(env)
	return env
}

func (h *heldOrigin) counts() (cancels, polls int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cancels, h.polls
}

// TestFollowCancelWaitsForAdmission: a cancel request the origin's
// admission holds back is sent once it is admitted (here as the breaker's
// probe, after about 70 attempts not admitted): attempts that sent nothing
// do not use up the cancel's tries; the cancel requests sent are counted,
// 3 at most, however the origin answers them.
func TestFollowCancelWaitsForAdmission(t *testing.T) {
	for _, tc := range []struct {
		name         string
		hold         bool
		cancelStatus int
		wantCancels  int
	}{
		{"held back, then answered", true, http.StatusOK, 1},
		{"held back, then answered 503 to every cancel", true, http.StatusServiceUnavailable, 3},
		{"answered 503 to every cancel", false, http.StatusServiceUnavailable, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHeldOrigin(t, 60, false, tc.cancelStatus)
			if tc.hold {
				h.holdAt(time.Second)
			}
			// In the start answer's Retry-After wait, with the origin
			// held back.
			h.env.RegisterDelayedCallback(h.env.CancelWorkflow, 5*time.Second)
			h.env.ExecuteWorkflow(followWorkflow, h.srv.URL+"/transfers", workflows.FollowOptions{CancelOperation: true})
			var ce *temporal.CanceledError
			require.ErrorAs(t, h.env.GetWorkflowError(), &ce)
			cancels, polls := h.counts()
			assert.Equal(t, tc.wantCancels, cancels, "cancel requests sent")
			assert.Zero(t, polls, "polls")
		})
	}
}

// TestFollowPollsOutlastAdmission: polls the origin's admission holds back
// for longer than the timeout in seconds (about 95 attempts in 10 s, each
// not admitted, against a timeout of 60 s) still end by the operation's
// outcome once a poll is admitted, not with OperationStillRunning:
// Temporal's attempt ceiling counts the shortest wait for admission, as a
// call's does; for Request.Follow and for a webhook's fallback poll alike.
func TestFollowPollsOutlastAdmission(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(h *heldOrigin)
		want func(t *testing.T, resp *workflows.Response)
	}{
		{"Request.Follow", func(h *heldOrigin) {
			h.env.ExecuteWorkflow(followWorkflow, h.srv.URL+"/transfers", workflows.FollowOptions{Timeout: time.Minute})
		}, func(t *testing.T, resp *workflows.Response) {
			require.NotNil(t, resp.Accepted)
			assert.Equal(t, "done: true", resp.Accepted.State)
		}},
		{"WebhookPoll", func(h *heldOrigin) {
			h.env.ExecuteWorkflow(workflows.WorkflowName, workflows.Request{Operation: "charge", Method: http.MethodPost, URL: h.srv.URL + "/charges", Body: []byte(`{}`),
				Webhook: &workflows.WebhookOptions{Succeeded: []string{"charge.succeeded"}, Timeout: time.Minute,
					Poll: &workflows.WebhookPoll{URL: h.srv.URL + "/charges/{id}", After: 2 * time.Second, Succeeded: []string{"succeeded"}}}})
		}, func(t *testing.T, resp *workflows.Response) {
			require.NotNil(t, resp.Outcome)
			assert.Equal(t, workflows.SourcePoll, resp.Outcome.Source)
			assert.Equal(t, workflows.StateSucceeded, resp.Outcome.State)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHeldOrigin(t, 2, true, http.StatusOK)
			h.holdAt(500 * time.Millisecond)
			tc.run(h)
			require.True(t, h.env.IsWorkflowCompleted())
			require.NoError(t, h.env.GetWorkflowError())
			var resp workflows.Response
			require.NoError(t, h.env.GetWorkflowResult(&resp))
			assert.Equal(t, http.StatusOK, resp.Status)
			tc.want(t, &resp)
			_, polls := h.counts()
			assert.Equal(t, 1, polls, "polls sent: the held ones sent nothing")
		})
	}
}
