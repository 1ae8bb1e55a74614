// Package input holds what the workflow side hands the HTTP activity
// through Temporal: its input (Input), the names the activities, the
// callback-URL local activity and the webhook updates are registered
// under, and the activity's one-line summary in the Web UI.
package input

import (
	"encoding/json"
	"net/url"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/internal/backoff"
	"github.com/idemhttp/temporal-idempotent-http/internal/reconcile"
	"github.com/idemhttp/temporal-idempotent-http/internal/wire"
)

// Input is the activity's input: one HTTP operation as the workflow side
// (workflows.Call) writes it to Temporal's history and the HTTP activity
// (activities.Activities.requestActivity) reads it back. It is the wire
// type between the two, not public API: users describe an operation with workflows.Request.
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
	Backoff backoff.Backoff `json:"backoff,omitzero"`
	// MaximumAttempts is the attempt budget for failures: attempts that end
	// in a retryable failure count, waits for a request with this key that
	// the server is still processing do not. 0 falls back to the activity's
	// RetryPolicy.MaximumAttempts, where every attempt counts; if that is 0
	// too, only the schedule-to-close deadline bounds the attempts. The
	// workflow side sets it and leaves Temporal's own MaximumAttempts at
	// backoff.AttemptCeiling.
	MaximumAttempts int32 `json:"maximum_attempts,omitempty"`
	// KeyIn is where the key goes (workflows.Request.KeyIn, read by
	// package keyplace); "" for the origin's.
	KeyIn string `json:"key_in,omitempty"`
	// Reconcile is workflows.Request.Reconcile; zero for the origin's.
	Reconcile reconcile.Reconcile `json:"reconcile,omitzero"`
	// Follow: the caller will follow a long-running operation, so a 2xx
	// that names a status monitor (by the origin's
	// activities.LongRunning) is returned with its
	// workflows.Response.Operation set.
	Follow bool `json:"follow,omitempty"`
	// StartWait, with Follow, is the longest part of the start answer's
	// wait before the first poll (its Retry-After) that the start
	// request's attempt may spend before it returns, reporting it in
	// workflows.Accepted.Waited: the call's FollowOptions bound it (the
	// first wait the workflow would time), and the origin's admission
	// decides whether a wait that long fits the attempt. 0 (as workflows
	// wrote before it): the attempt waits none, the workflow's timer all.
	StartWait time.Duration `json:"start_wait,omitempty"`
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

// ActivityName is the name the HTTP activity is registered under
// (activities.Activities.Register), which workflows.Call schedules.
const ActivityName = "IdempotentHTTPRequest"

// ActivityNameV2 is the HTTP activity's second name, which workflows.Call
// schedules a call that puts its key elsewhere (KeyIn) or reconciles
// (Reconcile) under: only workers that know those fields register it, so
// that an older worker, which would ignore them (sending the key in a
// header, retrying blind), never runs such a call.
const ActivityNameV2 = "IdempotentHTTPRequestV2"

// Name is the activity type in is scheduled under: ActivityNameV2 when
// it uses a field older workers do not know, else ActivityName.
func (in *Input) Name() string {
	if in.KeyIn != "" || !in.Reconcile.IsZero() {
		return ActivityNameV2
	}
	return ActivityName
}

// Summary is the activity's one-line summary in the Web UI, e.g.
// "POST api.example.com/payments (charge)".
func Summary(method, rawURL, operation string) string {
	s := method + " " + rawURL
	if u, err := url.Parse(rawURL); err == nil {
		s = method + " " + u.Host + u.Path
	}
	if operation != "" {
		s += " (" + operation + ")"
	}
	return s
}

// WebhookUpdate is the name of the Temporal Update that delivers verified
// notifications of operation to the workflow awaiting them (a workflows
// call with Request.Webhook registers its handler; webhooks.Receiver sends
// it): one name per operation, so that a workflow awaits several at once.
func WebhookUpdate(operation string) string { return "IdempotentHTTPWebhook:" + operation }

// CallbackActivityName is the local activity that builds a call's
// callback URL with its token (webhooks.Callbacks registers it;
// workflows.CallbackURL runs it). Its input is the operation and the
// digest of the call's key (idemkey.Digest; "" for none); the workflow ID and
// namespace come from the activity's info, so a workflow can only get
// tokens for itself.
const CallbackActivityName = "IdempotentHTTPCallbackURL"
