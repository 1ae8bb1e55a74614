package activities_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktestsuite "go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/internal/credential"
	"github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// clockedSource fails as its token endpoint would until fixedAt on the
// test environment's clock (now), then authorizes; it counts its calls.
type clockedSource struct {
	r       credential.Redactor
	now     func() time.Time
	fixedAt time.Time
	fail    *credential.Error
	calls   atomic.Int32
}

func (s *clockedSource) Apply(_ context.Context, req *http.Request, _ []byte) error {
	s.calls.Add(1)
	if s.now().Before(s.fixedAt) {
		return s.fail
	}
	s.r.Add("tok_live_A1b2C3d4E5f6")
	req.Header.Set("Authorization", "Bearer tok_live_A1b2C3d4E5f6")
	return nil
}

// TestCredentialWaitsAreNotAttempts: attempts that sent nothing for want
// of the origin's credential wait on their own backoff (1 s doubling to
// 1 min, or the token endpoint's Retry-After) and use none of
// RetryOptions.MaximumAttempts: a token endpoint down for 2 minutes fails
// no call whose deadline allows the wait; a refused credential fails at
// once by default, and is asked again within Credential.RetryRefused
// (the operator fixes the file), then fails with CredentialUnavailable.
func TestCredentialWaitsAreNotAttempts(t *testing.T) {
	down := &credential.Error{Scheme: "oauth2", Retryable: true, Status: 503, Err: errors.New("token endpoint answered 503")}
	refused := &credential.Error{Scheme: "oauth2", Status: 401, Err: errors.New("token endpoint refused the client: invalid_client")}
	tests := []struct {
		name         string
		fail         *credential.Error
		fixedAfter   time.Duration
		retryRefused time.Duration
		wantErr      string // "" for success
		minCalls     int32
		maxCalls     int32
	}{
		{"token endpoint down for 2 minutes", down, 2 * time.Minute, 0, "", 8, 14},
		{"refused, fixed within the window", refused, 3 * time.Minute, 5 * time.Minute, "", 8, 14},
		{"refused, no window: final at once", refused, time.Hour, 0, workflows.ErrTypeCredentialUnavailable, 1, 1},
		{"refused past the window", refused, time.Hour, 2 * time.Minute, workflows.ErrTypeCredentialUnavailable, 5, 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := new(sdktestsuite.WorkflowTestSuite).NewTestWorkflowEnvironment()
			api := newRecorder(t, status(201, `{"id":"ch_1"}`))
			src := &clockedSource{now: env.Now, fixedAt: env.Now().Add(tt.fixedAfter), fail: tt.fail}
			t.Cleanup(activities.SetNewOAuth2(func(r credential.Redactor) credential.Source { src.r = r; return src }))
			cfg := activities.Config{Credentials: map[string]activities.Credential{api.URL: {OAuth2: &clientcredentials.Config{}, RetryRefused: tt.retryRefused}}}
			testsuite.Register(t, env, &testsuite.Server{URL: api.URL}, cfg)
			start := env.Now()
			var took time.Duration
			charge := func(ctx workflow.Context) (*workflows.Response, error) {
				defer func() { took = workflow.Now(ctx).Sub(start) }()
				return workflows.Call(ctx, workflows.Request{Operation: "charge", URL: api.URL + "/charges", Body: json.RawMessage(`{"amount":1}`),
					Retry: workflows.RetryOptions{MaximumAttempts: 3}, ScheduleToCloseTimeout: 10 * time.Minute})
			}
			env.RegisterWorkflowWithOptions(charge, workflow.RegisterOptions{Name: "charge"})
			env.ExecuteWorkflow("charge")
			err := env.GetWorkflowError()
			calls := src.calls.Load()
			assert.GreaterOrEqual(t, calls, tt.minCalls, "attempts")
			assert.LessOrEqual(t, calls, tt.maxCalls, "attempts: a backoff, not a storm")
			if tt.wantErr == "" {
				require.NoError(t, err)
				assert.Equal(t, 1, api.count(), "sent once, once the credential was there")
				assert.GreaterOrEqual(t, took, tt.fixedAfter)
				return
			}
			f, ok := workflows.AsFailure(err)
			require.True(t, ok, "%v", err)
			assert.Equal(t, tt.wantErr, f.Type)
			assert.False(t, f.Retryable)
			assert.False(t, f.OutcomeUnknown, "nothing was sent")
			assert.Zero(t, api.count())
			if tt.retryRefused > 0 {
				assert.GreaterOrEqual(t, took, tt.retryRefused, "asked again for the whole window")
				assert.Less(t, took, tt.retryRefused+2*time.Minute)
			}
		})
	}
}
