// Package activities holds the worker side of an idempotent HTTP call: the
// activity that sends one attempt of a request with its idempotency key,
// classifies the answer and hands Temporal's retry policy the delay to the
// next attempt (the server's Retry-After, else jittered backoff, as
// NextRetryDelay). It never loops: every attempt is one request, and
// Temporal schedules, counts and bounds the attempts.
//
// A second activity, the poll activity, follows a long-running operation
// that a call asked to follow (workflows.Request.Follow): one GET of its
// status monitor per attempt, read by the origin's [LongRunning]
// convention (longrunning.go chooses the reader of its style, one per
// style in internal/longrunning; poll.go sends each request through the
// start request's admission, exchange and classification), the wait
// between polls held by Temporal's retry timer.
//
// Register both on a worker with [New] and [Activities.Register]; workflow
// code calls it through package workflows, whose [workflows.Response] and
// [workflows.Failure] are what it returns. The rules live in one place
// each: the classification in outcome.go (the table in docs/how-it-works.md), the retry
// delay in retry.go, admission and the circuit breaker in
// internal/admission, redaction in redact.go.
//
// Credentials live in [Config] on the worker. They are added to outgoing
// requests only for their own origin and never appear in activity input,
// results, errors or logs, so they never reach Temporal's history.
package activities
