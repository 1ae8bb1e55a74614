package rules

import (
	"strings"
	"testing"

	"github.com/idemhttp/temporal-idempotent-http/internal/idemkey"
)

func TestHeaders(t *testing.T) {
	tests := []struct {
		name string
		h    map[string]string
		want string
	}{
		{"none", nil, ""},
		{"plain", map[string]string{"X-Note": "a b\tc", "Prefer": "return=minimal"}, ""},
		{"obs-text is allowed", map[string]string{"X-Note": "caf\xc3\xa9"}, ""},
		{"credential", map[string]string{"X-Api-Key": "k"}, "looks like a credential"},
		{"credential in lower case", map[string]string{"proxy-authorization": "Basic x"}, "looks like a credential"},
		{"set by the client", map[string]string{"Content-Length": "3"}, "computed from the body"},
		{"key header", map[string]string{"idempotency-key": "k"}, "IdempotencyKey"},
		{"Expect", map[string]string{"Expect": "100-continue"}, "managed by the HTTP client"},
		// Hardening, third round: a coding or charset the client asks for
		// would hide credentials from redaction; the trace context is the
		// worker's, per attempt.
		{"Accept-Encoding", map[string]string{"accept-encoding": "gzip"}, "decodes the body before credentials are redacted"},
		{"Accept-Charset", map[string]string{"Accept-Charset": "utf-16"}, "another charset"},
		{"Traceparent", map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}, "trace context"},
		{"Tracestate", map[string]string{"Tracestate": "a=b"}, "trace context"},
		{"invalid name", map[string]string{"X Note": "a"}, "invalid header name"},
		{"empty name", map[string]string{"": "a"}, "invalid header name"},
		{"name with colon", map[string]string{"X-Note:": "a"}, "invalid header name"},
		{"CR LF", map[string]string{"X-Note": "a\r\nX-Evil: 1"}, "control character"},
		{"NUL", map[string]string{"X-Note": "a\x00"}, "control character"},
		{"ESC", map[string]string{"X-Note": "\x1b[0m"}, "control character"},
		{"DEL", map[string]string{"X-Note": "\x7f"}, "control character"},
		{"two spellings", map[string]string{"X-Note": "a", "x-note": "b"}, "differ only in case"},
	}
	for _, tt := range tests {
		if err := Headers(tt.h); !errContains(err, tt.want) {
			t.Errorf("%s: Headers(%q) = %v, want %q", tt.name, tt.h, err, tt.want)
		}
	}
}

func TestBody(t *testing.T) {
	tests := []struct {
		name string
		b    string
		want string
	}{
		{"none", "", ""},
		{"object", `{"a":1}`, ""},
		{"pretty", "{\n  \"a\": 1\n}\n", ""},
		{"exactly the bound", `"` + strings.Repeat("a", MaxBodyBytes-2) + `"`, ""},
		{"one byte over", `"` + strings.Repeat("a", MaxBodyBytes-1) + `"`, "at most 262144"},
		{"not JSON", `{"a":`, "not valid JSON"},
		{"not UTF-8", "\"\xff\"", "UTF-8"},
		{"two documents", `{} {}`, "not valid JSON"},
	}
	for _, tt := range tests {
		if err := Body([]byte(tt.b)); !errContains(err, tt.want) {
			t.Errorf("%s: Body = %v, want %q", tt.name, err, tt.want)
		}
	}
}

func TestKeyOperationMethod(t *testing.T) {
	for key, want := range map[string]string{
		"order-1":                               "",
		strings.Repeat("k", idemkey.MaxBytes):   "",
		strings.Repeat("k", idemkey.MaxBytes+1): "at most 255",
		"":                                      "missing idempotency key",
		"a b":                                   "printable ASCII",
		"ключ":                                  "printable ASCII",
		"k\x7f":                                 "printable ASCII",
	} {
		if err := idemkey.Check(key); !errContains(err, want) {
			t.Errorf("Key(%q) = %v, want %q", key, err, want)
		}
	}
	for op, want := range map[string]string{
		"charge":         "",
		"charge-2026-12": "",
		"":               "",
		"a\x00b":         "NUL",
		"charge\xff":     "UTF-8",
	} {
		if err := Operation(op); !errContains(err, want) {
			t.Errorf("Operation(%q) = %v, want %q", op, err, want)
		}
	}
	for m, want := range map[string]string{"": "POST", "post": "POST", " Put ": "PUT", "PATCH": "PATCH", "delete": "DELETE", "GET": "", "HEAD": "", "CONNECT": ""} {
		got, err := Method(m)
		if got != want || (want == "") != (err != nil) {
			t.Errorf("Method(%q) = %q, %v; want %q", m, got, err, want)
		}
	}
}

// errContains reports whether err matches want: nil for "", else an error
// whose text contains want.
func errContains(err error, want string) bool {
	if want == "" {
		return err == nil
	}
	return err != nil && strings.Contains(err.Error(), want)
}
