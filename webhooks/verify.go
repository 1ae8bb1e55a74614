package webhooks

import (
	"bytes"
	"crypto/hmac"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// newVerifier makes a scheme's Verifier from its secrets. Each scheme's
// file registers its own by the scheme's name in internal/signature's
// Schemes (internal/named), where the worker's --webhook-scheme finds it.
type newVerifier = func(secrets ...string) (Verifier, error)

// Verifier checks one webhook scheme's signature: StandardWebhooks,
// Stripe or HMAC. Each holds several secrets at once (rotation: a
// delivery signed by any of them verifies) and compares in constant time.
type Verifier interface {
	// Verify checks the signature the headers h carry over body, read
	// whole, at now. It returns the event it names, or an error that
	// wraps ErrSignature, ErrTimestamp or ErrEvent and says what to fix
	// (never a secret, an expected MAC or a received signature).
	Verify(h http.Header, body []byte, now time.Time) (Event, error)
	// Scheme names the scheme: "standard-webhooks", "stripe" or "hmac".
	Scheme() string
	// RejectStatus is the status the scheme's senders expect for a
	// delivery that fails verification (they do not retry it as a
	// transient failure).
	RejectStatus() int
}

// Event is what a verified delivery names.
type Event struct {
	// ID is the event's ID (Standard Webhooks' webhook-id, Stripe's "id",
	// HMACOptions.IDHeader or IDField): the receiver delivers each ID to
	// a workflow once.
	ID string
	// Type is the body's event type ("type"; HMACOptions.TypeField).
	Type string
	// Time is the signed timestamp, zero for a scheme without one.
	Time time.Time
	// IDUnsigned and TypeUnsigned report that ID or Type came from a
	// header the signature does not cover (HMACOptions.IDHeader,
	// TypeHeader), so anyone holding a genuine delivery can change them.
	// The receiver then deduplicates by the signed body's SHA-256 instead
	// of ID, and marks the notification (workflows.Notification
	// TypeUnsigned): its type alone ends no operation.
	IDUnsigned, TypeUnsigned bool
}

// Errors of Verify, for errors.Is.
var (
	// ErrSignature: no valid signature by any of the verifier's secrets
	// (missing, malformed or wrong).
	ErrSignature = errors.New("webhooks: signature does not verify")
	// ErrTimestamp: the signed timestamp is missing, malformed or outside
	// the tolerance (a replay, or a sender's clock off).
	ErrTimestamp = errors.New("webhooks: timestamp outside the tolerance")
	// ErrEvent: the signature verifies but the delivery names no event
	// ID (the receiver delivers each ID once, so it cannot deliver one
	// without): a body that is not a JSON object or lacks the ID field,
	// or a missing ID header.
	ErrEvent = errors.New("webhooks: the verified delivery names no event ID")
)

// The bounds of a verifier's header parsing, so that a hostile delivery
// costs little: a signature or ID header over maxHeaderBytes (a timestamp
// over 32 bytes) is rejected unread, and signatures past the first
// maxSignatures are ignored: the work is one MAC of the body and at most
// maxSignatures comparisons per secret.
const (
	maxHeaderBytes = 8 << 10
	maxSignatures  = 16
)

// checkSecrets returns the secrets, or an error naming the first unusable
// one by its position (never its value).
func checkSecrets(scheme string, secrets []string) ([]string, error) {
	if len(secrets) == 0 {
		return nil, fmt.Errorf("webhooks: %s: no secret: give the endpoint's signing secret (several during a rotation)", scheme)
	}
	for i, s := range secrets {
		switch {
		case strings.TrimSpace(s) == "":
			return nil, fmt.Errorf("webhooks: %s: secret %d of %d is empty", scheme, i+1, len(secrets))
		case strings.TrimSpace(s) != s:
			return nil, fmt.Errorf("webhooks: %s: secret %d of %d starts or ends with white space (a stray newline?)", scheme, i+1, len(secrets))
		}
	}
	return secrets, nil
}

// anyMatch reports whether any received MAC equals the MAC of any key,
// comparing in constant time.
func anyMatch(keys [][]byte, received [][]byte, mac func(key []byte) []byte) bool {
	for _, k := range keys {
		want := mac(k)
		for _, r := range received {
			if hmac.Equal(want, r) {
				return true
			}
		}
	}
	return false
}

func noMatch(n int) error {
	secrets := "the secret"
	if n > 1 {
		secrets = fmt.Sprintf("any of the %d secrets", n)
	}
	return fmt.Errorf("%w: no signature matches %s: check the endpoint's signing secret, and that the body is passed as received", ErrSignature, secrets)
}

func missingID(field string) error {
	return fmt.Errorf("%w: the body has no top-level %q string or number", ErrEvent, field)
}

// parseUnix parses a timestamp header's value: Unix seconds.
func parseUnix(header, v string) (int64, error) {
	switch {
	case v == "":
		return 0, fmt.Errorf("%w: the %s header is missing", ErrTimestamp, header)
	case len(v) > 32:
		return 0, fmt.Errorf("%w: the %s header is not a Unix time in seconds", ErrTimestamp, header)
	}
	t, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: the %s header is not a Unix time in seconds", ErrTimestamp, header)
	}
	return t, nil
}

// checkAge rejects a timestamp t (Unix seconds) more than past seconds
// before now or more than future seconds after it (future < 0: no bound),
// now truncated to whole seconds as the official libraries do.
func checkAge(what string, t int64, now time.Time, past, future int64) error {
	n := now.Unix()
	// Saturating differences: t may be any int64.
	switch {
	case t < n && (n-t > past || n-t < 0):
		return fmt.Errorf("%w: %s is %s old, past the tolerance of %s: a replay, or the sender's clock is behind", ErrTimestamp, what, secs(n, t), time.Duration(past)*time.Second)
	case future >= 0 && t > n && (t-n > future || t-n < 0):
		return fmt.Errorf("%w: %s is %s in the future, past the tolerance of %s: the sender's clock is ahead", ErrTimestamp, what, secs(t, n), time.Duration(future)*time.Second)
	}
	return nil
}

// secs says b - a (b > a) seconds as a duration, or "very far" when that
// does not fit one.
func secs(b, a int64) string {
	d := b - a
	if d < 0 || d > int64(1<<63-1)/int64(time.Second) {
		return "more than 292 years"
	}
	return (time.Duration(d) * time.Second).String()
}

// bodyFields returns the top-level fields idField (a string, or a
// number's literal) and typeField (a string) of a JSON object body, ""
// for any that is absent or of another type, or when the body is not a
// JSON object.
func bodyFields(body []byte, idField, typeField string) (id, typ string) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return "", ""
	}
	if raw, ok := m[idField]; ok && idField != "" {
		var s string
		switch {
		case json.Unmarshal(raw, &s) == nil:
			id = s
		case len(raw) > 0 && (raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9'):
			id = string(bytes.TrimSpace(raw))
		}
	}
	if raw, ok := m[typeField]; ok && typeField != "" {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			typ = s
		}
	}
	return id, typ
}
