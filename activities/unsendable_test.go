package activities_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/propagation"
	"go.temporal.io/sdk/testsuite"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/internal/input"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// TestNewRefusesCredentialValueWithControlByte: a credential header value
// that net/http would refuse to send (a control byte other than tab) is
// refused by New with the header named and no piece of the value shown,
// whether it is set in Header or read from a header file; a tab passes.
func TestNewRefusesCredentialValueWithControlByte(t *testing.T) {
	const origin = "https://api.example.com"
	tests := []struct {
		name, header, value string
		ok                  bool
	}{
		{"vertical tab in a bearer token", "Authorization", "Bearer sk_live_\x0bA1b2C3d4E5", false},
		{"NUL in an API key", "X-Api-Key", "ak_live_\x00A1b2C3d4E5", false},
		{"DEL in an API key", "X-Api-Key", "ak_live_A1b2\x7fC3d4E5", false},
		{"escape at the end", "X-Api-Key", "ak_live_A1b2C3d4E5\x1b[0m", false},
		{"tab inside is allowed", "X-Api-Key", "ak_live_A1b2\tC3d4E5", true},
	}
	for _, tt := range tests {
		for _, from := range []string{"Header", "HeaderFiles"} {
			t.Run(tt.name+"/"+from, func(t *testing.T) {
				c := activities.Credential{}
				if from == "Header" {
					c.Header = http.Header{tt.header: {tt.value}}
				} else {
					path := filepath.Join(t.TempDir(), "secret")
					require.NoError(t, os.WriteFile(path, []byte(tt.value+"\n"), 0o600))
					c.HeaderFiles = map[string]string{tt.header: path}
				}
				_, err := activities.New(activities.Config{AllowedOrigins: []string{origin}, Credentials: map[string]activities.Credential{origin: c}})
				if tt.ok {
					require.NoError(t, err)
					return
				}
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.header)
				assert.Contains(t, err.Error(), "control character")
				assert.Empty(t, pieces(err.Error(), "A1b2C3d4E5", "sk_live_\x0bA1b2", "ak_live_\x00A1b2"), err.Error())
			})
		}
	}
}

// badPropagator writes a trace header with a control byte while bad is set.
type badPropagator struct{ bad *atomic.Bool }

func (p badPropagator) Inject(_ context.Context, c propagation.TextMapCarrier) {
	if p.bad.Load() {
		c.Set("X-Trace", "t\x0bx")
	} else {
		c.Set("X-Trace", "tx")
	}
}
func (badPropagator) Extract(ctx context.Context, _ propagation.TextMapCarrier) context.Context {
	return ctx
}
func (badPropagator) Fields() []string { return []string{"X-Trace"} }

// TestUnsendableAttemptSendsNothing: an attempt whose request net/http
// refuses to send (a header value with a control byte, from a token
// endpoint's token or a trace propagator) sent nothing: it is final with
// what to fix, never OutcomeUnknown, and the breaker does not count it,
// so the origin's requests after it are sent.
func TestUnsendableAttemptSendsNothing(t *testing.T) {
	tests := []struct {
		name     string
		token    string // the token endpoint's access_token ("": no OAuth2)
		errType  string
		contains string
	}{
		{"a token with a vertical tab", "tok_\u000bA1b2C3d4E5f6", workflows.ErrTypeCredentialUnavailable, "Authorization"},
		{"a trace header with a vertical tab", "", workflows.ErrTypeInvalidRequest, "X-Trace"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := newRecorder(t, status(201, `{"id":"ch_1"}`))
			var bad atomic.Bool
			bad.Store(true)
			cfg := activities.Config{AllowedOrigins: []string{api.URL}, Propagator: badPropagator{&bad},
				Admission: activities.Admission{Breaker: activities.Breaker{MinFailures: 2, OpenTime: time.Minute}}}
			if tt.token != "" {
				tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
					w.Header().Set("Content-Type", "application/json")
					_ = json.NewEncoder(w).Encode(map[string]any{"access_token": tt.token, "token_type": "Bearer", "expires_in": 3600})
				}))
				t.Cleanup(tokens.Close)
				cfg.Credentials = map[string]activities.Credential{api.URL: {OAuth2: &clientcredentials.Config{
					ClientID: "client-1", ClientSecret: "cs_A1b2C3d4E5f6", TokenURL: tokens.URL}}}
				bad.Store(false)
			}
			a, err := activities.New(cfg)
			require.NoError(t, err)
			attempt := func(i int, details map[string]any) error {
				var s testsuite.WorkflowTestSuite
				env := s.NewTestActivityEnvironment()
				if details != nil {
					env.SetHeartbeatDetails(details)
				}
				a.Register(env)
				r := req(api.URL + "/charges")
				r.IdempotencyKey = fmt.Sprintf("key-%d", i)
				_, err := env.ExecuteActivity(input.ActivityName, r)
				return err
			}
			for i := range 6 {
				err := attempt(i, nil)
				appErr := appError(t, err)
				assert.Equal(t, tt.errType, appErr.Type(), "attempt %d: %v", i, err)
				assert.True(t, appErr.NonRetryable(), "attempt %d: no retry can send it", i)
				assert.Contains(t, appErr.Message(), tt.contains)
				assert.NotContains(t, appErr.Message(), "may have processed")
				f, ok := workflows.AsFailure(err)
				require.True(t, ok)
				assert.False(t, f.OutcomeUnknown, "attempt %d: nothing was sent", i)
				assert.Empty(t, pieces(appErr.Message()+f.Reason, "A1b2C3d4E5f6"))
			}
			// An earlier attempt's unknown outcome stays unknown.
			err = attempt(99, map[string]any{"attempt": 1, "unknown": true, "sent": 1})
			f, ok := workflows.AsFailure(err)
			require.True(t, ok)
			assert.True(t, f.OutcomeUnknown, "an earlier attempt may have reached the API")
			assert.Zero(t, api.count(), "nothing reached the API")
			if tt.token != "" {
				return
			}
			// Fixed, the next request is sent: seven attempts that sent
			// nothing did not open the origin's breaker.
			bad.Store(false)
			require.NoError(t, attempt(100, nil))
			assert.Equal(t, 1, api.count())
		})
	}
}

