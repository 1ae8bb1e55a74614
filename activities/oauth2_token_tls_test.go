package activities_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// TestOAuth2TokenEndpointTLS: a bank requiring mutual TLS (its own CA,
// CAFile) whose token endpoint is another host, with a certificate of
// another CA and a client certificate of its own or none. By default the
// token request uses the origin's TLS settings, so such an endpoint
// fails, and the credential error says which settings applied;
// Credential.TokenTLS gives the token request its own: its CA, its client
// certificate or none. New refuses TokenTLS without OAuth2, and a
// certificate without its key.
func TestOAuth2TokenEndpointTLS(t *testing.T) {
	bankCA := testCert(t, "bank CA", nil, false)
	idpClientCA := testCert(t, "identity provider's client CA", nil, false)
	dir := t.TempDir()
	bankCAFile := filepath.Join(dir, "bank-ca.pem")
	require.NoError(t, os.WriteFile(bankCAFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: bankCA.Certificate[0]}), 0o600))
	bankCert, bankKey := certFiles(t, dir, "bank-client", testCert(t, "worker at the bank", &bankCA, true))
	idpCert, idpKey := certFiles(t, dir, "idp-client", testCert(t, "worker at the identity provider", &idpClientCA, true))

	const token = "tok-issued-by-the-idp-0123456789"
	bankPool := x509.NewCertPool()
	bankPool.AddCert(bankCA.Leaf)
	bank := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	bank.TLS = &tls.Config{Certificates: []tls.Certificate{serverFor(t, &bankCA)}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: bankPool}
	bank.StartTLS()
	t.Cleanup(bank.Close)

	// The token endpoint: httptest's own certificate, a client
	// certificate of its CA if one is presented (required on /mtls).
	idpPool := x509.NewCertPool()
	idpPool.AddCert(idpClientCA.Leaf)
	var mu sync.Mutex
	var peers []string
	idp := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		peer := ""
		if len(r.TLS.PeerCertificates) > 0 {
			peer = r.TLS.PeerCertificates[0].Subject.CommonName
		}
		mu.Lock()
		peers = append(peers, peer)
		mu.Unlock()
		if r.URL.Path == "/mtls/token" && peer == "" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"error":"invalid_client","error_description":"a client certificate is required"}`)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"access_token":%q,"token_type":"Bearer","expires_in":3600}`, token)
	}))
	idp.TLS = &tls.Config{ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: idpPool}
	idp.StartTLS()
	t.Cleanup(idp.Close)
	idpCAFile := filepath.Join(dir, "idp-ca.pem")
	require.NoError(t, os.WriteFile(idpCAFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: idp.Certificate().Raw}), 0o600))

	oauth := func(path string) *clientcredentials.Config {
		return &clientcredentials.Config{ClientID: "treasury", ClientSecret: "treasury-secret-0123456789", TokenURL: idp.URL + path}
	}
	for _, tc := range []struct {
		name     string
		path     string // of the token endpoint
		tokenTLS *activities.TLSFiles
		peer     string // the client certificate the token endpoint saw
		says     []string
	}{
		{"the origin's settings by default", "/token", nil, "",
			[]string{"the origin's TLS settings", "Credential.CertFile", "Credential.TokenTLS"}},
		{"its own CA, no client certificate", "/token", &activities.TLSFiles{CAFile: idpCAFile}, "", nil},
		{"its own CA and client certificate", "/mtls/token", &activities.TLSFiles{CAFile: idpCAFile, CertFile: idpCert, KeyFile: idpKey}, "worker at the identity provider", nil},
		{"its own CA, the client certificate it requires missing", "/mtls/token", &activities.TLSFiles{CAFile: idpCAFile}, "",
			[]string{"invalid_client"}},
		{"the system's CAs", "/token", &activities.TLSFiles{}, "",
			[]string{"Credential.TokenTLS", "the system's", "no client certificate"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			peers = nil
			mu.Unlock()
			a, err := activities.New(activities.Config{
				AllowedOrigins: []string{bank.URL},
				Credentials: map[string]activities.Credential{bank.URL: {
					CertFile: bankCert, KeyFile: bankKey, CAFile: bankCAFile,
					OAuth2: oauth(tc.path), TokenTLS: tc.tokenTLS,
				}},
			})
			require.NoError(t, err)
			resp, logs, err := runWith(t, a, req(bank.URL+"/charges"))
			assert.NotContains(t, logs, "treasury-secret")
			if tc.says == nil {
				require.NoError(t, err)
				assert.Equal(t, http.StatusCreated, resp.Status)
				mu.Lock()
				assert.Equal(t, []string{tc.peer}, peers, "the client certificates the token endpoint saw")
				mu.Unlock()
				return
			}
			require.Error(t, err)
			t.Logf("%v", err)
			assert.Equal(t, workflows.ErrTypeCredentialUnavailable, appError(t, err).Type())
			assert.True(t, appError(t, err).NonRetryable(), "final: the same settings fail again")
			for _, s := range tc.says {
				assert.Contains(t, err.Error(), s)
			}
			assert.NotContains(t, err.Error(), "treasury-secret")
		})
	}

	for _, tc := range []struct {
		name string
		c    activities.Credential
		says string
	}{
		{"TokenTLS without OAuth2", activities.Credential{CertFile: bankCert, KeyFile: bankKey, TokenTLS: &activities.TLSFiles{CAFile: idpCAFile}}, "TokenTLS"},
		{"a certificate without its key", activities.Credential{OAuth2: oauth("/token"), TokenTLS: &activities.TLSFiles{CertFile: idpCert}}, "Credential.TokenTLS.KeyFile"},
		{"a CA file that does not parse", activities.Credential{OAuth2: oauth("/token"), TokenTLS: &activities.TLSFiles{CAFile: bankCert + ".none"}}, "Credential.TokenTLS.CAFile"},
	} {
		t.Run("New refuses "+tc.name, func(t *testing.T) {
			_, err := activities.New(activities.Config{AllowedOrigins: []string{bank.URL}, Credentials: map[string]activities.Credential{bank.URL: tc.c}})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.says)
		})
	}
}
