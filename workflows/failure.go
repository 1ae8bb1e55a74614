package workflows

import (
	"errors"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/idemhttp/temporal-idempotent-http/internal/wire"
)

// Failure is what a workflow needs to know about an operation that failed,
// in one value: its type, whether it is final, whether the server may have
// done the work, and what it answered. Get it from the error of [Call],
// [Post], [ExecuteChild] or the ready workflow with [AsFailure]:
//
//	if f, ok := AsFailure(err); ok && f.Status == http.StatusPaymentRequired {
//		// the card was declined
//	}
//
// The activity attaches it to every *temporal.ApplicationError it returns
// (as its first detail, without Type, Retryable and Message, which are the
// error's own), so the Web UI, the CLI and a log line show it too.
type Failure struct {
	// Type is the error type, one of the ErrType constants: what happened
	// and what to do next.
	Type string `json:"-"`
	// Retryable is false when the failure is final: non-retryable, or the
	// last attempt of the budget.
	Retryable bool `json:"-"`
	// Message is the error's message.
	Message string `json:"-"`

	// Operation, Method, URL (user info and query values redacted) and
	// IdempotencyKey are the request's. They and Attempt are unset (0)
	// when the workflow refused the request before scheduling it (an
	// InvalidRequest from Call, Post or ExecuteChild): the Message then
	// names the field to fix.
	Operation      string `json:"operation,omitempty"`
	Method         string `json:"method,omitempty"`
	URL            string `json:"url,omitempty"`
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// Status is the HTTP status, 0 when no response arrived.
	Status int `json:"status,omitempty"`
	// Attempt is the activity attempt (from 1) that failed.
	Attempt int32 `json:"attempt"`
	// Reason says why the answer was classified so: the rule of the
	// classification table (docs/how-it-works.md) that applied.
	Reason string `json:"reason,omitempty"`
	// OutcomeUnknown is true when a request of this operation may have
	// reached the server without an answer (a timeout, a lost connection, a
	// lost worker, a gateway's 408 or 5xx): the server may have done the
	// work or may still do it. Never retry such an operation with a new
	// key; run the same workflow ID again (same key) to learn the outcome.
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
	// Location is the redirect target, for ErrTypeRedirectNotFollowed, with
	// user info and query values redacted, cut at 1 KiB.
	Location string `json:"location,omitempty"`
	// Body is the start of the response body (at most 1 KiB), credentials
	// redacted before it was cut; for ErrTypeOperationFailed, the error the
	// server's status document reported.
	Body string `json:"body,omitempty"`
	// Accepted is the long-running operation the server accepted, when the
	// failure came while following it (ErrTypeOperationFailed,
	// ErrTypeOperationCanceled, ErrTypeOperationStillRunning, a poll's
	// final error): FollowAccepted(ctx, *f.Accepted, opts) resumes
	// following it.
	Accepted *Accepted `json:"accepted,omitempty"`
	// Outcome is set on the failure of Webhook.Await of an operation that
	// failed or was cancelled: whether a notification (Outcome.Notification)
	// or the fallback poll said so, and when.
	Outcome *Outcome `json:"outcome,omitempty"`
}

// MarshalJSON encodes f's details as package wire does: durations as
// strings such as "10s". Type, Retryable and Message are not encoded:
// they are the ApplicationError's own, which AsFailure copies back.
func (f Failure) MarshalJSON() ([]byte, error) {
	type plain Failure
	return wire.Marshal(plain(f))
}

// UnmarshalJSON decodes what MarshalJSON encodes, and durations as
// nanoseconds (histories written before, or input typed by hand).
func (f *Failure) UnmarshalJSON(data []byte) error {
	type plain Failure
	return wire.Unmarshal(data, (*plain)(f))
}

// AsFailure returns the Failure in err, which may be wrapped (in a
// *temporal.ActivityError from [Call] or [Post], a *temporal.ChildWorkflowExecutionError
// from [ExecuteChild], a *temporal.WorkflowExecutionError from a client).
// ok is false when err holds no failure of this package: a timeout, a
// cancellation, or another activity's error (an ApplicationError whose
// type is none of the ErrType constants, or without a Failure).
func AsFailure(err error) (f Failure, ok bool) {
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || !appErr.HasDetails() || !errTypes[appErr.Type()] {
		return Failure{}, false
	}
	if !decodeFailure(appErr, &f) {
		return Failure{}, false
	}
	f.Type, f.Retryable, f.Message = appErr.Type(), !appErr.NonRetryable(), appErr.Message()
	return f, true
}

