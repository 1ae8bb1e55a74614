// Package request holds the rules every HTTP operation of this module obeys,
// in one place for the workflow side (which refuses a bad request before it
// is written to Temporal's history) and the activity (which refuses it again
// before anything is sent): the method, the URL and its origin, the
// idempotency key, the headers, the body and the operation name.
package request

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// MaxBodyBytes bounds a request body: it is stored in Temporal's history
// (workflow input and activity input), whose payloads are limited to 2 MiB.
const MaxBodyBytes = 256 << 10

// MaxKeyBytes bounds an idempotency key (Stripe's limit; the IETF draft sets none).
const MaxKeyBytes = 255

// DefaultMethod is the method of a request that names none.
const DefaultMethod = http.MethodPost

// Method returns the request method in upper case, POST for "", or an error
// for a method other than POST, PUT, PATCH and DELETE.
func Method(m string) (string, error) {
	u := strings.ToUpper(strings.TrimSpace(m))
	switch u {
	case "":
		return DefaultMethod, nil
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return u, nil
	}
	return "", fmt.Errorf("method %q is not supported: use POST, PUT, PATCH or DELETE", m)
}

// ParseURL parses an absolute http or https URL and returns it, without its
// fragment, with its origin. It refuses user info (a password would be
// stored in Temporal's history) and hosts that are not ASCII (write them in
// their punycode form, so the origin compared with the worker's allow list is
// the host that is dialled).
func ParseURL(raw string) (*url.URL, string, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return nil, "", fmt.Errorf("invalid URL: %v", RedactErr(err))
	}
	if u.User != nil {
		return nil, "", fmt.Errorf("URL %s carries user info: a password in the URL would be stored in Temporal's history; put credentials on the worker instead", RedactURL(u.String()))
	}
	o, err := originOf(u)
	if err != nil {
		return nil, "", err
	}
	u.Fragment, u.RawFragment = "", ""
	return u, o, nil
}

// Origin returns the canonical origin of an absolute http or https URL:
// lower-case scheme and host, default port dropped, e.g. "https://api.example.com".
func Origin(raw string) (string, error) {
	_, o, err := ParseURL(raw)
	return o, err
}

// ParseOrigin parses an allowed origin, "scheme://host[:port]".
func ParseOrigin(s string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil {
		return "", fmt.Errorf("origin %q: %v", s, err)
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("origin %q must be scheme://host[:port] with no path, query or user info", RedactURL(s))
	}
	o, err := originOf(u)
	if err != nil {
		return "", fmt.Errorf("origin %q: %w", s, err)
	}
	return o, nil
}

func originOf(u *url.URL) (string, error) {
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		if scheme == "" {
			return "", fmt.Errorf("%q is not an absolute URL: write it as https://host/path", RedactURL(u.String()))
		}
		return "", fmt.Errorf("unsupported scheme %q: only http and https are allowed", u.Scheme)
	}
	host := strings.ToLower(u.Hostname())
	if host == "" {
		return "", fmt.Errorf("%q has no host", RedactURL(u.String()))
	}
	for i := 0; i < len(host); i++ {
		if host[i] >= utf8.RuneSelf {
			return "", fmt.Errorf("host %q is not ASCII: write it in its punycode form (xn--…), the form that is dialled and compared with the allowed origins", host)
		}
	}
	port := u.Port()
	if (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
		port = ""
	}
	if port != "" {
		host = net.JoinHostPort(host, port)
	} else if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return scheme + "://" + host, nil
}

// Key checks an idempotency key: 1 to MaxKeyBytes printable ASCII characters.
func Key(key string) error {
	if key == "" {
		return errors.New("missing idempotency key: name the operation (its key is derived from it) or set the request's IdempotencyKey")
	}
	if len(key) > MaxKeyBytes {
		return fmt.Errorf("idempotency key is %d characters long: at most %d are allowed", len(key), MaxKeyBytes)
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x21 || key[i] > 0x7e {
			return fmt.Errorf("idempotency key has a character (byte %#x at %d) outside printable ASCII", key[i], i)
		}
	}
	return nil
}

// QuoteKey writes key as an RFC 8941 String (sf-string, section 3.3.3, as
// serialized by section 4.1.6), the form the IETF draft "The Idempotency-Key
// HTTP Header Field" gives the header: between double quotes, with \ and "
// escaped by a backslash. A key that passes Key (printable ASCII) is a valid
// sf-string's content.
func QuoteKey(key string) string {
	var b strings.Builder
	b.Grow(len(key) + 2)
	b.WriteByte('"')
	for i := 0; i < len(key); i++ {
		if key[i] == '"' || key[i] == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(key[i])
	}
	b.WriteByte('"')
	return b.String()
}

