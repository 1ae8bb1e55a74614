package activities

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/idemhttp/temporal-idempotent-http/internal/wire"
)

// ActivityName is the name the HTTP activity is registered under.
const ActivityName = "IdempotentHTTPRequest"

// Response is the activity result for a 2xx answer.
type Response struct {
	// Status is the HTTP status code.
	Status int `json:"status"`
	// Headers holds the response headers named in Config.ResultHeaders that
	// were present (each at most 4 KiB; URLs the server sent have their user
	// info and query values redacted).
	Headers map[string]string `json:"headers,omitempty"`
	// Body is the response body when it is valid JSON, byte for byte unless
	// OmittedReason says otherwise.
	Body json.RawMessage `json:"body,omitempty"`
	// RawBody is the response body when it is not JSON.
	RawBody []byte `json:"raw_body,omitempty"`
	// BodyOmitted is true when the body is not kept although the operation
	// succeeded; OmittedReason says why, BodyBytes and BodySHA256 identify it.
	BodyOmitted bool `json:"body_omitted,omitempty"`
	// OmittedReason is "too large" (the encoded result would pass
	// Config.MaxResultBytes, or the body passed Config.MaxResponseBytes),
	// "credential" (the body holds a credential that cannot be redacted
	// without rewriting it) or "encoded" (the server sent it in a content
	// coding the worker cannot decode, such as br, so credentials in it
	// could not be found). A body that broke off is never a result: the
	// attempt is retried with the same key (see Activities.Do).
	OmittedReason string `json:"omitted_reason,omitempty"`
	// BodyRedacted is true when credentials were redacted inside the body's
	// JSON strings (the body stays valid JSON).
	BodyRedacted bool `json:"body_redacted,omitempty"`
	// BodyBytes is the size of the body received (decoded, when the
	// server sent it gzip- or deflate-encoded).
	BodyBytes int64 `json:"body_bytes"`
	// BodySHA256 is the hex SHA-256 of the body received, set when the body
	// is omitted or redacted, so an operator can match it with the server's.
	BodySHA256 string `json:"body_sha256,omitempty"`
	// BodyTruncated is true when the body was longer than 64 MiB: reading
	// stopped there, and BodyBytes and BodySHA256 cover those bytes only.
	BodyTruncated bool `json:"body_truncated,omitempty"`
	// Replayed is true when the server marked this as a stored response for a
	// key it had already processed (Idempotent-Replayed: true, or the
	// origin's Convention.ReplayedHeaders).
	Replayed bool `json:"replayed"`
	// Attempt is the activity attempt (from 1) that got this response.
	Attempt int32 `json:"attempt"`
	// IdempotencyKey is the key the request carried.
	IdempotencyKey string `json:"idempotency_key"`
}

// MarshalJSON encodes r as package wire does: bodies byte for byte
// (Temporal's JSON converter would compact them and escape <, > and &),
// durations as strings such as "10s".
func (r Response) MarshalJSON() ([]byte, error) {
	type plain Response
	return wire.Marshal(plain(r))
}

// UnmarshalJSON decodes what MarshalJSON encodes, and bodies as plain JSON
// and durations as nanoseconds (histories written before, or input typed
// by hand).
func (r *Response) UnmarshalJSON(data []byte) error {
	type plain Response
	return wire.Unmarshal(data, (*plain)(r))
}

// Decode decodes the JSON body into v, as json.Unmarshal does. It fails,
// saying why, when there is no JSON body to decode: the body was omitted
// (OmittedReason, with its size and SHA-256), is not JSON (see RawBody) or
// is empty.
func (r *Response) Decode(v any) error {
	switch {
	case r.BodyOmitted:
		return fmt.Errorf("the %d response's body was omitted (%s; %d bytes, sha256 %s): the operation succeeded, but its body is not in the result", r.Status, r.OmittedReason, r.BodyBytes, r.BodySHA256)
	case len(r.Body) == 0 && len(r.RawBody) > 0:
		return fmt.Errorf("the %d response's body is not JSON (%d bytes in RawBody)", r.Status, len(r.RawBody))
	case len(r.Body) == 0:
		return fmt.Errorf("the %d response has no body", r.Status)
	}
	return json.Unmarshal(r.Body, v)
}

