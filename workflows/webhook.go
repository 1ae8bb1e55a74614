package workflows

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/idemhttp/temporal-idempotent-http/internal/defaults"
	"github.com/idemhttp/temporal-idempotent-http/internal/httpurl"
	"github.com/idemhttp/temporal-idempotent-http/internal/idemkey"
	"github.com/idemhttp/temporal-idempotent-http/internal/input"
	"github.com/idemhttp/temporal-idempotent-http/internal/jsonfield"
	"github.com/idemhttp/temporal-idempotent-http/internal/poll"
	"github.com/idemhttp/temporal-idempotent-http/internal/redact"
	"github.com/idemhttp/temporal-idempotent-http/internal/rules"
	"github.com/idemhttp/temporal-idempotent-http/internal/wire"
)

// Source is where an Outcome came from (Outcome.Source); in JSON, its
// string.
type Source string

// The sources of an Outcome.
const (
	SourceWebhook Source = "webhook"
	SourcePoll    Source = "poll"
)

// State is how an operation ended (Outcome.State; testsuite's Async and
// Webhooks take it to say how the reference server's operations end); in
// JSON, its string.
type State string

// The states of an ended operation.
const (
	StateSucceeded State = "succeeded"
	StateFailed    State = "failed"
	StateCanceled  State = "canceled"
)

// WebhookOptions ask a call to await the outcome of the operation it
// starts (Request.Webhook): from the provider's verified
// notifications (delivered by webhooks.Receiver), and, when none has ended
// it by WebhookPoll.After, from polling the resource too. Whichever terminal state comes first wins; a later or
// duplicate notification changes nothing.
//
// A run may call one operation with several keys (two refunds, each with
// its own Request.IdempotencyKey). A notification that names a call
// (Notification.KeyDigest: CallbackURL and WebhookMetadata given the
// call's key) is refused, before it reaches history, by any call but the
// one with that key. One that names no call is matched by the operation
// alone in the calls before the run first awaits the operation under a
// second key (the first call and its retries); in every call after that
// it may be an earlier call's late event, so it ends nothing by itself,
// as a notification whose operation is not signed: Resource binds it by
// the resource (and refuses another's), Poll confirms it, and without
// either it is only counted. Calls are told apart one after the other:
// calls of one operation started side by side (in workflow.Go) share one
// handler, the last one's; give them their own operation names.
type WebhookOptions struct {
	// Succeeded, Failed and Canceled are the event types (the event's
	// "type", as webhooks.Verifier reads it) that end the operation so,
	// e.g. "payment_intent.succeeded"; matched exactly. A notification of
	// another type is counted (Outcome.Notifications) and the wait goes on.
	// At least one type is required.
	Succeeded []string `json:"succeeded,omitempty"`
	Failed    []string `json:"failed,omitempty"`
	Canceled  []string `json:"canceled,omitempty"`
	// Timeout bounds the wait after the start answer, polls included (default
	// 72 hours, as long as providers retry a delivery): an operation not ended by then fails
	// with ErrTypeOperationStillRunning.
	Timeout time.Duration `json:"timeout,omitempty"`
	// Poll is the fallback; nil: none (only a notification ends the wait).
	Poll *WebhookPoll `json:"poll,omitempty"`
	// Resource binds a callback's signed events that carry no
	// WebhookMetadata (Notification.OperationUnsigned), and events that
	// name no call once the run awaits the operation under a second key
	// (above), to this call by the resource the start answer names; nil
	// (the default): such an event ends nothing without the resource's
	// confirmation (Poll).
	Resource *WebhookResource `json:"resource,omitempty"`
}

// WebhookResource says where the resource's ID is in the start answer's
// JSON body and in an event's: an event whose ID there is another (or
// none) is refused, one whose ID matches is the operation's and ends it by
// its type. An event that comes before the start answer is held until the
// answer says which resource is the operation's. A value redacted there (a
// field named like a credential, see redact.IsCredential) or a body
// omitted binds nothing: point Start and Event at an ID field not named
// like a credential.
type WebhookResource struct {
	// Start is the dotted path of the ID in the start answer's body, e.g.
	// "id". Required.
	Start string `json:"start"`
	// Event is the dotted path of the ID in the event's body, e.g.
	// "data.object.id". Required.
	Event string `json:"event"`
}

