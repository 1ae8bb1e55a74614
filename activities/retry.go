package activities

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/idemhttp/temporal-idempotent-http/internal/admission"
	"github.com/idemhttp/temporal-idempotent-http/internal/backoff"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// progress is what one attempt leaves for the next, as the activity's
// heartbeat details (Temporal hands the last ones to the next attempt). An
// attempt that left none (its worker died, or Temporal timed it out) counts
// as a failure whose outcome is unknown.
type progress struct {
	// Attempt is the attempt that recorded this.
	Attempt int32 `json:"attempt"`
	// Counted is how many attempts up to Attempt count against the budget.
	Counted int32 `json:"counted"`
	// Unknown: the request of an attempt up to Attempt may have reached the
	// server and got no answer (or a 408 or 5xx, which a gateway may send).
	Unknown bool `json:"unknown,omitempty"`
	// UnknownGot says what the latest of those attempts got, for messages
	// ("got 503 Service Unavailable", "ended without an answer"); empty in
	// progress recorded before it existed (read as no answer).
	UnknownGot string `json:"unknown_got,omitempty"`
	// Guessed counts the bare 409s taken for the key in flight by decide's
	// guess alone (after an attempt of unknown outcome, hint), and
	// GuessedAfter is Waited when the first of them came: the guess has
	// lasted Waited − GuessedAfter.
	Guessed      int32         `json:"guessed,omitempty"`
	GuessedAfter time.Duration `json:"guessed_after,omitempty"`
	// Waited is the sum of the waits handed to Temporal between the
	// attempts up to Attempt: the least time that has passed since the
	// first, whichever clock Config.Now reads.
	Waited time.Duration `json:"waited,omitempty"`
	// InFlightSince and InFlightCount: when the server first said the key was
	// in flight, and how many times it has said so; InFlightAfter is Waited
	// then.
	InFlightSince time.Time     `json:"in_flight_since,omitzero"`
	InFlightCount int32         `json:"in_flight_count,omitempty"`
	InFlightAfter time.Duration `json:"in_flight_after,omitempty"`
	// Deadline is the schedule-to-close deadline on Config.Now's clock,
	// fixed by the first attempt that needed it.
	Deadline time.Time `json:"deadline,omitzero"`
	// Sent is how many requests the attempts up to Attempt sent (an
	// attempt that waited for admission sent none): a request after one is
	// a retry for the retry budget. For the poll activity: how many polls.
	Sent int32 `json:"sent,omitempty"`
	// Retry (the poll activity): the last poll failed, so the next is a
	// retry for the retry budget (a poll after "still running" is not).
	Retry bool `json:"retry,omitempty"`
	// Ticket is the place in the origin's admission queue of an attempt
	// that ended to wait for admission.
	Ticket admission.Ticket `json:"ticket,omitzero"`
	// Monitor is where the poll activity polls next when a poll's 202
	// moved the monitor (its Location), checked as the start's monitor
	// is; empty: the monitor of its input.
	Monitor string `json:"monitor,omitempty"`
	// Sealed is the moved monitor's workflows.Accepted.Sealed, when it
	// carries a secret (Monitor then shows it redacted).
	Sealed string `json:"sealed,omitempty"`
	// Credential counts the attempts that sent nothing because the
	// origin's credential could not be applied (their waits back off and
	// are not counted against the budget); RefusedSince is when, on
	// Config.Now's clock, the first of them was refused
	// (Credential.RetryRefused counts from it).
	Credential   int32     `json:"credential,omitempty"`
	RefusedSince time.Time `json:"refused_since,omitzero"`
	// PausedAt is the attempt that paused the activity for a person's
	// decision (Reconcile.AtMostOnce): the attempt right after it was
	// started by a person's unpause, which means "send again", if the
	// activity is no longer paused (see Activities.settle).
	PausedAt int32 `json:"paused_at,omitempty"`
	// PauseTries counts the attempts that could not pause the activity.
	PauseTries int32 `json:"pause_tries,omitempty"`
}

// retryAfterCap is the longest Retry-After honoured for a request of
// call b to origin o: the call's MaxRetryAfter, else the origin's
// (Convention.MaxRetryAfter), else Config.MaxRetryAfter (the one place of
// that rule).
func (a *Activities) retryAfterCap(o *origin, b backoff.Backoff) time.Duration {
	return cmp.Or(max(b.MaxRetryAfter, 0), o.conv.MaxRetryAfter, a.cfg.MaxRetryAfter)
}

