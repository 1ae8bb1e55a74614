package activities

import (
	"encoding/json"
	"errors"
	"time"

	"go.temporal.io/sdk/temporal"
)

// ActivityName is the name the HTTP activity is registered under.
const ActivityName = "IdempotentHTTPRequest"

// IdempotencyKeyHeader is the request header that carries the key, as in the
// IETF draft "The Idempotency-Key HTTP Header Field".
const IdempotencyKeyHeader = "Idempotency-Key"

// ReplayedHeader is the response header a server sets to "true" when it
// answers with a stored response for a key it has seen.
const ReplayedHeader = "Idempotent-Replayed"

// Request is the activity input: one HTTP operation. It is stored in Temporal's
// history, so it must never hold credentials; the activity rejects
// Authorization, Cookie and similar headers here (configure them on the
// worker in Config.Credentials instead).
type Request struct {
	// Operation names the operation for logs and metrics (e.g. "charge").
	Operation string `json:"operation,omitempty"`
	// Method is POST (the default), PUT, PATCH or DELETE.
	Method string `json:"method,omitempty"`
	// URL is the absolute http or https URL. Its origin must be allowed by the worker.
	URL string `json:"url"`
	// Body is the JSON request body, sent as-is with Content-Type: application/json.
	Body json.RawMessage `json:"body,omitempty"`
	// Headers are extra, non-secret request headers.
	Headers map[string]string `json:"headers,omitempty"`
	// IdempotencyKey is sent as the Idempotency-Key header. Required.
	IdempotencyKey string `json:"idempotency_key"`
	// Backoff is used when the server does not send the activity's retry policy
	// (Temporal's test environment), and selects the jitter strategy.
	Backoff Backoff `json:"backoff,omitzero"`
}

// Response is the activity result for a 2xx answer.
type Response struct {
	// Status is the HTTP status code.
	Status int `json:"status"`
	// Headers holds the response headers named in Config.ResultHeaders that were present.
	Headers map[string]string `json:"headers,omitempty"`
	// Body is the response body when it is valid JSON.
	Body json.RawMessage `json:"body,omitempty"`
	// RawBody is the response body when it is not JSON.
	RawBody []byte `json:"raw_body,omitempty"`
	// BodyOmitted is true when the body was larger than Config.MaxResponseBytes:
	// the operation succeeded, but its body is not kept (BodyBytes says how much was read).
	BodyOmitted bool `json:"body_omitted,omitempty"`
	// BodyBytes is the number of body bytes read (at most MaxResponseBytes+1).
	BodyBytes int64 `json:"body_bytes"`
	// Replayed is true when the server marked this as a stored response for a
	// key it had already processed (Idempotent-Replayed: true).
	Replayed bool `json:"replayed"`
	// Attempt is the activity attempt (from 1) that got this response.
	Attempt int32 `json:"attempt"`
	// IdempotencyKey is the key the request carried.
	IdempotencyKey string `json:"idempotency_key"`
}

// FailureDetails is attached to every ApplicationError the activity returns
// (its first detail), so a workflow, a log line or an operator can see what
// happened without the logs of the worker. Get it with [Details].
type FailureDetails struct {
	Operation      string `json:"operation,omitempty"`
	Method         string `json:"method,omitempty"`
	URL            string `json:"url,omitempty"`
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// Status is the HTTP status, 0 when no response arrived.
	Status int `json:"status,omitempty"`
	// Attempt is the activity attempt (from 1) that failed.
	Attempt int32 `json:"attempt"`
	// RetryAfter is the server's Retry-After, when it sent a valid one.
	RetryAfter time.Duration `json:"retry_after,omitempty"`
	// NextRetryDelay is the delay handed to Temporal, for retryable failures.
	NextRetryDelay time.Duration `json:"next_retry_delay,omitempty"`
	// Location is the redirect target, for ErrTypeRedirect.
	Location string `json:"location,omitempty"`
	// Body is the start of the response body (at most 1 KiB), credentials redacted.
	Body string `json:"body,omitempty"`
}

// Details extracts the FailureDetails from an error returned by the activity,
// directly or wrapped (for example in a *temporal.ActivityError in a workflow).
func Details(err error) (FailureDetails, bool) {
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || !appErr.HasDetails() {
		return FailureDetails{}, false
	}
	var d FailureDetails
	if appErr.Details(&d) != nil {
		return FailureDetails{}, false
	}
	return d, true
}
