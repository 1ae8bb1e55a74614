package interop_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/harness/interop"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// The mutual-TLS rows: the activity with a client certificate
// (Credential.CertFile, KeyFile, CAFile) against Node's own https server
// with requestCert and rejectUnauthorized (interop/node/mtls-server.js),
// which refuses a certificate it does not trust by closing the connection
// without a TLS alert: during the handshake with TLS 1.2, right after it
// with TLS 1.3. The ready workflow runs in Temporal's test environment,
// with its retries.

var mtlsResults struct {
	mu   sync.Mutex
	rows []string
}

func mtlsMarkdown() string {
	mtlsResults.mu.Lock()
	defer mtlsResults.mu.Unlock()
	if len(mtlsResults.rows) == 0 {
		return ""
	}
	node, _ := exec.Command("node", "--version").Output()
	var b strings.Builder
	fmt.Fprintf(&b, "\n## Mutual TLS\n\nThe activity with a client certificate (Credential.CertFile, KeyFile, CAFile) against Node %s's https server with requestCert and rejectUnauthorized (interop/mtls_test.go, interop/node/mtls-server.js), which closes the connection of a certificate it does not trust without a TLS alert. The ready workflow, in Temporal's test environment, with its retries; connections counted by the server (a refusal is checked once on a connection that sends no request).\n\n", strings.TrimSpace(string(node)))
	b.WriteString("| TLS | client certificate | outcome | connections | requests handled | |\n|---|---|---|---|---|---|\n")
	b.WriteString(strings.Join(mtlsResults.rows, "\n") + "\n")
	return b.String()
}

// mtlsPKI writes a CA, a server certificate for 127.0.0.1 it signed, a
// client certificate it signed and one signed by another CA, as PEM files
// in a temporary directory.
type mtlsPKI struct {
	caFile, serverCert, serverKey string
	goodCert, goodKey             string
	strangerCert, strangerKey     string
}

