// Package redact holds what a log line, an error or a result may show:
// URLs without user info and query values (URL, Err), and JSON documents
// without the values of members named like a credential (Fields), by the
// one rule of what is named like a credential (IsCredential).
package redact

import (
	"encoding/json"
	"errors"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/idemhttp/temporal-idempotent-http/internal/httpheader"
)

// IsCredential reports whether a name, a header's or a JSON object
// member's, names a credential: the one rule for what "named like a
// credential" means. A header so named may not come from workflow input
// (which is stored in Temporal's history; it is configured on the worker),
// and a string or number held by a JSON member so named, in an answer or a
// webhook event, never reaches history (Fields).
//
// The name is split into words at every character other than a letter or
// digit and where the case changes ("clientSecret", "X-API-Key" and
// "secret_key" are client secret, x api key and secret key), in lower case.
// It names a credential when
//   - a word is, or ends with, token, secret(s), password, passwd,
//     passphrase, credential(s), cookie(s), sessionid or sessid:
//     accessToken, idToken, X-Csrf-Token, Set-Cookie, "accesstoken",
//     JSESSIONID, PHPSESSID;
//   - a word is session: X-Session-Id, sessionData;
//   - "key" (or "keys") follows one of keyQualifiers (api, access, private,
//     secret, client, subscription, signing, auth, authorization,
//     authentication, encryption, master, functions, application,
//     transaction, session), as a word of its own or run together:
//     X-Api-Key, Apikey, private_key, Ocp-Apim-Subscription-Key,
//     X-Functions-Key, DD-APPLICATION-KEY, transactionKey (Authorize.net's
//     secret);
//   - its last word is one of lastWords (auth, authorization,
//     authentication, authenticate; a card's cvc, cvc2, cvv, cvv2 or pin;
//     passcode, pwd, otp), or "code" after pin, otp or security:
//     Authorization, WWW-Authenticate, basicAuth, card_cvc, cardPin,
//     security_code.
//
// Words that would hide business fields are matched only so: "key" alone
// (idempotency_key, public_key), a word that merely starts with token
// (tokenized_card), "tokens" (total_tokens, a count), auth or
// authorization before another word (authorization_code, a card payment's
// approval code; X-Auth-Email), transaction before anything but key
// (transaction_id), and the card and sign-in words before another word
// (cvc_check, Stripe's check result; pin_status) or inside one (pinned,
// shipping, opinion) are not credentials.
func IsCredential(name string) bool {
	ws := words(name)
	for i, w := range ws {
		if w == "session" {
			return true
		}
		for _, c := range credentialEnds {
			if strings.HasSuffix(w, c) {
				return true
			}
		}
		if (w == "key" || w == "keys") && i > 0 && keyQualifiers[ws[i-1]] {
			return true
		}
	}
	if n := len(ws); n > 0 && (lastWords[ws[n-1]] || n > 1 && ws[n-1] == "code" && codeQualifiers[ws[n-2]]) {
		return true
	}
	return false
}

// keyQualifiers make the word "key" after them, or run together with them,
// a credential.
var keyQualifiers = map[string]bool{
	"api": true, "access": true, "private": true, "secret": true, "client": true,
	"subscription": true, "signing": true, "auth": true, "authorization": true,
	"authentication": true, "encryption": true, "master": true, "functions": true,
	"application": true, "transaction": true, "session": true,
}

// credentialEnds name a credential as a word or a word's end: the words
// and every key qualifier run together with key or keys.
var credentialEnds = func() []string {
	ends := []string{
		"token", "secret", "secrets", "password", "passwd", "passphrase",
		"credential", "credentials", "cookie", "cookies", "sessionid", "sessid",
	}
	for q := range keyQualifiers {
		ends = append(ends, q+"key", q+"keys")
	}
	return ends
}()

// lastWords are credentials as a name's last word.
var lastWords = map[string]bool{
	"auth": true, "authorization": true, "authentication": true, "authenticate": true,
	"cvc": true, "cvc2": true, "cvv": true, "cvv2": true, "pin": true,
	"passcode": true, "pwd": true, "otp": true,
}

// codeQualifiers make a last word "code" after them a credential.
var codeQualifiers = map[string]bool{"pin": true, "otp": true, "security": true}

// words splits name into lower-case words at each byte that is not an
// ASCII letter or digit (bytes of other scripts stay in their word) and
// where the case changes: "aB" splits before B, "ABc" before B.
func words(name string) []string {
	var ws []string
	var cur []byte
	flush := func() {
		if len(cur) > 0 {
			ws = append(ws, string(cur))
			cur = cur[:0]
		}
	}
	isUpper := func(c byte) bool { return c >= 'A' && c <= 'Z' }
	isLower := func(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case isUpper(c):
			prevLower := i > 0 && isLower(name[i-1])
			acronymEnd := i > 0 && isUpper(name[i-1]) && i+1 < len(name) && name[i+1] >= 'a' && name[i+1] <= 'z'
			if prevLower || acronymEnd {
				flush()
			}
			cur = append(cur, c+'a'-'A')
		case isLower(c) || c >= 0x80:
			cur = append(cur, c)
		default:
			flush()
		}
	}
	flush()
	return ws
}

