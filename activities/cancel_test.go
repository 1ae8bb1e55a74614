package activities_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/internal/credential"
	"github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// TestFollowCancelRequestKeepsQuery: the cancel suffix goes on the path,
// before the monitor's query.
func TestFollowCancelRequestKeepsQuery(t *testing.T) {
	c := conv(activities.OperationLocation())
	c.LongRunning.CancelMethod, c.LongRunning.CancelSuffix = http.MethodPost, ":cancel"
	env := testsuite.NewEnv(t)
	var mu sync.Mutex
	var cancels []string
	srv := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/transfers":
			w.Header().Set("Operation-Location", "/operations/1?api-version=2024-01-01")
			w.WriteHeader(http.StatusAccepted)
		case r.Method == http.MethodPost:
			mu.Lock()
			cancels = append(cancels, r.URL.RequestURI())
			mu.Unlock()
		default:
			w.Header().Set("Retry-After", "5")
			_, _ = w.Write([]byte(`{"status":"Running"}`))
		}
	})
	testsuite.Register(t, env, &testsuite.Server{URL: srv.URL}, activities.Config{Conventions: map[string]activities.Convention{srv.URL: c}})
	env.RegisterWorkflow(followWorkflow)
	env.RegisterDelayedCallback(env.CancelWorkflow, 20*time.Second)
	env.ExecuteWorkflow(followWorkflow, srv.URL+"/transfers", workflows.FollowOptions{CancelOperation: true})
	assert.Equal(t, []string{"/operations/1:cancel?api-version=2024-01-01"}, cancels)
}

// TestFollowCancelAsksOnEveryPath: with CancelOperation, cancelling the
// workflow asks the server to cancel the operation once, wherever the
// following is: in the start answer's Retry-After wait before the first
// poll, between polls, or in a poll.
func TestFollowCancelAsksOnEveryPath(t *testing.T) {
	for _, tc := range []struct {
		name       string
		retryAfter int           // the start answer's and the monitor's Retry-After, s
		cancelAt   time.Duration // 0: while the second poll is in flight
		polls      int
	}{
		{"in the first Retry-After wait", 60, 30 * time.Second, 0},
		{"between polls", 5, 12 * time.Second, 2},
		{"in a poll", 5, 0, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := testsuite.NewEnv(t)
			var mu sync.Mutex
			polls, cancels := 0, 0
			cancelled := make(chan struct{})
			srv := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				defer mu.Unlock()
				w.Header().Set("Retry-After", strconv.Itoa(tc.retryAfter))
				switch {
				case r.Method == http.MethodPost && r.URL.Path == "/transfers":
					_, _ = w.Write([]byte(`{"name":"operations/1","done":false}`))
				case r.Method == http.MethodPost && r.URL.Path == "/v1/operations/1:cancel":
					if cancels++; cancels == 1 {
						close(cancelled)
					}
					_, _ = w.Write([]byte(`{}`))
				default:
					polls++
					if tc.cancelAt == 0 && polls == 2 {
						// The poll is in flight: the workflow is cancelled,
						// and this answer waits for the cancel request.
						env.CancelWorkflow()
						mu.Unlock()
						select {
						case <-cancelled:
						case <-time.After(10 * time.Second):
						}
						mu.Lock()
					}
					_, _ = w.Write([]byte(`{"name":"operations/1","done":false}`))
				}
			})
			testsuite.Register(t, env, &testsuite.Server{URL: srv.URL}, activities.Config{Conventions: map[string]activities.Convention{srv.URL: google(srv.URL)}})
			env.RegisterWorkflow(followWorkflow)
			if tc.cancelAt > 0 {
				env.RegisterDelayedCallback(env.CancelWorkflow, tc.cancelAt)
			}
			env.ExecuteWorkflow(followWorkflow, srv.URL+"/transfers", workflows.FollowOptions{CancelOperation: true})
			var ce *temporal.CanceledError
			require.ErrorAs(t, env.GetWorkflowError(), &ce)
			mu.Lock()
			defer mu.Unlock()
			assert.Equal(t, 1, cancels, "cancel requests")
			assert.Equal(t, tc.polls, polls, "polls")
		})
	}
}

// TestCancelRequestsCountOnlyWhatReachedTheAPI: asking the server to
// cancel while the origin's token endpoint is down (503 for 2 s: four
// attempts whose credential could not be applied) sends nothing and uses
// none of the three cancel requests: the cancel reaches the API once the
// endpoint is back.
func TestCancelRequestsCountOnlyWhatReachedTheAPI(t *testing.T) {
	env := testsuite.NewEnv(t)
	var mu sync.Mutex
	cancels, polls := 0, 0
	srv := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		w.Header().Set("Retry-After", "5")
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/transfers":
			_, _ = w.Write([]byte(`{"name":"operations/1","done":false}`))
		case r.Method == http.MethodPost && r.URL.Path == "/v1/operations/1:cancel":
			cancels++
			_, _ = w.Write([]byte(`{}`))
		default:
			polls++
			_, _ = w.Write([]byte(`{"name":"operations/1","done":false}`))
		}
	})
	src := &downSource{tokens: "tok_live_A1b2C3d4E5f6"}
	t.Cleanup(activities.SetNewOAuth2(func(r credential.Redactor) credential.Source { src.r = r; return src }))
	cfg := activities.Config{Credentials: map[string]activities.Credential{srv.URL: {OAuth2: &clientcredentials.Config{}}}}
	cfg.Conventions = map[string]activities.Convention{srv.URL: google(srv.URL)}
	testsuite.Register(t, env, &testsuite.Server{URL: srv.URL}, cfg)
	env.RegisterWorkflow(followWorkflow)
	env.RegisterDelayedCallback(func() {
		src.fail(4) // the token endpoint answers 503 to the next four
		env.CancelWorkflow()
	}, 12*time.Second)
	env.ExecuteWorkflow(followWorkflow, srv.URL+"/transfers", workflows.FollowOptions{CancelOperation: true})
	var ce *temporal.CanceledError
	require.ErrorAs(t, env.GetWorkflowError(), &ce)
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, 1, cancels, "the cancel request reached the API")
	assert.Equal(t, 0, src.left(), "every failure was asked through")
	assert.Positive(t, polls)
}

// downSource authorizes with a token, or fails as a token endpoint that
// answers 503 for the next n Applies (fail).
type downSource struct {
	r      credential.Redactor
	mu     sync.Mutex
	tokens string
	down   int
}

func (d *downSource) fail(n int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.down = n
}

func (d *downSource) left() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.down
}

func (d *downSource) Apply(_ context.Context, req *http.Request, _ []byte) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.down > 0 {
		d.down--
		return &credential.Error{Scheme: "oauth2", Retryable: true, RetryAfter: 500 * time.Millisecond, Status: 503, Err: errors.New("token endpoint answered 503")}
	}
	d.r.Add(d.tokens)
	req.Header.Set("Authorization", "Bearer "+d.tokens)
	return nil
}
