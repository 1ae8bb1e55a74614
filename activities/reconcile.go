package activities

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/idemhttp/temporal-idempotent-http/internal/input"
	"github.com/idemhttp/temporal-idempotent-http/internal/reconcile"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// Reconciled values of workflows.Response.Reconciled.
const reconciledByLookup = "lookup"

// pauseRetryDelay is the wait after an attempt that paused itself: the
// next starts only once a person unpauses the activity.
const pauseRetryDelay = time.Second

// maxPauseTries bounds the attempts that could not pause the activity
// (credentialBackoff apart: 1 s doubling to 1 min, about 15 minutes).
const maxPauseTries = 20

// settle runs before an attempt sends, for a call that reconciles
// (p.rec): before every request of a Lookup call, and after an attempt
// of unknown outcome for the others. It asks the lookup, leaves it to
// the call's lookup activity, or pauses the activity for a person's
// decision. It returns the result (the
// lookup found the record), or the error that ends the attempt, or send
// true: the attempt sends (the lookup found nothing, or a person unpaused
// the activity), with prev's unknown outcome settled.
func (a *Activities) settle(ctx context.Context, info activity.Info, p *prepared, m client.MetricsHandler, prev *progress) (resp *workflows.Response, status int, send bool, err error) {
	d := workflows.Failure{
		Operation: p.req.Operation, Method: p.method, URL: p.shown, IdempotencyKey: p.req.IdempotencyKey,
		Attempt: info.Attempt, OutcomeUnknown: prev.hint(),
	}
	if p.rec.LookupActivity != "" {
		// The workflow side runs the call's own lookup activity.
		activity.GetLogger(ctx).Warn("HTTP attempt of unknown outcome left to the call's lookup activity", "key", p.req.IdempotencyKey, "lookup_activity", p.rec.LookupActivity)
		return nil, 0, false, a.fail(fmt.Sprintf("%s %s: %s; the call's lookup activity %s is asked before anything is sent again",
			p.method, p.shown, prev.earlier(), p.rec.LookupActivity), reconcile.NeedsLookup, d)
	}
	if p.rec.AtMostOnce {
		if prev.PausedAt != 0 && prev.PausedAt == prev.Attempt {
			// The attempt before paused itself, and Temporal started this
			// one: a person unpaused the activity, which means "send
			// again", unless the activity is still paused: temporal-server
			// 1.29.1, in the seconds after a restart, started attempts of
			// paused activities no one had unpaused (logging "Activity is
			// paused, but new task was schedulled"), and only the
			// activity's state tells an unpause from that.
			if err := a.stillPaused(ctx, info); err != nil {
				return nil, 0, false, a.awaitAgain(ctx, info, p, *prev, d, err)
			}
			activity.GetLogger(ctx).Warn("HTTP request sent again at a person's decision (the activity was unpaused)", "key", p.req.IdempotencyKey, "attempt", info.Attempt)
			prev.Unknown, prev.UnknownGot, prev.PausedAt = false, "", 0
			return nil, 0, true, nil
		}
		return nil, 0, false, a.pause(ctx, info, p, *prev, d)
	}
	return a.lookup(ctx, info, p, m, prev, d)
}

