package activities_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/internal/credential"
	"github.com/idemhttp/temporal-idempotent-http/testsuite"
)

// TestOAuth2OverMTLS: a bank that requires mutual TLS requires it of its
// token endpoint too (RFC 8705, FAPI): the token request of an origin with
// both OAuth2 and CertFile goes through the origin's own transport,
// presenting its client certificate.
func TestOAuth2OverMTLS(t *testing.T) {
	ca := testCert(t, "test client CA", nil, false)
	clientCert := testCert(t, "worker", &ca, true)
	pool := x509.NewCertPool()
	pool.AddCert(ca.Leaf)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "bank"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	leaf, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	serverCert := tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
	roots := x509.NewCertPool()
	roots.AddCert(leaf)

	const secret = "bank-client-secret-0123456789"
	srv := testsuite.StartServer(t, testsuite.Options{TLSCertificate: &serverCert, ClientCAs: pool, OAuthClients: map[string]string{"app": secret}})
	t.Cleanup(activities.SetNewTLS(func() credential.TLSSource {
		return fakeTLS{&tls.Config{RootCAs: roots, Certificates: []tls.Certificate{clientCert}}}
	}))
	cfg := activities.Config{
		HTTPClient:     &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}},
		AllowedOrigins: []string{srv.URL},
		Credentials: map[string]activities.Credential{srv.URL: {
			CertFile: "client.pem", KeyFile: "client-key.pem",
			OAuth2: &clientcredentials.Config{ClientID: "app", ClientSecret: secret, TokenURL: srv.URL + "/oauth/token"},
		}},
	}
	a, err := activities.New(cfg)
	require.NoError(t, err)
	resp, _, err := runWith(t, a, req(srv.URL+"/charges"))
	require.NoError(t, err)
	assert.Less(t, resp.Status, 300)
}
