// Package activities holds the HTTP activity that performs one idempotent
// request per attempt and classifies its outcome for Temporal's retry policy.
//
// The activity never loops: every attempt is one request. A retryable outcome
// (a network error, 408, 429, 500, 502, 503, 504, or a 409 that carries
// Retry-After) is returned as a retryable [temporal.ApplicationError] whose
// NextRetryDelay is either the server's Retry-After or a jittered exponential
// backoff computed from the activity's retry policy, so Temporal schedules the
// next attempt, counts attempts and enforces the schedule-to-close deadline.
// A non-retryable outcome (any other 4xx, 501, 505, a TLS certificate error, an
// invalid request) is returned with NonRetryable set and one of the ErrType
// constants as its type, so a workflow can match it:
//
//	var appErr *temporal.ApplicationError
//	if errors.As(err, &appErr) && appErr.Type() == activities.ErrTypeClientError { … }
//
// Credentials live in [Config] on the worker. They are added to outgoing
// requests only for their own origin and never appear in activity input,
// results, errors or logs, so they never reach Temporal's history.
package activities