// WebhookPoll is the fallback of a webhook: GET the resource until its
// status ends the operation, through the poll activity and its
// classification (the table in docs/how-it-works.md), paced as
// FollowOptions. Its fields:
//
//   - URL (required): the resource read with GET, e.g.
//     "https://api.example.com/v1/charges/{id}": each {field} (a dotted
//     path) is replaced by that string or number of the start answer's
//     JSON body, path-escaped (query-escaped in the query). It is polled
//     as written, its query included; its origin must be allowed on the
//     worker, and its query values reach history: put no secret there;
//   - After: how long the call waits for a terminal notification after
//     the start answer before the first poll (default 5 min; at least
//     1 s);
//   - StatusField: the dotted path of the resource's state in its JSON
//     document (default defaults.StatusField, "status");
//   - Succeeded (required), Failed and Canceled: the states that end the
//     operation (matched case-insensitively); any other is still running;
//   - Confirm: a terminal notification does not end the wait by itself:
//     it starts the poll at once, and the resource's terminal state is
//     the outcome (Outcome.Confirmed); a poll that cannot confirm fails
//     the call. For callbacks that only a token authenticates;
//   - Interval and MaximumInterval (time.Duration) pace the polls as in
//     FollowOptions (1 s doubling to 1 min; a Retry-After is followed).
//
// It is declared in internal/poll, where the poll activity's input
// holds its rule (poll.StatusRule); go doc internal/poll.WebhookPoll
// documents each field in full.
type WebhookPoll = poll.WebhookPoll

// MarshalJSON encodes o with durations as strings such as "72h0m0s".
func (o WebhookOptions) MarshalJSON() ([]byte, error) {
	type plain WebhookOptions
	return wire.Marshal(plain(o))
}

// UnmarshalJSON decodes what MarshalJSON encodes, and durations as
// nanoseconds.
func (o *WebhookOptions) UnmarshalJSON(data []byte) error {
	type plain WebhookOptions
	return wire.Unmarshal(data, (*plain)(o))
}

// placeholder is a {field} of WebhookPoll.URL.
var placeholder = regexp.MustCompile(`\{([A-Za-z0-9_.\-]+)\}`)

// validate checks o before anything is written to history.
func (o WebhookOptions) validate() error {
	if len(o.Succeeded)+len(o.Failed)+len(o.Canceled) == 0 {
		return errors.New("WebhookOptions: name the event types that end the operation in Succeeded, Failed or Canceled (e.g. Succeeded: []string{\"payment_intent.succeeded\"})")
	}
	if o.Timeout < 0 {
		return fmt.Errorf("WebhookOptions.Timeout must be 0 (the default, %s) or more, got %s", defaults.WebhookTimeout, o.Timeout)
	}
	if r := o.Resource; r != nil && (strings.TrimSpace(r.Start) == "" || strings.TrimSpace(r.Event) == "") {
		return errors.New("WebhookOptions.Resource: name where the resource's ID is in the start answer (Start, e.g. \"id\") and in an event (Event, e.g. \"data.object.id\")")
	}
	p := o.Poll
	if p == nil {
		return nil
	}
	if len(p.Succeeded) == 0 {
		return errors.New("WebhookPoll.Succeeded: name the resource states that mean the operation succeeded (e.g. \"succeeded\")")
	}
	if p.After < 0 || p.Interval < 0 || p.MaximumInterval < 0 {
		return fmt.Errorf("WebhookPoll: After, Interval and MaximumInterval must be 0 (the default) or more, got %s, %s and %s", p.After, p.Interval, p.MaximumInterval)
	}
	if _, _, err := httpurl.Parse(placeholder.ReplaceAllString(p.URL, "x")); err != nil {
		return fmt.Errorf("WebhookPoll.URL: %v", err)
	}
	return nil
}

// pollURL is p.URL with its placeholders filled from the start answer's
// body, or an error naming the field it lacks.
func pollURL(p *WebhookPoll, start *Response) (string, error) {
	var missing []string
	escape := url.PathEscape
	fill := func(m string) string {
		name := m[1 : len(m)-1]
		var body []byte
		if start != nil {
			body = start.Body
		}
		v, ok := jsonfield.Value(body, name)
		var s string
		if ok && json.Unmarshal(v, &s) != nil {
			var n json.Number
			if json.Unmarshal(v, &n) != nil {
				ok = false
			}
			s = n.String()
		}
		if !ok || s == "" {
			missing = append(missing, name)
			return m
		}
		return escape(s)
	}
	// A placeholder in the query is a query value.
	path, query, hasQuery := strings.Cut(p.URL, "?")
	u := placeholder.ReplaceAllStringFunc(path, fill)
	if hasQuery {
		escape = url.QueryEscape
		u += "?" + placeholder.ReplaceAllStringFunc(query, fill)
	}
	if len(missing) > 0 {
		return "", fmt.Errorf("the start answer's body has no string or number %s for WebhookPoll.URL", strings.Join(missing, ", "))
	}
	return u, nil
}