// lookup asks p.rec.Lookup whether an earlier attempt's request went
// through (see settle).
func (a *Activities) lookup(ctx context.Context, info activity.Info, p *prepared, m client.MetricsHandler, prev *progress, d workflows.Failure) (*workflows.Response, int, bool, error) {
	pu, err := a.urls.parse(p.rec.URL(p.req.IdempotencyKey))
	if err != nil {
		return nil, 0, false, a.fail(fmt.Sprintf("Reconcile.Lookup: %v", err), workflows.ErrTypeInvalidRequest, d)
	}
	lp := &prepared{
		req:    input.Input{Operation: p.req.Operation, Method: http.MethodGet, URL: pu.raw, IdempotencyKey: p.req.IdempotencyKey},
		method: http.MethodGet, url: pu.url, raw: pu.raw, shown: a.redact.string(pu.shown), origin: pu.origin, o: p.o,
		noKey: true, inject: p.inject,
	}
	// The call's own headers (an account, a tenant, an API version) scope
	// the records the lookup searches.
	lp.req.Headers = p.req.Headers
	ans := a.exchange(ctx, info.TaskQueue, lp)
	found, record, n := reconcile.Read(ans.status, ans.body, p.rec.Items, p.req.IdempotencyKey, p.rec.KeyInPath())
	if ans.err != nil {
		found = reconcile.Unreadable
	}
	logger := activity.GetLogger(ctx)
	where := fmt.Sprintf("lookup GET %s", lp.shown)
	switch {
	case found == reconcile.NotFound:
		// prev keeps its unknown outcome: a failure after the request
		// sent now still says the first may have gone through (a
		// lookup that lags says "not found" for it).
		logger.Info("HTTP lookup found no record: sending", "key", p.req.IdempotencyKey, "attempt", info.Attempt, "lookup_status", ans.status, "earlier_unknown", prev.Unknown)
		return nil, 0, true, nil
	case found == reconcile.One:
		one := answer{status: ans.status, header: ans.header, body: record, size: int64(len(record)), from: lp.url}
		r := a.result(&one, p, info.Attempt, nil)
		r.Reconciled, r.Replayed = reconciledByLookup, false
		logger.Info("HTTP request found by lookup: an earlier attempt went through", "key", p.req.IdempotencyKey, "attempt", info.Attempt, "lookup_status", ans.status)
		return r, ans.status, false, nil
	case found == reconcile.Many:
		// Records carry the key: the work was done, more than once.
		d.Status, d.OutcomeUnknown = ans.status, true
		logger.Error("HTTP lookup found more than one record for the key", "key", p.req.IdempotencyKey, "records", n)
		return nil, ans.status, false, a.fail(fmt.Sprintf("%s found %d records carrying idempotency key %s (%s): none is taken as the result, and nothing is sent; settle it by hand with the API's owner",
			where, n, p.req.IdempotencyKey, lookupWhy(prev)), workflows.ErrTypeLookupAmbiguous, d)
	}
	// Unreadable: no answer, or not a lookup's.
	d.Status = ans.status
	var msg string
	if ans.err != nil {
		msg = fmt.Sprintf("%s failed: %s; nothing was sent (%s)", where, a.redact.string(ans.err.Error()), lookupWhy(prev))
	} else {
		d.Body = a.redact.snippet(ans.body)
		msg = fmt.Sprintf("%s answered %d, from which nothing can be concluded: a lookup answers a 2xx with the list of records%s (or a per-record route the record, or a 404), and a record matches only when it carries the key %s (others' records mean the route ignored its filter); nothing was sent (%s)",
			where, ans.status, itemsNote(p.rec.Items), p.req.IdempotencyKey, lookupWhy(prev))
	}
	if ans.err == nil && !retryableStatus[ans.status] {
		logger.Error("HTTP lookup failed, not retrying", "key", p.req.IdempotencyKey, "status", ans.status)
		return nil, ans.status, false, a.fail(msg+"; fix Reconcile.Lookup or Items, then run the same workflow ID again (it asks the lookup before it sends)", workflows.ErrTypeLookupFailed, d)
	}
	v := verdict{kind: kindRetry, errType: workflows.ErrTypeLookupFailed, reason: "the lookup failed"}
	return nil, ans.status, false, a.retry(ctx, &failure{info: info, p: p, m: m, prev: *prev, v: v, d: d, msg: msg, header: ans.header})
}

// lookupWhy says, for messages, why the lookup was asked.
func lookupWhy(prev *progress) string {
	if prev.Unknown {
		return prev.earlier()
	}
	return "a lookup comes before every request: an earlier run of the workflow may have made the record"
}

// itemsNote names the lookup's list for a message.
func itemsNote(items string) string {
	if items == "" {
		return ""
	}
	return " at " + items
}

