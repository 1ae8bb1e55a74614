package activities

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/idemhttp/temporal-idempotent-http/internal/admission"
	"github.com/idemhttp/temporal-idempotent-http/internal/request"
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
	// server and got no answer.
	Unknown bool `json:"unknown,omitempty"`
	// InFlightSince and InFlightCount: when the server first said the key was
	// in flight, and how many times it has said so.
	InFlightSince time.Time `json:"in_flight_since,omitzero"`
	InFlightCount int32     `json:"in_flight_count,omitempty"`
	// Deadline is the schedule-to-close deadline on Config.Now's clock,
	// fixed by the first attempt that needed it.
	Deadline time.Time `json:"deadline,omitzero"`
	// Sent is how many requests the attempts up to Attempt sent (an
	// attempt that waited for admission sent none): a request after one is
	// a retry for the retry budget.
	Sent int32 `json:"sent,omitempty"`
	// Ticket is the place in the origin's admission queue of an attempt
	// that ended to wait for admission.
	Ticket admission.Ticket `json:"ticket,omitzero"`
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
	}
	p.Attempt = attempt - 1
	return p
}

// hint reports whether the key may be in flight at the server because of
// this activity's own earlier attempts.
func (p progress) hint() bool { return p.Unknown || p.InFlightCount > 0 }

