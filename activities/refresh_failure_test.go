package activities_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/internal/credential"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// downRefresher is a fakeSource whose token endpoint goes down when asked
// for a new token: Refresh fails and Apply then reports it.
type downRefresher struct{ *fakeSource }

func (d downRefresher) Refresh(context.Context, *http.Request) bool {
	d.refreshes.Add(1)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.err = &credential.Error{Scheme: "oauth2", Retryable: true, Status: 503, Err: errors.New("the token endpoint answered HTTP 503")}
	return false
}

// TestRefreshFailsIsCredentialError: a 401 invalid_token whose refresh
// fails (the token endpoint is down) is the credential's error, retryable
// as the source says, not the API's final 401: nothing was done, and the
// token endpoint's outage must not fail a payment for good.
func TestRefreshFailsIsCredentialError(t *testing.T) {
	srv := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
		w.WriteHeader(401)
	})
	f := &fakeSource{tokens: []string{"tok_stale_0123456789"}}
	src := downRefresher{f}
	cfg := withFake(t, srv.URL, f)
	t.Cleanup(activities.SetNewOAuth2(func(r credential.Redactor) credential.Source { f.r = r; return src }))
	a, err := activities.New(cfg)
	require.NoError(t, err)
	_, _, err = runWith(t, a, req(srv.URL))
	require.Error(t, err)
	ae := appError(t, err)
	assert.Equal(t, workflows.ErrTypeCredentialUnavailable, ae.Type(), "error: %v", err)
	assert.False(t, ae.NonRetryable(), "the token endpoint's 503 is retryable")
	assert.Equal(t, 1, srv.count(), "nothing sent after the failed refresh")
	assert.EqualValues(t, 1, f.refreshes.Load())
}
