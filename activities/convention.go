package activities

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/idemhttp/temporal-idempotent-http/internal/httpheader"
	"github.com/idemhttp/temporal-idempotent-http/internal/idemkey"
	"github.com/idemhttp/temporal-idempotent-http/internal/keyplace"
	"github.com/idemhttp/temporal-idempotent-http/internal/named"
	"github.com/idemhttp/temporal-idempotent-http/internal/redact"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// IdempotencyKeyHeader is the default key header, as in the IETF draft "The
// Idempotency-Key HTTP Header Field".
const IdempotencyKeyHeader = "Idempotency-Key"

// ReplayedHeader is the default replay marker: a server sets it to "true"
// when it answers with a stored response for a key it has seen.
const ReplayedHeader = "Idempotent-Replayed"

// defaultBareConflictWait is Convention.BareConflictWait's default: how
// long bare 409s after an attempt of unknown outcome are waited out as the
// key still in flight before one is taken as the server's answer.
const defaultBareConflictWait = 30 * time.Second

// Convention is how one server speaks idempotency: the header that carries
// the key, the key format it accepts, the header that marks a stored
// response, and the answers that mean "a request with this key is still
// being processed" and "this key was used with a different request". Set one
// per origin in Config.Conventions; an origin without one uses IETFConvention(). Start
// from a preset and change what differs:
//
//	c := activities.IETFConvention()
//	c.KeyHeader = "PayPal-Request-Id"
//	cfg.Conventions = map[string]activities.Convention{"https://api-m.paypal.com": c}
type Convention struct {
	// KeyHeader is the request header that carries the key (default
	// "Idempotency-Key").
	KeyHeader string
	// KeyIn is where the server reads the key when not in KeyHeader:
	// "body:PATH", a string member of the JSON body, inserted byte for
	// byte before a signature is computed (Square's "body:idempotency_key",
	// AWS JSON APIs' "body:ClientToken"); "query:NAME", a query parameter
	// (Google Cloud's "query:requestId"); "header:NAME" is KeyHeader NAME.
	// A call's workflows.Request.KeyIn wins. Default "": KeyHeader.
	KeyIn string
	// Reconcile is what calls to this origin do after an attempt of
	// unknown outcome when the server does not honour keys: ask a Lookup
	// on this origin, or wait AtMostOnce for a person's decision
	// (docs/unknown-outcomes.md). A call's workflows.Request.Reconcile
	// wins. Default zero: send again, which only a server that honours
	// the key makes safe. An AtMostOnce origin's calls need no
	// ScheduleToCloseTimeout under an hour: set Request.Reconcile on them
	// too, whose defaults wait.
	Reconcile workflows.Reconcile
	// ReplayedHeaders name response headers whose value "true" marks a
	// stored response replayed for a key the server had seen (default
	// "Idempotent-Replayed"). workflows.Response.Replayed reports it.
	ReplayedHeaders []string
	// KeyMaxBytes is the longest key the server accepts (default and at most
	// 255). A longer explicit key is refused before anything is sent.
	KeyMaxBytes int
	// KeyUUID is true when the server accepts only UUIDs as keys. Derived
	// keys are UUIDs; an explicit key that is not one is refused before
	// anything is sent.
	KeyUUID bool
	// InFlight lists the answers that mean "a request with this key is still
	// being processed". They are waited out (see Activities.Register).
	InFlight []Signal
	// KeyReused lists the answers that mean "this key was already used with a
	// different request"; they fail with workflows.ErrTypeIdempotencyKeyReused.
	KeyReused []Signal
	// SignalsInFlight is true when the server marks every answer about a
	// key in flight (an InFlight signal, Retry-After, or retry advice
	// "true"), as Stripe does with its code idempotency_key_in_use: a bare
	// 409 (one without such a mark) is then its answer about the resource
	// (e.g. "already refunded"), final at once as
	// workflows.ErrTypeHTTPClientError with its body, even after an
	// attempt of unknown outcome (Failure.OutcomeUnknown says so). Default
	// false: a bare 409 after an attempt of unknown outcome is taken for
	// the key in flight, for at most BareConflictWait.
	SignalsInFlight bool
	// BareConflictWait bounds the activity's guess that a bare 409 after an
	// attempt of unknown outcome (a timeout, a lost connection, a gateway's
	// 408 or 5xx) is the key in flight: once the waits after such 409s add
	// up to it, the next bare 409 is the server's answer, final as
	// workflows.ErrTypeHTTPClientError with its body and
	// Failure.OutcomeUnknown (default 30 seconds). It is
	// the sum of the waits the activity asked for, not a clock's reading,
	// so Temporal's test environment, which skips them, ends the same way.
	// A 409 the server marks as in flight is waited out to the
	// schedule-to-close deadline whatever this says.
	BareConflictWait time.Duration
	// KeyQuoted sends the key as a quoted string (default false: the bare
	// key, which Stripe-style servers expect). The IETF draft "The
	// Idempotency-Key HTTP Header Field" (draft-ietf-httpapi-idempotency-key-header,
	// section 2) defines the header as an RFC 8941 Structured Field Item
	// whose value is a String (sf-string, RFC 8941 section 3.3.3), as in
	// Idempotency-Key: "8e03978e-40d5-43e8-bc93-6894a57f9324". Set it for
	// a server that parses the header that strictly: the key is then
	// written between double quotes, with \ and " escaped as \\ and \".
	// The key itself (what KeyMaxBytes and KeyUUID check, and what history
	// and logs hold) is unchanged.
	KeyQuoted bool
	// LongRunning is how the server reports operations that outlive their
	// request, for calls that follow them (workflows.Request.Follow); the
	// zero value is AcceptedLocation.
	LongRunning LongRunning
	// MaxRetryAfter, when more than 0, is the longest Retry-After of this
	// origin honoured, in place of Config.MaxRetryAfter (a call's
	// RetryOptions.MaxRetryAfter or FollowOptions.MaxRetryAfter wins over
	// both): an API whose operations take days and that asks for an hour
	// between polls.
	MaxRetryAfter time.Duration

	// place is KeyIn read, with KeyHeader for a header (withDefaults).
	place keyplace.Place
	// replayedCanon are ReplayedHeaders in canonical form (withDefaults),
	// looked up as they are by replayed.
	replayedCanon []string
}

