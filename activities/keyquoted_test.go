package activities_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/internal/idemkey"
	"github.com/idemhttp/temporal-idempotent-http/testsuite"
)

// TestKeyQuoted: the key header carries the bare key by default and, with
// Convention.KeyQuoted, the key as an RFC 8941 sf-string (\ and " escaped);
// the Response names the key itself either way.
func TestKeyQuoted(t *testing.T) {
	quoted := func(c activities.Convention, keyHeader string) activities.Convention {
		c.KeyQuoted = true
		if keyHeader != "" {
			c.KeyHeader = keyHeader
		}
		return c
	}
	const uuid = "8e03978e-40d5-43e8-bc93-6894a57f9324"
	tests := []struct {
		name       string
		conv       *activities.Convention // nil: none for the origin
		key        string
		wantHeader string // the header the key travels in
		want       string // its value
	}{
		{"no convention: bare", nil, uuid, "Idempotency-Key", uuid},
		{"IETF: bare by default", new(activities.IETFConvention()), uuid, "Idempotency-Key", uuid},
		{"Stripe: bare", new(activities.StripeConvention()), `a"b\c`, "Idempotency-Key", `a"b\c`},
		{"zero Convention: bare", &activities.Convention{}, "key-1", "Idempotency-Key", "key-1"},
		{"KeyQuoted: the draft's example", new(quoted(activities.IETFConvention(), "")), uuid, "Idempotency-Key", `"` + uuid + `"`},
		{"KeyQuoted: quote and backslash escaped", new(quoted(activities.IETFConvention(), "")), `a"b\c"`, "Idempotency-Key", `"a\"b\\c\""`},
		{"KeyQuoted: other key header", new(quoted(activities.IETFConvention(), "PayPal-Request-Id")), "key-1", "PayPal-Request-Id", `"key-1"`},
		{"KeyQuoted on a zero Convention", &activities.Convention{KeyQuoted: true}, "key-1", "Idempotency-Key", `"key-1"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newRecorder(t, status(201, `{"id":"rec_1"}`))
			cfg := activities.Config{AllowedOrigins: []string{srv.URL}}
			if tt.conv != nil {
				cfg.Conventions = map[string]activities.Convention{srv.URL: *tt.conv}
			}
			r := req(srv.URL + "/payments")
			r.IdempotencyKey = tt.key
			resp, _, err := run(t, cfg, r)
			require.NoError(t, err)
			assert.Equal(t, tt.key, resp.IdempotencyKey, "the Response names the key, not the header value")
			got, _ := srv.last()
			assert.Equal(t, []string{tt.want}, got.Header.Values(tt.wantHeader))
			if tt.wantHeader != "Idempotency-Key" {
				assert.Empty(t, got.Header.Values("Idempotency-Key"))
			}
		})
	}
}

// TestKeyQuotedAgainstReferenceServer: the activity with KeyQuoted against
// the reference server's IETF dialect, twice with the same key: one record,
// the second answer replayed; the server read the key itself, escapes
// undone. A run with the bare key afterwards is the same key too.
func TestKeyQuotedAgainstReferenceServer(t *testing.T) {
	for _, key := range []string{"8e03978e-40d5-43e8-bc93-6894a57f9324", `k"1\2`, `"`, `\`} {
		t.Run(key, func(t *testing.T) {
			api := testsuite.NewServer(testsuite.Options{Dialect: testsuite.IETFDialect()})
			var mu sync.Mutex
			var sent []string // the key headers as they arrived
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				sent = append(sent, r.Header.Get("Idempotency-Key"))
				mu.Unlock()
				api.ServeHTTP(w, r)
			}))
			t.Cleanup(srv.Close)
			conv := activities.IETFConvention()
			conv.KeyQuoted = true
			cfg := activities.Config{AllowedOrigins: []string{srv.URL}, Conventions: map[string]activities.Convention{srv.URL: conv}}
			r := req(srv.URL + "/payments")
			r.IdempotencyKey = key

			first, _, err := run(t, cfg, r)
			require.NoError(t, err)
			assert.Equal(t, 201, first.Status)
			assert.False(t, first.Replayed)
			second, _, err := run(t, cfg, r)
			require.NoError(t, err)
			assert.Equal(t, 201, second.Status)
			assert.True(t, second.Replayed, "the second request must be a replay")
			assert.JSONEq(t, string(first.Body), string(second.Body))

			replays := 1
			if !strings.HasPrefix(key, `"`) {
				// A bare key that starts with a double quote would be read
				// as a (malformed) sf-string: see testsuite.Dialect.KeyString.
				bare, _, err := run(t, activities.Config{AllowedOrigins: []string{srv.URL}}, r)
				require.NoError(t, err)
				assert.True(t, bare.Replayed, "the bare key is the same key")
				replays++
			}

			mu.Lock()
			assert.Equal(t, []string{idemkey.Quote(key), idemkey.Quote(key)}, sent[:2], "quoted on the wire")
			if len(sent) > 2 {
				assert.Equal(t, key, sent[2], "bare on the wire")
			}
			mu.Unlock()
			st := api.Stats()
			assert.Equal(t, 1, st.Records)
			assert.Equal(t, replays, st.Replays)
			assert.Equal(t, 1, st.DistinctKeys)
			assert.Zero(t, st.MissingKey)
			recs := api.Records()
			require.Len(t, recs, 1)
			assert.Equal(t, key, recs[0].IdempotencyKey)
		})
	}
}