// decodeFailure decodes appErr's first detail into f. An ApplicationError
// made in the workflow itself holds its details as Go values, and the
// SDK panics when the first is not a Failure: that is not a Failure.
func decodeFailure(appErr *temporal.ApplicationError, f *Failure) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	return appErr.Details(f) == nil
}

// The error types of a [Failure] (its Type, and the Type of the
// *temporal.ApplicationError it comes in). Each constant's name is
// "ErrType" and its value; the values are recorded in Temporal's histories
// and never change. They are untyped string constants on purpose, unlike
// Jitter, State and Source: they are compared with
// temporal.ApplicationError.Type() and listed in
// temporal.RetryPolicy.NonRetryableErrorTypes, which are plain strings. The
// classification table (docs/how-it-works.md) says which answer gets which
// type; here is what each means and what to do next.
//
// Types that Temporal retries, with the same key, until the operation
// succeeds or its budget (RetryOptions.MaximumAttempts) or deadline
// (Request.ScheduleToCloseTimeout) runs out:
//
//   - [ErrTypeHTTPRetryableStatus], [ErrTypeNetworkError]: retry, counted
//     against the budget; on the last attempt of the budget the failure
//     comes back with the same type and Retryable false.
//   - [ErrTypeCredentialUnavailable], when asking the credential again may
//     help (or within the origin's activities.Credential.RetryRefused):
//     wait on the credential's backoff, not counted against the budget,
//     nothing sent; at the deadline it ends as itself, final.
//   - [ErrTypeIdempotencyKeyInFlight], [ErrTypeNotAdmitted]: wait, not
//     counted against the budget; a wait that cannot end before the
//     deadline ends as [ErrTypeIdempotencyKeyLocked] or
//     [ErrTypeRetryWouldExceedDeadline].
//
// Every other type is final at once. [Failure.OutcomeUnknown] says whether
// the server may have done the work: if it is true, never call again with
// another key; run the same workflow ID again, which sends the same key
// and gets the server's stored answer.
const (
	// ErrTypeInvalidRequest: the request is malformed (operation or key,
	// method, URL, header, body): nothing was sent. Fix the Request; the
	// message names the field.
	ErrTypeInvalidRequest = "InvalidRequest"
	// ErrTypeOriginNotAllowed: the URL's origin is not in the worker's
	// activities.Config.AllowedOrigins: nothing was sent. Add the origin to
	// the worker's configuration (worker flag --allow-origin) or fix the URL.
	ErrTypeOriginNotAllowed = "OriginNotAllowed"
	// ErrTypeHTTPClientError: the server answered a 4xx that retrying
	// cannot fix, or told the activity not to retry: fix the request, or
	// treat the status as a business outcome (a 402: the card was declined).
	ErrTypeHTTPClientError = "HTTPClientError"
	// ErrTypeHTTPNonRetryableStatus: the server answered a status that
	// retrying cannot fix and that is not a 4xx (the classification table, rule
	// 7). Check OutcomeUnknown.
	ErrTypeHTTPNonRetryableStatus = "HTTPNonRetryableStatus"
	// ErrTypeHTTPRetryableStatus: the server answered a retryable status
	// (the classification table, rule 7) or told the activity to retry.
	ErrTypeHTTPRetryableStatus = "HTTPRetryableStatus"
	// ErrTypeNetworkError: the request or its answer failed in transit
	// (refused, reset, timed out, a body cut short).
	ErrTypeNetworkError = "NetworkError"
	// ErrTypeTLSCertificateError: the server's certificate could not be
	// verified, or the URL's scheme does not match the server. Fix the URL
	// or the worker's trust store.
	ErrTypeTLSCertificateError = "TLSCertificateError"
	// ErrTypeRedirectNotFollowed: the server redirected somewhere the
	// activity does not follow (a method-changing redirect, another
	// origin, user info); Failure.Location says where. Call that URL if it
	// is right.
	ErrTypeRedirectNotFollowed = "RedirectNotFollowed"
	// ErrTypeRetryWouldExceedDeadline: the next retry could not start
	// before the schedule-to-close deadline, so the activity failed at
	// once instead of waiting. Raise Request.ScheduleToCloseTimeout, or
	// run the same workflow ID again later.
	ErrTypeRetryWouldExceedDeadline = "RetryWouldExceedDeadline"
	// ErrTypeIdempotencyKeyInFlight: the server is still processing a
	// request with this key (most likely an earlier attempt of this
	// operation).
	ErrTypeIdempotencyKeyInFlight = "IdempotencyKeyInFlight"
	// ErrTypeNotAdmitted: the attempt sent nothing: the worker's admission
	// or circuit breaker for the origin (activities.Admission) held it back.
	ErrTypeNotAdmitted = "NotAdmitted"
	// ErrTypeCredentialUnavailable: the attempt sent nothing the API acted
	// on: the origin's credential (activities.Config.Credentials) could not
	// be applied (a token endpoint down or refusing the client, a signature
	// that could not be made), before the request or after the API refused
	// its token with 401 invalid_token. It is retryable when asking again may help (a token
	// endpoint that answered 5xx or 429 or could not be reached), with the
	// endpoint's Retry-After as NextRetryDelay; final when the credential
	// was refused or is misconfigured: fix the worker's credential for the
	// origin, then run the same workflow ID again. It is never an answer of
	// the API: OutcomeUnknown is false unless an earlier attempt's was.
	// The poll of a long-running operation whose monitor was sealed with
	// a key this worker does not hold (activities.Config.SealKeys) fails
	// with it too, retried, so that a worker that holds the key polls.
	ErrTypeCredentialUnavailable = "CredentialUnavailable"
	// ErrTypeIdempotencyKeyLocked: the server kept answering that the key
	// is in flight until the next wait could not end before the deadline.
	// The first request may still complete: never retry with another key;
	// wait out the server's lock, then run the same workflow ID again.
	ErrTypeIdempotencyKeyLocked = "IdempotencyKeyLocked"
	// ErrTypeIdempotencyKeyReused: the server says this key was already
	// used with another request (another body, method or path): a bug in
	// the caller, such as two operations sharing a name or a key, or a body
	// that changed between runs of the same workflow ID. Give each call its
	// own operation name, and build bodies from workflow input only.
	ErrTypeIdempotencyKeyReused = "IdempotencyKeyReused"

	// Types of following a long-running operation (Request.Follow,
	// FollowAccepted); Failure.Accepted is the operation, but for
	// ErrTypeMonitorNotFollowed.

	// ErrTypeOperationRunning: the monitor says the operation is still
	// running. Temporal polls again after the monitor's Retry-After or the
	// poll backoff (FollowOptions); it is never final: at
	// FollowOptions.Timeout it becomes ErrTypeOperationStillRunning.
	ErrTypeOperationRunning = "OperationRunning"
	// ErrTypeOperationStillRunning: the operation had not ended (or its
	// monitor could not be read) when the next poll could not happen before
	// FollowOptions.Timeout. It may still succeed: resume with
	// FollowAccepted(ctx, *f.Accepted, opts); never start it again with
	// another key.
	ErrTypeOperationStillRunning = "OperationStillRunning"
	// ErrTypeOperationFailed: the monitor says the operation failed
	// (Azure's "Failed", Google's error); Failure.Body is the server's
	// error. The server did not do the work, by its own word; a call again
	// with the same key gets the same accepted operation: start anew under
	// another operation name once the cause is fixed.
	ErrTypeOperationFailed = "OperationFailed"
	// ErrTypeOperationCanceled: the monitor says the operation was
	// cancelled.
	ErrTypeOperationCanceled = "OperationCanceled"
	// ErrTypeMonitorNotFollowed: the server accepted the operation, but
	// named no status monitor (a 202 without one), or one (Failure.Location,
	// redacted) the worker will not follow: another origin not in the
	// origin's LongRunning.MonitorOrigins or the worker's AllowedOrigins,
	// user info, longer than 8 KiB, or a secret (query values whose names
	// LongRunning.KeepQuery does not allow into history, a credential in
	// its path) that the worker cannot seal (activities.Config.SealKeys),
	// or sealed with a key this worker does not hold. The
	// operation goes on at the server (OutcomeUnknown): fix the worker's
	// configuration, then run the same workflow ID again (the same key
	// gets the stored answer, and the operation is followed).
	ErrTypeMonitorNotFollowed = "MonitorNotFollowed"

	// Types of reconciling an attempt of unknown outcome with an API that
	// does not honour keys (Request.Reconcile, docs/unknown-outcomes.md).

	// ErrTypeLookupFailed: the lookup asked before a request (whether an
	// earlier attempt or run went through) failed (no answer, a 429 or
	// 5xx: retried, counted against the budget; another status, or an
	// answer from which nothing can be concluded: final). Nothing was
	// sent after it. Fix the lookup (Reconcile.Lookup, Items) or check by
	// hand, then run the same workflow ID again: it asks the lookup first.
	ErrTypeLookupFailed = "LookupFailed"
	// ErrTypeLookupAmbiguous: the lookup found more than one record for
	// the key: none is taken as the result, and nothing is sent again.
	// Settle it by hand with the API's owner.
	ErrTypeLookupAmbiguous = "LookupAmbiguous"
	// ErrTypeAwaitingDecision: an attempt of an AtMostOnce call may have
	// reached the API and no answer says what it did: the call is paused
	// until a person decides (temporal activity unpause: send again;
	// temporal activity complete: it went through, or give up). Final
	// where the call cannot wait (Temporal's test environment, which
	// cannot pause; a schedule-to-close under an hour; a pause refused 20
	// times) and for a completion that is no decision: the outcome is
	// unknown; check with the API's owner before running the workflow
	// again, whose first attempt sends at once.
	ErrTypeAwaitingDecision = "AwaitingDecision"
	// ErrTypeGaveUp: a person decided to give up an AtMostOnce call whose
	// outcome was unknown (Failure.Reason says why); the API may have done
	// the work (OutcomeUnknown).
	ErrTypeGaveUp = "GaveUp"
)