// Fields returns the JSON document doc with every string or number
// that is the value of an object member named like a credential
// (IsCredential, the name read with its escapes decoded), or that stands in
// an array (at any depth of arrays) that is such a value, replaced by the
// JSON string with, and whether anything was replaced. An object such a
// member holds is walked into, its members judged by their own names: a
// Stripe card's "network_token": {"used": false} and
// "incremental_authorization": {"status": …} keep their shape, so the
// answer still decodes into its types. null and booleans hold no secret and
// are kept. Every other byte is kept as it was. doc must be valid JSON
// (json.Valid); anything else is returned unchanged.
func Fields(doc []byte, with string) ([]byte, bool) {
	if !json.Valid(doc) {
		return doc, false
	}
	return ValidFields(doc, with)
}

// ValidFields is Fields for a document the caller has already
// checked with json.Valid: it is not validated again.
func ValidFields(doc []byte, with string) ([]byte, bool) {
	var repl []byte
	var out []byte
	last := 0
	// stack holds '{' for an object, '[' for an array and 'c' for an
	// array that is the value of a member named like a credential.
	var stack []byte
	expectName := false // after an object's '{' or ',' the next string is a name
	named := false      // the next value is a credential-named member's
	// under reports whether the value starting now is a credential-named
	// member's or in such an array, and consumes the name.
	under := func() bool {
		u := named || len(stack) > 0 && stack[len(stack)-1] == 'c'
		named = false
		return u
	}
	replace := func(start, end int) {
		if repl == nil {
			repl, _ = json.Marshal(with)
		}
		out = append(append(out, doc[last:start]...), repl...)
		last = end
	}
	for i := 0; i < len(doc); i++ {
		switch c := doc[i]; c {
		case ' ', '\t', '\n', '\r', ':':
		case '{':
			under()
			stack = append(stack, '{')
			expectName = true
		case '[':
			if under() {
				stack = append(stack, 'c')
			} else {
				stack = append(stack, '[')
			}
			expectName = false
		case '}', ']':
			stack = stack[:len(stack)-1]
			expectName = false
		case ',':
			expectName = stack[len(stack)-1] == '{'
		case '"':
			end := StringEnd(doc, i)
			if expectName {
				expectName = false
				named = nameIsCredential(doc, i, end)
			} else if under() {
				replace(i, end+1)
			}
			i = end
		case 't', 'f', 'n':
			under()
			i = valueEnd(doc, i) - 1
		default: // a number
			end := valueEnd(doc, i)
			if under() {
				replace(i, end)
			}
			i = end - 1
		}
	}
	if out == nil {
		return doc, false
	}
	return append(out, doc[last:]...), true
}

// nameIsCredential reports whether the member name whose literal spans
// doc[i:end+1] names a credential, its escapes decoded.
func nameIsCredential(doc []byte, i, end int) bool {
	raw := doc[i+1 : end]
	escaped := slices.Contains(raw, '\\')
	if !escaped && !mayNameCredential(raw) {
		return false
	}
	name := string(raw)
	if escaped && json.Unmarshal(doc[i:end+1], &name) != nil {
		return false
	}
	return IsCredential(name)
}

// stems are what every name IsCredential accepts contains, in lower case.
var stems = []string{
	"token", "secret", "pass", "credential", "cookie", "key", "sess", "auth",
	"cvc", "cvv", "pin", "pwd", "otp", "code",
}

// mayNameCredential reports whether name, in any case, holds a stem: a
// test without allocation before IsCredential.
func mayNameCredential(name []byte) bool {
	for i := range name {
		for _, st := range stemsFrom[name[i]|0x20] {
			if len(name)-i < len(st) {
				continue
			}
			j := 1
			for j < len(st) && name[i+j]|0x20 == st[j] {
				j++
			}
			if j == len(st) {
				return true
			}
		}
	}
	return false
}

// stemsFrom are the stems by their first byte: mayNameCredential compares
// at each byte of a name only the stems that start with it.
var stemsFrom = func() (m [256][]string) {
	for _, st := range stems {
		m[st[0]] = append(m[st[0]], st)
	}
	return m
}()

// StringEnd returns the index of the quote that closes the JSON string
// literal opening at b[i], or -1 if none does (never in valid JSON). The
// one scanner of string literals for the redactors of JSON bodies.
func StringEnd(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j
		}
	}
	return -1
}