// credentialBackoff is the wait after the n-th attempt (from 1) that
// sent nothing for want of the origin's credential, without a Retry-After
// of its source: 1 s doubling to 1 min.
func credentialBackoff(n int32) time.Duration {
	return min(time.Second<<min(max(n-1, 0), 6), time.Minute)
}

// loadProgress returns the progress of the attempts before this one, with
// the attempts that left none counted as failures of unknown outcome.
func loadProgress(ctx context.Context, attempt int32) progress {
	var p progress
	if activity.HasHeartbeatDetails(ctx) {
		// Only this branch pays for a progress on the heap.
		var details progress
		_ = activity.GetHeartbeatDetails(ctx, &details)
		p = details
	}
	if lost := attempt - 1 - p.Attempt; lost > 0 {
		p.Counted += lost
		p.Sent += lost
		p.Unknown = true
		p.UnknownGot = "left no record (it timed out, or its worker was lost)"
	}
	p.Attempt = attempt - 1
	return p
}

// unpausedAt is the PausedAt an attempt (attempt) that sent nothing
// leaves for the next: a person's unpause that started it holds for the
// next, as if the unpause had started that one; else none.
func (p progress) unpausedAt(attempt int32) int32 {
	if p.PausedAt != 0 && p.PausedAt == p.Attempt {
		return attempt
	}
	return 0
}

// hint reports whether the key may be in flight at the server because of
// this activity's own earlier attempts.
func (p progress) hint() bool { return p.Unknown || p.InFlightCount > 0 }

// earlier says, for messages, why the key may be in flight (hint).
func (p progress) earlier() string {
	if !p.Unknown {
		return "the server has answered that a request with this key was being processed"
	}
	return "an earlier attempt with this key " + cmp.Or(p.UnknownGot, "ended without an answer")
}

// guessed is how long decide's guess that bare 409s are the key in flight
// has lasted, as the sum of the waits after them.
func (p progress) guessed() time.Duration {
	if p.Guessed == 0 {
		return 0
	}
	return p.Waited - p.GuessedAfter
}

// failure is an attempt's retryable answer on its way to Temporal: the
// attempt (its Info, request and metrics handler, the progress before it),
// the verdict, the details and message built for it so far, and the
// answer's headers (for Retry-After).
type failure struct {
	info   activity.Info
	p      *prepared
	m      client.MetricsHandler
	prev   progress
	v      verdict
	d      workflows.Failure
	msg    string
	header http.Header
	// got says what the attempt got (answer.got).
	got string
}

// retry turns a retryable verdict into the error handed to Temporal: the
// delay (Retry-After, else jittered backoff) as NextRetryDelay, or a final
// error when the attempt budget is spent (ErrType of the verdict, marked
// non-retryable), or when the delay cannot end before the
// schedule-to-close deadline (IdempotencyKeyLocked for a key still in
// flight, else RetryWouldExceedDeadline: failAtDeadline). It records this
// attempt's progress for the next, and in f.m the retry it hands to
// Temporal.
func (a *Activities) retry(ctx context.Context, f *failure) error {
	now := a.cfg.Now()
	next := f.next(now)
	f.d.InFlightSince, f.d.InFlightCount = next.InFlightSince, next.InFlightCount
	f.d.OutcomeUnknown = next.hint()
	if err := a.checkBudget(ctx, f, next); err != nil {
		return err
	}
	w := a.retryWait(f, next, now)
	if w.fromRetryAfter {
		f.d.RetryAfter = w.retryAfter
	}
	if left, beyond := beyondDeadline(f.info, f.prev, &next, now, w.delay); beyond {
		return a.failAtDeadline(ctx, f, next, w, now, left)
	}
	observeRetry(f.m, w.delay, w.handed, w.fromRetryAfter, f.v.inFlight)
	err := a.handOver(ctx, next, f.v.errType, fmt.Sprintf("%s; retrying in %s (%s)", f.msg, w.delay, w.source), w.delay, w.handed, f.d)
	activity.GetLogger(ctx).Warn("HTTP attempt failed, Temporal will retry", "key", f.d.IdempotencyKey, "status", f.d.Status, "attempt", f.d.Attempt, "delay", w.delay, "source", w.source, "in_flight", f.v.inFlight)
	return err
}

