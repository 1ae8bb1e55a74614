package request

import "time"

// WebhookUpdate is the name of the Temporal Update that delivers verified
// notifications of operation to the workflow awaiting them (a workflows
// call with Request.Webhook registers its handler; webhooks.Receiver sends
// it): one name per operation, so that a workflow awaits several at once.
func WebhookUpdate(operation string) string { return "IdempotentHTTPWebhook:" + operation }

// CallbackActivityName is the local activity that builds a call's
// callback URL with its token (webhooks.Callbacks registers it;
// workflows.CallbackURL runs it). Its input is the operation and the
// digest of the call's key (KeyDigest; "" for none); the workflow ID and
// namespace come from the activity's info, so a workflow can only get
// tokens for itself.
const CallbackActivityName = "IdempotentHTTPCallbackURL"

// The defaults of workflows.WebhookOptions and WebhookPoll (their field
// docs state them; the starter uses them too).
const (
	// DefaultWebhookTimeout bounds the wait of a call with
	// Request.Webhook, fallback polls included, when WebhookOptions.Timeout
	// is 0: providers retry a delivery for up to three days.
	DefaultWebhookTimeout = 72 * time.Hour
	// DefaultPollAfter is how long the call waits for a terminal
	// notification before it starts polling, when WebhookPoll.After is 0.
	DefaultPollAfter = 5 * time.Minute
	// DefaultStatusField is where the fallback poll reads the resource's
	// state, when WebhookPoll.StatusField is "".
	DefaultStatusField = "status"
)

// The defaults of webhooks.Config (its field docs state them; the
// worker's flags use them too).
const (
	DefaultWebhookMaxBodyBytes  = 1 << 20
	DefaultWebhookMaxEventBytes = 64 << 10
	DefaultDeliveryTimeout      = 10 * time.Second
	// DefaultWorkflowIDField and DefaultOperationField are where the
	// receiver finds the workflow and operation in a fixed endpoint's
	// event: Stripe's place for the metadata the start request set
	// (workflows.WebhookMetadata), which the reference server's events
	// copy.
	DefaultWorkflowIDField = "data.object.metadata.workflow_id"
	DefaultOperationField  = "data.object.metadata.operation"
	// DefaultKeyDigestField is where the receiver finds the digest of the
	// call's key (KeyDigest) in an event, beside the workflow and
	// operation: workflows.WebhookMetadata's "key_digest".
	DefaultKeyDigestField = "data.object.metadata.key_digest"
)