// dropTrace is a Config.HTTPClient transport that sends a copy of each
// request without its X-Trace header (an egress wrapper that sanitizes
// what it does not know): the original's invalid header never reaches
// net/http.
type dropTrace struct{}

func (dropTrace) RoundTrip(r *http.Request) (*http.Response, error) {
	c := r.Clone(r.Context())
	c.Header.Del("X-Trace")
	return http.DefaultTransport.RoundTrip(c)
}

// TestSentRequestIsNeverCalledUnsent: a request that left the worker and
// lost its answer (the server read it, then the connection closed) is of
// unknown outcome, retried with the same key, even when a header of the
// request handed to the client is one net/http would refuse: the client's
// transport sent it anyway (without that header). Calling it "unsent"
// (InvalidRequest, OutcomeUnknown false) tells the workflow nothing was
// charged when the API may have charged.
func TestSentRequestIsNeverCalledUnsent(t *testing.T) {
	api := newRecorder(t, func(w http.ResponseWriter, _ *http.Request) {
		// The API charges, then the connection breaks before its answer.
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			_ = conn.Close()
		}
	})
	var bad atomic.Bool
	bad.Store(true)
	cfg := activities.Config{AllowedOrigins: []string{api.URL}, Propagator: badPropagator{&bad},
		HTTPClient: &http.Client{Transport: dropTrace{}}}
	_, _, err := run(t, cfg, req(api.URL+"/charges"))
	require.Equal(t, 1, api.count(), "the request reached the API")
	appErr := appError(t, err)
	assert.Equal(t, workflows.ErrTypeNetworkError, appErr.Type(), "%v", err)
	f, ok := workflows.AsFailure(err)
	require.True(t, ok)
	assert.True(t, f.OutcomeUnknown, "the API may have charged: %v", err)
}

// TestFinalFailureLogSaysOutcomeUnknown: the log line of a final failure
// says whether the API may have done the work, as the Failure does.
func TestFinalFailureLogSaysOutcomeUnknown(t *testing.T) {
	tests := []struct {
		name    string
		handler http.HandlerFunc
		unknown bool
	}{
		{"a 500 the server says not to retry", status(500, `{}`, "Stripe-Should-Retry", "false"), true},
		{"a 400", status(400, `{}`), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newRecorder(t, tt.handler)
			_, logs, err := run(t, activities.Config{AllowedOrigins: []string{srv.URL}}, req(srv.URL))
			require.Error(t, err)
			line := ""
			for _, l := range strings.Split(logs, "\n") {
				if strings.Contains(l, "HTTP request failed, not retrying") {
					line = l
				}
			}
			require.NotEmpty(t, line, logs)
			assert.Contains(t, line, fmt.Sprintf(`"outcome_unknown":%t`, tt.unknown))
		})
	}
}
