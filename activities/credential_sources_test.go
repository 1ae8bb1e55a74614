package activities_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/log"
	sdktestsuite "go.temporal.io/sdk/testsuite"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/internal/credential"
	"github.com/idemhttp/temporal-idempotent-http/internal/input"
	"github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// runWith executes one attempt of a's activity, as run does for a new one.
func runWith(t *testing.T, a *activities.Activities, r input.Input) (*workflows.Response, string, error) {
	t.Helper()
	var logs bytes.Buffer
	var s sdktestsuite.WorkflowTestSuite
	s.SetLogger(log.NewStructuredLogger(slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	env := s.NewTestActivityEnvironment()
	a.Register(env)
	val, err := env.ExecuteActivity(input.ActivityName, r)
	if err != nil {
		return nil, logs.String(), err
	}
	var resp workflows.Response
	require.NoError(t, val.Get(&resp))
	return &resp, logs.String(), nil
}

// TestHeaderFileRotation: a header file rewritten while the worker runs is
// sent from then on, without a restart, and the value it replaced stays
// redacted when a server echoes it.
func TestHeaderFileRotation(t *testing.T) {
	const (
		oldKey = "sk_live_old_0123456789abcdef"
		newKey = "sk_live_new_fedcba9876543210ZZ"
	)
	srv := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		// Echoes what it got, and the old key, whatever it got.
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"error":"bad","auth":%q,"seen":%q}`, r.Header.Get("Authorization"), "Bearer "+oldKey)
	})
	dir := t.TempDir()
	path := filepath.Join(dir, "key")
	require.NoError(t, os.WriteFile(path, []byte("Bearer "+oldKey+"\n"), 0o600))
	a, err := activities.New(activities.Config{
		AllowedOrigins: []string{srv.URL},
		Credentials:    map[string]activities.Credential{srv.URL: {HeaderFiles: map[string]string{"authorization": path}}},
	})
	require.NoError(t, err)
	_, logs, err := runWith(t, a, req(srv.URL))
	assert.Equal(t, workflows.ErrTypeHTTPClientError, appError(t, err).Type())
	got, _ := srv.last()
	assert.Equal(t, "Bearer "+oldKey, got.Header.Get("Authorization"))
	assertNoPiece(t, err, nil, logs, oldKey)

	// Rotated as secret managers do: a new file renamed over the old one.
	tmp := filepath.Join(dir, "key.new")
	require.NoError(t, os.WriteFile(tmp, []byte("Bearer "+newKey+"\n"), 0o600))
	require.NoError(t, os.Rename(tmp, path))
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, logs, err = runWith(t, a, req(srv.URL))
		got, _ = srv.last()
		if got.Header.Get("Authorization") == "Bearer "+newKey || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	require.Equal(t, "Bearer "+newKey, got.Header.Get("Authorization"), "the rotated key is sent")
	assert.Equal(t, workflows.ErrTypeHTTPClientError, appError(t, err).Type())
	assertNoPiece(t, err, nil, logs, oldKey, newKey)
}

// TestHeaderFileRefusedAtNew: a header file that cannot be read, or holds
// a value too short to redact, is refused at New, the error naming the
// field.
func TestHeaderFileRefusedAtNew(t *testing.T) {
	const origin = "https://api.example.com"
	dir := t.TempDir()
	short := filepath.Join(dir, "short")
	require.NoError(t, os.WriteFile(short, []byte("Bearer abc\n"), 0o600))
	tests := []struct{ name, path, want string }{
		{"missing", filepath.Join(dir, "missing"), "no such file"},
		{"too short", short, "shorter than 8 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := activities.New(activities.Config{
				AllowedOrigins: []string{origin},
				Credentials:    map[string]activities.Credential{origin: {HeaderFiles: map[string]string{"Authorization": tt.path}}},
			})
			require.Error(t, err)
			assert.Contains(t, err.Error(), "Config.Credentials["+origin+"].HeaderFiles[Authorization]")
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

// fakeSource is a credential source whose token and error the test sets;
// it is a Refresher, whose Refresh moves to the next token.
type fakeSource struct {
	r         credential.Redactor
	mu        sync.Mutex
	tokens    []string
	err       error
	refreshes atomic.Int32
	// failFirst: the first failFirst Applies fail, retryable.
	failFirst int
	// refreshErr, if set, is what the token endpoint answers a refresh:
	// Refresh reports false and every later Apply fails with it.
	refreshErr error
}

func (f *fakeSource) Apply(_ context.Context, req *http.Request, _ []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return f.err
	}
	if f.failFirst > 0 {
		f.failFirst--
		return &credential.Error{Scheme: "oauth2", Retryable: true, RetryAfter: 3 * time.Second, Err: errors.New("token endpoint answered 503")}
	}
	f.r.Add(f.tokens[0])
	req.Header.Set("Authorization", "Bearer "+f.tokens[0])
	return nil
}

func (f *fakeSource) Refresh(context.Context, *http.Request) bool {
	f.refreshes.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refreshErr != nil {
		f.err = f.refreshErr
		return false
	}
	if len(f.tokens) > 1 {
		f.tokens = f.tokens[1:]
	}
	return true
}

// withFake returns a Config whose origin srv gets the OAuth2 source src.
func withFake(t *testing.T, srv string, src *fakeSource) activities.Config {
	t.Cleanup(activities.SetNewOAuth2(func(r credential.Redactor) credential.Source { src.r = r; return src }))
	return activities.Config{
		AllowedOrigins: []string{srv},
		Credentials:    map[string]activities.Credential{srv: {OAuth2: &clientcredentials.Config{}}},
	}
}

// TestCredentialUnavailable: a source that cannot give its credential
// fails the attempt with CredentialUnavailable, retryable or not as its
// error says, after its RetryAfter; nothing is sent, the outcome is known,
// and the origin's breaker does not count it as the origin's failure.
func TestCredentialUnavailable(t *testing.T) {
	tests := []struct {
		name  string
		err   error
		retry bool
		delay time.Duration
	}{
		{"endpoint down", &credential.Error{Scheme: "oauth2", Retryable: true, RetryAfter: 7 * time.Second, Status: 503, Err: errors.New("token endpoint answered 503")}, true, 7 * time.Second},
		{"client refused", &credential.Error{Scheme: "oauth2", Status: 401, Err: errors.New("token endpoint refused the client: invalid_client")}, false, 0},
		{"plain error", errors.New("something else"), false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newRecorder(t, status(201, `{}`))
			src := &fakeSource{tokens: []string{"tok_fetched_0123456789"}, err: tt.err}
			cfg := withFake(t, srv.URL, src)
			// An attempt the breaker held back would end NotAdmitted.
			cfg.Admission.MaxWait, cfg.Admission.InitialRate = time.Nanosecond, 1e6
			a, err := activities.New(cfg)
			require.NoError(t, err)
			// More than the breaker's MinFailures: none counts.
			for range 12 {
				_, _, err = runWith(t, a, req(srv.URL))
				appErr := appError(t, err)
				require.Equal(t, workflows.ErrTypeCredentialUnavailable, appErr.Type(), err.Error())
				assert.Equal(t, !tt.retry, appErr.NonRetryable())
				assert.Equal(t, tt.delay, appErr.NextRetryDelay())
				var d workflows.Failure
				require.NoError(t, appErr.Details(&d))
				assert.False(t, d.OutcomeUnknown, "nothing was sent")
				assert.Zero(t, d.Status)
			}
			assert.Zero(t, srv.count(), "nothing sent")
			src.mu.Lock()
			src.err = nil
			src.mu.Unlock()
			resp, _, err := runWith(t, a, req(srv.URL))
			require.NoError(t, err, "the origin was not held back by its breaker")
			assert.Equal(t, 201, resp.Status)
		})
	}
}

// TestRefreshOn401InvalidToken: a 401 that says the Bearer token is
// invalid gets one refresh and one resend, with the same idempotency key,
// in the same attempt; any other 401 gets none. A refresh the token
// endpoint refuses (the client revoked) fails the attempt with the
// source's error, CredentialUnavailable, retryable as it says, not as the
// API's 401.
func TestRefreshOn401InvalidToken(t *testing.T) {
	const (
		stale = "tok_stale_0123456789"
		fresh = "tok_fresh_9876543210"
	)
	invalid := `Bearer realm="api", error="invalid_token", error_description="The access token expired"`
	revoked := &credential.Error{Scheme: "oauth2", Status: 401, Err: errors.New("token endpoint refused the client: invalid_client")}
	down := &credential.Error{Scheme: "oauth2", Retryable: true, RetryAfter: 2 * time.Second, Status: 503, Err: errors.New("token endpoint answered 503")}
	tests := []struct {
		name      string
		challenge string
		accept    string // the token the server accepts
		refresh   error  // the token endpoint's answer to a refresh (nil: a new token)
		requests  int
		refreshes int32
		status    int
		errType   string
	}{
		{"refreshed", invalid, fresh, nil, 2, 1, 201, ""},
		{"still refused: once only", invalid, "none", nil, 2, 1, 0, workflows.ErrTypeHTTPClientError},
		{"other challenge", `Bearer realm="api", error="insufficient_scope"`, fresh, nil, 1, 0, 0, workflows.ErrTypeHTTPClientError},
		{"no challenge", "", fresh, nil, 1, 0, 0, workflows.ErrTypeHTTPClientError},
		{"refresh refused: client revoked", invalid, fresh, revoked, 1, 1, 0, workflows.ErrTypeCredentialUnavailable},
		{"refresh failed: endpoint down", invalid, fresh, down, 1, 1, 0, workflows.ErrTypeCredentialUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Authorization") == "Bearer "+tt.accept {
					w.WriteHeader(201)
					return
				}
				if tt.challenge != "" {
					w.Header().Set("WWW-Authenticate", tt.challenge)
				}
				w.WriteHeader(401)
				// An echo of the token: redacted.
				fmt.Fprintf(w, `{"error":"unauthorized","token":%q}`, r.Header.Get("Authorization"))
			})
			src := &fakeSource{tokens: []string{stale, fresh}, refreshErr: tt.refresh}
			a, err := activities.New(withFake(t, srv.URL, src))
			require.NoError(t, err)
			resp, logs, err := runWith(t, a, req(srv.URL))
			if tt.errType == "" {
				require.NoError(t, err)
				assert.Equal(t, tt.status, resp.Status)
			} else {
				assert.Equal(t, tt.errType, appError(t, err).Type(), "%v", err)
			}
			var ce *credential.Error
			if errors.As(tt.refresh, &ce) {
				appErr := appError(t, err)
				assert.Equal(t, !ce.Retryable, appErr.NonRetryable())
				assert.Equal(t, ce.RetryAfter, appErr.NextRetryDelay())
			}
			assert.Equal(t, tt.requests, srv.count())
			assert.Equal(t, tt.refreshes, src.refreshes.Load())
			srv.mu.Lock()
			for _, r := range srv.requests {
				assert.Equal(t, "key-1", r.Header.Get("Idempotency-Key"))
			}
			srv.mu.Unlock()
			assertNoPiece(t, err, resp, logs, stale, fresh)
		})
	}
}

// testCert returns a certificate signed by ca (self-signed when ca is nil).
func testCert(t *testing.T, cn string, ca *tls.Certificate, client bool) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: ca == nil,
	}
	if client {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	parent, signer := tmpl, any(key)
	if ca != nil {
		parent, signer = ca.Leaf, ca.PrivateKey
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	require.NoError(t, err)
	leaf, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
}

// fakeTLS is a TLSSource with a fixed configuration.
type fakeTLS struct{ cfg *tls.Config }

func (f fakeTLS) TLSConfig() *tls.Config { return f.cfg }

// TestOriginTransportWithTLSSource: an origin whose credential
// authenticates the connection gets its own transport, presenting its
// client certificate to it and to no other origin; New refuses a client
// certificate with a Config.HTTPClient whose Transport it cannot clone.
func TestOriginTransportWithTLSSource(t *testing.T) {
	ca := testCert(t, "test client CA", nil, false)
	clientCert := testCert(t, "worker", &ca, true)
	pool := x509.NewCertPool()
	pool.AddCert(ca.Leaf)
	var peers sync.Map
	serve := func(auth tls.ClientAuthType) *httptest.Server {
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			peers.Store(r.Host, len(r.TLS.PeerCertificates))
			w.WriteHeader(201)
		}))
		srv.TLS = &tls.Config{ClientAuth: auth, ClientCAs: pool}
		srv.StartTLS()
		t.Cleanup(srv.Close)
		return srv
	}
	bank := serve(tls.RequireAndVerifyClientCert)
	other := serve(tls.VerifyClientCertIfGiven)
	roots := x509.NewCertPool()
	roots.AddCert(bank.Certificate())
	roots.AddCert(other.Certificate())
	t.Cleanup(activities.SetNewTLS(func() credential.TLSSource {
		return fakeTLS{&tls.Config{RootCAs: roots, Certificates: []tls.Certificate{clientCert}}}
	}))
	cfg := activities.Config{
		HTTPClient:     &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}},
		AllowedOrigins: []string{bank.URL, other.URL},
		Credentials:    map[string]activities.Credential{bank.URL: {CertFile: "client.pem", KeyFile: "client-key.pem"}},
	}
	a, err := activities.New(cfg)
	require.NoError(t, err)
	for _, srv := range []*httptest.Server{bank, other} {
		resp, _, err := runWith(t, a, req(srv.URL))
		require.NoError(t, err, srv.URL)
		assert.Equal(t, 201, resp.Status)
	}
	n, _ := peers.Load(strings.TrimPrefix(bank.URL, "https://"))
	assert.Equal(t, 1, n, "the bank got the client certificate")
	n, _ = peers.Load(strings.TrimPrefix(other.URL, "https://"))
	assert.Equal(t, 0, n, "no other origin gets it")

	cfg.HTTPClient = &http.Client{Transport: roundTripper(http.DefaultTransport.RoundTrip)}
	_, err = activities.New(cfg)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Config.Credentials["+bank.URL+"]")
	assert.Contains(t, err.Error(), "Config.HTTPClient.Transport to be an *http.Transport")

	// A transport that dials TLS itself would lose the certificate.
	own := &http.Transport{DialTLSContext: func(context.Context, string, string) (net.Conn, error) { return nil, errors.New("unused") }}
	cfg.HTTPClient = &http.Client{Transport: own}
	_, err = activities.New(cfg)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "DialTLSContext")
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestEverySchemeSecretRedacted: whatever the credential's kind (a static
// header, a header file, a token a source fetched), the secret a server
// echoes, in an error's body, a result's body or a redirect's Location,
// reaches no result, error or log line.
func TestEverySchemeSecretRedacted(t *testing.T) {
	const secret = "sk_live_echoed_0123456789abcdef"
	path := filepath.Join(t.TempDir(), "key")
	require.NoError(t, os.WriteFile(path, []byte("Bearer "+secret), 0o600))
	kinds := map[string]func(t *testing.T, origin string) activities.Config{
		"header": func(_ *testing.T, origin string) activities.Config {
			return activities.Config{AllowedOrigins: []string{origin}, Credentials: map[string]activities.Credential{origin: {Header: http.Header{"Authorization": {"Bearer " + secret}}}}}
		},
		"header file": func(_ *testing.T, origin string) activities.Config {
			return activities.Config{AllowedOrigins: []string{origin}, Credentials: map[string]activities.Credential{origin: {HeaderFiles: map[string]string{"Authorization": path}}}}
		},
		"fetched token": func(t *testing.T, origin string) activities.Config {
			return withFake(t, origin, &fakeSource{tokens: []string{secret}})
		},
	}
	echoes := map[string]http.HandlerFunc{
		"error body": func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(400)
			fmt.Fprintf(w, `{"error":"bad token %s","part":%q}`, r.Header.Get("Authorization"), secret[3:20])
		},
		"result body": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(201)
			fmt.Fprintf(w, `{"id":"ch_1","seen":%q}`, r.Header.Get("Authorization"))
		},
		"location": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Location", "/moved/"+strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
			w.WriteHeader(301)
		},
		"retried then final": func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(503)
			fmt.Fprintf(w, "upstream refused %s", r.Header.Get("Authorization"))
		},
	}
	for kind, config := range kinds {
		for echo, h := range echoes {
			t.Run(kind+"/"+echo, func(t *testing.T) {
				srv := newRecorder(t, h)
				resp, logs, err := run(t, config(t, srv.URL), req(srv.URL))
				got, _ := srv.last()
				require.Equal(t, "Bearer "+secret, got.Header.Get("Authorization"), "sent")
				if echo == "result body" {
					require.NoError(t, err)
				} else {
					require.Error(t, err)
				}
				assertNoPiece(t, err, resp, logs, secret)
			})
		}
	}
}

// TestPollCredentialUnavailable: a poll whose credential cannot be applied
// sends nothing and is retried (after the source's RetryAfter), until the
// credential is there; the poll then carries it.
func TestPollCredentialUnavailable(t *testing.T) {
	const tok = "tok_monitor_0123456789"
	var mu sync.Mutex
	var auth []string
	mon := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		_, _ = w.Write([]byte(`{"id":"done"}`))
	})
	var h hostile
	srv := newRecorder(t, h.handler(mon.URL+"/operations/1", status(200, `{}`)))
	conv := activities.IETFConvention()
	conv.LongRunning.MonitorOrigins = []string{mon.URL}
	src := &fakeSource{tokens: []string{tok}, failFirst: 2}
	cfg := withFake(t, mon.URL, src)
	cfg.Conventions = map[string]activities.Convention{srv.URL: conv}
	env := testsuite.Register(t, nil, &testsuite.Server{URL: srv.URL}, cfg)
	env.RegisterWorkflow(followWorkflow)
	env.ExecuteWorkflow(followWorkflow, srv.URL+"/transfers", workflows.FollowOptions{})
	require.NoError(t, env.GetWorkflowError())
	var resp workflows.Response
	require.NoError(t, env.GetWorkflowResult(&resp))
	assert.JSONEq(t, `{"id":"done"}`, string(resp.Body))
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{"Bearer " + tok}, auth, "one poll sent, once the credential was there")
	assert.Zero(t, src.failFirst)
}