// valueEnd returns the index just past the JSON value starting at doc[i]
// (doc is valid JSON).
func valueEnd(doc []byte, i int) int {
	switch doc[i] {
	case '"':
		return StringEnd(doc, i) + 1
	case '{', '[':
		depth := 0
		for j := i; j < len(doc); j++ {
			switch doc[j] {
			case '"':
				j = StringEnd(doc, j)
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return len(doc)
	}
	// A number, true, false or null: up to the next delimiter.
	j := i
	for j < len(doc) && strings.IndexByte(",}] \t\n\r", doc[j]) < 0 {
		j++
	}
	return j
}

// CutURL ends a URL that URL shows only up to its first byte that no
// URL holds.
const CutURL = "[cut: invalid URL]"

// URL returns raw with its user info removed and every query value
// (and every parameter without a value) replaced by "REDACTED": for URLs a
// server sends (a redirect's Location, a presigned URL) and for URLs in
// errors; the one place a URL is made showable. Text that does not parse
// as a URL is returned as "[unparsable URL]"; a URL that parses but holds,
// before its query, a byte no URL holds (a space, a control character, a
// byte of invalid UTF-8, raw or percent-escaped, or an escaped "?" or "#"
// that would hide a query in the path) is shown only up to that byte,
// then CutURL: what follows cannot be told apart from a query value.
func URL(raw string) string {
	i := unclean(raw)
	if i < 0 {
		return redactURL(raw)
	}
	prefix := raw[:i]
	if k := strings.Index(prefix, "//"); k >= 0 && !strings.Contains(prefix[k+2:], "/") {
		// Cut inside the authority: what looks like a host or a port may
		// be user info whose "@" comes later. The scheme alone.
		if u, err := url.Parse(prefix); err == nil && u.Scheme != "" {
			return strings.ToLower(u.Scheme) + "://" + CutURL
		}
		return CutURL
	}
	return redactURL(prefix) + CutURL
}

// unclean returns the offset in raw of the first byte before its query or
// fragment that no clean URL holds (see URL), or -1.
func unclean(raw string) int {
	end := len(raw)
	if i := strings.IndexAny(raw, "?#"); i >= 0 {
		end = i
	}
	// decoded holds the bytes of raw[:end] with escapes decoded; at[k] is
	// where decoded[k] starts in raw.
	decoded := make([]byte, 0, end)
	at := make([]int, 0, end)
	for i := 0; i < end; i++ {
		c := raw[i]
		switch {
		case c == '%' && i+2 < len(raw) && ishex(raw[i+1]) && ishex(raw[i+2]):
			b := unhex(raw[i+1])<<4 | unhex(raw[i+2])
			if b < 0x20 || b == 0x7f || b == '?' || b == '#' {
				return i
			}
			decoded, at = append(decoded, b), append(at, i)
			i += 2
		case c <= 0x20 || c == 0x7f || strings.IndexByte("\"<>\\^`{|}", c) >= 0:
			return i
		default:
			decoded, at = append(decoded, c), append(at, i)
		}
	}
	for k := 0; k < len(decoded); {
		r, n := utf8.DecodeRune(decoded[k:])
		if r == utf8.RuneError && n <= 1 {
			return at[k]
		}
		k += n
	}
	return -1
}

func ishex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c >= 'a':
		return c - 'a' + 10
	case c >= 'A':
		return c - 'A' + 10
	}
	return c - '0'
}

// redactURL is URL for a URL without unclean bytes.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "[unparsable URL]"
	}
	u.User = nil
	if u.RawQuery != "" {
		// Keep the names of the parameters, not their values; a parameter
		// without "=" (a bare token, "?abc123") is all value.
		var parts []string
		for item := range strings.SplitSeq(u.RawQuery, "&") {
			name, _, hasValue := strings.Cut(item, "=")
			if !hasValue || !httpheader.ValidName(name) {
				name = "REDACTED"
			}
			parts = append(parts, name+"=REDACTED")
		}
		u.RawQuery = strings.Join(parts, "&")
	}
	u.Fragment, u.RawFragment = "", ""
	return u.String()
}

// Err returns the text of an error from net/url or net/http with the
// URL it names redacted by URL, and every query in the rest of the
// text (a Location the client could not parse, quoted in its error; a
// server's words in a protocol error) cut at its "?" (redactQueries).
func Err(err error) string {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		return uerr.Op + " " + URL(uerr.URL) + ": " + redactQueries(uerr.Err.Error())
	}
	return redactQueries(err.Error())
}

// redactQueries replaces, in free text, what follows each "?" with
// "REDACTED": up to the next space or quote, or, inside a double-quoted
// string (a server's header line or URL that an error quotes with %q), up
// to its closing quote, spaces and escaped quotes included: where a URL
// cannot be parsed, its query values are hidden all the same.
func redactQueries(s string) string {
	if !strings.Contains(s, "?") {
		return s
	}
	var b strings.Builder
	quoted := false // inside a double-quoted string
	for i := 0; i < len(s); i++ {
		c := s[i]
		b.WriteByte(c)
		switch {
		case c == '"':
			quoted = !quoted
		case c == '\\' && quoted && i+1 < len(s):
			i++
			b.WriteByte(s[i])
		case c == '?':
			end := i + 1
			if quoted {
				for end < len(s) && s[end] != '"' {
					if s[end] == '\\' {
						end++
					}
					end++
				}
				end = min(end, len(s))
			} else if j := strings.IndexAny(s[end:], " \t\n\"'`"); j >= 0 {
				end += j
			} else {
				end = len(s)
			}
			if end > i+1 {
				b.WriteString("REDACTED")
			}
			i = end - 1
		}
	}
	return b.String()
}
