package request

import (
	"errors"
	"math"
	"net/url"
	"strings"
	"testing"
	"time"
)

// errContains reports whether err matches want: nil for "", else an error
// whose text contains want.
func errContains(err error, want string) bool {
	if want == "" {
		return err == nil
	}
	return err != nil && strings.Contains(err.Error(), want)
}

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
		"order-1":                          "",
		strings.Repeat("k", MaxKeyBytes):   "",
		strings.Repeat("k", MaxKeyBytes+1): "at most 255",
		"":                                 "missing idempotency key",
		"a b":                              "printable ASCII",
		"ключ":                             "printable ASCII",
		"k\x7f":                            "printable ASCII",
	} {
		if err := Key(key); !errContains(err, want) {
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

// TestQuoteKey: RFC 8941 section 4.1.6, String serialization.
func TestQuoteKey(t *testing.T) {
	for key, want := range map[string]string{
		"8e03978e-40d5-43e8-bc93-6894a57f9324": `"8e03978e-40d5-43e8-bc93-6894a57f9324"`,
		`a"b\c`:                                `"a\"b\\c"`,
		`"`:                                    `"\""`,
		`\`:                                    `"\\"`,
		"":                                     `""`,
		"!#$%&'()*+,-./:;<=>?@[]^_{|}~":        `"!#$%&'()*+,-./:;<=>?@[]^_{|}~"`,
	} {
		if got := QuoteKey(key); got != want {
			t.Errorf("QuoteKey(%q) = %s, want %s", key, got, want)
		}
	}
}

func TestParseURL(t *testing.T) {
	tests := []struct {
		in, wantURL, wantOrigin, err string
	}{
		{"https://api.example.com/pay?x=1#frag", "https://api.example.com/pay?x=1", "https://api.example.com", ""},
		{"  http://127.0.0.1:8081/p  ", "http://127.0.0.1:8081/p", "http://127.0.0.1:8081", ""},
		{"https://u:hunter2hunter2@api.example.com/", "", "", "user info"},
		{"https://bücher.example/", "", "", "punycode"},
		{"https://b%C3%BCcher.example/", "", "", "punycode"},
		{"https://xn--bcher-kva.example/", "https://xn--bcher-kva.example/", "https://xn--bcher-kva.example", ""},
		{"mailto:a@example.com", "", "", "unsupported scheme"},
		{"http://[::1", "", "", "invalid URL"},
	}
	for _, tt := range tests {
		u, o, err := ParseURL(tt.in)
		if !errContains(err, tt.err) {
			t.Errorf("ParseURL(%q) error = %v, want %q", tt.in, err, tt.err)
			continue
		}
		if tt.err != "" {
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("ParseURL(%q) error repeats the password: %v", tt.in, err)
			}
			continue
		}
		if u.String() != tt.wantURL || o != tt.wantOrigin {
			t.Errorf("ParseURL(%q) = %q, %q; want %q, %q", tt.in, u, o, tt.wantURL, tt.wantOrigin)
		}
	}
}

// TestRedactURL (hardening issue, class 3): user info, query values and
// fragments of a URL a server sends are never kept.
func TestRedactURL(t *testing.T) {
	tests := []struct {
		in, want string
		secrets  []string
	}{
		{"https://deploy:hunter2hunter2@files.example.net/obj?X-Amz-Signature=fe5f80f77d5fa3be&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE",
			"https://files.example.net/obj?X-Amz-Signature=REDACTED&X-Amz-Credential=REDACTED", []string{"hunter2", "deploy", "fe5f80f77d5fa3be", "AKIAIOSFODNN7EXAMPLE"}},
		{"/receipts/9?access_token=ya29.a0AfH6&access_token=second", "/receipts/9?access_token=REDACTED&access_token=REDACTED", []string{"ya29", "second"}},
		{"https://user@h.example/p", "https://h.example/p", []string{"user@"}},
		{"https://h.example/p#token=abc123abc", "https://h.example/p", []string{"abc123abc"}},
		{"https://h.example/p?sig=a%2Fb%3Dc", "https://h.example/p?sig=REDACTED", []string{"a%2Fb", "a/b"}},
		{"https://h.example/plain/path", "https://h.example/plain/path", nil},
		{"http://[::1", "[unparsable URL]", nil},
		{"https://u:p%zz@h/", "[unparsable URL]", []string{"p%zz"}},
	}
	for _, tt := range tests {
		got := RedactURL(tt.in)
		if got != tt.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tt.in, got, tt.want)
		}
		for _, s := range tt.secrets {
			if strings.Contains(got, s) {
				t.Errorf("RedactURL(%q) = %q keeps %q", tt.in, got, s)
			}
		}
	}
}

func TestRedactErr(t *testing.T) {
	err := &url.Error{Op: "Post", URL: "https://u:hunter2hunter2@h.example/p?token=s3cr3t-s3cr3t", Err: errors.New("connection refused")}
	got := RedactErr(err)
	if strings.Contains(got, "hunter2") || strings.Contains(got, "s3cr3t") {
		t.Errorf("RedactErr = %q keeps a secret", got)
	}
	if !strings.Contains(got, "h.example/p?token=REDACTED") || !strings.Contains(got, "connection refused") {
		t.Errorf("RedactErr = %q: want the redacted URL and the cause", got)
	}
	if got := RedactErr(errors.New("plain")); got != "plain" {
		t.Errorf("RedactErr(plain) = %q", got)
	}
}

// TestRedactQueriesInQuotedText: a query inside a quoted string of an
// error (a server's header line or URL that Go quotes with %q) is cut up
// to the closing quote, spaces and escapes included: a malformed line may
// hold a space before the value. Found by FuzzPoll
// (activities/testdata/fuzz/FuzzPoll/77b54f7ae28168eb).
func TestRedactQueriesInQuotedText(t *testing.T) {
	const secret = "qsv_3c4d5e6f7a8b9c0d"
	tests := []struct{ in, want string }{
		{`net/http: HTTP/1.x transport connection broken: malformed MIME header line: "Location: sigesults/1? /\x01=` + secret + `"`,
			`net/http: HTTP/1.x transport connection broken: malformed MIME header line: "Location: sigesults/1?REDACTED"`},
		{`parse "http://h/p?a=1 b=` + secret + `": invalid character " " in URL`,
			`parse "http://h/p?REDACTED": invalid character " " in URL`},
		{`bad line "x?a=\"` + secret + `\" y" then ?tail=` + secret + ` end`,
			`bad line "x?REDACTED" then ?REDACTED end`},
		{`unclosed "Location: /x? ` + secret, `unclosed "Location: /x?REDACTED`},
		{`outside quotes: /x?a=1 b=2`, `outside quotes: /x?REDACTED b=2`},
		{`a "quoted" word and /p?q=1`, `a "quoted" word and /p?REDACTED`},
		{`empty query "?" here`, `empty query "?" here`},
	}
	for _, tt := range tests {
		got := RedactErr(errors.New(tt.in))
		if got != tt.want {
			t.Errorf("RedactErr(%q)\n = %q\nwant %q", tt.in, got, tt.want)
		}
		if strings.Contains(got, "3c4d5e6f") {
			t.Errorf("RedactErr(%q) = %q keeps the secret", tt.in, got)
		}
	}
}

func TestAttemptCeiling(t *testing.T) {
	tests := []struct {
		budget int32
		s2c    time.Duration
		want   int32
	}{
		{5, 2 * time.Minute, 5 + 1200 + 1},
		{1, 0, 2},
		{0, time.Second, 11},
		{5, 50 * time.Millisecond, 6},
		{math.MaxInt32, time.Hour, math.MaxInt32},
		{5, time.Duration(math.MaxInt64), math.MaxInt32},
	}
	for _, tt := range tests {
		if got := AttemptCeiling(tt.budget, tt.s2c); got != tt.want {
			t.Errorf("AttemptCeiling(%d, %s) = %d, want %d", tt.budget, tt.s2c, got, tt.want)
		}
	}
}

func TestRedactURLQueryWithoutValues(t *testing.T) {
	tests := []struct{ in, want string }{
		{"https://h/p?tok_live_abcdef123456", "https://h/p?REDACTED=REDACTED"},
		{"https://h/p?a=1&tok_live_abcdef123456&X-Amz-Signature=abc", "https://h/p?a=REDACTED&REDACTED=REDACTED&X-Amz-Signature=REDACTED"},
		{"https://u:p@h/p#frag", "https://h/p"},
	}
	for _, tt := range tests {
		if got := RedactURL(tt.in); got != tt.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestRedactURLNotClean (issue 30, item 14): a URL holding a byte no URL
// holds (raw, or percent-escaped where it makes no valid UTF-8 or a
// control character; an escaped "?" hiding a query in the path) is shown
// only up to that byte: what cannot be read as a URL is never shown whole.
func TestRedactURLNotClean(t *testing.T) {
	const qv = "qsv_3c4d5e6f7a8b9c0d"
	tests := []struct{ in, want string }{
		{"/results/1\xff\xffig=" + qv, "/results/1" + CutURL},
		{"http://127.0.0.1:39825/results/1%FF%FFig=" + qv, "http://127.0.0.1:39825/results/1" + CutURL},
		{"https://h.example/a b?sig=" + qv, "https://h.example/a" + CutURL},
		{"https://h.example/a\x00b=" + qv, "https://h.example/a" + CutURL},
		{"https://h.example/a%00b=" + qv, "https://h.example/a" + CutURL},
		{"https://h.example/a%3Fsig=" + qv, "https://h.example/a" + CutURL},
		{"https://h.example/a\"sig=" + qv, "https://h.example/a" + CutURL},
		{"https://u:p@h.example/r/\xc3?sig=" + qv, "https://h.example/r/" + CutURL},
		{"https://h\xff.example/" + qv, "https://" + CutURL},
		{"https://u:1234\xff5678@h.example/", "https://" + CutURL}, // a password's digits, not a port
		{"HTTPS://u:1234%005678@h.example/", "https://" + CutURL},
		{"/x//y\xff" + qv, CutURL},
		{"\xff" + qv, CutURL},
		// Clean URLs as before: escaped UTF-8 and escapes that make ASCII.
		{"https://h.example/caf%C3%A9/%2F?sig=" + qv, "https://h.example/caf%C3%A9/%2F?sig=REDACTED"},
		{"https://h.example/caf\xc3\xa9", "https://h.example/caf%C3%A9"},
	}
	for _, tt := range tests {
		got := RedactURL(tt.in)
		if got != tt.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if strings.Contains(got, qv[:8]) {
			t.Errorf("RedactURL(%q) = %q shows the value", tt.in, got)
		}
	}
}