// Signal matches an answer: its status and, when Body is set, a
// case-insensitive substring of its body (the first 64 KiB); when AnyOf is
// set, the body must hold one of its substrings too.
type Signal struct {
	Status int    // the answer's status
	Body   string // a case-insensitive substring of its body; "" matches any
	// AnyOf narrows Body: {422, "idempoten", {"already used", …}} matches
	// a 422 about the key being reused, not a validation error that
	// merely names an idempotency_key field.
	AnyOf []string
}

func (s Signal) matches(status int, lowerBody string) bool {
	if s.Status != status || !strings.Contains(lowerBody, strings.ToLower(s.Body)) {
		return false
	}
	if len(s.AnyOf) == 0 {
		return true
	}
	for _, w := range s.AnyOf {
		if strings.Contains(lowerBody, strings.ToLower(w)) {
			return true
		}
	}
	return false
}

// keyReusedWords are what a 422 about idempotency says when the key was
// reused with another request: the IETF draft's example ("Idempotency-Key
// is already used", "MUST not be reused across different payloads"),
// @node-idempotency's "is already used", and common phrasings of a key
// used with another request. A 422 that only names the key (a validation
// error about its format, such as "does not match the required format",
// or an echoed idempotency_key field) is a plain client error.
var keyReusedWords = []string{
	"already used", "already been used", "reused", "re-used", "reuse",
	"different payload", "different request", "different parameters", "different body",
	"payload mismatch", "request mismatch", "body mismatch",
	"other payload", "another request", "same parameters",
}

