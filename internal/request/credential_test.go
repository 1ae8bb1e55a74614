package request

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestIsCredential (issue 30, item 3): one rule for header names and JSON
// member names, whatever their case and separators; the names that would
// hide business fields stay plain.
func TestIsCredential(t *testing.T) {
	credential := []string{
		// Header names.
		"Authorization", "authorization", "Proxy-Authorization", "Cookie", "Set-Cookie",
		"X-Api-Key", "x-api-key", "X-API-KEY", "Api-Key", "Apikey", "X_Api_Key", "X-Auth-Token",
		"X-Access-Token", "X-Amz-Security-Token", "Ocp-Apim-Subscription-Key", "X-Client-Secret",
		"X-Session-Id", "Private-Token", "X-Password", "X-Credential", "X-Access-Key", "X-Private-Key",
		"X-Client-Key", "X-Csrf-Token", "Www-Authenticate", "X-Auth-Key", "X-Auth", "XAPIKEY",
		// The ten names webhook bodies matched before, in any case.
		"client_secret", "secret", "password", "api_key", "apikey", "access_token",
		"refresh_token", "token", "authorization", "private_key", "CLIENT_SECRET", "Token",
		// camelCase, prefixed and joined spellings.
		"accessToken", "clientSecret", "secret_key", "idToken", "apiKey", "APIKey", "privateKey",
		"PRIVATE_KEY", "refreshToken", "sessionToken", "aws_secret_access_key", "SecretAccessKey",
		"webhook_signing_key", "encryptionKey", "passphrase", "basicAuth", "clientsecret",
		"accesstoken", "xapikey", "id-token", "client.secret", "sessionData", "session_id",
		"user_credentials", "nextPageToken", "token_type", "api_keys",
	}
	plain := []string{
		"X-Correlation-Id", "X-Request-Id", "Accept-Language", "Content-Language", "X-Note",
		"Prefer", "If-Match", "Traceparent", "X-Tenant", "Keyboard",
		// Business fields: a key that is no secret, a word that starts
		// with token, a count of tokens, a card payment's approval code.
		"idempotency_key", "Idempotency-Key", "idempotencyKey", "key", "public_key", "sort_key",
		"keyId", "tokenized_card", "tokenization_method", "total_tokens", "max_tokens",
		"authorization_code", "authCode", "auth_code", "X-Auth-Email", "author", "possession",
		"secretary", "amount", "status", "",
	}
	for _, name := range credential {
		assert.True(t, IsCredential(name), "IsCredential(%q)", name)
		assert.True(t, mayNameCredential([]byte(name)), "RedactFields' prefilter skips %q", name)
	}
	for _, name := range plain {
		assert.False(t, IsCredential(name), "IsCredential(%q)", name)
	}
}

func TestRedactFields(t *testing.T) {
	tests := []struct {
		name, in, want string
		changed        bool
	}{
		{"none", `{"id":"ch_1","amount":42}`, `{"id":"ch_1","amount":42}`, false},
		{"camelCase and prefixed", `{"accessToken":"at_1","data":{"clientSecret":"cs_1","secret_key":"sk_1"},"n":1}`,
			`{"accessToken":"[R]","data":{"clientSecret":"[R]","secret_key":"[R]"},"n":1}`, true},
		{"any value, spacing kept", `{ "apiKey" : {"a":[1,"}"]}, "idToken":12345 , "token":null,"x":true}`,
			`{ "apiKey" : "[R]", "idToken":"[R]" , "token":"[R]","x":true}`, true},
		{"inside arrays", `[{"private_key":"pk"},{"password":"p\"w"}]`, `[{"private_key":"[R]"},{"password":"[R]"}]`, true},
		{"a name written with escapes", `{"\u0074oken":"t1"}`, `{"\u0074oken":"[R]"}`, true},
		{"a value named like one is kept", `{"note":"token","k":["secret"]}`, `{"note":"token","k":["secret"]}`, false},
		{"business fields kept", `{"idempotency_key":"k1","tokenized_card":"4242","authorization_code":"123456"}`,
			`{"idempotency_key":"k1","tokenized_card":"4242","authorization_code":"123456"}`, false},
		{"duplicate names", `{"token":"a","token":"b"}`, `{"token":"[R]","token":"[R]"}`, true},
		{"not JSON", `{"token":"a"`, `{"token":"a"`, false},
		{"a scalar", `"token"`, `"token"`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, changed := RedactFields([]byte(tt.in), "[R]")
			assert.Equal(t, tt.want, string(got))
			assert.Equal(t, tt.changed, changed)
			if json.Valid([]byte(tt.in)) {
				assert.True(t, json.Valid(got), "still JSON: %s", got)
			}
		})
	}
}

// FuzzRedactFields: the result of valid JSON is valid JSON in which every
// member named like a credential holds the replacement, and nothing else
// changed (the document decodes the same with those members set back).
func FuzzRedactFields(f *testing.F) {
	for _, s := range []string{`{"accessToken":"a","b":[{"apiKey":1}]}`, `{"\u0074oken":{"x":"}"}}`, `[1,"token",{"k":{"secret":null}}]`, `{"a" : "b" , "password" : [ ] }`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		got, changed := RedactFields(doc, "[R]")
		if !json.Valid(doc) {
			if changed || string(got) != string(doc) {
				t.Fatalf("not JSON, yet changed: %q", got)
			}
			return
		}
		decode := func(b []byte) (any, error) {
			d := json.NewDecoder(bytes.NewReader(b))
			d.UseNumber() // 1E700 is JSON, yet no float64
			var v any
			return v, d.Decode(&v)
		}
		out, err := decode(got)
		if err != nil {
			t.Fatalf("result is not JSON: %v: %q", err, got)
		}
		in, _ := decode(doc)
		var walk func(a, b any)
		walk = func(a, b any) {
			switch x := a.(type) {
			case map[string]any:
				y, ok := b.(map[string]any)
				if !ok || len(x) != len(y) {
					t.Fatalf("object changed: %q -> %q", doc, got)
				}
				for k, v := range x {
					if IsCredential(k) {
						if y[k] != "[R]" {
							t.Fatalf("member %q kept its value: %q", k, got)
						}
						continue
					}
					walk(v, y[k])
				}
			case []any:
				y, ok := b.([]any)
				if !ok || len(x) != len(y) {
					t.Fatalf("array changed: %q -> %q", doc, got)
				}
				for i := range x {
					walk(x[i], y[i])
				}
			default:
				if a != b {
					t.Fatalf("value %v became %v: %q", a, b, got)
				}
			}
		}
		walk(in, out)
	})
}
