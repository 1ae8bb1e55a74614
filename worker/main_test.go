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
	with := func(c activities.Convention, keyHeader string, quoted bool) activities.Convention {
		if keyHeader != "" {
			c.KeyHeader = keyHeader
		}
		c.KeyQuoted = quoted
		return c
	}
	lro := func(c activities.Convention, l activities.LongRunning) activities.Convention {
		c.LongRunning = l
		return c
	}
	tests := []struct {
		name    string
		list    string
		want    map[string]activities.Convention
		wantErr string
	}{
		{"empty", "", map[string]activities.Convention{}, ""},
		{"presets and a key header",
			"https://api.stripe.com=stripe, https://api-m.paypal.com=ietf:PayPal-Request-Id",
			map[string]activities.Convention{
				"https://api.stripe.com":   activities.Stripe(),
				"https://api-m.paypal.com": with(activities.IETF(), "PayPal-Request-Id", false),
			}, ""},
		{"quoted", "https://api.example.com=ietf+quoted",
			map[string]activities.Convention{"https://api.example.com": with(activities.IETF(), "", true)}, ""},
		{"quoted, any case, with spaces, and a key header", "https://api.example.com= IETF + Quoted :X-Request-Key",
			map[string]activities.Convention{"https://api.example.com": with(activities.IETF(), "X-Request-Key", true)}, ""},
		{"quoted stripe", "https://api.stripe.com=stripe+quoted",
			map[string]activities.Convention{"https://api.stripe.com": with(activities.Stripe(), "", true)}, ""},
		{"no preset", "https://x", nil, "ORIGIN=PRESET"},
		{"unknown preset", "https://x=paypal", nil, "ORIGIN=PRESET"},
		{"long-running presets", "https://a.example=ietf+azure, https://b.example=stripe+quoted+operation-location, https://c.example=ietf+google",
			map[string]activities.Convention{
				"https://a.example": lro(activities.IETF(), activities.AzureAsyncOperation()),
				"https://b.example": lro(with(activities.Stripe(), "", true), activities.OperationLocation()),
				"https://c.example": lro(activities.IETF(), activities.GoogleOperation("https://c.example/v1/")),
			}, ""},
		{"unknown suffix", "https://x=ietf+strict", nil, "ORIGIN=PRESET[+MODIFIER...]"},
		{"empty suffix", "https://x=ietf+", nil, "ORIGIN=PRESET[+MODIFIER...]"},
		{"empty suffix between", "https://x=ietf++quoted", nil, "ORIGIN=PRESET[+MODIFIER...]"},
		{"suffix twice", "https://x=ietf+quoted+quoted", nil, "ORIGIN=PRESET[+MODIFIER...]"},
		{"two long-running presets", "https://x=ietf+azure+google", nil, "ORIGIN=PRESET[+MODIFIER...]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseConventions(tt.list)
			if tt.wantErr != "" {
				assert.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}