func newMTLSPKI(t *testing.T) mtlsPKI {
	t.Helper()
	dir := t.TempDir()
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	type issued struct {
		cert *x509.Certificate
		key  *ecdsa.PrivateKey
	}
	issue := func(cn string, parent *issued, tmpl *x509.Certificate) issued {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl.SerialNumber = big.NewInt(time.Now().UnixNano())
		tmpl.Subject = pkix.Name{CommonName: cn}
		tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
		p, signer := tmpl, key
		if parent != nil {
			p, signer = parent.cert, parent.key
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, p, &key.PublicKey, signer)
		if err != nil {
			t.Fatal(err)
		}
		c, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		return issued{c, key}
	}
	files := func(name string, c issued) (string, string) {
		der, err := x509.MarshalPKCS8PrivateKey(c.key)
		if err != nil {
			t.Fatal(err)
		}
		return write(name+".crt", "CERTIFICATE", c.cert.Raw), write(name+".key", "PRIVATE KEY", der)
	}
	caTmpl := func() *x509.Certificate {
		return &x509.Certificate{IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	}
	clientTmpl := func() *x509.Certificate {
		return &x509.Certificate{KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	}
	ca, other := issue("bank CA", nil, caTmpl()), issue("another CA", nil, caTmpl())
	var p mtlsPKI
	p.caFile = write("ca.pem", "CERTIFICATE", ca.cert.Raw)
	p.serverCert, p.serverKey = files("server", issue("bank", &ca, &x509.Certificate{
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}))
	p.goodCert, p.goodKey = files("good", issue("worker", &ca, clientTmpl()))
	p.strangerCert, p.strangerKey = files("stranger", issue("worker", &other, clientTmpl()))
	return p
}

// nodeMTLSStats is mtls-server.js's GET /__stats.
type nodeMTLSStats struct {
	Connections  int      `json:"connections"`
	Secure       int      `json:"secure"`
	Handled      int      `json:"handled"`
	ClientErrors []string `json:"clientErrors"`
}

var httpsAddr = regexp.MustCompile(`https on (https://127\.0\.0\.1:\d+)`)

// TestMutualTLSNodeRefusal: Node's https server refusing the client
// certificate without an alert ends the workflow after the first attempt
// with a final CredentialUnavailable of known outcome that names
// Credential.CertFile, in TLS 1.2 and 1.3, its handler reading nothing;
// the certificate it trusts gets the 201; an origin without a client
// certificate stays a NetworkError (retried).
func TestMutualTLSNodeRefusal(t *testing.T) {
	t.Parallel()
	pki := newMTLSPKI(t)
	for _, version := range []string{"TLSv1.2", "TLSv1.3"} {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			srv := interop.Start(t, "mtls-server", interop.Options{Env: []string{
				"SERVER_CERT=" + pki.serverCert, "SERVER_KEY=" + pki.serverKey, "CLIENT_CA=" + pki.caFile, "TLS_VERSION=" + version,
			}})
			m := httpsAddr.FindStringSubmatch(srv.Proc.Output())
			if m == nil {
				t.Fatalf("mtls-server wrote no https address:\n%s", srv.Proc.Tail(4<<10))
			}
			origin := m[1]
			stats := func() nodeMTLSStats {
				t.Helper()
				resp, err := http.Get(srv.URL + "/__stats")
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				var s nodeMTLSStats
				if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
					t.Fatal(err)
				}
				return s
			}
			for _, c := range []struct {
				name      string
				cert, key string
				errType   string // "" for the 201
				final     bool
				// most is the connections the server may see: one attempt
				// and the check of its refusal.
				most int
			}{
				{"trusted", pki.goodCert, pki.goodKey, "", false, 1},
				{"of another CA", pki.strangerCert, pki.strangerKey, workflows.ErrTypeCredentialUnavailable, true, 2},
				{"none configured", "", "", workflows.ErrTypeNetworkError, false, 2},
			} {
				before := stats()
				cfg := activities.Config{AllowedOrigins: []string{origin}}
				if c.cert != "" {
					cfg.Credentials = map[string]activities.Credential{origin: {CertFile: c.cert, KeyFile: c.key, CAFile: pki.caFile}}
				} else {
					cfg.HTTPClient = trustingClient(t, pki.caFile)
				}
				exec := testEnv{}.prepare(t, cfg)
				r := exec(t, uniqueName(t, "wf"), workflows.Request{
					Operation: "charge", URL: origin + "/payments", Body: json.RawMessage(`{"amount":4200}`),
					StartToCloseTimeout: 10 * time.Second, ScheduleToCloseTimeout: time.Minute,
					Retry: workflows.RetryOptions{MaximumAttempts: 2},
				})
				after := stats()
				conns, handled := after.Connections-before.Connections, after.Handled-before.Handled
				outcome := describeMTLS(r)
				t.Logf("%s: %s; %d connections, %d handled; server TLS errors %v", c.name, outcome, conns, handled, after.ClientErrors[len(before.ClientErrors):])
				ok := true
				fail := func(format string, args ...any) {
					ok = false
					t.Errorf(c.name+": "+format, args...)
				}
				var app *temporal.ApplicationError
				switch {
				case c.errType == "":
					if r.err != nil || r.resp == nil || r.resp.Status != http.StatusCreated || handled != 1 {
						fail("%v, %d handled; want the 201, handled once", r.err, handled)
					}
				case !errors.As(r.err, &app) || app.Type() != c.errType:
					fail("%v, want %s", r.err, c.errType)
				default:
					if handled != 0 {
						fail("the handler read %d requests, want none", handled)
					}
					if !c.final {
						break
					}
					var d workflows.Failure
					if err := app.Details(&d); err != nil || d.OutcomeUnknown || !app.NonRetryable() || d.Attempt != 1 {
						fail("%v (details %+v, %v), want final at attempt 1, outcome known", r.err, d, err)
					}
					if !strings.Contains(r.err.Error(), "Credential.CertFile") {
						fail("%v, want it to name Credential.CertFile", r.err)
					}
					if conns > c.most {
						fail("%d connections, want at most %d (one attempt, one check)", conns, c.most)
					}
				}
				mark := "✓"
				if !ok {
					mark = "✗"
				}
				mtlsResults.mu.Lock()
				mtlsResults.rows = append(mtlsResults.rows, fmt.Sprintf("| %s | %s | %s | %d | %d | %s |", version, c.name, outcome, conns, handled, mark))
				mtlsResults.mu.Unlock()
			}
		})
	}
}

// trustingClient is an HTTP client that trusts the CA of caFile.
func trustingClient(t *testing.T, caFile string) *http.Client {
	t.Helper()
	b, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(b)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig.RootCAs = pool
	return &http.Client{Transport: tr}
}

// describeMTLS is a workflow's end in a few words.
func describeMTLS(r result) string {
	if r.err != nil {
		var app *temporal.ApplicationError
		if errors.As(r.err, &app) {
			var d workflows.Failure
			_ = app.Details(&d)
			return fmt.Sprintf("%s (final %v, attempt %d, outcome unknown %v)", app.Type(), app.NonRetryable(), d.Attempt, d.OutcomeUnknown)
		}
		return r.err.Error()
	}
	return fmt.Sprint(r.resp.Status)
}
