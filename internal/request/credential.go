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
// and the value of a JSON member so named, in an answer or a webhook
// event, never reaches history (RedactFields).
//
// The name is split into words at every character other than a letter or
// digit and where the case changes ("clientSecret", "X-API-Key" and
// "secret_key" are client secret, x api key and secret key), in lower case.
// It names a credential when
//   - a word is, or ends with, token, secret(s), password, passwd,
//     passphrase, credential(s), cookie(s), or a key written as one word
//     (apikey, accesskey, privatekey, secretkey, clientkey, subscriptionkey,
//     signingkey, authkey): accessToken, idToken, X-Csrf-Token, Set-Cookie,
//     "accesstoken", Apikey;
//   - a word is session: X-Session-Id, sessionData;
//   - "key" (or "keys") follows api, access, private, secret, client,
//     subscription, signing, auth, encryption or master: X-Api-Key,
//     private_key, Ocp-Apim-Subscription-Key, X-Auth-Key;
//   - its last word is auth, authorization, authentication or authenticate:
//     Authorization, Proxy-Authorization, WWW-Authenticate, basicAuth.
//
// Words that would hide business fields are matched only so: "key" alone
// (idempotency_key, public_key), a word that merely starts with token
// (tokenized_card), "tokens" (total_tokens, a count), and auth or
// authorization before another word (authorization_code, authCode, a card
// payment's approval code; X-Auth-Email) are not credentials.
func IsCredential(name string) bool {
	ws := words(name)
	for i, w := range ws {
		for _, c := range credentialSuffixes {
			if strings.HasSuffix(w, c) {
				return true
			}
		}
		if w == "session" {
			return true
		}
		if (w == "key" || w == "keys") && i > 0 && keyQualifiers[ws[i-1]] {
			return true
		}
	}
	if len(ws) > 0 && authHeads[ws[len(ws)-1]] {
		return true
	}
	return false
}

// credentialSuffixes name a credential as a word or a word's end.
var credentialSuffixes = []string{
	"token", "secret", "secrets", "password", "passwd", "passphrase",
	"credential", "credentials", "cookie", "cookies",
	"apikey", "accesskey", "privatekey", "secretkey", "clientkey",
	"subscriptionkey", "signingkey", "authkey",
}

// keyQualifiers make the word "key" after them a credential.
var keyQualifiers = map[string]bool{
	"api": true, "access": true, "private": true, "secret": true, "client": true,
	"subscription": true, "signing": true, "auth": true, "encryption": true, "master": true,
}

// authHeads are credentials as a name's last word.
var authHeads = map[string]bool{
	"auth": true, "authorization": true, "authentication": true, "authenticate": true,
}

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

// RedactFields returns the JSON document doc with the value of every
// object member named like a credential (IsCredential, the name read with
// its escapes decoded), whatever that value is, replaced by the JSON
// string with, and whether anything was replaced. Every other byte is
// kept as it was. doc must be valid JSON (json.Valid); anything else is
// returned unchanged.
func RedactFields(doc []byte, with string) ([]byte, bool) {
	if !json.Valid(doc) {
		return doc, false
	}
	repl, _ := json.Marshal(with)
	var out []byte
	last := 0
	// depth-first: after an object's '{' or ',' the next string is a name.
	var stack []byte // '{' or '['
	expectName := false
	for i := 0; i < len(doc); i++ {
		switch c := doc[i]; c {
		case '{', '[':
			stack = append(stack, c)
			expectName = c == '{'
		case '}', ']':
			stack = stack[:len(stack)-1]
			expectName = false
		case ',':
			expectName = len(stack) > 0 && stack[len(stack)-1] == '{'
		case '"':
			end := StringEnd(doc, i)
			if !expectName {
				i = end
				continue
			}
			expectName = false
			raw := doc[i+1 : end]
			escaped := slices.Contains(raw, '\\')
			if !escaped && !mayNameCredential(raw) {
				i = end
				continue
			}
			name := string(raw)
			if escaped && json.Unmarshal(doc[i:end+1], &name) != nil {
				name = ""
			}
			if !IsCredential(name) {
				i = end
				continue
			}
			// The value starts after the ':' that follows the name.
			j := end + 1
			for doc[j] != ':' {
				j++
			}
			j++
			for isSpace(doc[j]) {
				j++
			}
			vend := valueEnd(doc, j)
			out = append(append(out, doc[last:j]...), repl...)
			last = vend
			i = vend - 1
		}
	}
	if out == nil {
		return doc, false
	}
	return append(out, doc[last:]...), true
}

// stems are what every name IsCredential accepts contains, in lower case.
var stems = []string{"token", "secret", "pass", "credential", "cookie", "key", "session", "auth"}

// mayNameCredential reports whether name, in any case, holds a stem: a
// test without allocation before IsCredential.
func mayNameCredential(name []byte) bool {
	for _, st := range stems {
		for i := 0; i+len(st) <= len(name); i++ {
			j := 0
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

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

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
