// Package workflows holds what workflow code needs for idempotent HTTP
// calls, and nothing that does I/O: the request ([Request], [RetryOptions]),
// the calls ([Post], [Call], [ExecuteChild], the ready workflow), key
// derivation ([Key]), and what a call gives back ([Response], or a
// [Failure] read with [AsFailure] and one of the ErrType constants). The
// activity that sends the requests is in package activities.
//
// A business workflow calls [Post] or [Call] once per operation:
//
//	resp, err := workflows.Post(ctx, "charge", "https://pay.example.com/charges", charge)
//
// The idempotency key is derived from the Temporal namespace, the workflow ID
// and the operation name (see [Key]), so it is the same on every retry, on
// replay, after a worker restart, after a reset and when the same business
// workflow ID runs again, and it differs between operations. Retries are
// driven by Temporal's retry policy, built from [RetryOptions]; nobody writes
// a retry loop.
package workflows

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/idemhttp/temporal-idempotent-http/internal/backoff"
	"github.com/idemhttp/temporal-idempotent-http/internal/defaults"
	"github.com/idemhttp/temporal-idempotent-http/internal/httpurl"
	"github.com/idemhttp/temporal-idempotent-http/internal/idemkey"
	"github.com/idemhttp/temporal-idempotent-http/internal/input"
	"github.com/idemhttp/temporal-idempotent-http/internal/keyplace"
	"github.com/idemhttp/temporal-idempotent-http/internal/reconcile"
	"github.com/idemhttp/temporal-idempotent-http/internal/redact"
	"github.com/idemhttp/temporal-idempotent-http/internal/rules"
	"github.com/idemhttp/temporal-idempotent-http/internal/wire"
)

// WorkflowName is the name the ready workflow [HTTPCallWorkflow] is registered under.
const WorkflowName = "IdempotentHTTPCall"

// RetryOptions are the one retry policy of a call; they become the
// activity's Temporal RetryPolicy. A zero field takes the value of the
// RetryPolicy already on ctx (set with workflow.WithActivityOptions), else
// its default (200 ms, 2, 10 s, 5 attempts, JitterFull). Its fields:
//
//   - InitialInterval and MaximumInterval (time.Duration) and
//     BackoffCoefficient (float64) shape the backoff, as Temporal's
//     RetryPolicy does: the wait after failure n
//     is at most min(MaximumInterval, InitialInterval ×
//     BackoffCoefficient^(n−1)); a MaximumInterval below InitialInterval
//     is raised to it;
//   - MaximumAttempts (int32) counts the attempts that fail: waiting for
//     a request the server is still processing, or for admission, does
//     not count;
//   - Jitter spreads the waits within that bound.
//
// It is declared in internal/backoff as Backoff, the activity input's
// form of it; go doc internal/backoff.Backoff documents each field in
// full.
type RetryOptions = backoff.Backoff

// Reconcile is what a call does before it sends again after an attempt
// whose outcome is unknown (Request.Reconcile, activities.Convention.Reconcile).
type Reconcile = reconcile.Reconcile

// Jitter selects how the activity spreads the retries of a failure that
// carries no Retry-After: one of the Jitter constants below.
type Jitter = backoff.Jitter

// The jitter strategies, after Marc Brooker, "Exponential Backoff And
// Jitter" (AWS Architecture Blog, 2015); internal/backoff
// computes them. With ceiling(n) = min(MaximumInterval, InitialInterval ×
// BackoffCoefficient^(n−1)) after attempt n:
const (
	// JitterFull (the default, also for ""): uniform in [0, ceiling(n)].
	JitterFull Jitter = backoff.JitterFull
	// JitterEqual: ceiling(n)/2 + uniform in [0, ceiling(n)/2].
	JitterEqual Jitter = backoff.JitterEqual
	// JitterDecorrelated: d(n) = min(MaximumInterval, uniform in
	// [InitialInterval, 3 × d(n−1)]), d(0) = InitialInterval.
	JitterDecorrelated Jitter = backoff.JitterDecorrelated
)

