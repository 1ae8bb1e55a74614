package workflows

import (
	"encoding/json"
	"fmt"

	"github.com/idemhttp/temporal-idempotent-http/internal/wire"
)

// Response is the result of an operation that succeeded: the 2xx answer,
// as the activity returns it and [Call], [Post] and the ready workflow
// hand it on.
type Response struct {
	// Status is the HTTP status code.
	Status int `json:"status"`
	// Headers holds the response headers named in the worker's
	// activities.Config.ResultHeaders that were present (each at most 4
	// KiB; URLs the server sent have their user info and query values
	// redacted).
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
	// activities.Config.MaxResultBytes, or the body passed its
	// MaxResponseBytes),
	// "credential" (the body holds a credential that cannot be redacted
	// without rewriting it) or "encoded" (the server sent it in a content
	// coding the worker cannot decode, such as br, so credentials in it
	// could not be found). A body that broke off is never a result: the
	// attempt is retried with the same key (see activities.Activities.Register).
	OmittedReason string `json:"omitted_reason,omitempty"`
	// BodyRedacted is true when credentials were redacted inside the body's
	// JSON strings, or the values of members named like credentials
	// ("accessToken", "client_secret", …) replaced by "[REDACTED]" (the
	// body stays valid JSON).
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
	// origin's activities.Convention.ReplayedHeaders).
	Replayed bool `json:"replayed"`
	// Attempt is the activity attempt (from 1) that got this response.
	Attempt int32 `json:"attempt"`
	// IdempotencyKey is the key the request carried.
	IdempotencyKey string `json:"idempotency_key"`
	// Operation is set when the call followed a long-running operation
	// (Request.Follow): the start answer of a call that asked to follow
	// names it, and the final Response carries it with its last State and
	// Polls. Nil for an answer that was the result at once.
	Accepted *Accepted `json:"accepted,omitempty"`
	// Reconciled says how the call settled an attempt of unknown outcome
	// (Request.Reconcile): "lookup" (Body is the one record the lookup
	// found: the request went through, its own answer never came) or
	// "operator" (a person completed the call with this result). Empty
	// for the answer to the request itself.
	Reconciled string `json:"reconciled,omitempty"`
	// GaveUp is what a person who gave up an AtMostOnce call wrote
	// (temporal activity complete --result '{"gave_up": "why"}'): Call
	// returns an ErrTypeGaveUp failure instead of such a Response.
	GaveUp string `json:"gave_up,omitempty"`
	// Outcome is set on the result of Webhook.Await: how the operation
	// ended, and whether a notification or the fallback poll said so.
	Outcome *Outcome `json:"outcome,omitempty"`
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
