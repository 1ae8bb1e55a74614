// Package defaults holds the defaults of the public packages' fields, one
// declaration each: the field docs of workflows, activities and webhooks
// state them in words, and the worker, the starter and the benchmarks read
// them for their flags.
package defaults

import (
	"time"
)

// TaskQueue is the task queue the worker binary (host's
// --task-queue) and the starter use by default; a worker of one's own
// names its own queue. docs/operations.md states it.
const TaskQueue = "idempotent-http"

// The defaults of a call's zero fields other than the backoff's (package
// backoff holds those): workflows.Request and RetryOptions state them in
// their field docs; the starter and the benchmarks use them too.
const (
	MaximumAttempts        = 5
	StartToCloseTimeout    = 10 * time.Second
	ScheduleToCloseTimeout = 2 * time.Minute
)

// The defaults of activities.Config's limits (its field docs state them;
// the worker's flags use them too).
const (
	// MaxResponseBytes is the default of Config.MaxResponseBytes.
	MaxResponseBytes = 1 << 20 // 1 MiB
	// MaxResultBytes is the default of Config.MaxResultBytes: below
	// Temporal's default 2 MiB payload limit, with room for the rest of the
	// completion.
	MaxResultBytes = 3 << 19 // 1.5 MiB
	// MaxRetryAfter is the default of Config.MaxRetryAfter.
	MaxRetryAfter = 5 * time.Minute
)

// The defaults of workflows.WebhookOptions and WebhookPoll (their field
// docs state them; the starter uses them too).
const (
	// WebhookTimeout bounds the wait of a call with
	// Request.Webhook, fallback polls included, when WebhookOptions.Timeout
	// is 0: providers retry a delivery for up to three days.
	WebhookTimeout = 72 * time.Hour
	// PollAfter is how long the call waits for a terminal
	// notification before it starts polling, when WebhookPoll.After is 0.
	PollAfter = 5 * time.Minute
	// StatusField is where the fallback poll reads the resource's
	// state, when WebhookPoll.StatusField is "".
	StatusField = "status"
)

// The defaults of webhooks.Config (its field docs state them; the
// worker's flags use them too).
const (
	WebhookMaxBodyBytes  = 1 << 20
	WebhookMaxEventBytes = 64 << 10
	DeliveryTimeout      = 10 * time.Second
	// WorkflowIDField and OperationField are where the
	// receiver finds the workflow and operation in a fixed endpoint's
	// event: Stripe's place for the metadata the start request set
	// (workflows.WebhookMetadata), which the reference server's events
	// copy.
	WorkflowIDField = "data.object.metadata.workflow_id"
	OperationField  = "data.object.metadata.operation"
	// KeyDigestField is where the receiver finds the digest of the
	// call's key (idemkey.Digest) in an event, beside the workflow and
	// operation: workflows.WebhookMetadata's "key_digest".
	KeyDigestField = "data.object.metadata.key_digest"
)
