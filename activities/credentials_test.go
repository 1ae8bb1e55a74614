package activities_test

import (
	"encoding/base64"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// TestConfiguredCredentialHeaderInAnyCase (class 4): a credential
// configured as "x-api-key" is sent once, as X-Api-Key, and a request that
// sets that header in any spelling is refused as InvalidRequest before
// anything is sent.
func TestConfiguredCredentialHeaderInAnyCase(t *testing.T) {
	const apiKey = "ak_live_7c1f9e2d4b"
	srv := newRecorder(t, status(201, `{}`))
	cfg := activities.Config{
		AllowedOrigins: []string{srv.URL},
		Credentials:    map[string]activities.Credential{srv.URL: {Header: http.Header{"x-api-key": {apiKey}, "x-tenant": {"tenant-000042"}}}},
	}
	t.Run("sent once, canonical", func(t *testing.T) {
		_, _, err := run(t, cfg, req(srv.URL))
		require.NoError(t, err)
		got, _ := srv.last()
		assert.Equal(t, []string{apiKey}, got.Header["X-Api-Key"])
		assert.Equal(t, []string{"tenant-000042"}, got.Header["X-Tenant"])
	})
	for _, name := range []string{"X-Api-Key", "x-api-key", "X-API-KEY", "X-Tenant", "x-TENANT"} {
		t.Run(name, func(t *testing.T) {
			before := srv.count()
			r := req(srv.URL)
			r.Headers = map[string]string{name: "from-the-workflow"}
			_, _, err := run(t, cfg, r)
			appErr := appError(t, err)
			assert.Equal(t, workflows.ErrTypeInvalidRequest, appErr.Type())
			assert.True(t, appErr.NonRetryable())
			assert.Equal(t, before, srv.count(), "nothing sent")
		})
	}
}

// TestNewRefusesShortCredentials (class 6): a credential shorter than 8
// bytes (after its auth scheme) cannot be redacted without rewriting
// unrelated text, so New refuses it; 8 bytes are enough.
func TestNewRefusesShortCredentials(t *testing.T) {
	const origin = "https://api.example.com"
	basic := func(user, pass string) string {
		return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
	}
	tests := []struct {
		name, header, value string
		ok                  bool
	}{
		{"bearer of 3", "Authorization", "Bearer abc", false},
		{"bearer of 7", "Authorization", "Bearer abcdefg", false},
		{"bearer of 8", "Authorization", "Bearer abcdefgh", true},
		{"scheme only", "Authorization", "Bearer", false},
		{"api key of 7", "X-Api-Key", "1234567", false},
		{"api key of 8", "X-Api-Key", "12345678", true},
		{"api key of spaces", "X-Api-Key", "        ", false},
		{"basic of a short pair", "Authorization", basic("u", "p"), false},
		{"basic", "Authorization", basic("merchant", "s3cr3t-pass"), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := activities.New(activities.Config{
				AllowedOrigins: []string{origin},
				Credentials:    map[string]activities.Credential{origin: {Header: http.Header{tt.header: {tt.value}}}},
			})
			if tt.ok {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), "shorter than 8 bytes")
		})
	}
}

// TestNewRefusesWhatItCannotRedact (hardening 3, item 7): a Basic
// password under 8 bytes would never be redacted: New refuses it, naming
// the part; a Basic credential with an empty password (Stripe's form: the
// secret key is the user name) has its user name redacted.
func TestNewRefusesWhatItCannotRedact(t *testing.T) {
	const origin = "https://api.example.com"
	basic := func(user, pass string) string {
		return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
	}
	tests := []struct {
		name, value, want string
	}{
		{"short password", basic("acct_1234567890", "hunt3r"), "password"},
		{"password of 7", basic("acct_1234567890", "1234567"), "password"},
		{"short user without a password", basic("sk_test", ""), "user name"},
		{"short password, unpadded", strings.TrimRight(basic("acct_1234567890", "hunt3r"), "="), "password"},
		{"short user without a password, unpadded", strings.TrimRight(basic("sk_test", ""), "="), "user name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := activities.New(activities.Config{
				AllowedOrigins: []string{origin},
				Credentials:    map[string]activities.Credential{origin: {Header: http.Header{"Authorization": {tt.value}}}},
			})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			assert.Contains(t, err.Error(), "Basic")
		})
	}
	t.Run("Stripe-style key as the user name is redacted", func(t *testing.T) {
		const key = "sk_test_51H8abcdefGHIJ"
		srv := newRecorder(t, status(401, `{"error":"invalid api key `+key+`"}`))
		cfg := activities.Config{
			AllowedOrigins: []string{srv.URL},
			Credentials:    map[string]activities.Credential{srv.URL: {Header: http.Header{"Authorization": {basic(key, "")}}}},
		}
		_, logs, err := run(t, cfg, req(srv.URL))
		appError(t, err)
		assertNoPiece(t, err, nil, logs, key)
	})
	t.Run("password of 8 is redacted", func(t *testing.T) {
		const pass = "hunt3r-pw"
		srv := newRecorder(t, status(401, `{"error":"wrong password `+pass+`"}`))
		cfg := activities.Config{
			AllowedOrigins: []string{srv.URL},
			Credentials:    map[string]activities.Credential{srv.URL: {Header: http.Header{"Authorization": {basic("acct_1234567890", pass)}}}},
		}
		_, logs, err := run(t, cfg, req(srv.URL))
		appError(t, err)
		assertNoPiece(t, err, nil, logs, pass)
	})
}
