package credential

import (
	"context"
	"crypto/tls"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"golang.org/x/oauth2/clientcredentials"
)

// TestNamesInErrors: a credential given Names (read from a file) names its
// settings as the file writes them in its errors, at New and at run time
// (a token endpoint that refuses the client, a certificate that expired
// after its rotated files could not be used), and never by the Go fields.
func TestNamesInErrors(t *testing.T) {
	n := Names{Credential: "origins.toml: origin x", Fields: map[string]string{
		"OAuth2.TokenURL":            "oauth2.token_url at origins.toml:2:1",
		"OAuth2.ClientID":            "oauth2.client_id at origins.toml:3:1",
		"OAuth2.ClientSecret":        "oauth2.client_secret_env at origins.toml:4:1",
		"CertFile":                   "tls.cert_file at origins.toml:7:1",
		"KeyFile":                    "tls.key_file at origins.toml:8:1",
		"CAFile":                     "tls.ca_file at origins.toml:9:1",
		"Header[X-Api-Key]":          "headers.X-Api-Key at origins.toml:11:1",
		"HeaderFiles[Authorization]": "headers.Authorization at origins.toml:12:1",
		"SigV4.Region":               "aws_sigv4.region (not set; [origin.x.aws_sigv4] is at origins.toml:14:9)",
	}}
	ca, serverCA := newMTLSCA(t, "trusted"), newMTLSCA(t, "server")
	certFile, keyFile, caFile, _ := mtlsFiles(t, ca, serverCA, 7, time.Now().Add(time.Hour))
	e := newTokenEndpoint(t, 60)
	e.set(func(e *tokenEndpoint) { e.answer = jsonAnswer(401, `{"error":"invalid_client"}`) })

	for _, tc := range []struct {
		name string
		err  func() error
		says []string
	}{
		{"a header too short", func() error {
			_, err := NewStatic(http.Header{"X-Api-Key": {"abc"}}, &secrets{}, n)
			return err
		}, []string{"headers.X-Api-Key at origins.toml:11:1: the X-Api-Key value is 3 bytes long"}},
		{"a header file that does not exist", func() error {
			_, err := NewHeaderFiles(map[string]string{"Authorization": filepath.Join(t.TempDir(), "none")}, &secrets{}, nil, n)
			return err
		}, []string{"headers.Authorization at origins.toml:12:1: open "}},
		{"a region not set", func() error {
			_, err := NewSigV4("execute-api", "", credentials.NewStaticCredentialsProvider("AKID", "secret-0123456789", ""), &sigRedactor{}, n)
			return err
		}, []string{"aws_sigv4.region (not set; [origin.x.aws_sigv4] is at origins.toml:14:9) is empty"}},
		{"a token endpoint that refuses the client", func() error {
			cfg := &clientcredentials.Config{ClientID: testClientID, ClientSecret: testClientSecret, TokenURL: e.URL}
			src, err := NewOAuth2With(cfg, nil, &recRedactor{}, OAuth2Options{Names: n})
			if err != nil {
				return err
			}
			req, _ := http.NewRequest(http.MethodPost, "https://api.example/pay", nil)
			return src.Apply(context.Background(), req, nil)
		}, []string{"check oauth2.client_id at origins.toml:3:1 and oauth2.client_secret_env at origins.toml:4:1"}},
		{"a certificate expired after its rotated files could not be used", func() error {
			src, err := NewTLSFor(n, "", certFile, keyFile, caFile, &sigRedactor{})
			if err != nil {
				return err
			}
			src.(*tlsSource).now = func() time.Time { return time.Now().Add(2 * time.Hour) }
			if err := os.WriteFile(certFile, []byte("half a certificate"), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err = src.TLSConfig().GetClientCertificate(&tls.CertificateRequestInfo{})
			return err
		}, []string{"the client certificate in tls.cert_file at origins.toml:7:1 ", "write a renewed certificate and key to tls.cert_file at origins.toml:7:1 and tls.key_file at origins.toml:8:1", "the files changed since but could not be used: mtls credential: tls.cert_file at origins.toml:7:1 " + certFile + " does not start with a PEM certificate"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.err()
			if err == nil {
				t.Fatal("no error")
			}
			for _, s := range tc.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("%v\ndoes not say %q", err, s)
				}
			}
			if strings.Contains(err.Error(), "Credential.") {
				t.Errorf("%v names a Go field", err)
			}
		})
	}
}