// IETF returns the convention of the IETF draft "The Idempotency-Key HTTP
// Header Field", the default: the key in Idempotency-Key; a 409 for a
// request whose key is still being processed, recognised by the draft's
// wording ("outstanding", "being processed", "in progress") or by Stripe's
// code idempotency_key_in_use, and, since the draft leaves the wording to
// each server, a bare 409 after an attempt of unknown outcome too, for at
// most BareConflictWait (SignalsInFlight false); a 422 whose body speaks of an idempotency
// key already used or reused with another payload (keyReusedWords) for a
// key reused with another request, and the answers of common server
// libraries for the same (a 417, which a client that sends no Expect header
// gets only from such a library, and Stripe's 400 idempotency_error);
// Idempotent-Replayed: true on a stored response.
func IETFConvention() Convention {
	return Convention{
		KeyHeader:       IdempotencyKeyHeader,
		ReplayedHeaders: []string{ReplayedHeader},
		KeyMaxBytes:     idemkey.MaxBytes,
		InFlight: []Signal{
			{Status: 409, Body: "outstanding"}, {Status: 409, Body: "being processed"}, {Status: 409, Body: "in progress"},
			{Status: 409, Body: "in-progress"}, {Status: 409, Body: "still processing"}, {Status: 409, Body: "idempotency_key_in_use"},
		},
		KeyReused: []Signal{{Status: 422, Body: "idempoten", AnyOf: keyReusedWords}, {Status: 417}, {Status: 400, Body: "idempotency_error"}},
	}
}

// Stripe returns Stripe's convention: the key in Idempotency-Key, at most 255
// characters; a 409 with error code idempotency_key_in_use while a request
// with the key is in progress (no Retry-After), and every other 409 an
// answer about the resource (SignalsInFlight); a 400 with error type
// idempotency_error for a key reused with other parameters;
// Idempotent-Replayed: true on a stored response. Stripe's
// Stripe-Should-Retry header is honoured for every origin (see Activities.Register).
func StripeConvention() Convention {
	return Convention{
		KeyHeader:       IdempotencyKeyHeader,
		ReplayedHeaders: []string{ReplayedHeader},
		KeyMaxBytes:     idemkey.MaxBytes,
		InFlight:        []Signal{{Status: 409, Body: "idempotency_key_in_use"}},
		SignalsInFlight: true,
		KeyReused:       []Signal{{Status: 400, Body: "idempotency_error"}},
	}
}

// squareConvention is Square's: the key in the body member
// idempotency_key (at most 45 characters), a 400 IDEMPOTENCY_KEY_REUSED
// for a key reused with another request.
func squareConvention() Convention {
	c := IETFConvention()
	c.KeyIn, c.KeyMaxBytes = "body:idempotency_key", 45
	c.KeyReused = append(c.KeyReused, Signal{Status: 400, Body: "IDEMPOTENCY_KEY_REUSED"})
	return c
}

// awsJSONConvention is that of AWS's JSON-protocol APIs: the key in the
// body member ClientToken (at most 64 characters), a 400
// IdempotentParameterMismatch for a key reused with other parameters.
func awsJSONConvention() Convention {
	c := IETFConvention()
	c.KeyIn, c.KeyMaxBytes = "body:ClientToken", 64
	c.KeyReused = append(c.KeyReused, Signal{Status: 400, Body: "IdempotentParameterMismatch"})
	return c
}

// googleConvention is Google Cloud's requestId: the key in the query
// parameter requestId, a UUID.
func googleConvention() Convention {
	c := IETFConvention()
	c.KeyIn, c.KeyUUID = "query:requestId", true
	return c
}

// The presets the worker's --convention flag and the origins file's
// convention name: a preset registered here is one they accept and list
// in their help. Go code starts from IETFConvention or StripeConvention
// and sets KeyIn.
func init() {
	named.Register("ietf", IETFConvention)
	named.Register("stripe", StripeConvention)
	named.Register("square", squareConvention)
	named.Register("aws-json", awsJSONConvention)
	named.Register("google", googleConvention)
}

