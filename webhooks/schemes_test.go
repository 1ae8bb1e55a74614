package webhooks_test

import (
	"encoding/base64"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemhttp/temporal-idempotent-http/internal/named"
	"github.com/idemhttp/temporal-idempotent-http/internal/signature"
	"github.com/idemhttp/temporal-idempotent-http/webhooks"
)

// TestEverySchemeVerifiesItsSender: each scheme of internal/signature's
// Schemes (the worker's --webhook-scheme and testsuite.Webhooks.Scheme) has
// a verifier registered under its name, which takes what the reference
// server's sender signs with the scheme and rejects a forged copy.
func TestEverySchemeVerifiesItsSender(t *testing.T) {
	secret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	body := []byte(`{"id":"evt_1","type":"operation.succeeded"}`)
	now := time.Unix(1_700_000_000, 0)
	require.Equal(t, []string{"standard-webhooks", "stripe", "hmac"}, signature.Names()[:3])
	for _, sc := range signature.Schemes {
		t.Run(sc.Name, func(t *testing.T) {
			newVerifier, ok := named.Lookup[func(...string) (webhooks.Verifier, error)](sc.Name)
			require.True(t, ok, "package webhooks registers no verifier for %s", sc.Name)
			v, err := newVerifier(secret)
			require.NoError(t, err)
			assert.Equal(t, sc.Name, v.Scheme())
			key, err := sc.Key(secret)
			require.NoError(t, err)

			h := http.Header{}
			sc.Sign(h, key, "evt_1", now.Unix(), body)
			ev, err := v.Verify(h, body, now)
			require.NoError(t, err)
			assert.Equal(t, "evt_1", ev.ID)
			assert.Equal(t, "operation.succeeded", ev.Type)

			forged := http.Header{}
			sc.Sign(forged, append([]byte("forged:"), key...), "evt_1", now.Unix(), body)
			_, err = v.Verify(forged, body, now)
			assert.ErrorIs(t, err, webhooks.ErrSignature)
		})
	}
}