// Notification is one verified webhook delivery, as webhooks.Receiver
// hands it to the workflow awaiting its operation (a Temporal Update,
// stored in history). It never holds the signature or a secret.
type Notification struct {
	// ID is the provider's event ID: a workflow takes each once.
	ID string `json:"id"`
	// Type is the event's type ("payment_intent.succeeded").
	Type string `json:"type,omitempty"`
	// Operation is the operation it names (the callback URL's, or the
	// event's routing field).
	Operation string `json:"operation"`
	// KeyDigest names the call of Operation it is for, by the digest of
	// that call's idempotency key, from the callback URL (CallbackURL with
	// a key) or the event's metadata (WebhookMetadata with a key); "" when
	// the delivery names none. The call refuses an event that names
	// another key (see WebhookOptions for the rule of events that name
	// none).
	KeyDigest string `json:"key_digest,omitempty"`
	// Scheme is the verifier's ("standard-webhooks", "stripe", "hmac"),
	// or "callback" for a delivery the callback token alone authenticated.
	Scheme string `json:"scheme"`
	// Sent is the signed timestamp (zero for a scheme without one), and
	// Received when the receiver verified it (its clock).
	Sent     time.Time `json:"sent,omitzero"`
	Received time.Time `json:"received"`
	// Body is the event's JSON body, the strings and numbers held by
	// members named like credentials ("client_secret", "accessToken", …,
	// see redact.Fields) redacted; omitted
	// (BodyOmitted) when it is larger than the receiver's MaxEventBytes.
	Body        json.RawMessage `json:"body,omitempty"`
	BodyOmitted bool            `json:"body_omitted,omitempty"`
	// TypeUnsigned: the signature does not cover Type (it came from a
	// header, webhooks.HMACOptions.TypeHeader). OperationUnsigned: the
	// signed event does not name this workflow and operation (a callback
	// URL's path alone routed it, with a verifier on that endpoint). Such
	// a notification ends no operation by itself (but one that
	// WebhookOptions.Resource binds): a terminal type starts the poll at
	// once and the resource's state is the outcome, as with
	// WebhookPoll.Confirm; without a WebhookPoll it is only counted.
	TypeUnsigned      bool `json:"type_unsigned,omitempty"`
	OperationUnsigned bool `json:"operation_unsigned,omitempty"`
}

// MarshalJSON encodes n as package wire does (its body byte for byte).
func (n Notification) MarshalJSON() ([]byte, error) {
	type plain Notification
	return wire.Marshal(plain(n))
}

// UnmarshalJSON decodes what MarshalJSON encodes.
func (n *Notification) UnmarshalJSON(data []byte) error {
	type plain Notification
	return wire.Unmarshal(data, (*plain)(n))
}

// Outcome is how an awaited operation ended and how the workflow learned
// it: Response.Outcome of a call with Request.Webhook's result, Failure.Outcome of its
// failure.
type Outcome struct {
	// State is StateSucceeded, StateFailed or StateCanceled.
	State State `json:"state"`
	// Source is SourceWebhook or SourcePoll.
	Source Source `json:"source"`
	// At is when the workflow learned it (workflow time).
	At time.Time `json:"at"`
	// Notification is the notification that ended it (Source webhook).
	Notification *Notification `json:"notification,omitempty"`
	// Notifications counts the verified notifications the workflow took
	// for the operation until then, the terminal one included (duplicates
	// are not taken).
	Notifications int `json:"notifications,omitempty"`
	// Polls is how many polls the fallback made (0 when it did not run).
	Polls int `json:"polls,omitempty"`
	// Confirmed is true when a read of the resource confirmed the
	// notification's outcome (WebhookPoll.Confirm): State is then the
	// resource's.
	Confirmed bool `json:"confirmed,omitempty"`
}

// webhook is an operation whose outcome the workflow awaits by webhook
// (Request.Webhook): expectWebhook makes it before the call that starts the
// operation, so that a notification that comes before the start's answer
// is kept; await waits for the outcome. It belongs to the operation, not
// to one call: a later call of the run with the same operation and key (a
// retry after a failed call) gets the same webhook, with what the earlier
// call's handler took.
type webhook struct {
	operation string
	key       string // the start request's idempotency key
	opts      WebhookOptions
	made      int // the history length at which it was made
	// seen holds the IDs of the notifications taken.
	seen map[string]bool
	// count counts them; ended is the outcome of what decides: a
	// notification that decides alone (decides), or the resource's read.
	count int
	ended *Outcome
	// pending is the first notification of a terminal type that cannot
	// decide alone, with a WebhookPoll to confirm it: it starts the
	// confirming poll, and ends nothing itself.
	pending *Notification
	// extra counts the notifications taken that could change nothing
	// (dispose: not useful); maxNotifications bounds them.
	extra int
	// unconfirmable counts the notifications of a terminal type that ended
	// nothing: not signed, and no WebhookPoll to confirm them.
	unconfirmable int
	// resource is the resource's ID from the start answer
	// (WebhookOptions.Resource), "" before it; held are the terminal
	// notifications that came before it, to be bound by it.
	resource string
	held     []Notification
	// unbindable: the start answer named no resource.
	unbindable bool
	// shared: this run awaited the operation under another key before
	// this call (an earlier call with its own key), so an event that names
	// no key may be that call's: it does not name this call (unbound).
	shared bool
}

