package host

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
	stdlog "log"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/log"
	sdktestsuite "go.temporal.io/sdk/testsuite"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/harness/registered"
	"github.com/idemhttp/temporal-idempotent-http/internal/input"
)

// rotatingSecrets is what a server accepts: the old secret until it is
// revoked, the new one from the start (an overlap, as a rotation has), and
// what it saw of each after the revocation.
type rotatingSecrets struct {
	old, new string
	revoked  atomic.Bool
	mu       sync.Mutex
	after    map[string]int // values received after the revocation
	refused  atomic.Int64
}

func (r *rotatingSecrets) accept(v string) bool {
	ok := v == r.new || v == r.old && !r.revoked.Load()
	if r.revoked.Load() {
		r.mu.Lock()
		r.after[v]++
		r.mu.Unlock()
	}
	if !ok {
		r.refused.Add(1)
	}
	return ok
}

func (r *rotatingSecrets) seenAfter(v string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.after[v]
}

// writeInPlace rewrites path in place, in two writes with a pause between
// (a writer that truncates, then writes in pieces): half a secret is on
// disk for a moment.
func writeInPlace(t *testing.T, path, v string) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Error(err)
		return
	}
	defer f.Close()
	_, _ = f.WriteString(v[:len(v)/2])
	time.Sleep(300 * time.Millisecond)
	_, _ = f.WriteString(v[len(v)/2:] + "\n")
}

// writeRenamed writes path beside it, then renames it over (as Kubernetes
// and most secret managers do).
func writeRenamed(t *testing.T, path string, b []byte) {
	if err := os.WriteFile(path+".new", b, 0o600); err != nil {
		t.Error(err)
		return
	}
	if err := os.Rename(path+".new", path); err != nil {
		t.Error(err)
	}
}

