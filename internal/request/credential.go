package request

import (
	"encoding/json"
	"slices"
	"strings"
)

// IsCredential reports whether a name, a header's or a JSON object
// member's, names a credential: the one rule for what "named like a
// credential" means. A header so named may not come from workflow input
// (which is stored in Temporal's history; it is configured on the worker),
// and a string or number held by a JSON member so named, in an answer or a
// webhook event, never reaches history (RedactFields).
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

// RedactFields returns the JSON document doc with every string or number
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
func RedactFields(doc []byte, with string) ([]byte, bool) {
	if !json.Valid(doc) {
		return doc, false
	}
	return RedactValidFields(doc, with)
}

// RedactValidFields is RedactFields for a document the caller has already
// checked with json.Valid: it is not validated again.
func RedactValidFields(doc []byte, with string) ([]byte, bool) {
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
		c := name[i] | 0x20
		if !stemStart[c] {
			continue
		}
		for _, st := range stems {
			if st[0] != c || len(name)-i < len(st) {
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

// stemStart marks the first bytes of stems: mayNameCredential compares a
// stem only where one of them stands.
var stemStart = func() (m [256]bool) {
	for _, st := range stems {
		m[st[0]] = true
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