// pause pauses the activity until a person decides what an attempt of
// unknown outcome did (Reconcile.AtMostOnce), and returns the error that
// ends this attempt: retryable (Temporal starts the next attempt only
// once the activity is unpaused), or final where it cannot wait.
func (a *Activities) pause(ctx context.Context, info activity.Info, p *prepared, prev progress, d workflows.Failure) error {
	logger := activity.GetLogger(ctx)
	what := prev.earlier()
	decide := "decide what it did: `temporal activity unpause` to send it again, `temporal activity complete --result` with the API's answer if it went through, or with {\"gave_up\": \"why\"} to give up (a new run of the workflow would send at once: decide here)"
	if info.ScheduleToCloseTimeout > 0 && info.ScheduleToCloseTimeout < reconcile.MinDecisionWait {
		logger.Error("HTTP call at most once cannot wait for a decision", "key", p.req.IdempotencyKey, "schedule_to_close", info.ScheduleToCloseTimeout)
		return a.fail(fmt.Sprintf("%s %s: at most once, and %s; its ScheduleToCloseTimeout (%s) cannot wait for a person's decision, so it ends here without sending again: check with the API's owner what the request did before running the workflow again (its first attempt sends at once); set Request.Reconcile.AtMostOnce on the call (no bound by default) or a ScheduleToCloseTimeout of at least %s",
			p.method, p.shown, what, info.ScheduleToCloseTimeout, reconcile.MinDecisionWait), workflows.ErrTypeAwaitingDecision, d)
	}
	svc := workflowService(ctx)
	if svc == nil {
		return a.fail(fmt.Sprintf("%s %s: at most once, and %s; the activity cannot pause here (Temporal's test environment has no activity pause), so it ends without sending again; on a Temporal server it pauses: %s",
			p.method, p.shown, what, decide), workflows.ErrTypeAwaitingDecision, d)
	}
	reason := a.redact.string(fmt.Sprintf("at most once: %s (key %s); %s", what, p.req.IdempotencyKey, decide))
	_, err := svc.PauseActivity(ctx, &workflowservice.PauseActivityRequest{
		Namespace: info.WorkflowNamespace,
		Execution: &commonpb.WorkflowExecution{WorkflowId: info.WorkflowExecution.ID, RunId: info.WorkflowExecution.RunID},
		Identity:  "idempotent-http",
		Activity:  &workflowservice.PauseActivityRequest_Id{Id: info.ActivityID},
		Reason:    reason,
	})
	next := prev
	next.Attempt = info.Attempt
	opts := temporal.ApplicationErrorOptions{NextRetryDelay: pauseRetryDelay}
	d.NextRetryDelay = pauseRetryDelay
	if err != nil {
		// Not paused: the next attempt tries again, sending nothing, on
		// a backoff of its own, a bounded number of times.
		next.PauseTries++
		if next.PauseTries >= maxPauseTries {
			logger.Error("HTTP call at most once could not pause for a decision", "key", p.req.IdempotencyKey, "tries", next.PauseTries, "error", err)
			return a.fail(fmt.Sprintf("%s %s: at most once, and %s; pausing the activity for a person's decision failed %d times (last: %v), so the call ends here, sending nothing again: give the worker's Temporal identity the right to pause activities (the workflow service's PauseActivity), check with the API's owner what the request did, and only then run the workflow again (its first attempt sends at once)",
				p.method, p.shown, what, next.PauseTries, err), workflows.ErrTypeAwaitingDecision, d)
		}
		delay := credentialBackoff(next.PauseTries)
		opts.NextRetryDelay, d.NextRetryDelay = delay, delay
		logger.Warn("HTTP call at most once could not pause for a decision, trying again", "key", p.req.IdempotencyKey, "tries", next.PauseTries, "delay", delay, "error", err)
		opts.Details = []any{a.scrub(d)}
		a.leave(ctx, next)
		return temporal.NewApplicationErrorWithOptions(a.redact.string(fmt.Sprintf("%s %s: at most once, and %s; pausing the activity for a decision failed (%v): trying again in %s, nothing sent", p.method, p.shown, what, err, delay)), workflows.ErrTypeAwaitingDecision, opts)
	}
	// Recorded only once paused: an attempt that finds it knows a person
	// unpaused the activity (a pause lost with its worker pauses again).
	next.PausedAt = info.Attempt
	logger.Warn("HTTP call at most once paused for a person's decision", "key", p.req.IdempotencyKey, "attempt", info.Attempt, "earlier", what)
	opts.Details = []any{a.scrub(d)}
	opts.Category = temporal.ApplicationErrorCategoryBenign
	a.leave(ctx, next)
	return temporal.NewApplicationErrorWithOptions(a.redact.string(fmt.Sprintf("%s %s: at most once, and %s; paused: %s", p.method, p.shown, what, decide)), workflows.ErrTypeAwaitingDecision, opts)
}

