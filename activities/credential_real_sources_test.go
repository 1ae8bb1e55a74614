package activities_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"math/big"
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
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/log"
	sdktestsuite "go.temporal.io/sdk/testsuite"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/harness/registered"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// inOneActivity runs f inside one activity execution of Temporal's test
// environment, with that execution's context: Do gets a real activity
// context, and f may call it from as many goroutines as it likes (the
// environment runs one execution at a time).
func inOneActivity(t *testing.T, f func(ctx context.Context) error) {
	t.Helper()
	var s sdktestsuite.WorkflowTestSuite
	s.SetLogger(log.NewStructuredLogger(slog.New(slog.NewJSONHandler(io.Discard, nil))))
	env := s.NewTestActivityEnvironment()
	env.RegisterActivityWithOptions(f, activity.RegisterOptions{Name: "OneActivity"})
	_, err := env.ExecuteActivity("OneActivity")
	require.NoError(t, err)
}

// TestOAuth2ThousandAttemptsAtExpiry: 1000 attempts of Do run at once on
// one worker against one origin whose OAuth 2.0 token has just expired.
// The source's single flight guarantees that while one token request is
// running every attempt that needs a token waits for it, and that once it
// has answered its token is fresh (an hour): so the endpoint gets exactly
// one token request for the 1000 attempts, and every attempt succeeds and
// sends the new token. (Measured, issue 32: "1000 concurrent attempts on
// one worker at token expiry: 1 token request".)
func TestOAuth2ThousandAttemptsAtExpiry(t *testing.T) {
	const attempts = 1000
	var tokenRequests atomic.Int64
	started := make(chan struct{}) // closed when every attempt is about to call Do
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		n := tokenRequests.Add(1)
		life := 3600
		if n == 1 {
			life = 1 // the token that expires
		} else {
			<-started // answer once the herd has been let go
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"access_token":"at_measure_%08d_abcdef","token_type":"Bearer","expires_in":%d}`, n, life)
	}))
	t.Cleanup(tokens.Close)
	var mu sync.Mutex
	auth := map[string]int{}
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		auth[r.Header.Get("Authorization")]++
		mu.Unlock()
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"id":"ch_1"}`)
	}))
	t.Cleanup(api.Close)
	a, err := activities.New(activities.Config{
		AllowedOrigins: []string{api.URL},
		// Admission off: its slow start (10 requests/s) would hold the herd.
		Admission: activities.Admission{Off: true},
		Credentials: map[string]activities.Credential{api.URL: {OAuth2: &clientcredentials.Config{
			TokenURL: tokens.URL + "/oauth2/token", ClientID: "measure", ClientSecret: "cs_measure_0123456789",
		}}},
	})
	require.NoError(t, err)

	// The first token (1 s) is fetched and used, then left to expire.
	resp, _, err := runWith(t, a, req(api.URL))
	require.NoError(t, err)
	require.Equal(t, 201, resp.Status)
	require.Equal(t, int64(1), tokenRequests.Load())
	time.Sleep(1500 * time.Millisecond) // expires_in 1: expired after 1 s

	var (
		ok      atomic.Int64
		errs    sync.Map
		ready   sync.WaitGroup
		finally sync.WaitGroup
	)
	inOneActivity(t, func(ctx context.Context) error {
		ready.Add(attempts)
		finally.Add(attempts)
		go1 := make(chan struct{})
		for i := range attempts {
			go func() {
				defer finally.Done()
				r := req(api.URL)
				r.IdempotencyKey = fmt.Sprintf("key-%04d", i)
				ready.Done()
				<-go1
				resp, err := registered.Of(a).Do(ctx, r)
				switch {
				case err != nil:
					errs.Store(i, err.Error())
				case resp.Status != 201:
					errs.Store(i, fmt.Sprintf("status %d", resp.Status))
				default:
					ok.Add(1)
				}
			}()
		}
		ready.Wait()
		close(go1)
		close(started)
		finally.Wait()
		return nil
	})
	errs.Range(func(k, v any) bool {
		t.Errorf("attempt %v: %v", k, v)
		return false // one is enough to see
	})
	assert.Equal(t, int64(attempts), ok.Load(), "attempts that succeeded")
	assert.Equal(t, int64(2), tokenRequests.Load(), "token requests: the first token's, then one for the 1000 attempts at its expiry")
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, 1, auth["Bearer at_measure_00000001_abcdef"], "requests with the token that expired: the attempt before expiry")
	assert.Equal(t, attempts, auth["Bearer at_measure_00000002_abcdef"], "requests with the new token")
	assert.Equal(t, 2, len(auth), "distinct Authorization values the API received")
}