// next is the progress this attempt leaves for the next: a wait for a key
// in flight is counted as such, any other failure against the budget.
func (f *failure) next(now time.Time) progress {
	prev := f.prev
	next := progress{Attempt: f.info.Attempt, Counted: prev.Counted, Unknown: prev.Unknown || f.v.unknown,
		UnknownGot: prev.UnknownGot, Guessed: prev.Guessed, GuessedAfter: prev.GuessedAfter, Waited: prev.Waited,
		InFlightSince: prev.InFlightSince, InFlightCount: prev.InFlightCount, InFlightAfter: prev.InFlightAfter,
		Sent: prev.Sent, Deadline: prev.Deadline, Credential: prev.Credential, RefusedSince: prev.RefusedSince}
	if f.v.unknown {
		next.UnknownGot = f.got
	}
	if f.v.guessed {
		if next.Guessed == 0 {
			next.GuessedAfter = prev.Waited
		}
		next.Guessed++
	}
	switch {
	case f.v.inFlight:
		next.InFlightCount++
		if next.InFlightSince.IsZero() {
			next.InFlightSince, next.InFlightAfter = now, prev.Waited
		}
	case f.v.credential:
		// Nothing was sent: a wait for the credential, not an attempt.
		next.Credential++
		next.PausedAt = prev.unpausedAt(f.info.Attempt)
		if f.v.refused && next.RefusedSince.IsZero() {
			next.RefusedSince = now
		}
	default:
		next.Counted++
	}
	return next
}

// checkBudget fails the operation, with the verdict's ErrType made final,
// when this attempt was the last the budget allows (a wait for a key in
// flight is never the last).
func (a *Activities) checkBudget(ctx context.Context, f *failure, next progress) error {
	budget, source := f.p.req.MaximumAttempts, "RetryOptions.MaximumAttempts; waits for a key in flight are not counted"
	if budget <= 0 && f.info.RetryPolicy != nil {
		budget, source = f.info.RetryPolicy.MaximumAttempts, "the activity's RetryPolicy.MaximumAttempts"
	}
	if f.v.inFlight || f.v.credential || budget <= 0 || next.Counted < budget {
		return nil
	}
	activity.GetLogger(ctx).Error("HTTP attempt failed, no attempts left", "key", f.d.IdempotencyKey, "status", f.d.Status, "attempt", f.d.Attempt, "counted", next.Counted, "outcome_unknown", f.d.OutcomeUnknown)
	return a.fail(fmt.Sprintf("%s; that was the last of %d attempts (%s)", f.msg, budget, source), f.v.errType, f.d)
}

// wait is the delay before the next attempt and what chose it.
type wait struct {
	delay time.Duration
	// source names what chose delay, for messages and logs.
	source string
	// fromRetryAfter: the server's Retry-After chose it; retryAfter is
	// the server's value, before the MaxRetryAfter cap.
	fromRetryAfter bool
	retryAfter     time.Duration
	// handed: the delay is handed to Temporal as NextRetryDelay (else
	// Temporal's own retry policy spaces the attempts).
	handed bool
}

