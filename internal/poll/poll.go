// Package poll holds what the workflow side hands the poll activity to
// follow a long-running operation: the operation the server accepted
// (Accepted, workflows.Accepted), the poll activity's input (Monitor) and
// the fallback poll of an operation awaited by webhook (WebhookPoll,
// workflows.WebhookPoll, and its rule, StatusRule); and the pace of the
// polls and of cancel requests. Their JSON is what histories hold.
package poll

import (
	"time"

	"github.com/idemhttp/temporal-idempotent-http/internal/backoff"
	"github.com/idemhttp/temporal-idempotent-http/internal/wire"
)

// ActivityName is the name the poll activity is registered under
// (activities.Activities.Register), which workflows schedule to follow a
// long-running operation.
const ActivityName = "IdempotentHTTPPoll"

// The pace of the polls of a long-running operation whose monitor sends no
// Retry-After, and its bounds (workflows.FollowOptions states them): poll
// n waits Backoff(n) with equal jitter, never less than MinInterval
// (a Retry-After below it too).
const (
	DefaultInterval      = time.Second
	DefaultMaxInterval   = time.Minute
	MinInterval          = time.Second
	DefaultFollowTimeout = 24 * time.Hour
)

// Asking the server to cancel an operation (workflows.FollowOptions.
// CancelOperation: the poll activity with Monitor.Cancel set).
//
// CancelAttempts is how many cancel requests are sent at most: the poll
// activity counts the requests that reached the API (one the origin's
// admission holds back is none, nor is one whose credential could not be
// applied or that could not connect) and ends after the third that
// failed; Temporal's MaximumAttempts is only
// backoff.AttemptCeiling(CancelAttempts, CancelTimeout).
//
// CancelTimeout bounds the asking, from the workflow's cancellation on,
// the waits for admission included. It is twice the longest an origin's
// breaker holds requests back with the worker's defaults (the Retry-After
// of the 503 that opened it, at most defaults.MaxRetryAfter, 5
// min), so that a cancel request waits out an outage and is sent as the
// breaker's probe, with room for its own retries. A wait that could not
// end within it fails at once (RetryWouldExceedDeadline, logged). The
// workflow waits for the asking (it runs in a disconnected context):
// cancelled while the origin is held back, it stays open, its pending
// activity "cancelling the operation at …" showing why in the Web UI,
// until the cancel request is answered, or failed 3 times, or this
// bound, and then ends cancelled.
//
// CancelMargin: the asking also ends CancelMargin before the workflow's
// own deadline (the run's start plus the shorter of its run and execution
// timeouts), so that Temporal does not time the workflow out while it
// asks, and the workflow has a workflow task's default timeout to record
// that it was cancelled. With less than MinCancelTime left before that,
// no cancel request is scheduled at all (logged).
const (
	CancelAttempts = 3
	CancelTimeout  = 10 * time.Minute
	CancelMargin   = 10 * time.Second
	MinCancelTime  = time.Second
)

// Backoff is the backoff of the polls without Retry-After: from
// interval (default DefaultInterval) doubling up to maxInterval
// (default DefaultMaxInterval), equal jitter.
func Backoff(interval, maxInterval time.Duration) backoff.Backoff {
	interval = max(interval, MinInterval)
	if maxInterval <= 0 {
		maxInterval = DefaultMaxInterval
	}
	return backoff.Backoff{InitialInterval: interval, BackoffCoefficient: 2, MaximumInterval: max(maxInterval, interval), Jitter: backoff.JitterEqual}
}