// FailureDetails is attached to every ApplicationError the activity returns
// (its first detail), so a workflow, a log line or an operator can see what
// happened without the logs of the worker. Get it with [Details].
type FailureDetails struct {
	Operation string `json:"operation,omitempty"`
	Method    string `json:"method,omitempty"`
	// URL is the request URL.
	URL            string `json:"url,omitempty"`
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// Status is the HTTP status, 0 when no response arrived.
	Status int `json:"status,omitempty"`
	// Attempt is the activity attempt (from 1) that failed.
	Attempt int32 `json:"attempt"`
	// Reason says why the answer was classified so (the rule that applied).
	Reason string `json:"reason,omitempty"`
	// OutcomeUnknown is true when a request of this activity may have reached
	// the server without an answer (a timeout, a lost connection, a lost
	// worker, a gateway's 408 or 5xx): the server may have done the work or
	// may still do it. Never retry such an operation with a new key; run the
	// same workflow ID again (same key) to learn the outcome.
	OutcomeUnknown bool `json:"outcome_unknown,omitempty"`
	// RetryAfter is the server's Retry-After, when it sent a valid one.
	RetryAfter time.Duration `json:"retry_after,omitempty"`
	// NextRetryDelay is the delay handed to Temporal, for retryable failures.
	NextRetryDelay time.Duration `json:"next_retry_delay,omitempty"`
	// InFlightSince is when the server first answered that a request with
	// this key is still being processed, and InFlightCount how many times it
	// has answered so, in this activity.
	InFlightSince time.Time `json:"in_flight_since,omitzero"`
	InFlightCount int32     `json:"in_flight_count,omitempty"`
	// Location is the redirect target, for ErrTypeRedirect, with user info
	// and query values redacted, cut at 1 KiB.
	Location string `json:"location,omitempty"`
	// Body is the start of the response body (at most 1 KiB), credentials
	// redacted before it was cut.
	Body string `json:"body,omitempty"`
}

// MarshalJSON encodes d as package wire does: bodies byte for byte
// (Temporal's JSON converter would compact them and escape <, > and &),
// durations as strings such as "10s".
func (d FailureDetails) MarshalJSON() ([]byte, error) {
	type plain FailureDetails
	return wire.Marshal(plain(d))
}

// UnmarshalJSON decodes what MarshalJSON encodes, and bodies as plain JSON
// and durations as nanoseconds (histories written before, or input typed
// by hand).
func (d *FailureDetails) UnmarshalJSON(data []byte) error {
	type plain FailureDetails
	return wire.Unmarshal(data, (*plain)(d))
}

// Failure is what a workflow needs to know about an error from the activity
// (as returned by workflows.Call and workflows.Post), in one value:
//
//	if f, ok := activities.AsFailure(err); ok && f.Status == http.StatusPaymentRequired {
//		// the card was declined
//	}
type Failure struct {
	// Type is the error type, one of the ErrType constants.
	Type string
	// Retryable is false when the activity marked the error final
	// (non-retryable, or the last attempt of the budget).
	Retryable bool
	// Message is the error's message.
	Message string
	// FailureDetails holds the status, attempt, key, reason and body snippet.
	FailureDetails
}

// AsFailure returns the Failure in err, which may be wrapped (for example in
// a *temporal.ActivityError). ok is false when err holds no ApplicationError
// of this package: a timeout, a cancellation, or another activity's error.
func AsFailure(err error) (f Failure, ok bool) {
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) {
		return Failure{}, false
	}
	d, ok := Details(err)
	if !ok {
		return Failure{}, false
	}
	return Failure{Type: appErr.Type(), Retryable: !appErr.NonRetryable(), Message: appErr.Message(), FailureDetails: d}, true
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
