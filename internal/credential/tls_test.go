package credential

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// mtlsCA is a certificate authority made for a test.
type mtlsCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newMTLSCA(t *testing.T, name string) *mtlsCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &mtlsCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns the PEM certificate and key of a leaf signed by ca.
func (ca *mtlsCA) issue(t *testing.T, serial int64, notBefore, notAfter time.Time, server bool) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "client"},
		NotBefore: notBefore, NotAfter: notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.Subject.CommonName = "server"
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})
}

func mtlsWrite(t *testing.T, name string, b []byte) {
	t.Helper()
	// Written beside, then renamed: the rotation a deployment does.
	tmp := name + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, name); err != nil {
		t.Fatal(err)
	}
}

// mtlsServer requires and verifies client certificates issued by ca, and
// records the serials it verified and the bodies its handler read.
type mtlsServer struct {
	*httptest.Server
	mu      sync.Mutex
	serials []int64
	bodies  int
}

func startMTLSServer(t *testing.T, ca, serverCA *mtlsCA) *mtlsServer {
	t.Helper()
	s := &mtlsServer{}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		if len(b) > 0 {
			s.bodies++
		}
		s.mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	}))
	certPEM, keyPEM := serverCA.issue(t, 99, time.Now().Add(-time.Hour), time.Now().Add(time.Hour), true)
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	s.TLS = &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
		VerifyPeerCertificate: func(_ [][]byte, chains [][]*x509.Certificate) error {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.serials = append(s.serials, chains[0][0].SerialNumber.Int64())
			return nil
		},
	}
	s.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes
	s.StartTLS()
	t.Cleanup(s.Close)
	return s
}

func (s *mtlsServer) seen() ([]int64, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int64(nil), s.serials...), s.bodies
}

// mtlsFiles writes a client certificate and key and the server's CA.
func mtlsFiles(t *testing.T, ca, serverCA *mtlsCA, serial int64, notAfter time.Time) (certFile, keyFile, caFile string, keyPEM []byte) {
	t.Helper()
	dir := t.TempDir()
	certFile, keyFile, caFile = filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key"), filepath.Join(dir, "ca.pem")
	certPEM, keyPEM := ca.issue(t, serial, time.Now().Add(-time.Hour), notAfter, false)
	mtlsWrite(t, certFile, certPEM)
	mtlsWrite(t, keyFile, keyPEM)
	mtlsWrite(t, caFile, serverCA.pem)
	return certFile, keyFile, caFile, keyPEM
}

func mtlsPost(src TLSSource, url string) error {
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: src.TLSConfig(), DisableKeepAlives: true}}
	resp, err := c.Post(url, "application/json", strings.NewReader(`{"amount":100,"card":"4242"}`))
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		return errors.New(resp.Status)
	}
	return nil
}

func TestTLSHandshake(t *testing.T) {
	trusted, other, serverCA := newMTLSCA(t, "trusted"), newMTLSCA(t, "other"), newMTLSCA(t, "server")
	for _, tc := range []struct {
		name   string
		issuer *mtlsCA
		expire bool // the certificate expires after New
		says   string
	}{
		{"good certificate", trusted, false, ""},
		{"wrong CA", other, false, "certificate"},
		{"expired since New", trusted, true, "Credential.CertFile"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := startMTLSServer(t, trusted, serverCA)
			certFile, keyFile, caFile, _ := mtlsFiles(t, tc.issuer, serverCA, 7, time.Now().Add(time.Hour))
			src, err := NewTLS(certFile, keyFile, caFile, &sigRedactor{})
			if err != nil {
				t.Fatal(err)
			}
			if tc.expire {
				src.(*tlsSource).now = func() time.Time { return time.Now().Add(2 * time.Hour) }
			}
			err = mtlsPost(src, srv.URL)
			serials, bodies := srv.seen()
			if tc.says == "" {
				if ce := TLSRefusal(errors.New("connection reset"), "Credential.CertFile"); ce != nil {
					t.Errorf("TLSRefusal of another error = %v, want nil", ce)
				}
				if err != nil || len(serials) != 1 || serials[0] != 7 || bodies != 1 {
					t.Fatalf("post = %v; server verified %v, read %d bodies; want serial 7 and 1 body", err, serials, bodies)
				}
				return
			}
			t.Logf("post: %v", err)
			if err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("post = %v, want an error saying %q", err, tc.says)
			}
			if tc.expire {
				var ce *Error
				if !errors.As(err, &ce) || ce.Scheme != "mtls" {
					t.Errorf("post = %v, want an mtls *Error", err)
				}
			} else if ce := TLSRefusal(err, "Credential.CertFile"); ce == nil || ce.Retryable || !strings.Contains(ce.Error(), "unknown certificate authority") || !strings.Contains(ce.Error(), "Credential.CertFile") {
				t.Errorf("TLSRefusal(%v) = %v, want a final mtls *Error naming the alert and Credential.CertFile", err, ce)
			}
			if len(serials) != 0 || bodies != 0 {
				t.Errorf("the server verified %v and read %d bodies, want none", serials, bodies)
			}
		})
	}
}