// errorTypes are the ErrType constants, each with whether it is final
// at once: the one list of this package's failure types. AsFailure reads
// the types it holds; nonRetryableErrorTypes is made from it. A new
// ErrType constant goes here, or AsFailure cannot read its Failure (a
// test parses this file and fails when one is missing).
var errorTypes = []struct {
	name  string
	final bool
}{
	{ErrTypeInvalidRequest, true},
	{ErrTypeOriginNotAllowed, true},
	{ErrTypeHTTPClientError, true},
	{ErrTypeHTTPNonRetryableStatus, true},
	{ErrTypeHTTPRetryableStatus, false},
	{ErrTypeNetworkError, false},
	{ErrTypeTLSCertificateError, true},
	{ErrTypeRedirectNotFollowed, true},
	{ErrTypeRetryWouldExceedDeadline, true},
	{ErrTypeIdempotencyKeyInFlight, false},
	{ErrTypeNotAdmitted, false},
	// Final or not as its answer says: the activity sets NonRetryable.
	{ErrTypeCredentialUnavailable, false},
	{ErrTypeIdempotencyKeyLocked, true},
	{ErrTypeIdempotencyKeyReused, true},
	// Final or not as its answer says.
	{ErrTypeLookupFailed, false},
	{ErrTypeLookupAmbiguous, true},
	// Retried while paused; final where the activity cannot pause.
	{ErrTypeAwaitingDecision, false},
	{ErrTypeGaveUp, true},
	{ErrTypeOperationRunning, false},
	{ErrTypeOperationStillRunning, true},
	{ErrTypeOperationFailed, true},
	{ErrTypeOperationCanceled, true},
	{ErrTypeMonitorNotFollowed, true},
}

// errTypes are the names of errorTypes, for AsFailure.
var errTypes = func() map[string]bool {
	m := make(map[string]bool, len(errorTypes))
	for _, t := range errorTypes {
		m[t.name] = true
	}
	return m
}()

// nonRetryableErrorTypes are the types of errorTypes that are final at
// once, which Call puts in the RetryPolicy's NonRetryableErrorTypes as a
// second guard beside the activity's own NonRetryable flag.
var nonRetryableErrorTypes = func() []string {
	var names []string
	for _, t := range errorTypes {
		if t.final {
			names = append(names, t.name)
		}
	}
	return names
}()