// withDefaults fills the zero fields of c and checks it.
func (c Convention) withDefaults() (Convention, error) {
	if c.KeyHeader == "" {
		c.KeyHeader = IdempotencyKeyHeader
	}
	c.KeyHeader = http.CanonicalHeaderKey(c.KeyHeader)
	if err := checkKeyHeader(c.KeyHeader); err != nil {
		return c, err
	}
	var err error
	if c.place, err = keyplace.Parse(c.KeyIn); err != nil {
		return c, fmt.Errorf("KeyIn: %w", err)
	}
	if c.place.In == keyplace.Header {
		if c.place.Name != "" {
			if c.KeyHeader != IdempotencyKeyHeader && c.KeyHeader != http.CanonicalHeaderKey(c.place.Name) {
				return c, fmt.Errorf("KeyIn %s and KeyHeader %s name two headers: set one", c.KeyIn, c.KeyHeader)
			}
			c.KeyHeader = http.CanonicalHeaderKey(c.place.Name)
			if err := checkKeyHeader(c.KeyHeader); err != nil {
				return c, err
			}
		}
		c.place.Name = c.KeyHeader
	}
	if err := c.Reconcile.CheckPlace("Reconcile", c.place); err != nil {
		return c, err
	}
	if c.ReplayedHeaders == nil {
		c.ReplayedHeaders = []string{ReplayedHeader}
	}
	c.replayedCanon = make([]string, len(c.ReplayedHeaders))
	for i, name := range c.ReplayedHeaders {
		c.replayedCanon[i] = http.CanonicalHeaderKey(name)
	}
	if c.MaxRetryAfter < 0 {
		return c, fmt.Errorf("MaxRetryAfter %s: 0 (the worker's Config.MaxRetryAfter) or more", c.MaxRetryAfter)
	}
	if c.KeyMaxBytes <= 0 || c.KeyMaxBytes > idemkey.MaxBytes {
		c.KeyMaxBytes = idemkey.MaxBytes
	}
	if c.BareConflictWait <= 0 {
		c.BareConflictWait = defaultBareConflictWait
	}
	if c.LongRunning, err = c.LongRunning.withDefaults(); err != nil {
		return c, err
	}
	for _, s := range append(append([]Signal(nil), c.InFlight...), c.KeyReused...) {
		if s.Status < 400 || s.Status > 599 {
			return c, fmt.Errorf("signal status %d: in-flight and key-reused signals are 4xx or 5xx answers", s.Status)
		}
	}
	return c, nil
}

// checkKeyHeader checks a key header's name: a valid one, not named like
// a credential (the key is in history and logs).
func checkKeyHeader(name string) error {
	if !httpheader.ValidName(name) {
		return fmt.Errorf("key header %q is not a valid header name", name)
	}
	if redact.IsCredential(name) {
		return fmt.Errorf("key header %s looks like a credential header: the key is stored in Temporal's history and logged", name)
	}
	return nil
}

// keyValue is the value of the key header for key: key itself, or, with
// KeyQuoted, key as an RFC 8941 sf-string.
func (c *Convention) keyValue(key string) string {
	if !c.KeyQuoted {
		return key
	}
	return idemkey.Quote(key)
}

// checkKey checks key against the server's key format.
func (c *Convention) checkKey(key string) error {
	if len(key) > c.KeyMaxBytes {
		return fmt.Errorf("idempotency key is %d characters long: this origin's server accepts at most %d (Convention.KeyMaxBytes)", len(key), c.KeyMaxBytes)
	}
	if c.KeyUUID {
		if _, err := uuid.Parse(key); err != nil || len(key) != 36 {
			return fmt.Errorf("idempotency key %q is not a UUID, which this origin's server requires (Convention.KeyUUID): use a derived key", key)
		}
	}
	return nil
}

func (c *Convention) replayed(h http.Header) bool {
	if c.replayedCanon == nil {
		// A Convention withDefaults did not fill (tests).
		for _, name := range c.ReplayedHeaders {
			if strings.EqualFold(strings.TrimSpace(h.Get(name)), "true") {
				return true
			}
		}
		return false
	}
	for _, canon := range c.replayedCanon {
		// h.Get(canon), without canonicalizing canon again.
		if vs := h[canon]; len(vs) > 0 && strings.EqualFold(strings.TrimSpace(vs[0]), "true") {
			return true
		}
	}
	return false
}

// match returns the first signal among signals that matches the answer.
func match(signals []Signal, status int, lowerBody string) (Signal, bool) {
	for _, s := range signals {
		if s.matches(status, lowerBody) {
			return s, true
		}
	}
	return Signal{}, false
}