// Operation checks an operation name: it is part of the derived key, where
// a NUL byte separates the fields, so it may not hold one.
func Operation(op string) error {
	if strings.IndexByte(op, 0) >= 0 {
		return errors.New("operation name contains a NUL byte: it would derive the same key as another (workflow ID, operation) pair; remove it")
	}
	if !utf8.ValidString(op) {
		return errors.New("operation name is not valid UTF-8")
	}
	return nil
}

// Body checks a JSON request body: valid JSON, valid UTF-8 (RFC 8259 §8.1;
// it travels through history as text) and at most MaxBodyBytes.
func Body(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	if len(b) > MaxBodyBytes {
		return fmt.Errorf("request body is %d bytes: at most %d are allowed, since it is stored in Temporal's history; send a reference to the data instead", len(b), MaxBodyBytes)
	}
	if !utf8.Valid(b) {
		return fmt.Errorf("request body is not valid UTF-8 (%d bytes): JSON must be UTF-8", len(b))
	}
	if !json.Valid(b) {
		return fmt.Errorf("request body is not valid JSON (%d bytes): encode it with encoding/json", len(b))
	}
	return nil
}

// BodyHash is the hex SHA-256 of a request body: the bytes sent.
func BodyHash(body []byte) string {
	sum := sha256.Sum256(body)
	var buf [2 * sha256.Size]byte // one allocation: the string
	hex.Encode(buf[:], sum[:])
	return string(buf[:])
}

// setByClient are headers the activity or the HTTP client sets itself.
var setByClient = map[string]string{
	"Idempotency-Key":   "set the request's IdempotencyKey (or let it be derived) instead",
	"Content-Type":      "the body is always sent as application/json",
	"Content-Length":    "it is computed from the body",
	"Host":              "it is taken from the URL",
	"Transfer-Encoding": "it is managed by the HTTP client",
	"Connection":        "it is managed by the HTTP client",
	"Te":                "it is managed by the HTTP client",
	"Upgrade":           "it is managed by the HTTP client",
	"Expect":            "it is managed by the HTTP client",
	"Accept-Encoding":   "the HTTP client negotiates compression itself and decodes the body before credentials are redacted from it; an encoded body would hide them",
	"Accept-Charset":    "a body in another charset would hide credentials from redaction",
	"Traceparent":       "the worker writes each attempt's W3C trace context",
	"Tracestate":        "the worker writes each attempt's W3C trace context",
}

// Headers checks the extra headers of a request: valid names (RFC 9110
// tokens), no two names that differ only in case, values without control
// characters other than horizontal tab, no credential headers (see
// IsCredential) and none that the activity sets itself.
func Headers(h map[string]string) error {
	seen := make(map[string]string, len(h))
	for _, name := range slices.Sorted(maps.Keys(h)) {
		if !ValidHeaderName(name) {
			return fmt.Errorf("invalid header name %q: use letters, digits and !#$%%&'*+-.^_`|~", name)
		}
		canon := http.CanonicalHeaderKey(name)
		if other, dup := seen[canon]; dup {
			return fmt.Errorf("headers %q and %q differ only in case: HTTP header names are case-insensitive, keep one", other, name)
		}
		seen[canon] = name
		if err := HeaderValue(canon, h[name]); err != nil {
			return err
		}
		if IsCredential(canon) {
			return fmt.Errorf("header %s may not be set in the request: it looks like a credential, and the request is stored in Temporal's history; configure it on the worker", canon)
		}
		if why, ok := setByClient[canon]; ok {
			return fmt.Errorf("header %s may not be set in the request: %s", canon, why)
		}
	}
	return nil
}

// ValidHeaderName reports whether s is a valid header name (an RFC 9110 token).
func ValidHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			continue
		}
		if !strings.ContainsRune("!#$%&'*+-.^_`|~", rune(c)) {
			return false
		}
	}
	return true
}

// HeaderValue checks the value v of header name as net/http does before
// it sends a request (which refuses the whole request otherwise): no
// control character other than horizontal tab, and no DEL. The error names
// the header and the byte's position, never the value (it may be a
// credential's).
func HeaderValue(name, v string) error {
	if i := badValueByte(v); i >= 0 {
		return fmt.Errorf("invalid value for header %s: byte %#x at %d is a control character, which HTTP does not allow in a header value", name, v[i], i)
	}
	return nil
}