// expectWebhook readies the workflow to take verified notifications of
// operation (the operation name of the call that starts it) from
// webhooks.Receiver: call it before that call. The notifications are
// Temporal Updates named for the operation, so a workflow awaits several
// operations at once; an update is rejected, and leaves nothing in
// history, when it repeats an event ID already taken or comes after the
// operation ended.
func expectWebhook(ctx workflow.Context, operation, key string, opts WebhookOptions) (*webhook, error) {
	if strings.TrimSpace(operation) == "" {
		return nil, invalid("Request.Webhook needs Request.Operation: the notifications name it")
	}
	if err := rules.Operation(operation); err != nil {
		return nil, invalid("Request.Webhook: %v", err)
	}
	if err := opts.validate(); err != nil {
		return nil, invalid("Request.Webhook: %v", err)
	}
	w, afterOther := operationWebhook(ctx, operation, key)
	if afterOther {
		// A history recorded before events were told apart by key took
		// an event that names no key as this call's: replay it so.
		w.shared = workflow.GetVersion(ctx, keyMatch, workflow.DefaultVersion, 1) != workflow.DefaultVersion
	}
	w.opts = opts
	err := workflow.SetUpdateHandlerWithOptions(ctx, input.WebhookUpdate(operation), w.take,
		workflow.UpdateHandlerOptions{Validator: w.admit})
	if err != nil {
		return nil, err
	}
	return w, nil
}

// hooks keeps, for each workflow execution (perExecution), the webhook of
// each operation it awaits.
var hooks perExecution[*webhook]

// keyMatch is the change ID (workflow.GetVersion) of a call telling its
// events from those of an earlier call of its operation under another key
// (webhook.shared): its marker is recorded only where a run awaits an
// operation under a second key.
const keyMatch = "webhook-events-match-the-call-by-key"

// operationWebhook is the webhook of operation with key in this execution:
// the one an earlier call made, with what its handler took, or a new one;
// afterOther reports a new one made after an earlier call of operation
// under another key. A call that meets a webhook made at its own history
// length or later is the SDK running the execution's code again from the
// start (perExecution): it starts afresh, as the first run of that call
// did, so that every replay takes the same notifications and decides
// afterOther alike.
func operationWebhook(ctx workflow.Context, operation, key string) (w *webhook, afterOther bool) {
	hooks.with(ctx, func(ops map[string]*webhook, length int) {
		// In the test environment (length 0) an earlier call's webhook
		// is always kept.
		w = ops[operation]
		earlier := w != nil && (length == 0 || w.made < length)
		if w == nil || w.key != key || !earlier {
			afterOther = earlier && w.key != key
			w = &webhook{operation: operation, key: key, made: length, seen: map[string]bool{}}
			ops[operation] = w
		}
	})
	return w, afterOther
}

// WebhookMetadata is what a provider's fixed-endpoint events need to name
// this workflow, operation and call: put it in the start request's
// metadata (Stripe's "metadata", …), which the provider copies into its
// events, and point the receiver's webhooks.Config.WorkflowIDField,
// OperationField and KeyDigestField at its "workflow_id", "operation" and
// "key_digest". Pass the call's Request.Operation and
// Request.IdempotencyKey: a key names the call by its digest
// ("key_digest"), so that its events are told from those of another call
// of the operation with another key (see WebhookOptions); "" (a key
// derived from the operation) names none, the metadata as before.
func WebhookMetadata(ctx workflow.Context, operation, key string) map[string]string {
	m := map[string]string{"workflow_id": workflow.GetInfo(ctx).WorkflowExecution.ID, "operation": operation}
	if key != "" {
		m["key_digest"] = idemkey.Digest(key)
	}
	return m
}

// CallbackURL returns the callback URL of a call of operation, for an API
// that takes one in the request ("callback_url", "notification_url"): the
// worker's webhooks.Callbacks builds it from its base URL, this workflow's
// ID, the operation, the digest of key and an unguessable token that the
// receiver checks. Pass the call's Request.IdempotencyKey as key: its
// events then name the call, and are told from those of another call of
// the operation with another key (see WebhookOptions); "" (a key derived
// from the operation) names none, the URL as before. It runs a local
// activity (the worker holds the token key); the URL, token included, is
// stored in history, as the start request's body that carries it is.
// Register webhooks.Callbacks on the worker first.
func CallbackURL(ctx workflow.Context, operation, key string) (string, error) {
	if err := rules.Operation(operation); err != nil || strings.TrimSpace(operation) == "" {
		return "", invalid("CallbackURL needs the operation name of the call that starts the operation")
	}
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		ScheduleToCloseTimeout: 10 * time.Second,
		RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 3},
	})
	var u string
	if err := workflow.ExecuteLocalActivity(lctx, input.CallbackActivityName, operation, idemkey.Digest(key)).Get(lctx, &u); err != nil {
		return "", fmt.Errorf("the callback URL of operation %q could not be built (is webhooks.Callbacks registered on this worker?): %w", operation, err)
	}
	return u, nil
}

// maxNotifications bounds the notifications an operation takes that do
// not end it (each, its body up to the receiver's MaxEventBytes, is
// stored in history).
const maxNotifications = 32

