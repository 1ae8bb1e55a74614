package request

import (
	"encoding/json"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/internal/wire"
)

// Input is the activity's input: one HTTP operation as the workflow side
// (workflows.Call) writes it to Temporal's history and the activity
// (the HTTP activity, activities.Activities.requestActivity) reads it back. It is the wire type between the
// two, not public API: users describe an operation with workflows.Request.
// Its JSON is what histories hold (field names, bodies byte for byte,
// durations as strings such as "10s"): never rename a field.
//
// It is stored in Temporal's history, so it must never hold credentials: the
// activity refuses Authorization, Cookie, X-Api-Key and every other header
// that looks like a credential (the worker adds those, from
// Config.Credentials).
type Input struct {
	// Operation names the operation for logs and metrics (e.g. "charge").
	Operation string `json:"operation,omitempty"`
	// Method is POST (the default), PUT, PATCH or DELETE.
	Method string `json:"method,omitempty"`
	// URL is the absolute http or https URL. Its origin must be allowed by the worker.
	URL string `json:"url"`
	// Body is the JSON request body (at most MaxBodyBytes), sent byte for
	// byte with Content-Type: application/json.
	Body json.RawMessage `json:"body,omitempty"`
	// Headers are extra, non-secret request headers.
	Headers map[string]string `json:"headers,omitempty"`
	// IdempotencyKey is sent in the origin's key header (Idempotency-Key
	// unless its Convention says otherwise). Required.
	IdempotencyKey string `json:"idempotency_key"`
	// Backoff holds the retry policy's intervals and the jitter strategy. The
	// activity reads the intervals from the activity's RetryPolicy when the
	// server sends one and from here otherwise (Temporal's test environment).
	Backoff Backoff `json:"backoff,omitzero"`
	// MaximumAttempts is the attempt budget for failures: attempts that end
	// in a retryable failure count, waits for a request with this key that
	// the server is still processing do not. 0 falls back to the activity's
	// RetryPolicy.MaximumAttempts, where every attempt counts; if that is 0
	// too, only the schedule-to-close deadline bounds the attempts. The
	// workflow side sets it and leaves Temporal's own MaximumAttempts at
	// AttemptCeiling.
	MaximumAttempts int32 `json:"maximum_attempts,omitempty"`
	// Follow: the caller will follow a long-running operation, so a 2xx
	// that names a status monitor (by the origin's
	// activities.LongRunning) is returned with its
	// workflows.Response.Operation set.
	Follow bool `json:"follow,omitempty"`
}

// MarshalJSON encodes in as package wire does: bodies byte for byte
// (Temporal's JSON converter would compact them and escape <, > and &),
// durations as strings such as "10s".
func (in Input) MarshalJSON() ([]byte, error) {
	type plain Input
	return wire.Marshal(plain(in))
}

// UnmarshalJSON decodes what MarshalJSON encodes, and bodies as plain JSON
// and durations as nanoseconds (histories written before, or input typed
// by hand).
func (in *Input) UnmarshalJSON(data []byte) error {
	type plain Input
	return wire.Unmarshal(data, (*plain)(in))
}

// Backoff is a call's retry policy: it is workflows.RetryOptions (declared
// here, where the activity input holds its backoff), and the activity
// input's Backoff, the fields a retry delay is computed from, with
// MaximumAttempts 0 there (Input.MaximumAttempts holds it). Its JSON is
// what histories hold: never rename a field.
//
// As workflows.RetryOptions it becomes the activity's Temporal
// RetryPolicy: a zero field takes the value of the RetryPolicy already on
// the workflow context (workflow.WithActivityOptions), else its default
// (DefaultInitialInterval, DefaultBackoffCoefficient,
// DefaultMaximumInterval, 5 attempts, JitterFull).
type Backoff struct {
	// InitialInterval, BackoffCoefficient and MaximumInterval shape the
	// backoff, as Temporal's RetryPolicy does: the wait after failure n is
	// at most min(MaximumInterval, InitialInterval ×
	// BackoffCoefficient^(n−1)). A MaximumInterval below InitialInterval
	// is raised to it (Temporal refuses such a policy).
	InitialInterval    time.Duration `json:"initial_interval,omitempty"`
	BackoffCoefficient float64       `json:"backoff_coefficient,omitempty"`
	MaximumInterval    time.Duration `json:"maximum_interval,omitempty"`
	// MaximumAttempts counts the attempts that fail; waiting for a
	// request the server is still processing, or for admission, does not
	// count (the activity keeps the count; Temporal's own MaximumAttempts
	// is a ceiling every wait before the schedule-to-close deadline fits
	// under).
	MaximumAttempts int32 `json:"maximum_attempts,omitempty"`
	// Jitter spreads the waits within that bound.
	Jitter Jitter `json:"jitter,omitempty"`
	// MaxRetryAfter, when more than 0, is the longest Retry-After this
	// call honours, in place of its origin's
	// (activities.Convention.MaxRetryAfter) and the worker's
	// (activities.Config.MaxRetryAfter, default 5 minutes): an operation of
	// days whose API asks for an hour between polls. A longer Retry-After
	// waits this long. The wait is Temporal's retry timer, durable and
	// free for the worker.
	MaxRetryAfter time.Duration `json:"max_retry_after,omitempty"`
}

// MarshalJSON encodes b as package wire does: durations as strings such as
// "10s".
func (b Backoff) MarshalJSON() ([]byte, error) {
	type plain Backoff
	return wire.Marshal(plain(b))
}

// UnmarshalJSON decodes what MarshalJSON encodes, and durations as
// nanoseconds (histories written before, or input typed by hand).
func (b *Backoff) UnmarshalJSON(data []byte) error {
	type plain Backoff
	return wire.Unmarshal(data, (*plain)(b))
}

// WithDefaults returns b with its unset fields at the defaults, the one
// place both sides take them from: an InitialInterval or MaximumInterval
// of 0 or less becomes DefaultInitialInterval or DefaultMaximumInterval, a
// BackoffCoefficient below 1 becomes DefaultBackoffCoefficient, and an empty
// Jitter becomes JitterFull. A MaximumInterval below InitialInterval is
// raised to it: Temporal refuses such a retry policy (the workflow task
// that schedules the activity would fail, and the workflow would not move).
func (b Backoff) WithDefaults() Backoff {
	if b.InitialInterval <= 0 {
		b.InitialInterval = DefaultInitialInterval
	}
	if b.BackoffCoefficient < 1 {
		b.BackoffCoefficient = DefaultBackoffCoefficient
	}
	if b.MaximumInterval <= 0 {
		b.MaximumInterval = DefaultMaximumInterval
	}
	if b.Jitter == "" {
		b.Jitter = JitterFull
	}
	b.MaximumInterval = max(b.MaximumInterval, b.InitialInterval)
	b.MaxRetryAfter = max(b.MaxRetryAfter, 0)
	return b
}

// ActivityName is the name the HTTP activity is registered under
// (activities.Activities.Register), which workflows.Call schedules.
const ActivityName = "IdempotentHTTPRequest"