// workflowService is the Temporal service the activity's worker talks
// to, or nil where there is none that can pause an activity: Temporal's
// test environment serves activities with a mock of it.
func workflowService(ctx context.Context) workflowservice.WorkflowServiceClient {
	c := activity.GetClient(ctx)
	if c == nil {
		return nil
	}
	svc := c.WorkflowService()
	if svc == nil || strings.Contains(fmt.Sprintf("%T", svc), "workflowservicemock") {
		return nil
	}
	return svc
}

// errStillPaused is stillPaused's answer for an activity still paused.
var errStillPaused = errors.New("the activity is still paused: no one unpaused it")

// stillPaused returns nil when the activity of info is no longer paused
// (a person unpaused it), errStillPaused when it is, or the error that
// kept it from asking the server.
func (a *Activities) stillPaused(ctx context.Context, info activity.Info) error {
	svc := workflowService(ctx)
	if svc == nil {
		return errors.New("no Temporal service to ask")
	}
	resp, err := svc.DescribeWorkflowExecution(ctx, &workflowservice.DescribeWorkflowExecutionRequest{
		Namespace: info.WorkflowNamespace,
		Execution: &commonpb.WorkflowExecution{WorkflowId: info.WorkflowExecution.ID, RunId: info.WorkflowExecution.RunID},
	})
	if err != nil {
		return fmt.Errorf("describing the workflow: %w", err)
	}
	for _, pa := range resp.GetPendingActivities() {
		if pa.GetActivityId() == info.ActivityID && pa.GetPaused() {
			return errStillPaused
		}
	}
	return nil
}

// awaitAgain ends an attempt that Temporal started after a pause while
// no one has unpaused the activity (why: errStillPaused, or the error
// that kept it from knowing): it sends nothing, and the next attempt,
// which only an unpause starts, asks again.
func (a *Activities) awaitAgain(ctx context.Context, info activity.Info, p *prepared, prev progress, d workflows.Failure, why error) error {
	activity.GetLogger(ctx).Warn("HTTP call at most once started while waiting for a decision: not sending", "key", p.req.IdempotencyKey, "attempt", info.Attempt, "why", why.Error())
	next := prev
	next.Attempt, next.PausedAt = info.Attempt, info.Attempt
	d.NextRetryDelay = pauseRetryDelay
	opts := temporal.ApplicationErrorOptions{NextRetryDelay: pauseRetryDelay, Details: []any{a.scrub(d)}}
	if errors.Is(why, errStillPaused) {
		opts.Category = temporal.ApplicationErrorCategoryBenign
	}
	a.leave(ctx, next)
	return temporal.NewApplicationErrorWithOptions(a.redact.string(fmt.Sprintf("%s %s: at most once, and %s; started again while waiting for a decision (%v): nothing sent; `temporal activity unpause` sends it again",
		p.method, p.shown, prev.earlier(), why)), workflows.ErrTypeAwaitingDecision, opts)
}