// Request is one idempotent HTTP operation, as a business workflow asks for it
// and as the ready workflow takes it as input. It is stored in Temporal's
// history: never put credentials in it (the worker adds them).
type Request struct {
	// Operation names the call within the workflow, e.g. "charge" or
	// "charge-2026-12". It is part of the derived key: each distinct call in a
	// workflow needs its own name. Required unless IdempotencyKey is set.
	Operation string `json:"operation,omitempty"`
	// Method is POST (default), PUT, PATCH or DELETE.
	Method string `json:"method,omitempty"`
	// URL is the absolute http or https URL to call.
	URL string `json:"url"`
	// Body is the JSON body, at most 256 KiB, sent byte for byte.
	Body json.RawMessage `json:"body,omitempty"`
	// Headers are extra, non-secret headers.
	Headers map[string]string `json:"headers,omitempty"`
	// IdempotencyKey overrides the derived key, e.g. a key the business already
	// has (an order ID). It must stay the same for the same operation.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// KeyIn is where the API reads the key, when not in the origin's key
	// header: "body:PATH", a string member of the JSON body inserted byte
	// for byte (e.g. "body:idempotency_key", "body:metadata.idempotency_key",
	// "body:ClientToken"); "query:NAME", a query parameter (e.g.
	// "query:requestId"); or "header:NAME". Default "": the origin's
	// activities.Convention.KeyIn (the key header unless it says otherwise).
	KeyIn string `json:"key_in,omitempty"`
	// Reconcile is what the call does before it sends again after an
	// attempt of unknown outcome, for an API that does not honour keys:
	// ask a Lookup, or, AtMostOnce, wait for a person's decision (see
	// Reconcile and docs/unknown-outcomes.md). Default: the origin's
	// activities.Convention.Reconcile; zero there too, it sends again.
	Reconcile Reconcile `json:"reconcile,omitzero"`
	// Retry configures the retry policy.
	Retry RetryOptions `json:"retry,omitzero"`
	// StartToCloseTimeout bounds each attempt (default 10 seconds).
	StartToCloseTimeout time.Duration `json:"start_to_close_timeout,omitempty"`
	// ScheduleToCloseTimeout bounds the whole operation, all attempts and waits
	// included (default 2 minutes). A retry wait that
	// cannot end before it fails at once.
	ScheduleToCloseTimeout time.Duration `json:"schedule_to_close_timeout,omitempty"`
	// TaskQueue runs the activity on another task queue (default: the
	// workflow's, or the one already on ctx).
	TaskQueue string `json:"task_queue,omitempty"`
	// Repeat says that a second call with the same key in one workflow run,
	// after the first succeeded, is meant (to read the server's stored
	// answer again). Without it, such a call fails with InvalidRequest: the
	// server would answer it with the first call's stored response, and its
	// work would silently not happen. The rule holds across Post, Call and
	// ExecuteChild in any mix (ExecuteChild derives the key in the parent):
	// a child after a Post with the same operation is a repeat too. A call
	// again after a failed one is a retry of the same operation and needs no
	// Repeat.
	Repeat bool `json:"repeat,omitempty"`
	// OriginQueue runs the activity on the origin's own task queue,
	// OriginTaskQueue of the task queue it would run on otherwise, whose
	// rate limit the Temporal server enforces for every worker: the
	// workers learn it together (the worker's --shared-rate, which must
	// be on for the workers of that task queue; they poll the origins'
	// queues). Default false: the workflow's own queue.
	OriginQueue bool `json:"origin_queue,omitempty"`
	// Follow, when set, follows a long-running operation to its end: if
	// the server answers with a status monitor (by the origin's
	// activities.LongRunning: a 202 with Location by default), the call
	// polls it and returns the final result instead of the 202 (see
	// FollowOptions). Nil: the answer is returned as it is.
	Follow *FollowOptions `json:"follow,omitempty"`
	// Webhook, when set, awaits the outcome of the operation the call
	// starts by the provider's webhook, with polling as the fallback (see
	// WebhookOptions): the Response then carries Outcome. It needs
	// Operation, which the notifications name, and excludes Follow.
	Webhook *WebhookOptions `json:"webhook,omitempty"`
}

