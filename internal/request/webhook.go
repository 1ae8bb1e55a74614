package request

// WebhookUpdate is the name of the Temporal Update that delivers verified
// notifications of operation to the workflow awaiting them (a workflows
// call with Request.Webhook registers its handler; webhooks.Receiver sends
// it): one name per operation, so that a workflow awaits several at once.
func WebhookUpdate(operation string) string { return "IdempotentHTTPWebhook:" + operation }

// CallbackActivityName is the local activity that builds an operation's
// callback URL with its token (webhooks.Callbacks registers it;
// workflows.CallbackURL runs it). Its input is the
// operation; the workflow ID and namespace come from the activity's info,
// so a workflow can only get tokens for itself.
const CallbackActivityName = "IdempotentHTTPCallbackURL"