// retry turns a retryable verdict into the error handed to Temporal: the
// delay (Retry-After, else jittered backoff) as NextRetryDelay, or a final
// error when the attempt budget is spent (ErrType of the verdict, marked
// non-retryable), or when the delay cannot end before the schedule-to-close
// deadline (ErrTypeKeyLocked for a key still in flight, else ErrTypeDeadline).
// It records this attempt's progress for the next, and in m the retry it
// hands to Temporal.
func (a *Activities) retry(ctx context.Context, info activity.Info, p *prepared, m client.MetricsHandler, prev progress, v verdict, d FailureDetails, msg string, header http.Header) error {
	now := a.cfg.Now()
	next := progress{Attempt: info.Attempt, Counted: prev.Counted, Unknown: prev.Unknown || v.unknown,
		InFlightSince: prev.InFlightSince, InFlightCount: prev.InFlightCount, Sent: prev.Sent, Deadline: prev.Deadline}
	if v.inFlight {
		next.InFlightCount++
		if next.InFlightSince.IsZero() {
			next.InFlightSince = now
		}
	} else {
		next.Counted++
	}
	d.InFlightSince, d.InFlightCount = next.InFlightSince, next.InFlightCount
	d.OutcomeUnknown = next.Unknown || next.InFlightCount > 0
	logger := activity.GetLogger(ctx)

	budget, budgetSource := p.req.MaximumAttempts, "RetryOptions.MaximumAttempts; waits for a key in flight are not counted"
	if budget <= 0 && info.RetryPolicy != nil {
		budget, budgetSource = info.RetryPolicy.MaximumAttempts, "the activity's RetryPolicy.MaximumAttempts"
	}
	if !v.inFlight && budget > 0 && next.Counted >= budget {
		logger.Error("HTTP attempt failed, no attempts left", "key", d.IdempotencyKey, "status", d.Status, "attempt", d.Attempt, "counted", next.Counted)
		return a.fail(fmt.Sprintf("%s; that was the last of %d attempts (%s)", msg, budget, budgetSource), v.errType, d)
	}

	b := backoffOf(p.req.Backoff)
	if rp := info.RetryPolicy; rp != nil && rp.InitialInterval > 0 {
		b.InitialInterval, b.BackoffCoefficient, b.MaximumInterval = rp.InitialInterval, rp.BackoffCoefficient, rp.MaximumInterval
	}
	b = b.withDefaults()
	var delay time.Duration
	source := "backoff (" + string(b.Jitter) + " jitter)"
	paced := a.limiter != nil && a.throttle(d.Status)
	raValue := strings.Join(header.Values("Retry-After"), ", ")
	ra, fromRetryAfter := retryAfter(header, now)
	switch {
	case fromRetryAfter:
		d.RetryAfter = ra
		delay, source = max(min(ra, a.cfg.MaxRetryAfter), MinRetryDelay), fmt.Sprintf("Retry-After %q", raValue)
		if v.inFlight {
			delay = max(delay, request.MinInFlightWait)
		}
	case v.inFlight:
		delay, source = max(request.MinInFlightWait, b.Delay(next.InFlightCount, a.cfg.Uniform, decorrelatedSeed(p.req.IdempotencyKey, info.ScheduledTime))), "in-flight backoff ("+string(b.Jitter)+" jitter)"
	case paced:
		// The limiter has cut the origin's rate: it paces the retry.
		delay, source = MinRetryDelay, "adaptive admission after a throttle"
	default:
		delay = b.Delay(next.Counted, a.cfg.Uniform, decorrelatedSeed(p.req.IdempotencyKey, info.ScheduledTime))
	}
	if info.ScheduleToCloseTimeout > 0 {
		deadline, margin := scheduleDeadline(info, prev, now)
		next.Deadline = deadline
		if left := deadline.Sub(now); delay+margin >= left {
			d.NextRetryDelay = delay
			left = max(left, 0).Round(time.Millisecond)
			if v.inFlight {
				logger.Error("HTTP idempotency key still locked at the server", "key", d.IdempotencyKey, "in_flight_since", next.InFlightSince, "in_flight_count", next.InFlightCount)
				return a.fail(fmt.Sprintf("%s; the key is still locked at the server: it has answered that a request with this key is in progress %d times since %s (%s ago), and the next wait (%s, %s) cannot end before the schedule-to-close deadline (%s left). The first request may still complete: never retry with a new key. Wait out the server's lock expiry, then run the same workflow ID again (it sends the same key)",
					msg, next.InFlightCount, next.InFlightSince.UTC().Format(time.RFC3339), now.Sub(next.InFlightSince).Round(time.Millisecond), delay, source, left), ErrTypeKeyLocked, d)
			}
			logger.Error("HTTP retry cannot fit before the deadline", "key", d.IdempotencyKey, "status", d.Status, "attempt", d.Attempt, "delay", delay, "left", left)
			return a.fail(fmt.Sprintf("%s; the next attempt would wait %s (%s) but only %s remain before the schedule-to-close deadline (%s): failing now instead of waiting; raise ScheduleToCloseTimeout, or run the same workflow ID again later (it sends the same key)",
				msg, delay, source, left, info.ScheduleToCloseTimeout), ErrTypeDeadline, d)
		}
	}
	opts := temporal.ApplicationErrorOptions{}
	handed := fromRetryAfter || v.inFlight || b.Jitter != JitterNone || paced
	if handed {
		// JitterNone without Retry-After leaves the interval to Temporal.
		d.NextRetryDelay = delay
		opts.NextRetryDelay = delay
	}
	observeRetry(m, delay, handed, fromRetryAfter, v.inFlight)
	opts.Details = []any{d}
	// The next attempt reads this; a failure to record it only makes the
	// next attempt count this one as lost (a failure of unknown outcome).
	activity.RecordHeartbeat(ctx, next)
	logger.Warn("HTTP attempt failed, Temporal will retry", "key", d.IdempotencyKey, "status", d.Status, "attempt", d.Attempt, "delay", delay, "source", source, "in_flight", v.inFlight)
	return temporal.NewApplicationErrorWithOptions(a.redact.string(fmt.Sprintf("%s; retrying in %s (%s)", msg, delay, source)), v.errType, opts)
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
		if d, ok := ParseRetryAfter(v, now); ok && (!found || d > best) {
			best, found = d, true
		}
	}
	return best, found
}

// fail returns a non-retryable ApplicationError of errType with d.
func (a *Activities) fail(msg, errType string, d FailureDetails) error {
	return temporal.NewApplicationErrorWithOptions(a.redact.string(msg), errType, temporal.ApplicationErrorOptions{
		NonRetryable: true, Details: []any{d},
	})
}