// MarshalJSON encodes r as package wire does: bodies byte for byte
// (Temporal's JSON converter would compact them and escape <, > and &),
// durations as strings such as "10s".
func (r Request) MarshalJSON() ([]byte, error) {
	type plain Request
	return wire.Marshal(plain(r))
}

// UnmarshalJSON decodes what MarshalJSON encodes, and bodies as plain JSON
// and durations as nanoseconds (histories written before, or input typed
// by hand).
func (r *Request) UnmarshalJSON(data []byte) error {
	type plain Request
	return wire.Unmarshal(data, (*plain)(r))
}

// Key returns the idempotency key of operation in the current workflow: a
// UUIDv5 of the namespace, the workflow ID and the operation name.
//
// It does not depend on the run ID, on time or on randomness, so it is the
// same across retries, replays, worker restarts, resets, continue-as-new and
// a new run of the same workflow ID (which then gets the server's stored
// response instead of doing the work again). A periodic operation, such as a
// monthly charge in a continue-as-new loop, must name its period in the
// operation ("charge-2026-12", from workflow input, not from workflow.Now) so
// each period gets its own key.
func Key(ctx workflow.Context, operation string) string {
	info := workflow.GetInfo(ctx)
	return idemkey.Derive(info.Namespace, info.WorkflowExecution.ID, operation)
}

// Post sends body (encoded with encoding/json; a json.RawMessage or []byte is
// sent as-is) to url with POST, under a key derived from operation, with
// every other field of [Request] at its default. It is the one-line
// shorthand for the common case, as net/http's Post is beside Do: to set
// headers, a key, retries, timeouts, Repeat, OriginQueue, Follow or
// Webhook, fill a Request and pass it to [Call].
func Post(ctx workflow.Context, operation, url string, body any) (*Response, error) {
	raw, err := encodeBody(body)
	if err != nil {
		return nil, err
	}
	return Call(ctx, Request{Operation: operation, URL: url, Body: raw})
}

// encodeBody encodes v as a JSON request body. json.RawMessage and []byte
// are taken as already encoded and must be valid JSON; nil is no body.
func encodeBody(v any) (json.RawMessage, error) {
	var raw []byte
	switch b := v.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		raw = b
	case []byte:
		raw = b
	default:
		var err error
		if raw, err = json.Marshal(v); err != nil {
			return nil, invalid("request body does not encode as JSON: %v; pass a value encoding/json accepts", err)
		}
	}
	if err := rules.Body(raw); err != nil {
		return nil, invalid("%v", err)
	}
	return raw, nil
}

// Call performs one idempotent HTTP operation through the activity and returns
// its response, or the activity's error unchanged (a *temporal.ActivityError
// wrapping the *temporal.ApplicationError; read it with [AsFailure]). On final
// failure it logs once with the key, method, URL, body hash, attempts, last
// status and error.
func Call(ctx workflow.Context, req Request) (*Response, error) {
	in, ao, err := prepare(ctx, req)
	if err != nil {
		return nil, err
	}
	return execute(ctx, req, in, ao)
}

// execute runs the activity with in, the input prepare made of req, under
// ao, and logs a final failure.
func execute(ctx workflow.Context, req Request, in input.Input, ao workflow.ActivityOptions) (*Response, error) {
	owns, err := refuseRepeat(ctx, in.IdempotencyKey, req)
	if err != nil {
		return nil, err
	}
	var hook *webhook
	if req.Webhook != nil {
		// Before the start: a notification may come before its answer.
		if hook, err = expectWebhook(ctx, req.Operation, in.IdempotencyKey, *req.Webhook); err != nil {
			return nil, err
		}
	}
	var resp Response
	if err := callActivity(ctx, ao, in, req.Reconcile, &resp); err != nil {
		// Calling again with this key retries the same operation: allowed.
		if hook != nil && hook.decided() {
			// The start failed (every attempt unanswered, say), but what
			// decides (a verified event that decides alone, or a read of
			// the resource) says how the operation ended: a succeeded
			// operation is never reported failed. A notification still to
			// be confirmed does not replace the start's error.
			workflow.GetLogger(ctx).Warn("the start request failed, but a verified notification ended the operation", "operation", req.Operation,
				"key", in.IdempotencyKey, "error", err)
			return hook.await(ctx, ao, nil)
		}
		if owns {
			forget(ctx, in.IdempotencyKey)
		}
		logFailure(ctx, in, err)
		return nil, err
	}
	if resp.GaveUp != "" || resp.Attempt == 0 && resp.Reconciled != "lookup" {
		// No attempt made this (each sets its number), nor a lookup
		// activity: a person completed the call (Reconcile.AtMostOnce).
		// The recorded key is not compared with the call's otherwise:
		// a replay under another namespace derives another.
		if err := decided(&resp, in); err != nil {
			logFailure(ctx, in, err)
			return nil, err
		}
	}
	if req.Follow != nil {
		// The start succeeded: its key stays used whatever the following
		// gives (a call again would get the stored start answer; resume
		// with FollowAccepted).
		return followStart(ctx, ao, in, &resp, *req.Follow)
	}
	if hook != nil {
		return hook.await(ctx, ao, &resp)
	}
	return &resp, nil
}

