package activities_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/idemhttp/temporal-idempotent-http/activities"
)

// TestNewReadsClientSecretFile: New reads Credential.ClientSecretFile
// (its secret redacted from then on) and refuses it without OAuth2,
// beside OAuth2.ClientSecret, missing, or holding a secret too short to
// redact, naming the field.
func TestNewReadsClientSecretFile(t *testing.T) {
	const origin = "https://api.example.com"
	dir := t.TempDir()
	good, short := filepath.Join(dir, "secret"), filepath.Join(dir, "short")
	require.NoError(t, os.WriteFile(good, []byte("cs_from_file_0123456789\n"), 0o600))
	require.NoError(t, os.WriteFile(short, []byte("abc"), 0o600))
	oauth := func(secret string) *clientcredentials.Config {
		return &clientcredentials.Config{TokenURL: origin + "/token", ClientID: "worker", ClientSecret: secret}
	}
	for _, tc := range []struct {
		name string
		c    activities.Credential
		says string // "" for none
	}{
		{"the file", activities.Credential{OAuth2: oauth(""), ClientSecretFile: good}, ""},
		{"without OAuth2", activities.Credential{ClientSecretFile: good}, "ClientSecretFile is set without OAuth2"},
		{"beside ClientSecret", activities.Credential{OAuth2: oauth("cs_inline_0123456789"), ClientSecretFile: good}, "both set"},
		{"missing", activities.Credential{OAuth2: oauth(""), ClientSecretFile: filepath.Join(dir, "none")}, "Credential.ClientSecretFile"},
		{"too short", activities.Credential{OAuth2: oauth(""), ClientSecretFile: short}, "shorter than 8 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := activities.New(activities.Config{AllowedOrigins: []string{origin}, Credentials: map[string]activities.Credential{origin: tc.c}})
			if tc.says != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.says)
				assert.NotContains(t, err.Error(), "cs_from_file")
				return
			}
			require.NoError(t, err)
			_, redact := activities.Redactor(a)
			assert.NotContains(t, redact("echo: cs_from_file_0123456789"), "cs_from_file_0123456789", "the file's secret is redacted")
		})
	}
}
