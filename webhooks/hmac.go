package webhooks

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/internal/named"
	"github.com/idemhttp/temporal-idempotent-http/internal/signature"
)

// The hmac scheme with its default options; the worker's --webhook-hmac-*
// flags set the others.
func init() {
	named.Register[newVerifier]("hmac", func(secrets ...string) (Verifier, error) { return HMACVerifier(HMACOptions{Secrets: secrets}) })
}

// HMACOptions configures HMAC: a plain HMAC-SHA256 of the body (or of
// "timestamp.body") in a header, as GitHub's X-Hub-Signature-256 and many
// providers' own schemes sign.
type HMACOptions struct {
	// Secrets are the endpoint's signing secrets, their bytes as written
	// (required; several during a rotation: a delivery signed by any of
	// them verifies).
	Secrets []string
	// Header carries the signature (default "X-Signature"). It may hold
	// several, separated by commas or spaces, or come several times; the
	// first 16 are considered, and a header over 8 KiB is rejected.
	Header string
	// Prefix starts each signature and is not part of it, e.g. "sha256="
	// for GitHub's X-Hub-Signature-256 (default none).
	Prefix string
	// Encoding is the signature's encoding: "hex" (default; either case)
	// or "base64" (standard, padded).
	Encoding string
	// TimestampHeader, if set, carries the Unix time in seconds of the
	// delivery: the signed content is then "timestamp.body", the
	// timestamp as sent, and it must be within Tolerance of now either
	// way (default none: the body alone is signed, and nothing stops a
	// replay but the receiver's deduplication by ID).
	TimestampHeader string
	// Tolerance bounds the timestamp's distance from now, in whole
	// seconds, in the past and in the future (default
	// signature.DefaultTolerance, 5 minutes). Used only with
	// TimestampHeader.
	Tolerance time.Duration
	// IDHeader, if set, carries the event ID (default none: the ID is the
	// body's IDField). The signature does not cover it: the receiver
	// takes each signed body once whatever the header says (Event
	// IDUnsigned).
	IDHeader string
	// IDField is the top-level field of the JSON body that holds the
	// event ID, a string or a number, when IDHeader is not set (default
	// "id").
	IDField string
	// TypeField is the top-level string field of the JSON body that holds
	// the event type, if any, when TypeHeader is not set (default "type").
	TypeField string
	// TypeHeader, if set, carries the event type, e.g. GitHub's
	// X-GitHub-Event or Shopify's X-Shopify-Topic (default none: the
	// type is the body's TypeField). A delivery without it has no type:
	// the workflow counts it as a non-terminal event. The signature does
	// not cover it (Event TypeUnsigned): such a type ends an operation
	// only once a read of the resource confirms it (workflows.WebhookPoll);
	// prefer a TypeField the body carries where there is one.
	TypeHeader string
}

// HMAC returns the Verifier of a plain HMAC-SHA256 scheme (o says which);
// it fails when o has no secret or an unusable setting. Its RejectStatus
// is 401.
func HMACVerifier(o HMACOptions) (Verifier, error) {
	secrets, err := checkSecrets("HMACVerifier", o.Secrets)
	if err != nil {
		return nil, err
	}
	v := &hmacVerifier{o: o}
	for _, s := range secrets {
		v.keys = append(v.keys, []byte(s))
	}
	if v.o.Header == "" {
		v.o.Header = "X-Signature"
	}
	switch v.o.Encoding {
	case "":
		v.o.Encoding = "hex"
	case "hex", "base64":
	default:
		return nil, fmt.Errorf("webhooks: HMACVerifier: Encoding %q: want \"hex\" or \"base64\"", o.Encoding)
	}
	switch {
	case v.o.Tolerance < 0:
		return nil, fmt.Errorf("webhooks: HMACVerifier: Tolerance %v is negative", o.Tolerance)
	case v.o.Tolerance == 0:
		v.o.Tolerance = signature.DefaultTolerance
	case v.o.Tolerance < time.Second:
		return nil, fmt.Errorf("webhooks: HMACVerifier: Tolerance %v is under a second (timestamps are whole seconds)", o.Tolerance)
	}
	if v.o.IDField == "" {
		v.o.IDField = "id"
	}
	if v.o.TypeField == "" {
		v.o.TypeField = "type"
	}
	return v, nil
}

type hmacVerifier struct {
	o    HMACOptions
	keys [][]byte
}

func (v *hmacVerifier) Scheme() string    { return "hmac" }
func (v *hmacVerifier) RejectStatus() int { return http.StatusUnauthorized }

func (v *hmacVerifier) Verify(h http.Header, body []byte, now time.Time) (Event, error) {
	ts, at, err := v.timestamp(h, now)
	if err != nil {
		return Event{}, err
	}
	sigs, err := v.signatures(h)
	if err != nil {
		return Event{}, err
	}
	if !anyMatch(v.keys, sigs, func(key []byte) []byte { return signature.HMAC(string(key), ts, body) }) {
		return Event{}, noMatch(len(v.keys))
	}
	return v.identify(h, body, Event{Time: at})
}

