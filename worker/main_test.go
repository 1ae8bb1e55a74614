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
		{"token for each origin", []string{"http://127.0.0.1:8081", "https://pay.example.com"}, "t0k", map[string]http.Header{
			"http://127.0.0.1:8081":   {"Authorization": {"Bearer t0k"}},
			"https://pay.example.com": {"Authorization": {"Bearer t0k"}},
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