// certFiles writes cert's PEM certificate and PKCS #8 key to dir and
// returns their paths.
func certFiles(t *testing.T, dir, name string, cert tls.Certificate) (certFile, keyFile string) {
	t.Helper()
	certFile, keyFile = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	der, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}), 0o600))
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600))
	return certFile, keyFile
}

// clientCertUntil is a client certificate signed by ca, valid until notAfter.
func clientCertUntil(t *testing.T, ca *tls.Certificate, notAfter time.Time) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "worker (short-lived)"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Leaf, &key.PublicKey, ca.PrivateKey)
	require.NoError(t, err)
	leaf, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
}

// TestMutualTLSRealSource: an origin requiring a client certificate
// (RequireAndVerifyClientCert), with the worker's real source
// (credential.NewTLS, PEM files written here), over TLS 1.2 and 1.3. The
// right certificate gets the 201. A certificate of another CA, refused by
// the server in the handshake, and one that has expired since New,
// refused by the worker before it is presented, are both a final
// CredentialUnavailable whose outcome is known (nothing was done) and whose
// message points at Credential.CertFile; the server's handler got nothing.
func TestMutualTLSRealSource(t *testing.T) {
	ca := testCert(t, "bank client CA", nil, false)
	otherCA := testCert(t, "another CA", nil, false)
	pool := x509.NewCertPool()
	pool.AddCert(ca.Leaf)
	dir := t.TempDir()
	goodCert, goodKey := certFiles(t, dir, "good", testCert(t, "worker", &ca, true))
	strangerCert, strangerKey := certFiles(t, dir, "stranger", testCert(t, "worker", &otherCA, true))
	for _, v := range []struct {
		name    string
		version uint16
	}{{"TLS 1.2", tls.VersionTLS12}, {"TLS 1.3", tls.VersionTLS13}} {
		t.Run(v.name, func(t *testing.T) {
			var handled atomic.Int64
			bank := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				handled.Add(1)
				w.WriteHeader(http.StatusCreated)
			}))
			bank.TLS = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool, MinVersion: v.version, MaxVersion: v.version}
			bank.StartTLS()
			t.Cleanup(bank.Close)
			caFile := filepath.Join(t.TempDir(), "bank-ca.pem")
			require.NoError(t, os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: bank.Certificate().Raw}), 0o600))
			newActs := func(certFile, keyFile string) *activities.Activities {
				a, err := activities.New(activities.Config{
					AllowedOrigins: []string{bank.URL},
					Credentials:    map[string]activities.Credential{bank.URL: {CertFile: certFile, KeyFile: keyFile, CAFile: caFile}},
				})
				require.NoError(t, err)
				return a
			}

			resp, _, err := runWith(t, newActs(goodCert, goodKey), req(bank.URL))
			require.NoError(t, err)
			assert.Equal(t, 201, resp.Status)
			require.Equal(t, int64(1), handled.Load())

			// Valid for New, expired by the attempt.
			short := clientCertUntil(t, &ca, time.Now().Add(2*time.Second))
			shortCert, shortKey := certFiles(t, t.TempDir(), "short", short)
			expiring := newActs(shortCert, shortKey)
			time.Sleep(time.Until(short.Leaf.NotAfter) + 200*time.Millisecond)

			stranger := newActs(strangerCert, strangerKey)
			for _, c := range []struct {
				name string
				a    *activities.Activities
				body int // bytes of padding: a body larger than the sockets' buffers is still being written when the server refuses (TLS 1.3)
			}{{"another CA", stranger, 0}, {"another CA, large body", stranger, 200_000}, {"expired", expiring, 0}, {"expired, large body", expiring, 200_000}} {
				r := req(bank.URL)
				if c.body > 0 {
					r.Body = []byte(`{"amount":42,"pad":"` + strings.Repeat("x", c.body) + `"}`)
				}
				_, logs, err := runWith(t, c.a, r)
				require.Error(t, err, c.name)
				appErr := appError(t, err)
				assert.Equal(t, workflows.ErrTypeCredentialUnavailable, appErr.Type(), "%s: %v", c.name, err)
				assert.True(t, appErr.NonRetryable(), "%s: final", c.name)
				var d workflows.Failure
				require.NoError(t, appErr.Details(&d))
				assert.False(t, d.OutcomeUnknown, "%s: the server refused the connection before any handler read the request", c.name)
				assert.Contains(t, err.Error(), "Credential.CertFile", c.name)
				assert.NotContains(t, logs, "BEGIN PRIVATE KEY", c.name)
			}
			assert.Equal(t, int64(1), handled.Load(), "the handler got only the right certificate's request")
		})
	}
}
