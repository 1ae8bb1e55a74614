package webhooks

import (
	"errors"
	"net/http"
	"time"
)

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