func TestTLSRotation(t *testing.T) {
	ca, serverCA := newMTLSCA(t, "trusted"), newMTLSCA(t, "server")
	srv := startMTLSServer(t, ca, serverCA)
	certFile, keyFile, caFile, key1 := mtlsFiles(t, ca, serverCA, 1, time.Now().Add(time.Hour))
	r := &sigRedactor{}
	src, err := NewTLS(certFile, keyFile, caFile, r)
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Now()
	src.(*tlsSource).now = func() time.Time { return clock }
	step := func(d time.Duration) { clock = clock.Add(d) }

	if err := mtlsPost(src, srv.URL); err != nil {
		t.Fatal(err)
	}
	cert2, key2 := ca.issue(t, 2, time.Now().Add(-time.Hour), time.Now().Add(time.Hour), false)
	mtlsWrite(t, certFile, cert2)
	if err := mtlsPost(src, srv.URL); err != nil { // within the second: not checked
		t.Fatal(err)
	}
	step(statEvery)
	// Only the certificate rotated so far: the pair does not match, the
	// old one is kept.
	if err := mtlsPost(src, srv.URL); err != nil {
		t.Fatal(err)
	}
	mtlsWrite(t, keyFile, key2)
	step(statEvery)
	if err := mtlsPost(src, srv.URL); err != nil {
		t.Fatal(err)
	}
	// Rotated to an unparsable file: the last good pair is kept.
	mtlsWrite(t, certFile, []byte("not a certificate"))
	step(statEvery)
	if err := mtlsPost(src, srv.URL); err != nil {
		t.Fatal(err)
	}
	serials, _ := srv.seen()
	if want := []int64{1, 1, 1, 2, 2}; !slices.Equal(serials, want) {
		t.Errorf("the server verified serials %v, want %v", serials, want)
	}
	for i, k := range [][]byte{key1, key2} {
		if !r.has(strings.TrimSpace(string(k))) || !r.has(mtlsPEMBody(t, k)) {
			t.Errorf("key %d: its PEM text was not given to the redactor", i+1)
		}
	}
	// The key in use is added again while it is used (a secret stays
	// redacted RetainFor after it was last added).
	before := r.count(mtlsPEMBody(t, key2))
	step(statEvery)
	if err := mtlsPost(src, srv.URL); err != nil {
		t.Fatal(err)
	}
	if after := r.count(mtlsPEMBody(t, key2)); after <= before {
		t.Errorf("the key in use was added %d times, then %d: not again while in use", before, after)
	}
}

func mtlsPEMBody(t *testing.T, b []byte) string {
	t.Helper()
	blk, _ := pem.Decode(b)
	if blk == nil {
		t.Fatal("no PEM block")
	}
	return base64.StdEncoding.EncodeToString(blk.Bytes)
}

func TestNewTLSRefuses(t *testing.T) {
	ca, serverCA := newMTLSCA(t, "trusted"), newMTLSCA(t, "server")
	certFile, keyFile, caFile, _ := mtlsFiles(t, ca, serverCA, 1, time.Now().Add(time.Hour))
	dir := t.TempDir()
	_, otherKey, _, _ := mtlsFiles(t, ca, serverCA, 2, time.Now().Add(time.Hour))
	expCert, expKey := ca.issue(t, 3, time.Now().Add(-2*time.Hour), time.Now().Add(-time.Hour), false)
	expCertFile, expKeyFile := filepath.Join(dir, "exp.crt"), filepath.Join(dir, "exp.key")
	mtlsWrite(t, expCertFile, expCert)
	mtlsWrite(t, expKeyFile, expKey)
	garbage := filepath.Join(dir, "garbage.pem")
	mtlsWrite(t, garbage, []byte("-----BEGIN NONSENSE-----\nAAAA\n-----END NONSENSE-----\n"))
	for _, tc := range []struct {
		name                string
		cert, key, ca, says string
	}{
		{"key of another certificate", certFile, otherKey, caFile, "Credential.KeyFile"},
		{"certificate does not parse", garbage, keyFile, caFile, "Credential.CertFile"},
		{"key does not parse", certFile, garbage, caFile, "Credential.KeyFile"},
		{"CA file does not parse", certFile, keyFile, garbage, "Credential.CAFile"},
		{"missing CA file", certFile, keyFile, filepath.Join(dir, "none.pem"), "Credential.CAFile"},
		{"missing key file", certFile, filepath.Join(dir, "none.key"), "", "Credential.KeyFile"},
		{"expired certificate", expCertFile, expKeyFile, "", "Credential.CertFile"},
		{"key without certificate", "", keyFile, "", "Credential.CertFile"},
		{"certificate without key", certFile, "", "", "Credential.KeyFile"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &sigRedactor{}
			_, err := NewTLS(tc.cert, tc.key, tc.ca, r)
			var ce *Error
			if !errors.As(err, &ce) || ce.Scheme != "mtls" || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("NewTLS = %v, want an mtls *Error naming %s", err, tc.says)
			}
			for _, a := range r.added {
				if m := len(a) / 2; len(a) >= 16 && strings.Contains(err.Error(), a[m:m+8]) {
					t.Errorf("the error holds a piece of the key: %v", err)
				}
			}
		})
	}
}
