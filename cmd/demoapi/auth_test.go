package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// TestParseFlagsAuth: each credential flag sets the testsuite.Options
// field requiring the scheme, with secrets from the environment.
func TestParseFlagsAuth(t *testing.T) {
	t.Setenv("OAUTH_CLIENT_SECRET", "oauth-secret-1")
	t.Setenv("OTHER_SECRET", "oauth-secret-2")
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "aws-secret-1")
	t.Setenv("AWS_SESSION_TOKEN", "session-1")
	files := writePKI(t)
	tests := []struct {
		name  string
		args  []string
		check func(config) bool
	}{
		{"none", nil, func(c config) bool {
			return c.opts.OAuthClients == nil && c.opts.SigV4Credentials == nil && c.opts.TLSCertificate == nil
		}},
		{"oauth", []string{"--require-oauth"}, func(c config) bool {
			return c.opts.OAuthClients["demoapi"] == "oauth-secret-1" && c.opts.OAuthTokenLifetime == time.Hour && has(c.secrets, "oauth-secret-1")
		}},
		{"oauth, other client", []string{"--require-oauth", "--oauth-client-id", "app", "--oauth-client-secret-env", "OTHER_SECRET", "--oauth-token-lifetime", "5s"}, func(c config) bool {
			return len(c.opts.OAuthClients) == 1 && c.opts.OAuthClients["app"] == "oauth-secret-2" && c.opts.OAuthTokenLifetime == 5*time.Second
		}},
		{"sigv4", []string{"--require-sigv4", "--sigv4-service", "lambda", "--sigv4-region", "eu-west-1"}, func(c config) bool {
			cr := c.opts.SigV4Credentials
			return cr != nil && cr.AccessKeyID == "AKIDEXAMPLE" && cr.SecretAccessKey == "aws-secret-1" && cr.SessionToken == "session-1" &&
				c.opts.SigV4Service == "lambda" && c.opts.SigV4Region == "eu-west-1" && has(c.secrets, "aws-secret-1") && has(c.secrets, "session-1")
		}},
		{"tls", []string{"--tls-cert", files["server.pem"], "--tls-key", files["server-key.pem"]}, func(c config) bool {
			return c.opts.TLSCertificate != nil && c.opts.ClientCAs == nil
		}},
		{"mtls", []string{"--tls-cert", files["server.pem"], "--tls-key", files["server-key.pem"], "--client-ca", files["ca.pem"]}, func(c config) bool {
			return c.opts.TLSCertificate != nil && c.opts.ClientCAs != nil
		}},
	}
	for _, tt := range tests {
		cfg, err := parseFlags(tt.args, "")
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if !tt.check(cfg) {
			t.Errorf("%s: options %+v", tt.name, cfg.opts)
		}
	}
}

func has(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestParseFlagsAuthErrors(t *testing.T) {
	t.Setenv("OAUTH_CLIENT_SECRET", "oauth-secret-1")
	t.Setenv("EMPTY", "")
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "aws-secret-1")
	files := writePKI(t)
	for _, tc := range []struct {
		args  []string
		token string
		want  string
	}{
		{[]string{"--oauth-token-lifetime", "5s"}, "", "--oauth-token-lifetime needs --require-oauth"},
		{[]string{"--sigv4-region", "eu-west-1"}, "", "--sigv4-region needs --require-sigv4"},
		{[]string{"--require-oauth", "--oauth-client-secret-env", "EMPTY"}, "", "EMPTY"},
		{[]string{"--require-oauth"}, "static", "one kind of Authorization"},
		{[]string{"--require-oauth", "--oauth-token-lifetime", "-1s"}, "", "OAuthTokenLifetime"},
		{[]string{"--require-sigv4"}, "", "AWS_ACCESS_KEY_ID"},
		{[]string{"--tls-cert", files["server.pem"]}, "", "--tls-cert needs --tls-key"},
		{[]string{"--client-ca", files["ca.pem"]}, "", "--client-ca needs --tls-cert"},
		{[]string{"--tls-cert", files["ca.pem"], "--tls-key", files["server-key.pem"]}, "", "--tls-cert"},
		{[]string{"--tls-cert", files["server.pem"], "--tls-key", files["server-key.pem"], "--client-ca", files["server-key.pem"]}, "", "no PEM certificate"},
		{[]string{"--tls-cert", files["server.pem"], "--tls-key", files["server-key.pem"], "--client-ca", filepath.Join(t.TempDir(), "none.pem")}, "", "--client-ca"},
	} {
		_, err := parseFlags(tc.args, tc.token)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one saying %q", tc.args, err, tc.want)
		}
		if err != nil && (strings.Contains(err.Error(), "oauth-secret-1") || strings.Contains(err.Error(), "aws-secret-1")) {
			t.Errorf("%q: the error shows a secret: %v", tc.args, err)
		}
	}
}

