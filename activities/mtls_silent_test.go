package activities_test

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
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
	"go.temporal.io/sdk/testsuite"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/internal/input"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// silentServer is a raw TLS server that asks for a client certificate and,
// when it does not like the one it gets, closes the TCP connection without
// a TLS alert, as Node's https server (requestCert, rejectUnauthorized)
// and many load balancers do.
type silentServer struct {
	addr    string
	handled atomic.Int64 // requests read whole and answered 201
	conns   atomic.Int64 // connections accepted
}

// silentMode is what a silentServer does with a connection.
type silentMode int

const (
	// abortHandshake: the certificate is checked when it arrives, and the
	// connection closed at once, the alert unsent: in TLS 1.2 the client's
	// handshake fails; in TLS 1.3 the client has finished its side.
	abortHandshake silentMode = iota
	// closeAfterHandshake: the handshake completes, then the certificate
	// is checked and the connection closed, nothing read (Node's way).
	closeAfterHandshake
	// crashAfterRequest: any certificate is accepted; the first
	// connection's request is read whole, then the connection closed
	// without an answer (a server that failed while processing it).
	crashAfterRequest
	// abortFirstHandshake: the first connection's handshake is aborted
	// silently after the client's certificate arrived, whatever it is;
	// later ones are served.
	abortFirstHandshake
)

// mutedConn drops what is written once muted (the alert of a refusal).
type mutedConn struct {
	net.Conn
	muted atomic.Bool
}

func (c *mutedConn) Write(p []byte) (int, error) {
	if c.muted.Load() {
		return len(p), nil
	}
	return c.Conn.Write(p)
}

func startSilentServer(t *testing.T, version uint16, mode silentMode, trusted *x509.CertPool, server tls.Certificate) *silentServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &silentServer{addr: ln.Addr().String()}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	verify := func(raw [][]byte) error {
		if len(raw) == 0 {
			return errors.New("no certificate")
		}
		c, err := x509.ParseCertificate(raw[0])
		if err != nil {
			return err
		}
		_, err = c.Verify(x509.VerifyOptions{Roots: trusted, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
		return err
	}
	serve := func(raw net.Conn, n int64) {
		defer raw.Close()
		mc := &mutedConn{Conn: raw}
		cfg := &tls.Config{Certificates: []tls.Certificate{server}, ClientAuth: tls.RequestClientCert, MinVersion: version, MaxVersion: version}
		if mode == abortHandshake || mode == abortFirstHandshake && n == 1 {
			cfg.VerifyPeerCertificate = func(raw [][]byte, _ [][]*x509.Certificate) error {
				if err := verify(raw); err != nil || mode == abortFirstHandshake {
					mc.muted.Store(true)
					return errors.New("refused")
				}
				return nil
			}
		}
		tc := tls.Server(mc, cfg)
		_ = raw.SetDeadline(time.Now().Add(20 * time.Second))
		if err := tc.Handshake(); err != nil {
			return
		}
		if mode == closeAfterHandshake && verify(peerCerts(tc)) != nil {
			return
		}
		br := bufio.NewReader(tc)
		for {
			r, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			_, err = io.Copy(io.Discard, r.Body)
			if err != nil || mode == crashAfterRequest && n == 1 {
				return
			}
			s.handled.Add(1)
			if _, err := io.WriteString(tc, "HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n"); err != nil {
				return
			}
		}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n := s.conns.Add(1)
			wg.Add(1)
			go func() { defer wg.Done(); serve(c, n) }()
		}
	}()
	return s
}

// serverFor is a server certificate for 127.0.0.1 signed by ca.
func serverFor(t *testing.T, ca *tls.Certificate) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "bank"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Leaf, &key.PublicKey, ca.PrivateKey)
	require.NoError(t, err)
	leaf, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
}

func peerCerts(tc *tls.Conn) [][]byte {
	var out [][]byte
	for _, c := range tc.ConnectionState().PeerCertificates {
		out = append(out, c.Raw)
	}
	return out
}

