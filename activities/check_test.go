package activities_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/idemhttp/temporal-idempotent-http/activities"
)

// TestCheckCredentials: Check asks every origin's credential as a worker
// starts, sending nothing to the API: a token endpoint that refuses the
// client and a client certificate the origin refuses are returned, naming
// the origin; a token endpoint or an origin that is down is only passed to
// unreachable; good credentials pass. No secret is in any error.
func TestCheckCredentials(t *testing.T) {
	const secret = "cs_3f1e9d8c7b6a5f4e3d2c1b0a"
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		_, pass, _ := r.BasicAuth()
		w.Header().Set("Content-Type", "application/json")
		if pass != secret && r.PostForm.Get("client_secret") != secret {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = fmt.Fprintf(w, `{"error":"invalid_client","error_description":"bad secret %s"}`, pass+r.PostForm.Get("client_secret"))
			return
		}
		_, _ = w.Write([]byte(`{"access_token":"at_Vq8Rz2Lm5Np7Kx4Jw","token_type":"Bearer","expires_in":3600}`))
	}))
	t.Cleanup(tokens.Close)
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()

	ca := testCert(t, "client CA", nil, false)
	pool := x509.NewCertPool()
	pool.AddCert(ca.Leaf)
	dir := t.TempDir()
	goodCert, goodKey := certFiles(t, dir, "good", testCert(t, "worker", &ca, true))
	otherCA := testCert(t, "another CA", nil, false)
	badCert, badKey := certFiles(t, dir, "bad", testCert(t, "worker", &otherCA, true))
	var handled int
	bank := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { handled++ }))
	bank.TLS = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool}
	bank.StartTLS()
	t.Cleanup(bank.Close)
	caFile := filepath.Join(dir, "bank-ca.pem")
	require.NoError(t, os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: bank.Certificate().Raw}), 0o600))

	oauth := func(s, url string) activities.Credential {
		return activities.Credential{OAuth2: &clientcredentials.Config{ClientID: "c1", ClientSecret: s, TokenURL: url}}
	}
	tests := []struct {
		name            string
		origin          string
		cred            activities.Credential
		refused, unreac bool
		want            string
	}{
		{"a good client secret", "https://api.example.com", oauth(secret, tokens.URL), false, false, ""},
		{"a wrong client secret", "https://api.example.com", oauth("cs_wrong_0000000000000000", tokens.URL), true, false, "invalid_client"},
		{"a token endpoint that is down", "https://api.example.com", oauth(secret, down.URL), false, true, "token endpoint"},
		{"a certificate the bank takes", bank.URL, activities.Credential{CertFile: goodCert, KeyFile: goodKey, CAFile: caFile}, false, false, ""},
		{"a certificate the bank refuses", bank.URL, activities.Credential{CertFile: badCert, KeyFile: badKey, CAFile: caFile}, true, false, "Credential.CertFile"},
		{"a bank that is down", down.URL, activities.Credential{CertFile: goodCert, KeyFile: goodKey, CAFile: caFile}, false, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := activities.New(activities.Config{AllowedOrigins: []string{tt.origin}, Credentials: map[string]activities.Credential{tt.origin: tt.cred}})
			require.NoError(t, err)
			var warned []error
			err = a.Check(context.Background(), func(err error) { warned = append(warned, err) })
			if tt.refused {
				require.Error(t, err)
				assert.Contains(t, err.Error(), "origin "+tt.origin)
				assert.Contains(t, err.Error(), tt.want)
				assert.Empty(t, pieces(err.Error(), secret, "cs_wrong_0000000000000000"))
			} else {
				require.NoError(t, err)
			}
			if tt.unreac {
				require.Len(t, warned, 1)
				assert.Contains(t, warned[0].Error(), "origin "+tt.origin)
			} else {
				assert.Empty(t, warned)
			}
		})
	}
	assert.Zero(t, handled, "no request reached the bank")
}
