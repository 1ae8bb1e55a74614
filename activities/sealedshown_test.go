package activities_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/log"
	sdktestsuite "go.temporal.io/sdk/testsuite"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// TestSealedMonitorNotShownByAWorkerThatNeverSawItsSecret: a monitor
// sealed because its path holds the origin's OAuth 2.0 token is opened by
// a worker that started after that token was fetched (a restart, a
// resume elsewhere: its redactor knows only its own new token). What the
// poll shows of the URL it requests (Failure.URL, its logs) must not be
// the opened URL in clear: the old token may still be valid for an hour.
func TestSealedMonitorNotShownByAWorkerThatNeverSawItsSecret(t *testing.T) {
	var fetches atomic.Int32
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		// Tokens that share no 8 bytes: one worker's redactor knows
		// nothing of another's.
		tok := []string{"Vq8Rz2Lm5Np7Kx4Jw", "Hb3Tc6Yd9Wf2Ge5Pa"}[(fetches.Add(1)-1)%2]
		_, _ = fmt.Fprintf(w, `{"access_token":%q,"token_type":"Bearer","expires_in":3600}`, tok)
	}))
	t.Cleanup(tokens.Close)
	var first atomic.Value
	api := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		bearer := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		if r.Method == http.MethodPost {
			first.Store(bearer)
			w.Header().Set("Location", "/operations/"+bearer)
			w.WriteHeader(http.StatusAccepted)
			return
		}
		if bearer == first.Load() {
			w.WriteHeader(http.StatusAccepted) // still running
			return
		}
		w.WriteHeader(http.StatusNotFound) // the resumed poll: a final failure
	})
	cfg := activities.Config{SealKeys: [][]byte{bytes.Repeat([]byte{9}, 32)},
		Credentials: map[string]activities.Credential{api.URL: {OAuth2: &clientcredentials.Config{ClientID: "c", ClientSecret: "cs_3f1e9d8c7b6a5f4e3d2c1b0a", TokenURL: tokens.URL}}}}

	env := testsuite.Register(t, nil, &testsuite.Server{URL: api.URL}, cfg)
	env.RegisterWorkflow(followWorkflow)
	env.ExecuteWorkflow(followWorkflow, api.URL+"/transfers", workflows.FollowOptions{Timeout: 30 * time.Second})
	f, ok := workflows.AsFailure(env.GetWorkflowError())
	require.True(t, ok, "%v", env.GetWorkflowError())
	require.Equal(t, workflows.ErrTypeOperationStillRunning, f.Type)
	require.NotNil(t, f.Accepted)
	require.NotEmpty(t, f.Accepted.Sealed)
	old := first.Load().(string)

	// Another worker (same configuration, a token of its own) resumes.
	var logs syncBuffer
	var s sdktestsuite.WorkflowTestSuite
	s.SetLogger(log.NewStructuredLogger(slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	env = s.NewTestWorkflowEnvironment()
	testsuite.Register(t, env, &testsuite.Server{URL: api.URL}, cfg)
	env.RegisterWorkflow(workflows.FollowAccepted)
	env.ExecuteWorkflow(workflows.FollowAccepted, *f.Accepted, workflows.FollowOptions{Timeout: time.Minute})
	err := env.GetWorkflowError()
	f, ok = workflows.AsFailure(err)
	require.True(t, ok, "%v", err)
	require.Equal(t, workflows.ErrTypeHTTPClientError, f.Type, "the sealed monitor was polled: %v", err)
	req, _ := api.last()
	require.Equal(t, "/operations/"+old, req.URL.Path, "the real monitor was polled")
	assertNoPiece(t, err, nil, logs.take(), old)
}

// TestSealedMonitorCancelRequestGoesToTheRealURL: the cancel request of a
// sealed monitor goes to the URL sealed, its suffix before the query, and
// is shown as the monitor was (query values redacted).
func TestSealedMonitorCancelRequestGoesToTheRealURL(t *testing.T) {
	const sig = "sv2024sig_Q1w2E3r4T5y6U7i8"
	c := conv(activities.OperationLocation())
	c.LongRunning.CancelMethod, c.LongRunning.CancelSuffix = http.MethodPost, ":cancel"
	var logs syncBuffer
	var s sdktestsuite.WorkflowTestSuite
	s.SetLogger(log.NewStructuredLogger(slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	env := s.NewTestWorkflowEnvironment()
	var cancels atomic.Value
	srv := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/transfers":
			w.Header().Set("Operation-Location", "/operations/1?api-version=2024-01-01&sig="+sig)
			w.WriteHeader(http.StatusAccepted)
		case r.Method == http.MethodPost:
			cancels.Store(r.URL.RequestURI())
			w.WriteHeader(http.StatusBadRequest)
		default:
			w.Header().Set("Retry-After", "5")
			_, _ = w.Write([]byte(`{"status":"Running"}`))
		}
	})
	testsuite.Register(t, env, &testsuite.Server{URL: srv.URL}, activities.Config{SealKeys: [][]byte{bytes.Repeat([]byte{5}, 32)},
		Conventions: map[string]activities.Convention{srv.URL: c}})
	env.RegisterWorkflow(followWorkflow)
	env.RegisterDelayedCallback(env.CancelWorkflow, 20*time.Second)
	env.ExecuteWorkflow(followWorkflow, srv.URL+"/transfers", workflows.FollowOptions{CancelOperation: true})
	assert.Equal(t, "/operations/1:cancel?api-version=2024-01-01&sig="+sig, cancels.Load())
	out := logs.take()
	assert.Contains(t, out, "/operations/1:cancel?api-version=REDACTED")
	assert.Empty(t, pieces(out, sig))
}