// TestMutualTLSSilentRefusal: an origin that refuses the client
// certificate by closing the connection without a TLS alert, in TLS 1.2
// (the handshake fails) and 1.3 (the request was written, never read),
// with a small and a large body (a write that breaks), is a final
// CredentialUnavailable at the first attempt, of known outcome, naming
// Credential.CertFile, and no failure of the origin for its breaker (six
// in a row do not open it). A silent close for another reason stays a
// NetworkError: on an origin without a client certificate; after a
// certificate the origin accepts (a server that failed while processing
// the request: outcome unknown); and a handshake aborted once by an
// origin that accepts the certificate (nothing was sent: outcome known).
func TestMutualTLSSilentRefusal(t *testing.T) {
	ca := testCert(t, "bank client CA", nil, false)
	otherCA := testCert(t, "another CA", nil, false)
	trusted := x509.NewCertPool()
	trusted.AddCert(ca.Leaf)
	serverCert := serverFor(t, &ca)
	dir := t.TempDir()
	caFile := filepath.Join(dir, "bank-ca.pem")
	require.NoError(t, os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Certificate[0]}), 0o600))
	goodCert, goodKey := certFiles(t, dir, "good", testCert(t, "worker", &ca, true))
	strangerCert, strangerKey := certFiles(t, dir, "stranger", testCert(t, "worker", &otherCA, true))

	type want struct {
		errType string
		final   bool
		unknown bool
		handled int64
	}
	refused := want{errType: workflows.ErrTypeCredentialUnavailable, final: true}
	for _, v := range []struct {
		name    string
		version uint16
	}{{"TLS 1.2", tls.VersionTLS12}, {"TLS 1.3", tls.VersionTLS13}} {
		for _, tc := range []struct {
			name      string
			mode      silentMode
			cert, key string // the origin's client certificate ("": none)
			body      int
			want      want
		}{
			{"refused in the handshake", abortHandshake, strangerCert, strangerKey, 0, refused},
			{"refused in the handshake, large body", abortHandshake, strangerCert, strangerKey, 200_000, refused},
			{"refused after the handshake", closeAfterHandshake, strangerCert, strangerKey, 0, refused},
			{"refused after the handshake, large body", closeAfterHandshake, strangerCert, strangerKey, 200_000, refused},
			{"no client certificate configured", closeAfterHandshake, "", "", 0, want{errType: workflows.ErrTypeNetworkError, unknown: true}},
			{"accepted, then closed after the request", crashAfterRequest, goodCert, goodKey, 0, want{errType: workflows.ErrTypeNetworkError, unknown: true}},
			{"handshake aborted once, certificate accepted", abortFirstHandshake, goodCert, goodKey, 0, want{errType: workflows.ErrTypeNetworkError, unknown: v.version == tls.VersionTLS13}},
		} {
			t.Run(v.name+"/"+tc.name, func(t *testing.T) {
				srv := startSilentServer(t, v.version, tc.mode, trusted, serverCert)
				origin := "https://" + srv.addr
				clock := &fakeClock{now: time.Now()}
				cfg := activities.Config{AllowedOrigins: []string{origin}, Now: clock.Now,
					Admission: activities.Admission{Breaker: activities.Breaker{MinFailures: 5}}}
				if tc.cert != "" {
					cfg.Credentials = map[string]activities.Credential{origin: {CertFile: tc.cert, KeyFile: tc.key, CAFile: caFile}}
				} else {
					roots := x509.NewCertPool()
					roots.AddCert(ca.Leaf)
					cfg.HTTPClient = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
				}
				a, err := activities.New(cfg)
				require.NoError(t, err)
				runs := 1
				if tc.want.final {
					runs = 6 // more than the breaker's MinFailures
				}
				for i := range runs {
					r := req(origin + "/charges")
					r.IdempotencyKey = fmt.Sprintf("key-%d", i)
					if tc.body > 0 {
						r.Body = []byte(`{"amount":42,"pad":"` + strings.Repeat("x", tc.body) + `"}`)
					}
					var s testsuite.WorkflowTestSuite
					s.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
					env := s.NewTestActivityEnvironment()
					a.Register(env)
					_, err := env.ExecuteActivity(input.ActivityName, r)
					require.Error(t, err, "run %d", i)
					t.Logf("run %d: %v", i, err)
					appErr := appError(t, err)
					require.Equal(t, tc.want.errType, appErr.Type(), "run %d: %v", i, err)
					assert.Equal(t, tc.want.final, appErr.NonRetryable(), "run %d: final", i)
					var d workflows.Failure
					require.NoError(t, appErr.Details(&d))
					assert.Equal(t, tc.want.unknown, d.OutcomeUnknown, "run %d: outcome unknown", i)
					if tc.want.errType == workflows.ErrTypeCredentialUnavailable {
						assert.Contains(t, err.Error(), "Credential.CertFile")
						assert.NotContains(t, err.Error(), "BEGIN PRIVATE KEY")
					}
				}
				assert.Equal(t, tc.want.handled, srv.handled.Load(), "requests the server's handler answered")
			})
		}
	}
}
