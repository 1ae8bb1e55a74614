package activities

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemhttp/temporal-idempotent-http/internal/credential"
)

// windows returns the 8-byte windows of secrets that occur in s.
func windows(s string, secrets ...string) []string {
	var found []string
	for _, sec := range secrets {
		for i := 0; i+minCredentialBytes <= len(sec); i++ {
			if strings.Contains(s, sec[i:i+minCredentialBytes]) {
				found = append(found, sec[i:i+minCredentialBytes])
			}
		}
	}
	return found
}

// decodedStrings returns every string and key of the JSON document b,
// decoded, one per line, and false when b is not JSON.
func decodedStrings(b []byte) (string, bool) {
	var v any
	if json.Unmarshal(b, &v) != nil {
		return "", false
	}
	var sb strings.Builder
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			sb.WriteString(v + "\n")
		case []any:
			for _, e := range v {
				walk(e)
			}
		case map[string]any:
			for k, e := range v {
				sb.WriteString(k + "\n")
				walk(e)
			}
		}
	}
	walk(v)
	return sb.String(), true
}

func escapeEvery(s string, n int) string {
	var b strings.Builder
	for i, r := range s {
		if i%n == 0 {
			fmt.Fprintf(&b, `\u%04x`, r)
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestRedactorBytes(t *testing.T) {
	const tok = "tok_live_9f8e7d6c5b4a"
	r := newRedactor([]string{tok, "8675309867530986"})
	tests := []struct{ in, want string }{
		{"no secret here", "no secret here"},
		{"x" + tok + "y", "x[REDACTED]y"},
		{tok[:8], "[REDACTED]"},
		{tok[:7], tok[:7]},
		{tok[3:15] + " and " + tok[10:], "[REDACTED] and [REDACTED]"},
		{tok + tok, "[REDACTED]"},
		{"8675309867530986" + tok, "[REDACTED]"},
		{"Bearer " + tok, "Bearer [REDACTED]"},
	}
	for _, tt := range tests {
		got, changed := r.bytes([]byte(tt.in))
		assert.Equal(t, tt.want, string(got), tt.in)
		assert.Equal(t, tt.in != tt.want, changed, tt.in)
		assert.Equal(t, tt.want, r.string(tt.in))
	}
	empty := newRedactor(nil)
	got, changed := empty.bytes([]byte(tok))
	assert.Equal(t, tok, string(got))
	assert.False(t, changed)
}

func TestRedactorJSON(t *testing.T) {
	const tok = "tok_live_9f8e7d6c5b4a"
	r := newRedactor([]string{tok, "8675309867530986"})
	tests := []struct {
		name         string
		in           string
		changed, ok  bool
		wantStrings  string // a decoded string that must remain, when ok
		wantVerbatim bool
	}{
		{"no secret", `{"a":"b","n":1}`, false, true, "b", true},
		{"escapes but no secret", `{"a":"\u00e9\n\"","b":"<"}`, false, true, "<", true},
		{"in a string", `{"a":"` + tok + `","b":"keep"}`, true, true, "keep", false},
		{"fully escaped", `{"a":"` + escapeEvery(tok, 1) + `","b":"keep"}`, true, true, "keep", false},
		{"every other escaped", `{"a":"` + escapeEvery(tok, 2) + `","b":"keep"}`, true, true, "keep", false},
		{"as a key", `{"` + tok + `":"keep"}`, true, true, "keep", false},
		{"after an escaped quote", `{"a":"\"` + tok + `\\"}`, true, true, `"[REDACTED]\`, false},
		{"as a number", `{"a":8675309867530986,"b":"keep"}`, false, false, "", false},
		{"inside a longer number", `[18675309867530986]`, false, false, "", false},
		{"in a string and as a number", `["` + tok + `",8675309867530986]`, false, false, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.True(t, json.Valid([]byte(tt.in)))
			out, changed, ok := r.json([]byte(tt.in))
			assert.Equal(t, tt.ok, ok)
			assert.Equal(t, tt.changed, changed)
			if !ok {
				return
			}
			require.True(t, json.Valid(out), "%s", out)
			dec, _ := decodedStrings(out)
			assert.Empty(t, windows(dec+string(out), tok, "8675309867530986"))
			assert.Contains(t, dec, tt.wantStrings)
			if tt.wantVerbatim {
				assert.Equal(t, tt.in, string(out))
			}
		})
	}
}

func TestRedactorSnippet(t *testing.T) {
	const tok = "tok_live_9f8e7d6c5b4a"
	r := newRedactor([]string{tok})
	for at := errorBodyBytes - len(tok); at <= errorBodyBytes; at++ {
		body := strings.Repeat("x", at) + tok + strings.Repeat("y", 100)
		got := r.snippet([]byte(body))
		assert.Empty(t, windows(got, tok), "token at %d", at)
		assert.LessOrEqual(t, len(got), errorBodyBytes)
	}
	// Cut at a character boundary, as valid UTF-8.
	got := r.snippet([]byte(strings.Repeat("é", errorBodyBytes)))
	assert.True(t, utf8.ValidString(got))
	assert.Equal(t, strings.Repeat("é", errorBodyBytes/2), got)
	// Invalid UTF-8 (a binary error body) becomes U+FFFD before the cut.
	got = r.snippet([]byte(strings.Repeat("\xffa", errorBodyBytes)))
	assert.Equal(t, strings.Repeat("\uFFFDa", errorBodyBytes/4), got)
	// Escaped inside JSON: decoded, redacted, then cut.
	body := `{"pad":"` + strings.Repeat("p", 1000) + `","echo":"` + escapeEvery(tok, 1) + `"}`
	got = r.snippet([]byte(body))
	assert.NotContains(t, got, `\u0074\u006f\u006b`)
}

// FuzzRedact: whatever the secrets and the text, the redactor's output
// holds no 8-byte window of a secret (bytes, string, snippet, and json when
// it accepts the document, also decoded), json's output is valid JSON when
// its input is, and text without a secret is left unchanged. Secrets are
// printable ASCII, as header values are, without '[' and ']' and without
// the window "REDACTED" (the marker itself).
func FuzzRedact(f *testing.F) {
	const tok = "tok_live_9f8e7d6c5b4a"
	for _, s := range []struct {
		secret, other string
		text          string
		mode          byte
		at            uint16
	}{
		{tok, "", `{"echo":""}`, 0, 9},
		{tok, "", `{"echo":""}`, 2, 9},
		{tok, "", `{"echo":""}`, 3, 9},
		{tok, "8675309867530986", `{"n":,"s":""}`, 4, 5},
		{`pk"<&>\live01`, "", `["",1]`, 1, 2},
		{tok, "", strings.Repeat("x", 1100), 0, 1015},
		{"abcdefgh", "bcdefghi", "zzabcdefghizz", 5, 3},
		{"12345678", "", `{"a":1234567890}`, 5, 0},
		{`\u0041bcdefg`, "", `{"a":"\u0041bcdefg"}`, 5, 0},
		{`a","b":"c`, "", `{"x":"a","b":"c"}`, 5, 0},
		// Found by fuzzing: a secret holding quotes, raw across strings and
		// escaped inside one; the snippet redacts both.
		{`a","b":"`, "", `{"":"a","b":"0"}`, 1, 14},
		// Found by fuzzing: invalid UTF-8 grew the snippet past 1 KiB.
		{tok, "", "\xd9\xe8\xf1b3\xd4" + strings.Repeat("x", 1100), 0, 1015},
	} {
		f.Add(s.secret, s.other, []byte(s.text), s.mode, s.at)
	}
	f.Fuzz(func(t *testing.T, secret, other string, text []byte, mode byte, at uint16) {
		var secrets []string
		for _, s := range []string{secret, other} {
			if len(s) < minCredentialBytes || len(s) > 256 || strings.ContainsAny(s, "[]") || strings.Contains(s, "REDACTED") {
				continue
			}
			printable := true
			for i := 0; i < len(s); i++ {
				printable = printable && s[i] >= 0x20 && s[i] < 0x7f
			}
			if printable {
				secrets = append(secrets, s)
			}
		}
		if len(secrets) == 0 {
			return
		}
		// Put a form of the first secret into the text, where the fuzzer
		// would rarely put it: raw, as a JSON string's content, escaped, or
		// a prefix of it.
		sec := secrets[0]
		var ins string
		switch mode % 6 {
		case 1:
			enc, _ := json.Marshal(sec)
			ins = string(enc[1 : len(enc)-1])
		case 2:
			ins = escapeEvery(sec, 1)
		case 3:
			ins = escapeEvery(sec, 3)
		case 4:
			ins = sec[:minCredentialBytes+int(at)%(len(sec)-minCredentialBytes+1)]
		case 5: // nothing: the text as generated
		default:
			ins = sec
		}
		i := int(at) % (len(text) + 1)
		in := append(append(append([]byte(nil), text[:i]...), ins...), text[i:]...)

		r := newRedactor(secrets)
		out, changed := r.bytes(in)
		if w := windows(string(out), secrets...); len(w) > 0 {
			t.Fatalf("bytes(%q) = %q holds %q", in, out, w)
		}
		if len(windows(string(in), secrets...)) == 0 && (changed || string(out) != string(in)) {
			t.Fatalf("bytes(%q) changed text without a secret: %q", in, out)
		}
		if got := r.string(string(in)); got != string(out) {
			t.Fatalf("string(%q) = %q, bytes = %q", in, got, out)
		}

		snip := r.snippet(in)
		if w := windows(snip, secrets...); len(w) > 0 {
			t.Fatalf("snippet(%q) = %q holds %q", in, snip, w)
		}
		if len(snip) > errorBodyBytes || !utf8.ValidString(snip) {
			t.Fatalf("snippet(%q) = %q: %d bytes, valid UTF-8 %v", in, snip, len(snip), utf8.ValidString(snip))
		}
		if dec, ok := decodedStrings([]byte(snip)); ok {
			if w := windows(dec, secrets...); len(w) > 0 {
				t.Fatalf("snippet(%q) = %q holds %q once decoded", in, snip, w)
			}
		}

		if !json.Valid(in) {
			return
		}
		jout, jchanged, ok := r.json(in)
		if !ok {
			return
		}
		if !json.Valid(jout) {
			t.Fatalf("json(%q) = %q: not valid JSON", in, jout)
		}
		dec, _ := decodedStrings(jout)
		if w := windows(string(jout)+"\n"+dec, secrets...); len(w) > 0 {
			t.Fatalf("json(%q) = %q holds %q (decoded: %q)", in, jout, w, dec)
		}
		if !jchanged && string(jout) != string(in) {
			t.Fatalf("json(%q) = %q, reported unchanged", in, jout)
		}
	})
}

// TestSnippetOfACutBodyWithAnEscapedCredential: an error body that is not a
// JSON document (cut at MaxResponseBytes) and holds a credential written as
// \uXXXX escapes is withheld, not shown escaped.
func TestSnippetOfACutBodyWithAnEscapedCredential(t *testing.T) {
	r := newRedactor([]string{"tok_live_0123456789"})
	var esc strings.Builder
	for _, c := range "tok_live_0123456789" {
		fmt.Fprintf(&esc, `\u%04x`, c)
	}
	body := []byte(`{"error":"` + esc.String() + `", "cut here`)
	assert.Equal(t, "[body withheld: it holds an escaped credential]", r.snippet(body))
	assert.Equal(t, `{"error":"x", "cut here`, r.snippet([]byte(`{"error":"x", "cut here`)), "no credential: shown as it is")
}

// TestRedactorGrows: a secret added while the worker runs is redacted from
// then on, alongside those it had; adding one it knows changes nothing and
// allocates nothing.
func TestRedactorGrows(t *testing.T) {
	const first, second = "tok_first_0123456789", "tok_second_9876543210"
	r := newRedactor([]string{first})
	text := "a " + first + " b " + second + " c"
	assert.Equal(t, "a [REDACTED] b "+second+" c", r.string(text))
	r.Add(second)
	assert.Equal(t, "a [REDACTED] b [REDACTED] c", r.string(text))
	before := r.snap.Load()
	allocs := testing.AllocsPerRun(100, func() { r.Add(first); r.Add(second) })
	assert.Zero(t, allocs, "Add of a known secret allocates")
	assert.Same(t, before, r.snap.Load(), "Add of a known secret keeps the snapshot")
	r.Add("short") // too short to redact: ignored
	assert.Same(t, before, r.snap.Load())
}

// TestRedactorRetains: a secret stays redacted RetainFor after it was last
// added, and is dropped after that (when another is added), so that memory
// stays bounded however often keys rotate.
func TestRedactorRetains(t *testing.T) {
	const old, cur = "tok_old_0123456789", "tok_cur_9876543210"
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := newRedactor(nil)
	r.now = func() time.Time { return now }
	r.Add(old)
	now = now.Add(credential.RetainFor / 2)
	r.Add(old) // still in use: its time is renewed
	now = now.Add(credential.RetainFor - time.Minute)
	r.Add(cur)
	assert.Equal(t, "[REDACTED] [REDACTED]", r.string(old+" "+cur), "kept for RetainFor after its last Add")
	now = now.Add(2 * time.Minute)
	r.Add("tok_next_5555555555")
	assert.Equal(t, old+" [REDACTED]", r.string(old+" "+cur), "dropped after RetainFor")
	assert.Len(t, r.snap.Load().secrets, 2)
}

// TestRedactorConcurrent: Add and the redacting methods run at once (run
// with -race).
func TestRedactorConcurrent(t *testing.T) {
	r := newRedactor([]string{"tok_base_0123456789"})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := range 200 {
				r.Add(fmt.Sprintf("tok_g%d_%012d", g, i))
			}
		}()
		go func() {
			defer wg.Done()
			for range 200 {
				if got := r.string("x tok_base_0123456789 y"); got != "x [REDACTED] y" {
					t.Errorf("got %q", got)
					return
				}
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, "[REDACTED]", r.string("tok_g3_000000000199"))
}

// TestRedactorBoundedWithShortTokens: 5 s tokens for a day are 17,280
// secrets; the redactor keeps at most maxRetainedBytes of them (the most
// recently added, hours of them), yet never drops a secret still in use
// (re-added every minute, as the sources do), and each Add of a new token
// costs the same however many came before.
func TestRedactorBoundedWithShortTokens(t *testing.T) {
	defer func(n int) { maxRetainedBytes = n }(maxRetainedBytes)
	maxRetainedBytes = 256 * 52 // 256 tokens: the same rule, a faster test
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := newRedactor(nil)
	r.now = func() time.Time { return now }
	const static = "sk_live_static_key_0123456789"
	var last []string
	for i := range 17280 {
		tok := fmt.Sprintf("eyJhbGciOiJSUzI1NiJ9.token-%08d-abcdefghijklmnop", i)
		r.Add(tok)
		if i%12 == 0 {
			r.Add(static) // in use: re-added with every request
		}
		last = append(last, tok)
		now = now.Add(5 * time.Second)
	}
	s := r.snap.Load()
	assert.LessOrEqual(t, s.size, maxRetainedBytes, "bytes of secrets retained")
	assert.LessOrEqual(t, len(s.secrets), 257, "secrets retained")
	assert.Equal(t, "[REDACTED]", r.string(static), "the key in use stays redacted")
	for _, tok := range last[len(last)-128:] {
		if r.string(tok) != "[REDACTED]" {
			t.Fatalf("a recent token is no longer redacted: %q", tok)
		}
	}
	// Windows shared by tokens (their common prefix) stay while any holds them.
	assert.Equal(t, "[REDACTED]", r.string("eyJhbGciOiJSUzI1NiJ9."))
}