// Accepted is a long-running operation the server accepted: where its
// state is read, and, in a final Response, how following it went. It is
// workflows.Accepted (declared here, where the poll activity's input
// Monitor embeds it): workflows.Response.Accepted of a followed call, and
// workflows.Failure.Accepted of an operation that failed, was cancelled
// or was still running at the timeout (resume that one with
// workflows.FollowAccepted). Its JSON is what histories hold: never
// rename a field.
//
// Its URLs are stored in Temporal's history: they never hold user info,
// and hold query values only for the names the origin's
// activities.LongRunning.KeepQuery allows, or those the workflow wrote
// itself (workflows.WebhookPoll.URL), and no credential of the worker. A
// monitor a server names with a secret is shown redacted and travels in
// Sealed (activities.Config.SealKeys), or is not followed
// (workflows.ErrTypeMonitorNotFollowed).
type Accepted struct {
	// Operation, Method, URL and IdempotencyKey are the start request's.
	Operation      string `json:"operation,omitempty"`
	Method         string `json:"method,omitempty"`
	URL            string `json:"url"`
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// StartStatus is the status of the answer to the start request (202).
	StartStatus int `json:"start_status,omitempty"`
	// RetryAfter is the start answer's Retry-After (at least
	// MinInterval, 1 s, at most the worker's
	// activities.Config.MaxRetryAfter): the wait before the first poll.
	RetryAfter time.Duration `json:"retry_after,omitempty"`
	// Waited is how much of RetryAfter the start request's attempt
	// waited before it returned, when the workflow asked it to
	// (input.Input.StartWait) and a wait that long fits the attempt (the
	// origin's admission, activities.Config.Admission MaxWait, 1 s by
	// default): the workflow waits the rest on a timer. 0 when it waited
	// none, as in every history of a workflow that did not ask.
	Waited time.Duration `json:"waited,omitempty"`
	// Monitor is the status monitor's URL, polled with GET: in a final
	// Response or a Failure, the last one polled (a 202 polled by status
	// code may move it with a new Location).
	Monitor string `json:"monitor"`
	// StatusDocument is true when the monitor answers a status document
	// (Azure's "status", Google's "done"); false when its status code
	// decides (202 running, another 2xx the result, 303 the result's URL).
	StatusDocument bool `json:"status_document,omitempty"`
	// ResultURL, when set, is where the final result is read once the
	// operation succeeded (Azure: the start URL of a PUT or PATCH, else
	// the start answer's Location).
	ResultURL string `json:"result_url,omitempty"`
	// State is the last state the monitor reported ("InProgress",
	// "Succeeded", "Failed", "done: true"), redacted and at most 64 bytes;
	// "" when its status code decides.
	State string `json:"state,omitempty"`
	// Polls is how many polls the last following took (the poll
	// activity's attempts, failed ones included).
	Polls int `json:"polls,omitempty"`
	// Sealed is set when Monitor or ResultURL, as the server named them,
	// carry a secret (a credential of the worker in the path, a signature
	// in the query): they are then shown redacted, and Sealed holds them
	// encrypted with the workers' activities.Config.SealKeys, bound to
	// IdempotencyKey, for the poll activity to open. Only a worker that
	// holds the key can poll.
	Sealed string `json:"sealed,omitempty"`
}

// Monitor is a long-running operation as the poll activity follows it:
// the activity input the workflow side (workflows.Call,
// workflows.FollowAccepted) writes from an Accepted, its State and Polls
// left empty (the poll activity reports them). It is a wire type, not
// public API: never rename a field.
//
// It is stored in Temporal's history: its URLs hold no user info and no
// query values but those their origin's activities.LongRunning.KeepQuery
// names (the start activity refuses other monitors), or, with Status, the
// query the workflow wrote in workflows.WebhookPoll.URL.
type Monitor struct {
	// Accepted is the operation: Monitor is the URL polled (with
	// StatusDocument, the origin's LongRunning.StatusField or DoneField
	// reads its answer); ResultURL, when set, is read with a GET for the
	// final result once the status document says the operation
	// succeeded; Operation and IdempotencyKey serve logs, metrics and
	// errors (the key is never sent with a poll); StartStatus,
	// RetryAfter and Waited are handed back in the Response's Accepted
	// and change no poll.
	Accepted
	// Backoff paces polls without Retry-After (Backoff).
	Backoff backoff.Backoff `json:"backoff,omitzero"`
	// Cancel asks the poll activity to send the convention's cancel
	// request instead of polling.
	Cancel bool `json:"cancel,omitempty"`
	// Status, when set, reads the monitor as a resource's status document
	// by this rule instead of the origin's convention: the fallback poll
	// of an operation awaited by webhook (workflows.WebhookPoll).
	Status *StatusRule `json:"status,omitempty"`
}

// monitorOrder is the order of the members of Monitor's JSON that come
// from Accepted, as histories hold them (Monitor declared its own fields
// before it embedded Accepted).
var monitorOrder = []string{"operation", "idempotency_key", "method", "url", "monitor",
	"status_document", "result_url", "start_status", "retry_after"}