// admit is the update's validator: it rejects, before anything reaches
// history, a notification already taken, one for another operation or
// another call of it (another key), any after the operation ended, and,
// past maxNotifications, one that could change nothing (dispose decides,
// for it and for take).
func (w *webhook) admit(n Notification) error {
	switch {
	case n.Operation != w.operation:
		return fmt.Errorf("notification for operation %q, not %q", n.Operation, w.operation)
	case n.KeyDigest != "" && n.KeyDigest != idemkey.Digest(w.key):
		return fmt.Errorf("the event names another call of operation %s (key digest %s; the waiting call's key %s has %s): an earlier call's late event, or the callback URL or WebhookMetadata was given another key than the call's Request.IdempotencyKey",
			w.operation, n.KeyDigest, w.key, idemkey.Digest(w.key))
	case n.ID == "":
		return errors.New("notification without an event ID")
	case w.seen[n.ID]:
		return fmt.Errorf("event %s already taken", n.ID)
	case w.ended != nil:
		return fmt.Errorf("operation %s already ended (%s, from %s)", w.operation, w.ended.State, w.ended.Source)
	case w.unbound(&n) && w.opts.Resource != nil && w.resource != "" && !w.bound(n):
		return fmt.Errorf("the event's resource (%s) is not operation %s's %q", w.opts.Resource.Event, w.operation, w.resource)
	case w.extra >= maxNotifications && !w.useful(w.dispose(&n)):
		// History is bounded: past this, only an event that may end the
		// operation is taken (a terminal one never is refused for slots).
		return fmt.Errorf("operation %s took %d notifications that end nothing already: only a terminal one is taken now", w.operation, w.extra)
	}
	return nil
}

// disposition is what take does with a notification admit lets through.
type disposition int

const (
	dispNote          disposition = iota // not of a terminal type: counted
	dispUnconfirmable                    // terminal type, cannot decide alone, no WebhookPoll
	dispHold                             // until the start answer names the resource
	dispPend                             // starts the poll that confirms it
	dispEnd                              // ends the operation by its type
)

// dispose is the one decision of what n does, for admit and take: hold
// an event WebhookOptions.Resource may bind until the start answer;
// end the operation by one that decides alone; have the resource's read
// confirm one that cannot (with a WebhookPoll); count the rest.
func (w *webhook) dispose(n *Notification) disposition {
	switch {
	case w.state(n.Type) == "":
		return dispNote
	case w.unbound(n) && !n.TypeUnsigned && w.opts.Resource != nil && w.resource == "" && !w.unbindable:
		return dispHold // whose is it? The start answer will say
	case w.decides(n):
		return dispEnd
	case w.opts.Poll != nil:
		return dispPend
	}
	return dispUnconfirmable
}

// useful reports whether a notification so disposed may still end the
// operation or start its confirmation: such a one is never refused for
// slots.
func (w *webhook) useful(d disposition) bool {
	return d == dispEnd || d == dispHold || d == dispPend && w.pending == nil
}

// take is the update's handler: it records n and, when its type ends the
// operation, the outcome. It returns what it did.
func (w *webhook) take(ctx workflow.Context, n Notification) (string, error) {
	if err := w.admit(n); err != nil {
		// Validators do not run on replay; the handler checks again.
		return "ignored: " + err.Error(), nil
	}
	w.seen[n.ID] = true
	w.count++
	d := w.dispose(&n)
	if !w.useful(d) {
		w.extra++
	}
	return w.apply(ctx, n, d), nil
}

// apply does with n what d says, and returns what it did.
func (w *webhook) apply(ctx workflow.Context, n Notification, d disposition) string {
	switch d {
	case dispHold:
		w.held = append(w.held, n)
		return "held: until the start answer names the resource"
	case dispEnd:
		state := w.state(n.Type)
		w.ended = &Outcome{State: state, Source: SourceWebhook, At: workflow.Now(ctx), Notification: &n, Notifications: w.count}
		return "ended: " + string(state)
	case dispPend:
		if w.pending != nil {
			return "noted: a read of the resource confirms an earlier notification already"
		}
		w.pending = &n
		return "pending: a read of the resource decides"
	case dispUnconfirmable:
		w.unconfirmable++
		workflow.GetLogger(ctx).Error("a notification of a terminal type ends nothing: its type or operation is not signed, or it names no key while this run awaited the operation under another key before, and no WebhookPoll can confirm it; set WebhookOptions.Poll, or name the call's key in CallbackURL or WebhookMetadata",
			"operation", w.operation, "key", w.key, "event", n.ID, "type", n.Type, "type_unsigned", n.TypeUnsigned, "operation_unsigned", n.OperationUnsigned,
			"key_unnamed", n.KeyDigest == "" && w.shared)
		return "noted: it may be another call's (its type or operation not signed, or no key named after another key's call), and no WebhookPoll to confirm it"
	}
	return "noted"
}

// state is the state an event type ends the operation in, "" if none.
func (w *webhook) state(typ string) State {
	switch {
	case slices.Contains(w.opts.Succeeded, typ):
		return StateSucceeded
	case slices.Contains(w.opts.Failed, typ):
		return StateFailed
	case slices.Contains(w.opts.Canceled, typ):
		return StateCanceled
	}
	return ""
}

