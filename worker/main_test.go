package main

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemhttp/temporal-idempotent-http/activities"
)

func TestActivityConfig(t *testing.T) {
	tests := []struct {
		name      string
		origins   []string
		token     string
		wantCreds map[string]http.Header
	}{
		{"no token", []string{"http://127.0.0.1:8081"}, "", nil},
		{"token for each origin", []string{"http://127.0.0.1:8081", "https://pay.example.com"}, "tok_live_0123456789", map[string]http.Header{
			"http://127.0.0.1:8081":   {"Authorization": {"Bearer tok_live_0123456789"}},
			"https://pay.example.com": {"Authorization": {"Bearer tok_live_0123456789"}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := activityConfig(tt.origins, tt.token)
			assert.Equal(t, tt.origins, cfg.AllowedOrigins)
			assert.Equal(t, tt.wantCreds, cfg.Credentials)
			_, err := activities.New(cfg)
			require.NoError(t, err, "the worker's config must be valid")
		})
	}
}

func TestParseConventions(t *testing.T) {
	got, err := parseConventions("https://api.stripe.com=stripe, https://api-m.paypal.com=ietf:PayPal-Request-Id")
	require.NoError(t, err)
	assert.Equal(t, activities.Stripe(), got["https://api.stripe.com"])
	assert.Equal(t, "PayPal-Request-Id", got["https://api-m.paypal.com"].KeyHeader)
	for _, bad := range []string{"https://x", "https://x=paypal"} {
		_, err := parseConventions(bad)
		assert.ErrorContains(t, err, "ORIGIN=PRESET", bad)
	}
	_, err = parseConventions("")
	require.NoError(t, err)
}
