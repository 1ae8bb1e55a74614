package activities_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/idemhttp/temporal-idempotent-http/activities"
)

// escapeAll writes every byte of s as a percent-escape, upper-case hex:
// the same URL to a server (RFC 3986 2.1, 6.2.2.2), other bytes to a
// redactor that reads them as written.
func escapeAll(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		fmt.Fprintf(&b, "%%%02X", s[i])
	}
	return b.String()
}

// decodedPieces is pieces of text read as written and with its
// percent-escapes decoded (up to three times: "%2574" is "t" to whoever
// reads it twice).
func decodedPieces(text string, secrets ...string) []string {
	found := pieces(text, secrets...)
	for range 3 {
		var b strings.Builder
		for i := 0; i < len(text); i++ {
			if text[i] == '%' && i+2 < len(text) {
				if c, err := url.PathUnescape(text[i : i+3]); err == nil {
					b.WriteString(c)
					i += 2
					continue
				}
			}
			b.WriteByte(text[i])
		}
		text = b.String()
		found = append(found, pieces(text, secrets...)...)
	}
	return found
}

// TestEscapedSecretInAURLIsNotShown: a 202 whose Location writes the
// origin's token with percent-escapes (in the path, or as a query
// parameter's name) is sealed, since followable decodes it; the URL
// shown in its place (Accepted.Monitor, Response.Headers' Location, the
// logs, the span) must hide it as well: an escape is the same byte to
// anyone who reads history.
func TestEscapedSecretInAURLIsNotShown(t *testing.T) {
	for _, loc := range []string{
		"/operations/" + escapeAll(token),
		"/operations/" + strings.ReplaceAll(token, "_", "%5f"),
		"/operations/" + strings.ReplaceAll(escapeAll(token), "%", "%25"),
		"/operations/1?" + escapeAll(token) + "=1",
	} {
		t.Run(loc, func(t *testing.T) {
			api := newRecorder(t, status(http.StatusAccepted, "", "Location", loc))
			spans := tracetest.NewSpanRecorder()
			cfg := activities.Config{AllowedOrigins: []string{api.URL}, SealKeys: [][]byte{bytes.Repeat([]byte{3}, 32)},
				TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)),
				Credentials:    map[string]activities.Credential{api.URL: {Header: http.Header{"Authorization": {"Bearer " + token}}}}}
			r := req(api.URL + "/transfers")
			r.Follow = true
			resp, logs, err := run(t, cfg, r)
			require.NoError(t, err)
			require.NotNil(t, resp.Accepted)
			assert.NotEmpty(t, resp.Accepted.Sealed, "the monitor travels sealed")
			for where, text := range exposed(err, resp, logs) {
				if p := decodedPieces(text, token); len(p) > 0 {
					t.Errorf("%s holds pieces %q of the token, escaped:\n%s", where, p, text)
				}
			}
			for _, s := range spans.Ended() {
				for _, kv := range s.Attributes() {
					if p := decodedPieces(kv.Value.Emit(), token); len(p) > 0 {
						t.Errorf("span attribute %s holds pieces %q of the token", kv.Key, p)
					}
				}
			}
		})
	}
}

// TestEscapedSecretInABodyIsRedacted: an answer's body that writes the
// origin's token with percent-escapes (a link the API built from the
// request, in a JSON string or in text) is stored in Response.Body,
// RawBody or Failure.Body with it redacted, as a token written as is.
func TestEscapedSecretInABodyIsRedacted(t *testing.T) {
	link := "https://api.example/operations/" + escapeAll(token)
	for _, tc := range []struct {
		name, ctype, body string
		status            int
	}{
		{"JSON", "application/json", `{"links":{"self":"` + link + `"}}`, http.StatusOK},
		{"text", "text/plain", "see " + link, http.StatusOK},
		{"error", "application/json", `{"error":"see ` + link + `"}`, http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := newRecorder(t, status(tc.status, tc.body, "Content-Type", tc.ctype))
			cfg := activities.Config{AllowedOrigins: []string{api.URL},
				Credentials: map[string]activities.Credential{api.URL: {Header: http.Header{"Authorization": {"Bearer " + token}}}}}
			resp, logs, err := run(t, cfg, req(api.URL+"/transfers"))
			for where, text := range exposed(err, resp, logs) {
				if p := decodedPieces(text, token); len(p) > 0 {
					t.Errorf("%s holds pieces %q of the token, escaped:\n%s", where, p, text)
				}
			}
		})
	}
}