// callActivity runs the HTTP activity for in under ao into resp. With
// rec.LookupActivity, an attempt of unknown outcome ends the activity
// (reconcile.NeedsLookup): the lookup activity is asked with the key,
// and its record is the result, or the activity runs again, at most
// MaximumAttempts times in all.
func callActivity(ctx workflow.Context, ao workflow.ActivityOptions, in input.Input, rec Reconcile, resp *Response) error {
	actx := workflow.WithActivityOptions(ctx, ao)
	if rec.LookupActivity == "" {
		return workflow.ExecuteActivity(actx, in.Name(), in).Get(ctx, resp)
	}
	lookup := func(unknown bool) (bool, error) {
		var found *Response
		lao := ao
		lao.Summary = "lookup " + input.Summary(in.Method, in.URL, in.Operation)
		lao.RetryPolicy = &temporal.RetryPolicy{InitialInterval: ao.RetryPolicy.InitialInterval, BackoffCoefficient: ao.RetryPolicy.BackoffCoefficient,
			MaximumInterval: ao.RetryPolicy.MaximumInterval, MaximumAttempts: max(in.MaximumAttempts, 1)}
		if lerr := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, lao), rec.LookupActivity, in.IdempotencyKey).Get(ctx, &found); lerr != nil {
			return false, temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s %s: the lookup activity %s failed: %v; nothing was sent: fix it, then run the same workflow ID again (it asks the lookup before it sends)",
				in.Method, redact.URL(in.URL), rec.LookupActivity, lerr), ErrTypeLookupFailed, lerr, Failure{
				Operation: in.Operation, Method: in.Method, URL: redact.URL(in.URL), IdempotencyKey: in.IdempotencyKey, OutcomeUnknown: unknown,
			})
		}
		if found == nil {
			return false, nil
		}
		*resp = *found
		resp.IdempotencyKey, resp.Reconciled = in.IdempotencyKey, "lookup"
		return true, nil
	}
	// A lookup before the first request too: an earlier run of the
	// workflow, or the run before a reset, may have made the record.
	if done, err := lookup(false); done || err != nil {
		return err
	}
	for round := int32(1); ; round++ {
		err := workflow.ExecuteActivity(actx, in.Name(), in).Get(ctx, resp)
		var appErr *temporal.ApplicationError
		if err == nil || !errors.As(err, &appErr) || appErr.Type() != reconcile.NeedsLookup {
			return err
		}
		if done, lerr := lookup(true); done || lerr != nil {
			return lerr
		}
		if in.MaximumAttempts > 0 && round >= in.MaximumAttempts {
			return temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s %s: %d times the outcome was unknown and the lookup activity %s found no record: giving up; the last attempt may still have gone through: check by hand",
				in.Method, redact.URL(in.URL), round, rec.LookupActivity), ErrTypeLookupFailed, err, Failure{
				Operation: in.Operation, Method: in.Method, URL: redact.URL(in.URL), IdempotencyKey: in.IdempotencyKey, OutcomeUnknown: true,
			})
		}
		workflow.GetLogger(ctx).Warn("the lookup activity found no record of an attempt of unknown outcome: sending again", "operation", in.Operation, "key", in.IdempotencyKey, "round", round)
	}
}