// TestAuthEndToEnd: the server a parsed command line makes, served as run
// serves it, requires what the flags ask: mutual TLS with a bearer token
// of its own token endpoint, or Signature V4.
func TestAuthEndToEnd(t *testing.T) {
	t.Setenv("OAUTH_CLIENT_SECRET", "oauth-secret-1")
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "aws-secret-1")
	t.Setenv("AWS_SESSION_TOKEN", "")
	files := writePKI(t)
	pool := x509.NewCertPool()
	caPEM, _ := os.ReadFile(files["ca.pem"])
	pool.AppendCertsFromPEM(caPEM)
	clientCert, err := tls.LoadX509KeyPair(files["client.pem"], files["client-key.pem"])
	if err != nil {
		t.Fatal(err)
	}
	mtls := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{clientCert}}}}
	noCert := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}

	base := start(t, "--tls-cert", files["server.pem"], "--tls-key", files["server-key.pem"], "--client-ca", files["ca.pem"], "--require-oauth", "--oauth-client-id", "app")
	oauth := clientcredentials.Config{ClientID: "app", ClientSecret: "oauth-secret-1", TokenURL: base + "/oauth/token"}
	withToken := oauth.Client(context.WithValue(context.Background(), oauth2.HTTPClient, mtls))
	if st := post(t, withToken, base, "k1", nil); st != http.StatusCreated {
		t.Errorf("mTLS and a token: %d", st)
	}
	if st := post(t, mtls, base, "k2", nil); st != http.StatusUnauthorized {
		t.Errorf("mTLS without a token: %d", st)
	}
	if _, err := noCert.Get(base + "/healthz"); err == nil {
		t.Error("no client certificate: the handshake succeeded")
	}

	sigv4 := start(t, "--require-sigv4", "--sigv4-region", "eu-west-1")
	sign := func(r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		sum := sha256.Sum256(body)
		creds := aws.Credentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "aws-secret-1"}
		if err := v4.NewSigner().SignHTTP(context.Background(), creds, r, hex.EncodeToString(sum[:]), "execute-api", "eu-west-1", time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	if st := post(t, http.DefaultClient, sigv4, "k1", sign); st != http.StatusCreated {
		t.Errorf("signed: %d", st)
	}
	if st := post(t, http.DefaultClient, sigv4, "k2", nil); st != http.StatusForbidden {
		t.Errorf("unsigned: %d", st)
	}
}

// start serves the server of args as run does and returns its URL.
func start(t *testing.T, args ...string) string {
	t.Helper()
	cfg, err := parseFlags(append([]string{"--addr", "127.0.0.1:0"}, args...), "")
	if err != nil {
		t.Fatal(err)
	}
	_, hs := newServer(cfg)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	if hs.TLSConfig != nil {
		url = "https://" + ln.Addr().String()
	}
	go func() { _ = serve(hs, ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	return url
}

// post posts a payment with key through c, signed by set if not nil, and
// returns the status.
func post(t *testing.T, c *http.Client, base, key string, set func(*http.Request)) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/payments", strings.NewReader(`{"amount":1}`))
	req.Header.Set("Idempotency-Key", key)
	if set != nil {
		set(req)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// writePKI writes a CA, a server certificate for 127.0.0.1 and a client
// certificate it signed, as PEM files, and returns their paths by name.
func writePKI(t *testing.T) map[string]string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{}
	write := func(name, typ string, der []byte) {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		files[name] = p
	}
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "CA"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	write("ca.pem", "CERTIFICATE", caDER)
	for i, name := range []string{"server", "client"} {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(int64(i + 2)), Subject: pkix.Name{CommonName: name}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}
		if name == "server" {
			tmpl.ExtKeyUsage, tmpl.IPAddresses = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, []net.IP{net.ParseIP("127.0.0.1")}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		keyDER, _ := x509.MarshalPKCS8PrivateKey(key)
		write(name+".pem", "CERTIFICATE", der)
		write(name+"-key.pem", "PRIVATE KEY", keyDER)
	}
	return files
}
