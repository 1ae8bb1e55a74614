package activities

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"

	"github.com/idemhttp/temporal-idempotent-http/internal/admission"
	"github.com/idemhttp/temporal-idempotent-http/internal/backoff"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// asking is the attempt whose request asks for admission: what admit
// needs beyond the request. Every request the worker sends an origin (a
// start, a poll, a cancel request, the read of a result) asks through
// admit and is sent through exchange: one limiter, breaker, retry budget
// and shared-rate report per origin, whichever activity sends.
type asking struct {
	info activity.Info
	// prev is the progress of the attempts before this one; admit takes
	// its ticket and hands it, with the new one, to the next attempt.
	prev *progress
	// retry: the request repeats one of this activity that was sent and
	// failed (or may have): the retry budget counts it as a retry.
	retry bool
	// d is the Failure of a request not admitted (admit sets its Reason
	// and NextRetryDelay).
	d workflows.Failure
	// lateType and lateAdvice are the error type of a wait that cannot
	// end before the schedule-to-close deadline and what its message tells
	// the caller to do.
	lateType, lateAdvice string
}

// admit asks the origin's limiter before the attempt sends its request p.
// It waits inside the attempt while admission.Limiter.InAttempt says so (a
// short turn of the rate, up to MaxWait; the breaker's probe and its
// answer, up to a fifth of the attempt's time); otherwise it ends the attempt with a
// retryable workflows.ErrTypeNotAdmitted whose NextRetryDelay brings the
// next attempt back shortly before its turn (or the breaker's next probe),
// recording the progress (ticket included; the attempt is not counted
// against the budget). A wait that cannot end before the schedule-to-close
// deadline fails with q.lateType: nothing was sent by this attempt.
func (a *Activities) admit(ctx context.Context, p *prepared, m client.MetricsHandler, q asking) error {
	lim := p.o.limiter
	if lim == nil {
		return nil
	}
	cfg := p.o.admission
	info, prev := q.info, q.prev
	now := a.cfg.Now()
	// With the server's rate limit in force on this attempt's queue, the
	// server has paced it: the breaker and the budget decide, and the
	// attempts this worker is handed at once are spread at its share.
	limit, share, shared := a.sharedLimit(info.TaskQueue)
	if !shared && a.cfg.SharedRate != nil {
		// Before a limit is in force, the workers of the queue start
		// their own rates at their share of one worker's.
		lim.StartShared(p.origin, now, a.cfg.SharedRate.Workers(info.TaskQueue))
	}
	ask := func(now time.Time, t admission.Ticket) admission.Decision {
		if shared {
			return lim.Pace(p.origin, now, min(limit, share*sharePaceHeadroom), t, q.retry)
		}
		return lim.Admit(p.origin, now, t, q.retry)
	}
	d := ask(now, prev.Ticket)
	for waited := time.Duration(0); !d.Admitted && lim.InAttempt(waited, d, attemptLeft(ctx)); {
		m.Timer(metricAdmissionWait).Record(d.Wait)
		t := time.NewTimer(d.Wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		waited += d.Wait
		p.waited = waited
		// Config.Now may be a clock that does not move while the attempt
		// runs (Temporal's test environment): the wait has passed on it too.
		now = later(a.cfg.Now(), now.Add(d.Wait))
		d = ask(now, d.Ticket)
	}
	a.gauges(ctx, p.o, d.Circuit, d.Rate, limit)
	if d.Admitted {
		prev.Ticket = admission.Ticket{}
		return nil
	}
	// A wait too long for this attempt comes back shortly before its turn
	// (Hop), or at its turn when it was short but did not fit the attempt;
	// never sooner than the waits workflows.Call counted Temporal's
	// attempts for (backoff.AttemptCeiling).
	delay := lim.Hop(d.Wait, d.Reason)
	if delay == 0 {
		delay = d.Wait
	}
	delay = max(delay, backoff.MinInFlightWait)
	next := *prev
	next.Attempt, next.Ticket = info.Attempt, d.Ticket
	next.PausedAt = prev.unpausedAt(info.Attempt)
	fd := q.d
	fd.NextRetryDelay = delay
	why := fmt.Sprintf("its rate is %.2g requests/s", d.Rate)
	if shared {
		why = fmt.Sprintf("this worker's share of the task queue's rate limit (%.2g requests/s) is %.2g requests/s", limit, share)
	} else if d.Throttled {
		why += fmt.Sprintf(", learned from its throttles (%s.Throttles: %v)", p.o.admissionName, cfg.Throttles)
	}
	switch d.Reason {
	case admission.ReasonRetryBudget:
		why = "its retries have used up the retry budget (" + p.o.admissionName + ".RetryRatio and MinRetries)"
	case admission.ReasonCircuitOpen:
		why = "its circuit breaker is open: its recent requests failed (a 5xx or no answer), and one probe request at a time tests whether it is back (" + p.o.admissionName + ".Breaker)"
	}
	fd.Reason = "waiting for admission: " + string(d.Reason)
	msg := fmt.Sprintf("%s %s: not sent yet: adaptive admission holds requests to %s back (%s); its turn is in %s",
		p.method, p.shown, p.origin, why, d.Wait.Round(time.Millisecond))
	logger := activity.GetLogger(ctx)
	if left, beyond := beyondDeadline(info, *prev, &next, now, d.Wait); beyond {
		logger.Error("HTTP request not admitted before the deadline", "key", fd.IdempotencyKey, "attempt", info.Attempt, "wait", d.Wait, "left", left, "reason", string(d.Reason))
		return a.fail(fmt.Sprintf("%s, but only %s remain before the schedule-to-close deadline (%s): failing now; this attempt sent nothing. %s",
			msg, max(left, 0).Round(time.Millisecond), info.ScheduleToCloseTimeout, q.lateAdvice), q.lateType, fd)
	}
	m.WithTags(map[string]string{"reason": reasonLabel(d.Reason)}).Counter(metricAdmissionDelays).Inc(1)
	m.Timer(metricRetryDelay).Record(delay)
	err := a.handOver(ctx, next, workflows.ErrTypeNotAdmitted, fmt.Sprintf("%s; asking again in %s", msg, delay.Round(time.Millisecond)), delay, true, fd)
	logger.Info("HTTP request not admitted yet, Temporal will retry", "key", fd.IdempotencyKey, "attempt", info.Attempt, "delay", delay, "wait", d.Wait, "reason", string(d.Reason))
	return err
}

// exchange sends p once, the request of an attempt on task queue tq that
// admit has admitted, and tells the origin's limiter and the shared rate
// what its answer says (observe).
func (a *Activities) exchange(ctx context.Context, tq string, p *prepared) answer {
	sentAt := a.cfg.Now()
	sendCtx, cancel := withMargin(ctx)
	ans := a.send(sendCtx, p)
	// send has read the answer: its context may go.
	cancel()
	a.observe(ctx, tq, p, sentAt, &ans)
	return ans
}

// reasonLabel is a wait's reason as a metrics label value: rate,
// retry_budget or circuit_open.
func reasonLabel(r admission.Reason) string {
	return strings.ReplaceAll(string(r), " ", "_")
}

// observe tells the origin's limiter what the answer to the request sent
// at sentAt, by an attempt on task queue tq, says about the origin (see
// Breaker: which answers are failures), and updates the origin's gauges. An attempt whose context
// ended (the worker stops, the activity was cancelled) tells it nothing:
// the origin did not fail. Nor does an attempt that sent nothing
// (answer.unsent: a credential that could not be applied, a request
// net/http refused): the origin did not answer.
func (a *Activities) observe(ctx context.Context, tq string, p *prepared, sentAt time.Time, ans *answer) {
	lim := p.o.limiter
	if lim == nil || ctx.Err() != nil || ans.unsent() {
		return
	}
	o := admission.Observation{
		Throttled: ans.err == nil && p.o.throttle(ans.status),
		Failed:    ans.err != nil || ans.status >= 500 && unknownStatus(ans.status),
	}
	now := a.cfg.Now()
	if o.Failed && ans.err == nil {
		if ra, ok := retryAfter(ans.header, now); ok {
			// The origin's cap, not a call's: the breaker holds back
			// every call to the origin.
			o.RetryAfter = min(ra, a.retryAfterCap(p.o, backoff.Backoff{}))
		}
	}
	lim.Observe(p.origin, sentAt, now, o)
	s := lim.State(p.origin, now)
	if a.cfg.SharedRate != nil {
		a.cfg.SharedRate.Record(tq, o.Throttled, o.Failed)
	}
	limit, _, _ := a.sharedLimit(tq)
	a.gauges(ctx, p.o, s.Circuit, s.Rate, limit)
}

// sharePaceHeadroom is how much faster than its share of a shared queue's
// limit a worker paces the attempts it is handed: the server hands tasks
// to whichever worker polls, not in turn, so a worker paced at exactly its
// share falls behind whenever it is handed more than that, and the
// attempts it cannot pace within Admission.MaxWait go back to the server's
// queue, each spending one of the limit's starts. The server's own limit
// still holds the workers together to it; the pace only spreads the
// burst it releases after an idle moment. A worker alone (its share is
// the limit) paces at the limit.
const sharePaceHeadroom = 1.5

// sharedLimit returns the server's rate limit in force on taskQueue
// (Config.SharedRate), this worker's share of it, and whether one is.
func (a *Activities) sharedLimit(taskQueue string) (limit, share float64, ok bool) {
	if a.cfg.SharedRate == nil {
		return 0, 0, false
	}
	return a.cfg.SharedRate.Limit(taskQueue)
}

// gauges sets the origin's breaker, rate and limit gauges, labelled by
// origin only: a gauge per operation would keep the last value of an
// operation that no longer runs.
func (a *Activities) gauges(ctx context.Context, o *origin, c admission.Circuit, rate, limit float64) {
	m := activity.GetMetricsHandler(ctx).WithTags(o.gaugeTags)
	open := 0.0
	if c != admission.Closed {
		open = 1
	}
	m.Gauge(metricCircuitOpen).Update(open)
	m.Gauge(metricAdmissionRate).Update(rate)
	m.Gauge(metricRateLimit).Update(limit)
}

// attemptLeft returns the attempt's time before its deadline, 0 without
// one (admission.Limiter.InAttempt).
func attemptLeft(ctx context.Context) time.Duration {
	dl, ok := ctx.Deadline()
	if !ok {
		return 0
	}
	return max(time.Until(dl), time.Nanosecond)
}

// later returns the later of two times.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