// decided reads a result a person completed the activity with
// (Reconcile.AtMostOnce): {"gave_up": "why"} is an ErrTypeGaveUp
// failure; any other is the API's answer as the person found it, marked
// Reconciled "operator", with the call's key.
func decided(resp *Response, in input.Input) error {
	f := Failure{Operation: in.Operation, Method: in.Method, URL: redact.URL(in.URL), IdempotencyKey: in.IdempotencyKey, OutcomeUnknown: true}
	notDecision := func(why string) error {
		f.Reason = "a person's completion that is no decision"
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s %s: the call was completed by hand with a result that is no decision: %s; the outcome is still unknown: check with the API's owner what the request did before running the workflow again (its first attempt sends at once)",
			in.Method, redact.URL(in.URL), why), ErrTypeAwaitingDecision, nil, f)
	}
	switch {
	case resp.GaveUp == "" && resp.IdempotencyKey != "" && resp.IdempotencyKey != in.IdempotencyKey:
		return notDecision(fmt.Sprintf("it carries the idempotency key %s, another call's (this call's is %s)", resp.IdempotencyKey, in.IdempotencyKey))
	case resp.GaveUp == "" && (resp.Status < 200 || resp.Status > 299):
		return notDecision(fmt.Sprintf(`its status is %d; complete with {"status": 201, "body": …} (the API's answer, if it went through) or {"gave_up": "why"}`, resp.Status))
	}
	if resp.GaveUp != "" {
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("%s %s: a person gave up the call after an attempt of unknown outcome: %s; the API may have done the work: check it before calling again", in.Method, redact.URL(in.URL), resp.GaveUp),
			ErrTypeGaveUp, nil, Failure{
				Operation: in.Operation, Method: in.Method, URL: redact.URL(in.URL), IdempotencyKey: in.IdempotencyKey,
				Attempt: resp.Attempt, OutcomeUnknown: true, Reason: "gave up by a person: " + resp.GaveUp,
			})
	}
	resp.IdempotencyKey, resp.Reconciled = in.IdempotencyKey, cmp.Or(resp.Reconciled, "operator")
	return nil
}

// requestKey is req's explicit key, else the key derived from its
// operation, else "" (no operation either).
func requestKey(ctx workflow.Context, req Request) string {
	if req.IdempotencyKey == "" && strings.TrimSpace(req.Operation) != "" {
		return Key(ctx, req.Operation)
	}
	return req.IdempotencyKey
}

// OriginTaskQueue returns the task queue that a request to rawURL with
// Request.OriginQueue runs on when it would otherwise run on base: a
// worker polls it to serve that origin. The repo's worker does so with
// --shared-rate; a worker of your own that serves origin queues needs
// this name to poll them (it is public for that).
func OriginTaskQueue(base, rawURL string) (string, error) {
	origin, err := httpurl.Origin(rawURL)
	if err != nil {
		return "", err
	}
	return httpurl.OriginQueue(base, origin), nil
}