// retryWait chooses the delay before the next attempt: the server's
// Retry-After (capped by MaxRetryAfter), else for a key in flight its own
// backoff, else after a throttle with admission on the limiter's pace,
// else the backoff of the request (or of the activity's RetryPolicy).
func (a *Activities) retryWait(f *failure, next progress, now time.Time) wait {
	b := f.p.req.Backoff
	if rp := f.info.RetryPolicy; rp != nil && rp.InitialInterval > 0 {
		b.InitialInterval, b.BackoffCoefficient, b.MaximumInterval = rp.InitialInterval, rp.BackoffCoefficient, rp.MaximumInterval
	}
	b = b.WithDefaults()
	w := wait{source: "backoff (" + string(b.Jitter) + " jitter)"}
	paced := f.p.o.limiter != nil && f.p.o.throttle(f.d.Status)
	w.retryAfter, w.fromRetryAfter = retryAfter(f.header, now)
	switch {
	case f.v.retryAfter > 0:
		// The credential's source (a token endpoint's Retry-After).
		w.delay = max(min(f.v.retryAfter, a.retryAfterCap(f.p.o, f.p.req.Backoff)), backoff.MinRetryDelay)
		w.source, w.retryAfter, w.fromRetryAfter = "the credential's Retry-After", f.v.retryAfter, true
	case w.fromRetryAfter:
		w.delay = max(min(w.retryAfter, a.retryAfterCap(f.p.o, f.p.req.Backoff)), backoff.MinRetryDelay)
		w.source = fmt.Sprintf("Retry-After %q", strings.Join(f.header.Values("Retry-After"), ", "))
		if f.v.inFlight {
			w.delay = max(w.delay, backoff.MinInFlightWait)
		}
	case f.v.credential:
		w.delay, w.source = credentialBackoff(next.Credential), "the credential's backoff"
	case f.v.inFlight:
		w.delay = max(backoff.MinInFlightWait, b.Delay(next.InFlightCount, a.cfg.Uniform, backoff.DecorrelatedSeed(f.p.req.IdempotencyKey, f.info.ScheduledTime)))
		w.source = "in-flight backoff (" + string(b.Jitter) + " jitter)"
	case paced:
		// The limiter has cut the origin's rate: it paces the retry.
		w.delay, w.source = backoff.MinRetryDelay, "adaptive admission after a throttle"
	default:
		w.delay = b.Delay(next.Counted, a.cfg.Uniform, backoff.DecorrelatedSeed(f.p.req.IdempotencyKey, f.info.ScheduledTime))
	}
	// backoff.JitterNone without Retry-After leaves the interval to Temporal.
	w.handed = w.fromRetryAfter || f.v.inFlight || f.v.credential || b.Jitter != backoff.JitterNone || paced
	return w
}

// failAtDeadline fails the operation whose next attempt, after w, could not
// start before the schedule-to-close deadline (left away): workflows.ErrTypeIdempotencyKeyLocked
// for a key still in flight at the server, else workflows.ErrTypeRetryWouldExceedDeadline.
func (a *Activities) failAtDeadline(ctx context.Context, f *failure, next progress, w wait, now time.Time, left time.Duration) error {
	d := f.d
	d.NextRetryDelay = w.delay
	left = max(left, 0).Round(time.Millisecond)
	logger := activity.GetLogger(ctx)
	if f.v.credential {
		logger.Error("HTTP request's credential still unavailable at the deadline", "key", d.IdempotencyKey, "attempt", d.Attempt, "delay", w.delay, "left", left)
		return a.fail(fmt.Sprintf("%s; the next attempt would wait %s (%s) but only %s remain before the schedule-to-close deadline (%s): failing now; nothing was sent. Fix the worker's credential for the origin, then run the same workflow ID again (it sends the same key)",
			f.msg, w.delay, w.source, left, f.info.ScheduleToCloseTimeout), workflows.ErrTypeCredentialUnavailable, d)
	}
	if f.v.inFlight {
		logger.Error("HTTP idempotency key still locked at the server", "key", d.IdempotencyKey, "in_flight_since", next.InFlightSince, "in_flight_count", next.InFlightCount)
		return a.fail(fmt.Sprintf("%s; the key is still locked at the server: it has answered that a request with this key is in progress %d times since %s (%s ago), and the next wait (%s, %s) cannot end before the schedule-to-close deadline (%s left). The first request may still complete: never retry with a new key. Wait out the server's lock expiry, then run the same workflow ID again (it sends the same key)",
			f.msg, next.InFlightCount, next.InFlightSince.UTC().Format(time.RFC3339), max(now.Sub(next.InFlightSince), next.Waited-next.InFlightAfter).Round(time.Millisecond), w.delay, w.source, left), workflows.ErrTypeIdempotencyKeyLocked, d)
	}
	logger.Error("HTTP retry cannot fit before the deadline", "key", d.IdempotencyKey, "status", d.Status, "attempt", d.Attempt, "delay", w.delay, "left", left)
	return a.fail(fmt.Sprintf("%s; the next attempt would wait %s (%s) but only %s remain before the schedule-to-close deadline (%s): failing now instead of waiting; raise ScheduleToCloseTimeout, or run the same workflow ID again later (it sends the same key)",
		f.msg, w.delay, w.source, left, f.info.ScheduleToCloseTimeout), workflows.ErrTypeRetryWouldExceedDeadline, d)
}