// badValueByte returns the index of the first byte net/http refuses in a
// header value (a control character other than HTAB, or DEL), or -1.
func badValueByte(v string) int {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			return i
		}
	}
	return -1
}

// CutURL ends a URL that RedactURL shows only up to its first byte that no
// URL holds.
const CutURL = "[cut: invalid URL]"

// RedactURL returns raw with its user info removed and every query value
// (and every parameter without a value) replaced by "REDACTED": for URLs a
// server sends (a redirect's Location, a presigned URL) and for URLs in
// errors; the one place a URL is made showable. Text that does not parse
// as a URL is returned as "[unparsable URL]"; a URL that parses but holds,
// before its query, a byte no URL holds (a space, a control character, a
// byte of invalid UTF-8, raw or percent-escaped, or an escaped "?" or "#"
// that would hide a query in the path) is shown only up to that byte,
// then CutURL: what follows cannot be told apart from a query value.
func RedactURL(raw string) string {
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
// fragment that no clean URL holds (see RedactURL), or -1.
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

// redactURL is RedactURL for a URL without unclean bytes.
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
			if !hasValue || !ValidHeaderName(name) {
				name = "REDACTED"
			}
			parts = append(parts, name+"=REDACTED")
		}
		u.RawQuery = strings.Join(parts, "&")
	}
	u.Fragment, u.RawFragment = "", ""
	return u.String()
}

// RedactErr returns the text of an error from net/url or net/http with the
// URL it names redacted by RedactURL, and every query in the rest of the
// text (a Location the client could not parse, quoted in its error; a
// server's words in a protocol error) cut at its "?" (redactQueries).
func RedactErr(err error) string {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		return uerr.Op + " " + RedactURL(uerr.URL) + ": " + redactQueries(uerr.Err.Error())
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

// The backoff defaults, for workflows.RetryOptions (whose field docs state them)
// and for a Backoff with zero fields: Backoff.WithDefaults applies them
// for both sides.
const (
	DefaultInitialInterval    = 200 * time.Millisecond
	DefaultBackoffCoefficient = 2.0
	DefaultMaximumInterval    = 10 * time.Second
)

// DefaultTaskQueue is the task queue the worker binary (host's
// --task-queue) and the starter use by default; a worker of one's own
// names its own queue. docs/operations.md states it.
const DefaultTaskQueue = "idempotent-http"

// The defaults of a call's other zero fields (workflows.Request and
// RetryOptions state them in their field docs): the starter and the
// benchmarks use them too.
const (
	DefaultMaximumAttempts        = 5
	DefaultStartToCloseTimeout    = 10 * time.Second
	DefaultScheduleToCloseTimeout = 2 * time.Minute
)

// The defaults of activities.Config's limits (its field docs state them;
// the worker's flags use them too).
const (
	// DefaultMaxResponseBytes is the default of Config.MaxResponseBytes.
	DefaultMaxResponseBytes = 1 << 20 // 1 MiB
	// DefaultMaxResultBytes is the default of Config.MaxResultBytes: below
	// Temporal's default 2 MiB payload limit, with room for the rest of the
	// completion.
	DefaultMaxResultBytes = 3 << 19 // 1.5 MiB
	// DefaultMaxRetryAfter is the default of Config.MaxRetryAfter.
	DefaultMaxRetryAfter = 5 * time.Minute
)

// MinInFlightWait is the shortest wait before asking again about a key the
// server is still processing, or for admission.
const MinInFlightWait = 100 * time.Millisecond

// AttemptCeiling is the MaximumAttempts handed to Temporal when the activity
// counts the attempt budget itself: the budget plus every wait for a key in
// flight or for admission that fits before the schedule-to-close deadline
// (at least MinInFlightWait each). The activity ends the operation before Temporal's
// own count could; the ceiling is a guard (and Temporal's test environment
// would stop an unlimited MaximumAttempts at 10).
func AttemptCeiling(budget int32, scheduleToClose time.Duration) int32 {
	n := int64(budget) + int64(scheduleToClose/MinInFlightWait) + 1
	return int32(min(n, math.MaxInt32))
}

// OriginQueue is the activity task queue of origin's requests when they
// run on a queue of their own (workflows.Request.OriginQueue): base, the
// task queue they would run on otherwise, then "@" and the canonical
// origin, e.g. "idempotent-http@https://api.example.com". The workflow
// side and the worker both name it here.
func OriginQueue(base, origin string) string {
	return base + "@" + origin
}