// prepare validates req (the only place the workflow side does, see
// validate) and returns the activity input and options for it.
func prepare(ctx workflow.Context, req Request) (input.Input, workflow.ActivityOptions, error) {
	key := requestKey(ctx, req)
	method, err := validate(req, key)
	if err != nil {
		return input.Input{}, workflow.ActivityOptions{}, err
	}
	ao := workflow.GetActivityOptions(ctx)
	r := retryOptions(req.Retry, ao.RetryPolicy)
	in := input.Input{
		Operation: req.Operation, Method: method, URL: req.URL, Body: req.Body,
		Headers: req.Headers, IdempotencyKey: key, MaximumAttempts: r.MaximumAttempts,
		Backoff: r, Follow: req.Follow != nil, KeyIn: req.KeyIn, Reconcile: req.Reconcile,
	}
	in.Backoff.MaximumAttempts = 0 // the input's own MaximumAttempts
	ao.TaskQueue = cmp.Or(req.TaskQueue, ao.TaskQueue)
	if req.OriginQueue {
		// validate has parsed the URL.
		_, origin, _ := httpurl.Parse(req.URL)
		ao.TaskQueue = httpurl.OriginQueue(cmp.Or(ao.TaskQueue, workflow.GetInfo(ctx).TaskQueueName), origin)
		// The server does not rate-limit eager activities.
		ao.DisableEagerExecution = true
	}
	ao.StartToCloseTimeout = cmp.Or(req.StartToCloseTimeout, ao.StartToCloseTimeout, defaults.StartToCloseTimeout)
	if req.Follow != nil {
		in.StartWait = req.Follow.startWait(ao)
	}
	var ceiling int32
	if req.Reconcile.AtMostOnce {
		// A person's decision has no deadline unless the call (or its
		// context) gives one, and the attempts that wait for it are not
		// counted.
		ao.ScheduleToCloseTimeout = cmp.Or(req.ScheduleToCloseTimeout, ao.ScheduleToCloseTimeout)
		if err := canWait(workflow.GetInfo(ctx), ao.ScheduleToCloseTimeout, r.MaximumAttempts); err != nil {
			return input.Input{}, workflow.ActivityOptions{}, err
		}
	} else {
		ao.ScheduleToCloseTimeout = cmp.Or(req.ScheduleToCloseTimeout, ao.ScheduleToCloseTimeout, defaults.ScheduleToCloseTimeout)
		ceiling = backoff.AttemptCeiling(r.MaximumAttempts, ao.ScheduleToCloseTimeout)
	}
	ao.RetryPolicy = &temporal.RetryPolicy{
		InitialInterval:    r.InitialInterval,
		BackoffCoefficient: r.BackoffCoefficient,
		MaximumInterval:    r.MaximumInterval,
		// The activity counts the attempts itself (in.MaximumAttempts),
		// so that waiting for a request still in flight at the server does
		// not use up the budget; Temporal's count is only a ceiling.
		MaximumAttempts:        ceiling,
		NonRetryableErrorTypes: slices.Clone(nonRetryableErrorTypes),
	}
	ao.Summary = input.Summary(method, req.URL, req.Operation)
	return in, ao, nil
}

// Validate checks r as Call does before anything is written to Temporal's
// history: the operation or key, method, URL (absolute http or https, no
// user info, ASCII host), body (valid UTF-8 JSON, at most 256 KiB) and
// headers (no credentials, no control characters, no duplicates). A client
// that starts the ready workflow calls it first, so that a bad request
// never reaches the workflow's input; the error is a non-retryable
// ApplicationError of type ErrTypeInvalidRequest.
func (r Request) Validate() error {
	key := r.IdempotencyKey
	if key == "" && strings.TrimSpace(r.Operation) != "" {
		key = idemkey.Derive("", "", r.Operation)
	}
	_, err := validate(r, key)
	return err
}

// validate checks req in the workflow, before the activity input is written
// to history, with the rules of package request (the activity checks them
// again), and returns its method.
func validate(req Request, key string) (string, error) {
	if key == "" {
		return "", invalid(operationRequired)
	}
	method, err := rules.Method(req.Method)
	if err == nil {
		_, _, err = httpurl.Parse(req.URL)
	}
	if err == nil {
		err = rules.Operation(req.Operation)
	}
	if err == nil {
		err = idemkey.Check(key)
	}
	if err == nil {
		err = rules.Body(req.Body)
	}
	if err == nil {
		err = rules.Headers(req.Headers)
	}
	if err == nil {
		err = checkKeyIn(req, key)
	}
	if err == nil && req.Follow != nil {
		err = req.Follow.validate()
	}
	if err == nil && req.Webhook != nil {
		err = req.Webhook.validate()
		if err == nil && req.Follow != nil {
			err = errors.New("Request.Webhook and Request.Follow exclude each other: an operation is followed by polling its monitor or awaited by webhook (whose WebhookPoll is the polling)")
		}
		if err == nil && strings.TrimSpace(req.Operation) == "" {
			err = errors.New("Request.Webhook needs Request.Operation: the notifications name it")
		}
	}
	if err != nil {
		return "", invalid("%v", err)
	}
	return method, nil
}