// beyondDeadline reports whether a wait of wait from now cannot end before
// the schedule-to-close deadline (keeping scheduleDeadline's margin), with
// the time left before it; it records the deadline in next. Without a
// ScheduleToCloseTimeout every wait fits.
func beyondDeadline(info activity.Info, prev progress, next *progress, now time.Time, wait time.Duration) (left time.Duration, beyond bool) {
	if info.ScheduleToCloseTimeout <= 0 {
		return 0, false
	}
	deadline, margin := scheduleDeadline(info, prev, now)
	next.Deadline = deadline
	// At least the waits handed to Temporal have passed, whatever Now's
	// clock says: under a clock that stands still while Temporal's test
	// environment skips them (Config.Now unset there), the deadline would
	// never come near, and the environment would end the activity with
	// the last retryable error instead.
	left = min(deadline.Sub(now), info.ScheduleToCloseTimeout-prev.Waited)
	return left, wait+margin >= left
}

// handOver ends the attempt with the retryable error of errType that
// Temporal retries: msg (redacted) with d, and delay as NextRetryDelay
// when handed. It records next, the progress the next attempt reads, with
// delay added to its Waited (Temporal's own interval, when delay is not
// handed, is at least delay); a failure to record it only makes the next
// attempt count this one as lost (a failure of unknown outcome).
func (a *Activities) handOver(ctx context.Context, next progress, errType, msg string, delay time.Duration, handed bool, d workflows.Failure) error {
	next.Waited += delay
	var opts temporal.ApplicationErrorOptions
	if handed {
		d.NextRetryDelay = delay
		opts.NextRetryDelay = delay
	}
	opts.Details = []any{a.scrub(d)}
	a.leave(ctx, next)
	return temporal.NewApplicationErrorWithOptions(a.redact.string(msg), errType, opts)
}

// scheduleDeadline returns the schedule-to-close deadline on Config.Now's
// clock (whose time is now) and the margin to keep before it. Call it only
// when info.ScheduleToCloseTimeout is set.
//
// ScheduledTime is on Temporal's clock (the wall clock in its test
// environment), now on Config.Now's (the environment's skipped clock under
// testsuite.Register): the deadline is carried over to Now's clock once, and
// kept in the progress for the attempts after (their Now includes the
// skipped waits). The server decides at completion, a moment later: the
// margin (a tenth of the timeout, at most 1 s) lets the activity, not a
// timeout, end the operation.
func scheduleDeadline(info activity.Info, prev progress, now time.Time) (deadline time.Time, margin time.Duration) {
	deadline = prev.Deadline
	if deadline.IsZero() {
		deadline = info.ScheduledTime.Add(info.ScheduleToCloseTimeout).Add(now.Sub(time.Now()))
	}
	return deadline, min(time.Second, info.ScheduleToCloseTimeout/10)
}

// retryAfter reads the Retry-After header; of several values, the longest
// valid one wins (the server's most cautious request).
func retryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	var best time.Duration
	found := false
	for _, v := range h.Values("Retry-After") {
		if d, ok := backoff.RetryAfter(v, now); ok && (!found || d > best) {
			best, found = d, true
		}
	}
	return best, found
}

// fail returns a non-retryable ApplicationError of errType with d.
func (a *Activities) fail(msg, errType string, d workflows.Failure) error {
	return temporal.NewApplicationErrorWithOptions(a.redact.string(msg), errType, temporal.ApplicationErrorOptions{
		NonRetryable: true, Details: []any{a.scrub(d)},
	})
}

// scrub returns d with every text an answer or an error may have filled
// redacted by the one redactor, whatever field carries it: every
// workflows.Failure the activities return goes through it (fail,
// handOver, the poll's retry). Secrets are redacted where they are put
// in too; this is the guard for the fields that were not.
func (a *Activities) scrub(d workflows.Failure) workflows.Failure {
	r := a.redact.snap.Load()
	d.URL, d.Location, d.Reason, d.Body = r.string(d.URL), r.string(d.Location), r.string(d.Reason), r.string(d.Body)
	d.Accepted = scrubAccepted(r, d.Accepted)
	return d
}

// scrubAccepted returns a copy of acc (nil for nil) with its texts
// redacted by r: its URLs are shown ones (shownURL) or hold no secret
// (followable), and its state was redacted (stateName), so that this
// only guards.
func scrubAccepted(r *redactSet, acc *workflows.Accepted) *workflows.Accepted {
	if acc == nil {
		return nil
	}
	c := *acc
	c.URL, c.Monitor, c.ResultURL, c.State = r.string(c.URL), r.string(c.Monitor), r.string(c.ResultURL), r.string(c.State)
	return &c
}
