package request

import (
	"time"

	"github.com/idemhttp/temporal-idempotent-http/internal/wire"
)

// PollActivityName is the name the poll activity is registered under
// (activities.Activities.Register), which workflows schedule to follow a
// long-running operation.
const PollActivityName = "IdempotentHTTPPoll"

// The pace of the polls of a long-running operation whose monitor sends no
// Retry-After, and its bounds (workflows.FollowOptions states them): poll
// n waits PollBackoff(n) with equal jitter, never less than MinPollInterval
// (a Retry-After below it too).
const (
	DefaultPollInterval    = time.Second
	DefaultMaxPollInterval = time.Minute
	MinPollInterval        = time.Second
	DefaultFollowTimeout   = 24 * time.Hour
)

// Asking the server to cancel an operation (workflows.FollowOptions.
// CancelOperation: the poll activity with Monitor.Cancel set).
//
// CancelAttempts is how many cancel requests are sent at most: the poll
// activity counts the requests it sent (a request the origin's admission
// holds back is none) and ends after the third that failed; Temporal's
// MaximumAttempts is only AttemptCeiling(CancelAttempts, CancelTimeout).
//
// CancelTimeout bounds the asking, from the workflow's cancellation on,
// the waits for admission included. It is twice the longest an origin's
// breaker holds requests back with the worker's defaults (the Retry-After
// of the 503 that opened it, at most DefaultMaxRetryAfter, 5
// min), so that a cancel request waits out an outage and is sent as the
// breaker's probe, with room for its own retries. A wait that could not
// end within it fails at once (RetryWouldExceedDeadline, logged). The
// workflow waits for the asking (it runs in a disconnected context):
// cancelled while the origin is held back, it stays open, its pending
// activity "cancelling the operation at …" showing why in the Web UI,
// until the cancel request is answered, or failed 3 times, or this
// bound, and then ends cancelled.
const (
	CancelAttempts = 3
	CancelTimeout  = 10 * time.Minute
)

// PollBackoff is the backoff of the polls without Retry-After: from
// interval (default DefaultPollInterval) doubling up to maxInterval
// (default DefaultMaxPollInterval), equal jitter.
func PollBackoff(interval, maxInterval time.Duration) Backoff {
	interval = max(interval, MinPollInterval)
	if maxInterval <= 0 {
		maxInterval = DefaultMaxPollInterval
	}
	return Backoff{InitialInterval: interval, BackoffCoefficient: 2, MaximumInterval: max(maxInterval, interval), Jitter: JitterEqual}
}

// Monitor is a long-running operation as the poll activity follows it:
// the activity input the workflow side (workflows.Call,
// workflows.FollowAccepted) writes from a workflows.Accepted. It is a
// wire type, not public API: never rename a field.
//
// It is stored in Temporal's history: its URLs hold no user info and no
// query values but those their origin's activities.LongRunning.KeepQuery
// names (the start activity refuses other monitors), or, with Status, the
// query the workflow wrote in workflows.WebhookPoll.URL.
type Monitor struct {
	// Operation and IdempotencyKey are the start request's, for logs,
	// metrics and errors; the key is never sent with a poll.
	Operation      string `json:"operation,omitempty"`
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// Method and URL are the start request's; its origin's Convention
	// reads the monitor.
	Method string `json:"method,omitempty"`
	URL    string `json:"url"`
	// Monitor is the URL polled.
	Monitor string `json:"monitor"`
	// StatusDocument: the monitor answers a status document (the origin's
	// LongRunning.StatusField or DoneField reads it); false: the status
	// code decides (202 running, another 2xx the result, 303 see other).
	StatusDocument bool `json:"status_document,omitempty"`
	// ResultURL, when set, is read with a GET for the final result once the
	// status document says the operation succeeded.
	ResultURL string `json:"result_url,omitempty"`
	// StartStatus and RetryAfter are the start answer's (its status, its
	// first wait), handed back in Accepted; they change no poll.
	StartStatus int           `json:"start_status,omitempty"`
	RetryAfter  time.Duration `json:"retry_after,omitempty"`
	// Backoff paces polls without Retry-After (PollBackoff).
	Backoff Backoff `json:"backoff,omitzero"`
	// Cancel asks the poll activity to send the convention's cancel
	// request instead of polling.
	Cancel bool `json:"cancel,omitempty"`
	// Status, when set, reads the monitor as a resource's status document
	// by this rule instead of the origin's convention: the fallback poll
	// of an operation awaited by webhook (workflows.WebhookPoll).
	Status *StatusRule `json:"status,omitempty"`
}

// StatusRule reads a resource's state from its status document: the
// string at Field (a dotted path), matched case-insensitively with the
// values that end the operation; any other value is still running.
type StatusRule struct {
	Field     string   `json:"field"`
	Succeeded []string `json:"succeeded,omitempty"`
	Failed    []string `json:"failed,omitempty"`
	Canceled  []string `json:"canceled,omitempty"`
}

// MarshalJSON encodes m as package wire does (durations as strings).
func (m Monitor) MarshalJSON() ([]byte, error) {
	type plain Monitor
	return wire.Marshal(plain(m))
}

// UnmarshalJSON decodes what MarshalJSON encodes.
func (m *Monitor) UnmarshalJSON(data []byte) error {
	type plain Monitor
	return wire.Unmarshal(data, (*plain)(m))
}