// checkKeyIn checks, for a call whose key goes in its body or query
// (KeyIn), that the key can go there, and the call's Reconcile.
func checkKeyIn(req Request, key string) error {
	place, err := keyplace.Parse(req.KeyIn)
	if err != nil {
		return fmt.Errorf("Request.KeyIn: %w", err)
	}
	switch place.In {
	case keyplace.Body:
		if len(req.Body) == 0 {
			return fmt.Errorf("Request.KeyIn %s needs a JSON object body to carry the key: Request.Body is empty", req.KeyIn)
		}
		if _, err := keyplace.InsertBody(req.Body, place.Name, key); err != nil {
			return fmt.Errorf("Request.KeyIn %s: %w", req.KeyIn, err)
		}
	case keyplace.Query:
		u, _ := url.Parse(req.URL)
		if _, err := keyplace.InsertQuery(u, place.Name, key); err != nil {
			return fmt.Errorf("Request.KeyIn %s: %w", req.KeyIn, err)
		}
	}
	r := req.Reconcile
	if err := r.Validate("Request.Reconcile", req.URL); err != nil {
		return err
	}
	if req.KeyIn != "" {
		// Else the origin's KeyIn, which the activity checks.
		if err := r.CheckPlace("Request.Reconcile", place); err != nil {
			return err
		}
	}
	if !r.IsZero() && (req.Follow != nil || req.Webhook != nil) {
		return errors.New("Request.Reconcile goes with a call that is its own result: it cannot be combined with Follow or Webhook yet")
	}
	if r.AtMostOnce && req.ScheduleToCloseTimeout > 0 && req.ScheduleToCloseTimeout < reconcile.MinDecisionWait {
		return fmt.Errorf("Request.Reconcile.AtMostOnce waits for a person's decision, which Request.ScheduleToCloseTimeout %s cannot: leave it 0 (no bound) or give at least %s", req.ScheduleToCloseTimeout, reconcile.MinDecisionWait)
	}
	return nil
}

// canWait refuses an AtMostOnce call that cannot wait for a person's
// decision: a schedule-to-close (the call's, else its context's) or a
// workflow timeout under reconcile.MinDecisionWait (the server bounds an
// activity by the workflow's), or one attempt in all (the pause comes on
// the attempt after the unknown outcome).
func canWait(info *workflow.Info, scheduleToClose time.Duration, attempts int32) error {
	const want = "a call AtMostOnce waits for a person's decision"
	if scheduleToClose > 0 && scheduleToClose < reconcile.MinDecisionWait {
		return invalid("%s, which a ScheduleToCloseTimeout of %s (the request's, else the workflow context's) cannot: set Request.ScheduleToCloseTimeout to 0 (no bound) or at least %s", want, scheduleToClose, reconcile.MinDecisionWait)
	}
	for _, wt := range []struct {
		name string
		d    time.Duration
	}{{"execution", info.WorkflowExecutionTimeout}, {"run", info.WorkflowRunTimeout}} {
		if wt.d > 0 && wt.d < reconcile.MinDecisionWait {
			return invalid("%s, which the workflow's %s timeout of %s cannot (it bounds the activity): start the workflow without one, or with at least %s", want, wt.name, wt.d, reconcile.MinDecisionWait)
		}
	}
	if attempts == 1 {
		return invalid("%s after an attempt of unknown outcome, on the next attempt, which RetryOptions.MaximumAttempts 1 leaves none of: leave it 0 or set 2 or more", want)
	}
	return nil
}

// retryOptions fills the zero fields of r from the retry policy already on
// the workflow context (workflow.WithActivityOptions), then from the
// defaults (those of the backoff from backoff.Backoff.WithDefaults, which
// the activity applies too).
func retryOptions(r RetryOptions, ctxPolicy *temporal.RetryPolicy) RetryOptions {
	var p temporal.RetryPolicy
	if ctxPolicy != nil {
		p = *ctxPolicy
	}
	r.InitialInterval = cmp.Or(r.InitialInterval, p.InitialInterval)
	r.MaximumInterval = cmp.Or(r.MaximumInterval, p.MaximumInterval)
	if r.BackoffCoefficient < 1 {
		r.BackoffCoefficient = p.BackoffCoefficient
	}
	r = r.WithDefaults()
	r.MaximumAttempts = cmp.Or(max(r.MaximumAttempts, 0), max(p.MaximumAttempts, 0), defaults.MaximumAttempts)
	return r
}

