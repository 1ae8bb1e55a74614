// Package activities holds the HTTP activity that performs one idempotent
// request per attempt and classifies its outcome for Temporal's retry policy.
//
// The activity never loops: every attempt is one request. A retryable outcome
// (a network error, a retryable status, a key in flight: the classification
// table in the README, implemented once in outcome.go) is returned as a
// retryable [temporal.ApplicationError] whose
// NextRetryDelay is either the server's Retry-After or a jittered exponential
// backoff computed from the activity's retry policy, so Temporal schedules the
// next attempt, counts attempts and enforces the schedule-to-close deadline.
// A non-retryable outcome (a 4xx that retrying cannot fix, a 5xx such as
// 501, a TLS certificate error, an invalid request) is returned with
// NonRetryable set and one of the ErrType
// constants as its type, so a workflow can match it:
//
//	var appErr *temporal.ApplicationError
//	if errors.As(err, &appErr) && appErr.Type() == activities.ErrTypeClientError { … }
//
// Credentials live in [Config] on the worker. They are added to outgoing
// requests only for their own origin and never appear in activity input,
// results, errors or logs, so they never reach Temporal's history.
package activities
