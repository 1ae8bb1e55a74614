package credential

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// TestOAuth2SecretsReaddedWhileInUse: the redactor drops a secret not
// added for RetainFor; the token (no expires_in, used for days) and the
// client secret (sent with every token request) are added with every
// Apply, so they stay redacted as long as they are in use.
func TestOAuth2SecretsReaddedWhileInUse(t *testing.T) {
	e := newTokenEndpoint(t, 0)
	s, _, clock := newTestOAuth2(t, e.URL)
	r := &secrets{}
	s.r = r
	h := ""
	for i := 0; i < 3; i++ {
		clock.advance(25 * time.Hour)
		req, _ := http.NewRequest(http.MethodPost, "https://api.example/pay", nil)
		if err := s.Apply(context.Background(), req, nil); err != nil {
			t.Fatal(err)
		}
		h = req.Header.Get("Authorization")
	}
	tok := strings.TrimPrefix(h, "Bearer ")
	for _, tc := range []struct{ what, secret string }{{"the token in use", tok}, {"the client secret", testClientSecret}} {
		if n := r.count(tc.secret); n < 3 {
			t.Errorf("%s was added %d times in 3 Applies over 75 h: it would no longer be redacted after %v", tc.what, n, RetainFor)
		}
	}
}

// TestOAuth2ShortTokenRefused: a token shorter than MinSecretBytes could
// not be redacted: it is refused, never sent.
func TestOAuth2ShortTokenRefused(t *testing.T) {
	e := newTokenEndpoint(t, 3600)
	e.set(func(e *tokenEndpoint) {
		e.answer = jsonAnswer(http.StatusOK, `{"access_token":"abc1234","token_type":"Bearer","expires_in":3600}`)
	})
	s, _, _ := newTestOAuth2(t, e.URL)
	req, _ := http.NewRequest(http.MethodPost, "https://api.example/pay", nil)
	err := s.Apply(context.Background(), req, nil)
	if err == nil {
		t.Fatalf("a 7-byte token was accepted and sent: Authorization %q", req.Header.Get("Authorization"))
	}
	if strings.Contains(err.Error(), "abc1234") {
		t.Errorf("the error quotes the token: %v", err)
	}
	if got := req.Header.Get("Authorization"); got != "" {
		t.Errorf("Authorization = %q, want none", got)
	}
}

// TestOAuth2EncodedClientSecretRedacted: the client credentials travel to
// the token endpoint encoded (Basic: base64 of the form-escaped id:secret;
// in the body: form-escaped); a token endpoint echoing either must not
// show the secret.
func TestOAuth2EncodedClientSecretRedacted(t *testing.T) {
	secret := "sk/live+abc=def&ghi jkl"
	r := &recRedactor{}
	cfg := &clientcredentials.Config{ClientID: "client id", ClientSecret: secret, TokenURL: "https://as.example/token", AuthStyle: oauth2.AuthStyleAutoDetect}
	if _, err := NewOAuth2(cfg, nil, r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		secret,
		base64.StdEncoding.EncodeToString([]byte(url.QueryEscape("client id") + ":" + url.QueryEscape(secret))),
		url.QueryEscape(secret),
	} {
		if !r.has(want) {
			t.Errorf("the redactor was not told %q", want)
		}
	}
}

// TestOAuth2TokenRedirectNotFollowed: a token endpoint answering 307 or
// 308 would have the HTTP client resend the token request, client secret
// in its body, to wherever Location says: it is not followed.
func TestOAuth2TokenRedirectNotFollowed(t *testing.T) {
	for _, status := range []int{http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			var elsewhere atomic.Int64
			other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				elsewhere.Add(1)
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprint(w, `{"access_token":"stolen-token-0123456789","token_type":"Bearer"}`)
			}))
			defer other.Close()
			e := newTokenEndpoint(t, 3600)
			e.set(func(e *tokenEndpoint) {
				e.answer = func(w http.ResponseWriter) bool {
					w.Header().Set("Location", other.URL+"/token")
					w.WriteHeader(status)
					return true
				}
			})
			r := &recRedactor{}
			cfg := &clientcredentials.Config{ClientID: testClientID, ClientSecret: testClientSecret, TokenURL: e.URL, AuthStyle: oauth2.AuthStyleInParams}
			src, err := NewOAuth2(cfg, &http.Client{}, r)
			if err != nil {
				t.Fatal(err)
			}
			req, _ := http.NewRequest(http.MethodPost, "https://api.example/pay", nil)
			err = src.Apply(context.Background(), req, nil)
			var ce *Error
			if !errors.As(err, &ce) {
				t.Errorf("Apply = %v, want an *Error", err)
			}
			if n := elsewhere.Load(); n != 0 {
				t.Errorf("the token request was sent to Location's server %d times", n)
			}
		})
	}
}

// TestOAuth2TokenEndpointRefusesCertificate: a token endpoint that refuses
// the client certificate in the TLS handshake (or wants one) refused the
// client: a final error, not one retried until the call's deadline.
func TestOAuth2TokenEndpointRefusesCertificate(t *testing.T) {
	ca, serverCA := newMTLSCA(t, "trusted"), newMTLSCA(t, "server")
	srv := startMTLSServer(t, ca, serverCA)
	roots := x509.NewCertPool()
	roots.AddCert(serverCA.cert)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	cfg := &clientcredentials.Config{ClientID: testClientID, ClientSecret: testClientSecret, TokenURL: srv.URL + "/token"}
	src, err := NewOAuth2(cfg, client, &recRedactor{})
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, "https://api.example/pay", nil)
	err = src.Apply(context.Background(), req, nil)
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("Apply = %v, want an *Error", err)
	}
	if ce.Retryable {
		t.Errorf("a refused client certificate is retryable: %v", err)
	}
	if !strings.Contains(err.Error(), "certificate") {
		t.Errorf("the error does not say the certificate was refused: %v", err)
	}
}