// timestamp returns the TimestampHeader as sent, part of the signed
// content, and the time it says, once it is checked to be a Unix time
// within Tolerance of now; "" and the zero time when no TimestampHeader is
// configured.
func (v *hmacVerifier) timestamp(h http.Header, now time.Time) (string, time.Time, error) {
	if v.o.TimestampHeader == "" {
		return "", time.Time{}, nil
	}
	ts := h.Get(v.o.TimestampHeader)
	t, err := parseUnix(v.o.TimestampHeader, ts)
	if err != nil {
		return "", time.Time{}, err
	}
	if !digits(ts) {
		// The signed content is the timestamp as sent: keep it to
		// what senders write.
		return "", time.Time{}, fmt.Errorf("%w: %s is not a Unix time in seconds (digits only)", ErrTimestamp, v.o.TimestampHeader)
	}
	tol := int64(v.o.Tolerance / time.Second)
	if err := checkAge(v.o.TimestampHeader, t, now, tol, tol); err != nil {
		return "", time.Time{}, err
	}
	return ts, time.Unix(t, 0), nil
}

// signatures returns the well-formed signatures of the Header (at most
// maxSignatures fields are read), or why there is none.
func (v *hmacVerifier) signatures(h http.Header) ([][]byte, error) {
	vals := h.Values(v.o.Header)
	if len(vals) == 0 || strings.TrimSpace(strings.Join(vals, "")) == "" {
		return nil, fmt.Errorf("%w: the %s header is missing", ErrSignature, v.o.Header)
	}
	var sigs [][]byte
	size, malformed := 0, 0
	for _, val := range vals {
		if size += len(val); size > maxHeaderBytes {
			return nil, fmt.Errorf("%w: the %s header is longer than %d bytes", ErrSignature, v.o.Header, maxHeaderBytes)
		}
		for _, f := range strings.FieldsFunc(val, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' }) {
			if len(sigs)+malformed >= maxSignatures {
				break
			}
			if mac, ok := v.decode(f); ok {
				sigs = append(sigs, mac)
			} else {
				malformed++
			}
		}
	}
	if len(sigs) == 0 {
		want := v.o.Encoding
		if v.o.Prefix != "" {
			want = fmt.Sprintf("%q and %s", v.o.Prefix, want)
		}
		return nil, fmt.Errorf("%w: the %s header holds no well-formed signature (want %s)", ErrSignature, v.o.Header, want)
	}
	return sigs, nil
}

// decode returns the MAC one field of the Header carries, false unless it
// has the Prefix and a non-empty MAC in the Encoding.
func (v *hmacVerifier) decode(field string) ([]byte, bool) {
	s, ok := strings.CutPrefix(field, v.o.Prefix)
	if !ok {
		return nil, false
	}
	var mac []byte
	var err error
	if v.o.Encoding == "base64" {
		mac, err = base64.StdEncoding.DecodeString(s)
	} else {
		mac, err = hex.DecodeString(s)
	}
	return mac, err == nil && len(mac) > 0
}

// identify returns ev with the verified delivery's ID and type: from
// their headers when set, else from the body (parsed only when one of
// them is needed).
func (v *hmacVerifier) identify(h http.Header, body []byte, ev Event) (Event, error) {
	idField, typeField := v.o.IDField, v.o.TypeField
	if v.o.IDHeader != "" {
		idField, ev.ID, ev.IDUnsigned = "", h.Get(v.o.IDHeader), true
		switch {
		case ev.ID == "":
			return Event{}, fmt.Errorf("%w: the %s header is missing", ErrEvent, v.o.IDHeader)
		case len(ev.ID) > maxHeaderBytes:
			return Event{}, fmt.Errorf("%w: the %s header is longer than %d bytes", ErrEvent, v.o.IDHeader, maxHeaderBytes)
		}
	}
	if v.o.TypeHeader != "" {
		if typeField, ev.Type, ev.TypeUnsigned = "", h.Get(v.o.TypeHeader), true; len(ev.Type) > maxHeaderBytes {
			return Event{}, fmt.Errorf("%w: the %s header is longer than %d bytes", ErrEvent, v.o.TypeHeader, maxHeaderBytes)
		}
	}
	if idField == "" && typeField == "" {
		return ev, nil
	}
	id, typ := bodyFields(body, idField, typeField)
	if idField != "" {
		if id == "" {
			return Event{}, missingID(idField)
		}
		ev.ID = id
	}
	if typeField != "" {
		ev.Type = typ
	}
	return ev, nil
}

// digits reports whether s is a non-empty run of ASCII digits.
func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