// decides reports whether n may end the operation without a read of the
// resource: its type signed, and its operation and call named (not
// unbound) or bound by the resource (WebhookOptions.Resource).
func (w *webhook) decides(n *Notification) bool {
	return !n.TypeUnsigned && (!w.unbound(n) || w.opts.Resource != nil && w.resource != "" && w.bound(*n))
}

// unbound reports whether n may be another call's: its signed event does
// not name this operation (Notification.OperationUnsigned), or it names no
// key while this run awaited the operation under another key before
// (shared). Such a notification ends nothing by itself, unless
// WebhookOptions.Resource binds it.
func (w *webhook) unbound(n *Notification) bool {
	return n.OperationUnsigned || n.KeyDigest == "" && w.shared
}

// decided reports whether the operation ended by something that decides
// (a notification that decides alone, or the resource's read).
func (w *webhook) decided() bool {
	return w.ended != nil && (w.ended.Notification == nil || w.ended.Source == SourcePoll || w.ended.Confirmed || w.decides(w.ended.Notification))
}

// bound reports whether n's body names the operation's resource (never
// by a redacted or omitted value: resourceID).
func (w *webhook) bound(n Notification) bool {
	id, ok := resourceID(n.Body, n.BodyOmitted, w.opts.Resource.Event)
	return ok && id == w.resource
}

// resourceID is the resource's ID at path of a body, unless the body was
// omitted (BodyOmitted) or the value there is a redaction's placeholder
// (a name like a credential's: "[REDACTED]" in an answer, "[redacted]" in
// an event), which binds nothing.
func resourceID(body []byte, omitted bool, path string) (string, bool) {
	if omitted {
		return "", false
	}
	id, ok := scalar(body, path)
	if !ok || strings.Contains(strings.ToLower(id), "[redacted]") {
		return "", false
	}
	return id, true
}

// scalar is the string, or a number's literal, at a dotted path of a JSON
// body.
func scalar(body []byte, path string) (string, bool) {
	v, ok := jsonfield.Value(body, path)
	if !ok {
		return "", false
	}
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s, s != ""
	}
	var n json.Number
	if json.Unmarshal(v, &n) == nil {
		return n.String(), true
	}
	return "", false
}

// bind reads the resource's ID from the start answer (with
// WebhookOptions.Resource) and ends the operation by the first held
// notification it binds, if any.
func (w *webhook) bind(ctx workflow.Context, start *Response) {
	r := w.opts.Resource
	if r == nil || w.resource != "" || start == nil {
		return
	}
	if id, ok := resourceID(start.Body, start.BodyOmitted, r.Start); ok {
		w.resource = id
	} else {
		w.unbindable = true
		workflow.GetLogger(ctx).Error("the start answer names no resource this call can bind events by (WebhookOptions.Resource.Start is missing there, redacted because its name is like a credential's, or the body was omitted as too large): events that carry no metadata end nothing without the resource's confirmation; point WebhookOptions.Resource.Start at an ID field not named like a credential, put WebhookMetadata in the start request, or set WebhookOptions.Poll",
			"operation", w.operation, "field", r.Start, "body_omitted", start.BodyOmitted)
	}
	held := w.held
	w.held = nil
	for _, n := range held {
		if w.ended != nil {
			break
		}
		if w.resource != "" && !w.bound(n) {
			workflow.GetLogger(ctx).Warn("a signed event held until the start answer is not this operation's resource (WebhookOptions.Resource.Event is another ID, missing, redacted or its body omitted): it ends nothing",
				"operation", w.operation, "event", n.ID, "type", n.Type, "field", r.Event, "body_omitted", n.BodyOmitted)
			continue
		}
		w.apply(ctx, n, w.dispose(&n))
	}
}

// confirming reports whether the outcome is the resource's, read by the
// poll: with WebhookPoll.Confirm, or once a notification that cannot end
// the operation alone came (pending) and nothing decided since.
func (w *webhook) confirming() bool {
	p := w.opts.Poll
	return p != nil && (p.Confirm || w.ended == nil && w.pending != nil)
}

// confirmed is the notification the resource's read confirms: the one
// that ended the operation (WebhookPoll.Confirm), else the pending one;
// nil if none.
func (w *webhook) confirmed() *Notification {
	if w.ended != nil {
		return w.ended.Notification
	}
	return w.pending
}

// woken reports whether the wait for a notification is over: something
// decided, or a notification to confirm came.
func (w *webhook) woken() bool { return w.ended != nil || w.pending != nil && w.opts.Poll != nil }