const operationRequired = "Request.Operation is required: it names the call within the workflow and is part of its idempotency key"

// invalid is the InvalidRequest error of a request refused before it is
// scheduled. It carries a Failure, as the activity's errors do, so that
// AsFailure reads every error of a call alike; the message names the field.
func invalid(format string, args ...any) error {
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf(format, args...), ErrTypeInvalidRequest, nil, Failure{})
}

func logFailure(ctx workflow.Context, in input.Input, err error) {
	kv := []any{
		"operation", in.Operation, "key", in.IdempotencyKey, "method", in.Method,
		"url", redact.URL(in.URL), "body_sha256", rules.BodyHash(in.Body), "error", err,
	}
	d, ok := AsFailure(err)
	if ok {
		kv = append(kv, "attempts", d.Attempt, "last_status", d.Status)
	}
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		kv = append(kv, "error_type", appErr.Type())
	}
	log := workflow.GetLogger(ctx).Error
	if ok && appErr != nil && rules.CallerHandles(d.Status, appErr.Type() == ErrTypeHTTPClientError, d.OutcomeUnknown) {
		// The activity has logged it at Warn: once is enough.
		log = workflow.GetLogger(ctx).Info
	}
	log("idempotent HTTP call failed", kv...)
}

// HTTPCallWorkflow is the ready workflow: it performs req with [Call] and
// returns the response. Start it with the starter CLI or as a child workflow
// (see [ExecuteChild]).
func HTTPCallWorkflow(ctx workflow.Context, req Request) (*Response, error) {
	// As Call, validating req once: prepare's activity options carry the summary.
	in, ao, err := prepare(ctx, req)
	if err != nil {
		return nil, err
	}
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("%s with idempotency key %s", ao.Summary, in.IdempotencyKey))
	return execute(ctx, req, in, ao)
}

// ExecuteChild runs HTTPCallWorkflow as a child workflow. The child's
// workflow ID is the parent's ID plus "/" plus the operation, which is
// therefore required, and the key is derived in the parent, so both are
// stable across resets of either.
//
// The parent applies the rule of Post and Call (see Request.Repeat): a
// second call in one parent run with the same key, by ExecuteChild, Post or
// Call, after the first succeeded, fails with InvalidRequest before any
// child starts, unless Request.Repeat is set; after a failed call it is a
// retry and allowed. (Without the rule a second child, with the same
// workflow ID and key, would get the first's stored response with
// Replayed set, and the work would silently happen once.)
func ExecuteChild(ctx workflow.Context, req Request) (*Response, error) {
	if strings.TrimSpace(req.Operation) == "" {
		return nil, invalid("ExecuteChild needs Request.Operation: it names the child workflow (parent ID + \"/\" + operation); an explicit IdempotencyKey may be set beside it")
	}
	req.IdempotencyKey = requestKey(ctx, req)
	method, err := validate(req, req.IdempotencyKey)
	if err != nil {
		return nil, err
	}
	owns, err := refuseRepeat(ctx, req.IdempotencyKey, req)
	if err != nil {
		return nil, err
	}
	cwo := workflow.ChildWorkflowOptions{
		WorkflowID:    workflow.GetInfo(ctx).WorkflowExecution.ID + "/" + req.Operation,
		StaticSummary: input.Summary(method, req.URL, req.Operation),
	}
	var resp Response
	if err := workflow.ExecuteChildWorkflow(workflow.WithChildOptions(ctx, cwo), WorkflowName, req).Get(ctx, &resp); err != nil {
		// Calling again with this key retries the same operation: allowed.
		// A child that did not start because its twin runs (started beside
		// it) owns nothing: the twin's record stays.
		if owns {
			forget(ctx, req.IdempotencyKey)
		}
		return nil, err
	}
	return &resp, nil
}

// Register registers HTTPCallWorkflow under WorkflowName.
func Register(r worker.WorkflowRegistry) {
	r.RegisterWorkflowWithOptions(HTTPCallWorkflow, workflow.RegisterOptions{Name: WorkflowName})
}