// WebhookPoll is the fallback of a webhook: GET the resource until its
// status ends the operation, through the poll activity and its
// classification (the table in docs/how-it-works.md), paced as
// workflows.FollowOptions. It is workflows.WebhookPoll (declared here,
// where the poll activity's input holds its rule, StatusRule). Its JSON
// is what histories hold (workflow inputs): never rename a field; the
// rule tags name its fields in StatusRule's JSON.
type WebhookPoll struct {
	// URL is the resource read with GET, e.g.
	// "https://api.example.com/v1/charges/{id}": each {field} (a dotted
	// path) is replaced by that string or number of the start answer's
	// JSON body, path-escaped (query-escaped in the query). It is polled
	// as written, its query included (e.g. "?expand[]=latest_charge"; the
	// origin's activities.LongRunning.KeepQuery guards only the monitors
	// a server names). Its origin must be allowed on the worker, and its
	// query values reach history, as workflows.Request.URL's do: put no
	// secret there. Required.
	URL string `json:"url"`
	// After is how long the call waits for a terminal notification after
	// the start answer before the first poll (default
	// defaults.PollAfter, 5 min; at least MinInterval, 1 s).
	After time.Duration `json:"after,omitempty"`
	// StatusField is the dotted path of the resource's state in its JSON
	// document (default defaults.StatusField, "status").
	StatusField string `json:"status_field,omitempty" rule:"field"`
	// Succeeded, Failed and Canceled are the states that end the operation
	// (matched case-insensitively); any other is still running. Succeeded
	// is required.
	Succeeded []string `json:"succeeded,omitempty" rule:"succeeded,omitempty"`
	Failed    []string `json:"failed,omitempty" rule:"failed,omitempty"`
	Canceled  []string `json:"canceled,omitempty" rule:"canceled,omitempty"`
	// Confirm: a terminal notification does not end the wait by itself;
	// it starts the poll at once, and the resource's terminal state is the
	// outcome (workflows.Outcome.Confirmed, with the notification). For
	// callbacks that only a token authenticates, and for anyone who wants
	// the provider's API, not a delivery, to have the last word: a poll
	// that cannot confirm fails the call (fail closed). Default false: a
	// verified notification is the outcome.
	Confirm bool `json:"confirm,omitempty"`
	// Interval and MaximumInterval pace the polls as in
	// workflows.FollowOptions (defaults DefaultInterval, 1 s,
	// doubling to DefaultMaxInterval, 1 min; a Retry-After is
	// followed).
	Interval        time.Duration `json:"interval,omitempty"`
	MaximumInterval time.Duration `json:"maximum_interval,omitempty"`
}

// MarshalJSON encodes p with durations as strings such as "5m0s".
func (p WebhookPoll) MarshalJSON() ([]byte, error) {
	type plain WebhookPoll
	return wire.Marshal(plain(p))
}

// UnmarshalJSON decodes what MarshalJSON encodes, and durations as
// nanoseconds.
func (p *WebhookPoll) UnmarshalJSON(data []byte) error {
	type plain WebhookPoll
	return wire.Unmarshal(data, (*plain)(p))
}

// StatusRule is a WebhookPoll's rule as the poll activity's input holds
// it (Monitor.Status): the resource's state is the string at StatusField
// (a dotted path, its default applied) of its status document, matched
// case-insensitively with Succeeded, Failed and Canceled; any other value
// is still running. Its JSON has only those fields, named by their rule
// tags ("field", "succeeded", "failed", "canceled"); the poll activity
// reads nothing else.
type StatusRule WebhookPoll

// MarshalJSON encodes r's rule fields.
func (r StatusRule) MarshalJSON() ([]byte, error) {
	return wire.MarshalView(WebhookPoll(r), "rule")
}

// UnmarshalJSON decodes what MarshalJSON encodes.
func (r *StatusRule) UnmarshalJSON(data []byte) error {
	return wire.UnmarshalView(data, (*WebhookPoll)(r), "rule")
}

// MarshalJSON encodes m as package wire does (durations as strings), its
// members in the order histories hold them.
func (m Monitor) MarshalJSON() ([]byte, error) {
	type plain Monitor
	return wire.MarshalOrdered(plain(m), monitorOrder...)
}

// UnmarshalJSON decodes what MarshalJSON encodes.
func (m *Monitor) UnmarshalJSON(data []byte) error {
	type plain Monitor
	return wire.Unmarshal(data, (*plain)(m))
}

// MarshalJSON encodes a with durations as strings such as "2s".
func (a Accepted) MarshalJSON() ([]byte, error) {
	type plain Accepted
	return wire.Marshal(plain(a))
}

// UnmarshalJSON decodes what MarshalJSON encodes, and durations as
// nanoseconds.
func (a *Accepted) UnmarshalJSON(data []byte) error {
	type plain Accepted
	return wire.Unmarshal(data, (*plain)(a))
}