// await waits for the operation's outcome: a terminal notification, or,
// when none came within WebhookOptions.Poll.After, the first terminal
// state that either a notification or the fallback poll reports. start is
// the answer of the call that started the operation (its body fills
// WebhookPoll.URL's placeholders; nil: none). It returns start (a copy)
// with Outcome set when a notification ended the operation as succeeded,
// the poll's final answer with Outcome set when the poll did; a failed or
// cancelled operation fails with ErrTypeOperationFailed or
// ErrTypeOperationCanceled, one not ended within WebhookOptions.Timeout
// with ErrTypeOperationStillRunning, each with Failure.Outcome or the
// poll's Failure. The polls run with the activity options on ctx (task
// queue, start-to-close timeout), as FollowAccepted's.
func (w *webhook) await(ctx workflow.Context, ao workflow.ActivityOptions, start *Response) (*Response, error) {
	w.bind(ctx, start)
	timeout := cmp.Or(w.opts.Timeout, defaults.WebhookTimeout)
	deadline := workflow.Now(ctx).Add(timeout)
	ended := func() bool { return w.ended != nil }
	p := w.opts.Poll
	woken := w.woken
	var mon string
	if p != nil {
		u, err := pollURL(p, start)
		if err != nil {
			// The operation started: no fallback, but no failure either.
			workflow.GetLogger(ctx).Error("no fallback poll for the operation: awaiting its webhook only", "operation", w.operation, "error", err)
		}
		mon = u
	}
	first := timeout
	if mon != "" {
		first = min(timeout, max(cmp.Or(p.After, defaults.PollAfter), poll.MinInterval))
	}
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("awaiting the webhook of %s", w.operation))
	if _, err := workflow.AwaitWithTimeout(ctx, first, woken); err != nil {
		return nil, err
	}
	if w.confirming() && mon == "" {
		return nil, w.unconfirmed(ctx, "its WebhookPoll.URL could not be built from the start answer")
	}
	if w.ended == nil && mon != "" || w.confirming() {
		if resp, done, err := w.poll(ctx, ao, mon, deadline); done {
			return resp, err
		}
	}
	if w.ended == nil {
		left := deadline.Sub(workflow.Now(ctx))
		if _, err := workflow.AwaitWithTimeout(ctx, max(left, 0), ended); err != nil {
			return nil, err
		}
	}
	if w.ended == nil {
		return nil, w.stillRunning(ctx, timeout)
	}
	if w.confirming() && w.ended.Source == SourceWebhook {
		return nil, w.unconfirmed(ctx, "the notification came at the deadline, after the last read of the resource")
	}
	return w.result(start)
}

// poll runs the fallback poll until it or a notification ends the
// operation, deadline passes, or ctx is cancelled; done reports that the
// poll decided (its answer or error is the outcome), or that ctx ended.
func (w *webhook) poll(ctx workflow.Context, ao workflow.ActivityOptions, mon string, deadline time.Time) (resp *Response, done bool, err error) {
	p := w.opts.Poll
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("awaiting the webhook of %s; polling GET %s", w.operation, redact.URL(mon)))
	op := Accepted{Operation: w.operation, Method: http.MethodGet, URL: mon, Monitor: mon, StatusDocument: true, IdempotencyKey: w.key}
	in := pollInput(op, FollowOptions{Interval: p.Interval, MaximumInterval: p.MaximumInterval})
	rule := poll.StatusRule(*p)
	rule.StatusField = cmp.Or(p.StatusField, defaults.StatusField)
	in.Status = &rule
	pctx, cancel := workflow.WithCancel(ctx)
	defer cancel() // a notification came first: the poll stops
	var finished bool
	workflow.Go(pctx, func(gctx workflow.Context) {
		left := max(deadline.Sub(workflow.Now(gctx)), poll.MinInterval)
		resp, _, err = pollMonitor(gctx, ao, op, in, left)
		finished = true
	})
	if err := workflow.Await(ctx, func() bool { return finished || w.ended != nil && !w.confirming() }); err != nil {
		return nil, true, err
	}
	if w.ended != nil && !w.confirming() {
		return nil, false, nil
	}
	return w.polled(ctx, ao, mon, deadline, resp, err)
}

// polled is the outcome of a fallback poll that ended with resp or err:
// the resource's terminal state (confirming a notification's, if one came
// to be confirmed), or, if the poll could not read it, what awaitAfter
// makes of the wait for a notification.
func (w *webhook) polled(ctx workflow.Context, ao workflow.ActivityOptions, mon string, deadline time.Time, resp *Response, err error) (*Response, bool, error) {
	out := &Outcome{Source: SourcePoll, At: workflow.Now(ctx), Notifications: w.count}
	conf := w.confirmed()
	if conf != nil {
		// The resource's state, confirming the notification's.
		out.Source, out.Notification, out.Confirmed = SourceWebhook, conf, true
	}
	f, isFailure := AsFailure(err)
	switch {
	case err == nil:
		out.State = StateSucceeded
		if resp.Accepted != nil {
			out.Polls = resp.Accepted.Polls
		}
	case isFailure && (f.Type == ErrTypeOperationFailed || f.Type == ErrTypeOperationCanceled):
		out.State = StateFailed
		if f.Type == ErrTypeOperationCanceled {
			out.State = StateCanceled
		}
		if f.Accepted != nil {
			out.Polls = f.Accepted.Polls
		}
	case conf != nil:
		// Fail closed: a notification the resource did not confirm.
		return nil, true, w.unconfirmed(ctx, fmt.Sprintf("reading the resource failed: %v", err))
	case isFailure && f.Type == ErrTypeOperationStillRunning:
		return nil, false, nil // the deadline passed
	default:
		return w.awaitAfter(ctx, ao, mon, deadline, err)
	}
	if out.Confirmed && out.State != w.state(conf.Type) {
		workflow.GetLogger(ctx).Warn("the resource contradicts the notification: its state is the outcome", "operation", w.operation,
			"notification", conf.ID, "notified", w.state(conf.Type), "resource", out.State)
	}
	w.ended = out
	if err != nil {
		f.Outcome = out
		return nil, true, temporal.NewNonRetryableApplicationError(f.Message, f.Type, err, f)
	}
	r := *resp
	r.Outcome = out
	return &r, true, nil
}