// TestSecretFilesRotateMidRun: a worker configured by an origins file
// calls three origins from 4 goroutines for 8.5 s: one with an API key in
// a header file, one with OAuth 2.0 whose client secret is in
// client_secret_file (tokens of 2 s), one with mutual TLS (cert_file,
// key_file). 1.5 s in, each file is rotated (the header file and the
// client secret file rewritten in place, half a secret on disk for
// 300 ms; the certificate and key renamed over, one after the other);
// 4 s later each server refuses the old secret. No call fails, no half
// secret is ever sent, and each server sees the new secret after the
// revocation.
func TestSecretFilesRotateMidRun(t *testing.T) {
	dir := t.TempDir()
	keyFile, secretFile := filepath.Join(dir, "api-key"), filepath.Join(dir, "client-secret")
	certFile, certKeyFile, caFile := filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key"), filepath.Join(dir, "ca.pem")

	apiKeys := &rotatingSecrets{old: "Bearer sk_live_old_0123456789", new: "Bearer sk_live_new_9876543210", after: map[string]int{}}
	require.NoError(t, os.WriteFile(keyFile, []byte(apiKeys.old+"\n"), 0o600))
	keyed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if !apiKeys.accept(r.Header.Get("Authorization")) {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(keyed.Close)

	secrets := &rotatingSecrets{old: "cs_old_0123456789abcdef", new: "cs_new_fedcba9876543210", after: map[string]int{}}
	require.NoError(t, os.WriteFile(secretFile, []byte(secrets.old+"\n"), 0o600))
	var issued sync.Map
	var tokenN atomic.Int64
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		w.Header().Set("Content-Type", "application/json")
		if _, secret, _ := r.BasicAuth(); !secrets.accept(cmpOr(secret, r.PostForm.Get("client_secret"))) {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"error":"invalid_client"}`)
			return
		}
		tok := fmt.Sprintf("at_rotation_%08d_abcdef", tokenN.Add(1))
		issued.Store(tok, true)
		fmt.Fprintf(w, `{"access_token":%q,"token_type":"Bearer","expires_in":2}`, tok)
	}))
	t.Cleanup(tokens.Close)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		tok := r.Header.Get("Authorization")
		if len(tok) < 7 {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if _, ok := issued.Load(tok[7:]); !ok {
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(api.Close)

	ca := rotationCA(t)
	oldCert, oldKey := ca.issue(t, 1)
	newCert, newKey := ca.issue(t, 2)
	require.NoError(t, os.WriteFile(certFile, oldCert, 0o600))
	require.NoError(t, os.WriteFile(certKeyFile, oldKey, 0o600))
	require.NoError(t, os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.cert.Raw}), 0o600))
	serials := &rotatingSecrets{old: "1", new: "2", after: map[string]int{}}
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	bank := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		// A new connection, and so a new handshake, for each request.
		w.Header().Set("Connection", "close")
		w.WriteHeader(http.StatusCreated)
	}))
	bank.TLS = &tls.Config{
		Certificates: []tls.Certificate{ca.server(t)},
		ClientAuth:   tls.RequireAndVerifyClientCert, ClientCAs: pool,
		VerifyPeerCertificate: func(_ [][]byte, chains [][]*x509.Certificate) error {
			if !serials.accept(chains[0][0].SerialNumber.String()) {
				return fmt.Errorf("certificate %s revoked", chains[0][0].SerialNumber)
			}
			return nil
		},
	}
	bank.Config.ErrorLog = stdlog.New(io.Discard, "", 0) // the refused handshakes
	bank.StartTLS()
	t.Cleanup(bank.Close)

	origins := writeOrigins(t, fmt.Sprintf(`
[origin.%[1]q.headers]
Authorization = { file = %[2]q }

[origin.%[3]q.oauth2]
token_url = "%[4]s/token"
client_id = "rotation"
client_secret_file = %[5]q

[origin.%[6]q.tls]
cert_file = %[7]q
key_file = %[8]q
ca_file = %[9]q
`, keyed.URL, keyFile, api.URL, tokens.URL, secretFile, bank.URL, certFile, certKeyFile, caFile), 0o644)
	s, err := loadOrigins(origins, envOf(nil))
	require.NoError(t, err)
	a, err := activities.New(activities.Config{AllowedOrigins: s.Origins, Credentials: s.Credentials, Admission: activities.Admission{Off: true}})
	require.NoError(t, err)

	const (
		run      = 8500 * time.Millisecond
		rotateAt = 1500 * time.Millisecond
		revokeAt = rotateAt + 4*time.Second
	)
	targets := []string{keyed.URL, api.URL, bank.URL}
	var calls, failed atomic.Int64
	var firstErr sync.Map
	var s2 sdktestsuite.WorkflowTestSuite
	s2.SetLogger(log.NewStructuredLogger(slog.New(slog.NewJSONHandler(io.Discard, nil))))
	env := s2.NewTestActivityEnvironment()
	env.RegisterActivityWithOptions(func(ctx context.Context) error {
		start := time.Now()
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Go(func() {
				for i := 0; time.Since(start) < run; i++ {
					target := targets[(g+i)%len(targets)]
					in := input.Input{Operation: "charge", URL: target + "/charges", Body: []byte(`{"amount":42}`), IdempotencyKey: fmt.Sprintf("key-%d-%d", g, i)}
					calls.Add(1)
					resp, err := registered.Of(a).Do(ctx, in)
					if err != nil || resp.Status != http.StatusCreated {
						failed.Add(1)
						if err == nil {
							err = fmt.Errorf("status %d", resp.Status)
						}
						firstErr.LoadOrStore(target, fmt.Sprintf("at %s: %v", time.Since(start).Round(time.Millisecond), err))
					}
					time.Sleep(10 * time.Millisecond)
				}
			})
		}
		time.Sleep(rotateAt)
		var rw sync.WaitGroup
		rw.Go(func() { writeInPlace(t, keyFile, apiKeys.new) })
		rw.Go(func() { writeInPlace(t, secretFile, secrets.new) })
		rw.Go(func() {
			writeRenamed(t, certFile, newCert)
			time.Sleep(300 * time.Millisecond)
			writeRenamed(t, certKeyFile, newKey)
		})
		rw.Wait()
		time.Sleep(revokeAt - time.Since(start))
		for _, r := range []*rotatingSecrets{apiKeys, secrets, serials} {
			r.revoked.Store(true)
		}
		wg.Wait()
		return nil
	}, activity.RegisterOptions{Name: "Rotation"})
	_, err = env.ExecuteActivity("Rotation")
	require.NoError(t, err)

	t.Logf("%d calls, %d failed; refused: API key %d, client secret %d, certificate %d", calls.Load(), failed.Load(), apiKeys.refused.Load(), secrets.refused.Load(), serials.refused.Load())
	firstErr.Range(func(k, v any) bool {
		t.Errorf("%s: first failure %v", k, v)
		return true
	})
	assert.Zero(t, failed.Load(), "calls that failed")
	for _, c := range []struct {
		what string
		r    *rotatingSecrets
	}{{"the header file's API key", apiKeys}, {"the client secret", secrets}, {"the client certificate", serials}} {
		assert.Positive(t, c.r.seenAfter(c.r.new), "%s: the new one after the revocation", c.what)
		assert.Zero(t, c.r.refused.Load(), "%s: values refused (the old one after the revocation, or half of one)", c.what)
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// testCA is a certificate authority made for a test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func rotationCA(t *testing.T) *testCA {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(100), Subject: pkix.Name{CommonName: "rotation CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	c, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return &testCA{c, key}
}

// issue returns the PEM certificate and key of a client certificate.
func (ca *testCA) issue(t *testing.T, serial int64) (certPEM, keyPEM []byte) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "worker"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	require.NoError(t, err)
	k, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: k})
}

// server is a server certificate for 127.0.0.1.
func (ca *testCA) server(t *testing.T) tls.Certificate {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(99), Subject: pkix.Name{CommonName: "bank"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	require.NoError(t, err)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