// awaitAfter waits for a notification after the fallback poll failed
// with err (the resource unreadable, not yet readable, or not allowed, …),
// until the deadline: a notification to confirm is confirmed by another
// poll; with WebhookPoll.Confirm, none coming fails the call (fail
// closed); otherwise the webhook alone may still end the operation.
func (w *webhook) awaitAfter(ctx workflow.Context, ao workflow.ActivityOptions, mon string, deadline time.Time, err error) (*Response, bool, error) {
	confirming := w.confirming()
	if confirming {
		workflow.GetLogger(ctx).Warn("reading the resource failed: awaiting the webhook, to confirm it then", "operation", w.operation,
			"key", w.key, "error", err)
	} else {
		workflow.GetLogger(ctx).Error("the fallback poll failed: awaiting the webhook only", "operation", w.operation,
			"key", w.key, "error", err)
	}
	if _, err := workflow.AwaitWithTimeout(ctx, max(deadline.Sub(workflow.Now(ctx)), 0), w.woken); err != nil {
		return nil, true, err
	}
	switch {
	case confirming && !w.woken():
		return nil, true, w.unconfirmed(ctx, fmt.Sprintf("no notification came, and reading the resource failed: %v", err))
	case confirming || w.confirming():
		// A notification that needs the resource's word: read it again.
		return w.poll(ctx, ao, mon, deadline)
	}
	return nil, false, nil
}

// result is the Response or error of a notification's outcome.
func (w *webhook) result(start *Response) (*Response, error) {
	out := *w.ended
	if out.State == StateSucceeded {
		r := Response{}
		if start != nil {
			r = *start
		}
		r.Outcome = &out
		return &r, nil
	}
	t, what := ErrTypeOperationFailed, "failed"
	if out.State == StateCanceled {
		t, what = ErrTypeOperationCanceled, "was cancelled"
	}
	f := Failure{Operation: w.operation, IdempotencyKey: w.key, Outcome: &out}
	why := "a read of the resource said so" // an earlier call's poll
	if n := out.Notification; n != nil {
		why = fmt.Sprintf("the provider's %s event %s said so", n.Type, n.ID)
	}
	return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("the operation %s %s: %s", w.operation, what, why), t, nil, f)
}

// unconfirmed is the error of a call whose outcome needs a read of the
// resource (WebhookPoll.Confirm, or a notification that cannot decide
// alone) that none gave.
func (w *webhook) unconfirmed(ctx workflow.Context, why string) error {
	what := ""
	if n := w.confirmed(); n != nil {
		what = fmt.Sprintf(" (the %s event %s)", n.Type, n.ID)
	}
	return w.notEnded(ctx, fmt.Sprintf("the outcome of operation %s%s could not be confirmed by a read of the resource: %s; look the operation up at the provider (its key is the call's)", w.operation, what, why))
}

// stillRunning is the error of an operation not ended within timeout.
func (w *webhook) stillRunning(ctx workflow.Context, timeout time.Duration) error {
	hint := ""
	if n := w.pending; n != nil && w.ended == nil {
		hint = fmt.Sprintf(" (event %s of a terminal type whose type or operation the provider did not sign came, and no read of the resource confirmed it)", n.ID)
	}
	if w.unconfirmable > 0 {
		hint = fmt.Sprintf(" (%d of a terminal type whose type or operation the provider did not sign: set WebhookOptions.Poll so that the resource confirms such an event)", w.unconfirmable)
	}
	return w.notEnded(ctx, fmt.Sprintf("no notification or poll ended the operation %s within WebhookOptions.Timeout (%s, %d notifications taken%s): it may still end at the provider: look it up there (its key is the call's), then run the workflow's next step", w.operation, timeout, w.count, hint))
}

// notEnded logs msg and returns it as ErrTypeOperationStillRunning, the
// outcome unknown, with the unconfirmed notification's outcome if any.
func (w *webhook) notEnded(ctx workflow.Context, msg string) error {
	f := Failure{Operation: w.operation, IdempotencyKey: w.key, OutcomeUnknown: true}
	if w.ended != nil {
		o := *w.ended
		f.Outcome = &o
	}
	workflow.GetLogger(ctx).Error("an awaited operation's outcome is unknown", "operation", w.operation, "key", w.key, "error", msg)
	return temporal.NewNonRetryableApplicationError(msg, ErrTypeOperationStillRunning, nil, f)
}
