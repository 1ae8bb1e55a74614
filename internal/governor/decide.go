package governor

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/idemhttp/temporal-idempotent-http/internal/admission"
)

// Rules selects the decision rules of a [Decider].
type Rules int

const (
	// RulesV0 are the rules of governors recorded before versionRules: a
	// cut Gather after the first throttle, a raise after Calm only, no
	// breaker. A governor whose history began with them keeps them until
	// its next continue-as-new.
	RulesV0 Rules = iota
	// RulesV1 cut at once from the first throttle's report and correct the
	// cut after Gather, raise faster while the queue is saturated without
	// throttles, and open the cluster's breaker on the workers' failures.
	RulesV1
)

// ChangeKind says what a [Change] is for.
type ChangeKind int

// The kinds of a Change.
const (
	// ChangeCut lowers the rate after a throttle.
	ChangeCut ChangeKind = iota
	// ChangeRaise raises it after a calm, or while the queue is saturated.
	ChangeRaise
	// ChangeCorrect corrects a cut (RulesV1) from every worker's reports.
	ChangeCorrect
	// ChangeOpen opens the cluster's breaker: one probe per OpenTime.
	ChangeOpen
	// ChangeRamp doubles the rate after the breaker, on accepted answers,
	// or (Decider.Restore) brings it back at once to the rate before.
	ChangeRamp
)

// Change is a rate limit a [Decider] decided to write.
type Change struct {
	Kind ChangeKind
	// Rate is the limit to write, requests per second (never 0).
	Rate float64
	// Reason says why, for the limit's stored reason.
	Reason string
}

// Decider is the governor's decision rule, pure: no clock of its own, no
// I/O. The governor workflow and the benchmarks' simulation drive the same
// type: [Decider.Observe] each report as it arrives, ask [Decider.Next]
// when a decision is due, call [Decider.Decide] then, write the change it
// returns and tell [Decider.Applied] the outcome.
type Decider struct {
	// Config holds the parameters, with their defaults (NewDecider).
	Config Config
	// Rules selects the rules.
	Rules Rules
	// Arrival: reports are aged by when they arrive (Observation.Received)
	// rather than by their worker's clock; false only for histories from
	// before that (versionArrival).
	Arrival bool
	// Spans: a report counts for the length Observe takes when it arrives
	// (its Span, checked against the governor's clock: Decider.span), and
	// a worker's latest report is the last to arrive; false only for
	// histories from before that (versionSpans), which take To − From as
	// the worker's wall clock says and order its reports by To.
	Spans bool
	// Restore: the first answer after the breaker opened closes it at
	// once, back to the rate in force before it (breaker.go: restore);
	// false only for histories from before that (versionRestore), which
	// double the rate back every RampInterval. Without a rate before,
	// both ramp.
	Restore bool
	// TripMargin: the breaker trips by admission.Breaker.Trips, its
	// failure ratio above FailureRatio by admission.TripMargin standard
	// errors; false only for histories from before that
	// (versionTripMargin), which trip on the ratio alone.
	TripMargin bool
	// Restart: a breaker closing without a rate before it starts at
	// Config.Breaker.RestartRate (breaker.go); false only for histories
	// from before that (versionRestart), which double the probes' rate.
	Restart bool
	// Incidental: a throttle under a limit in force cuts only when the
	// API took less than Beta of the requests sent (Decider.cut); fewer
	// throttles come from the bursts of dispatch after a lull, not from
	// the limit (on the cluster, a limit of 5.4/s for an API taking 6/s
	// was cut to 3.96/s on 1 throttle among 14 requests). False only for
	// histories from before that (versionIncidental), which cut on any.
	Incidental bool
	// State is the state decided from, carried over by continue-as-new.
	State State
}

// NewDecider returns a decider with cfg (its defaults filled in), rules
// and the carried state st.
func NewDecider(cfg Config, rules Rules, st State) *Decider {
	d := &Decider{Config: cfg.WithDefaults(), Rules: rules, Arrival: true, Spans: true, Restore: true, TripMargin: true, Restart: true, Incidental: true, State: st}
	if d.State.Status == "" {
		d.State.Status = StatusLearning
	}
	return d
}

// Observe records obs, received at now: it may make a decision due (a cut
// on a throttle, the breaker on failures, a ramp on accepted answers).
// With Spans, obs's Span becomes the length it is taken to cover
// (Decider.span).
func (d *Decider) Observe(now time.Time, obs Observation) {
	st, cfg := &d.State, d.Config
	if d.Arrival {
		// Its age is judged on this clock, not the worker's (which may be
		// off by any amount).
		obs.Received = now
	}
	if d.Spans {
		obs.Span = d.span(now, obs)
	}
	if st.Workers == nil {
		st.Workers = map[string]Observation{}
	}
	if old, ok := st.Workers[obs.Worker]; !ok || d.Spans || !obs.To.Before(old.To) {
		// A worker sends its reports one after another: the last to
		// arrive is its latest (its wall clock may have stepped back).
		st.Workers[obs.Worker] = obs
	}
	st.Recent = append(st.Recent, obs)
	d.prune(now)
	st.Measured = d.measured(now)
	st.Accepted, _ = d.accepted(now)
	if d.Rules >= RulesV1 {
		d.observeBreaker(now, obs)
	}
	if obs.Throttles <= 0 {
		return
	}
	st.LastThrottle, st.CalmSince = now, now
	if !d.writing() || st.Status == StatusOpen || !st.CutAt.IsZero() {
		return
	}
	if st.LastCut.IsZero() || now.Sub(st.LastCut) >= cfg.CutInterval {
		if d.Rules >= RulesV1 {
			// Cut at once, from the reports so far; Gather later the
			// cut is corrected from every worker's (correct).
			st.CutAt = now
			return
		}
		// Cut after Gather, from every worker's reports by then: the
		// first report of a throttle alone undercounts what the API
		// accepted.
		st.CutAt = now.Add(max(cfg.Gather, 0))
	}
}

// observeBreaker opens the cluster's breaker when the reports received
// since it last changed trip it, and starts the ramp when an open
// breaker's probe was answered.
func (d *Decider) observeBreaker(now time.Time, obs Observation) {
	st, b := &d.State, &d.State.Breaker
	if !d.writing() || d.Config.Breaker.Off {
		return
	}
	if st.Status == StatusOpen {
		d.observeOpen(now, obs)
		return
	}
	if obs.Failed <= 0 || !b.TripAt.IsZero() {
		return
	}
	answers, failures := d.failures(now)
	margin := admission.TripMargin
	if !d.TripMargin {
		margin = 0
	}
	if d.Config.Breaker.TripsBy(answers, failures, margin) {
		b.TripAt = now
	}
}

// spanSlack is how much longer than the governor's own clock allows a
// report may say it lasted and still be taken at its word: one worker's
// reports reach the governor with latencies that differ, and a workflow
// task takes the signals it finds at its own start time (on a loaded
// server, a second or more after they came). A wall clock's step is
// minutes or hours (an NTP step, a VM's resume); less than this gets
// through from a worker that sends no Span.
const spanSlack = 2 * time.Second

// span returns the length obs, received at now, is taken to cover: what
// its worker measured (Span, on its monotonic clock; To − From, on its
// wall clock, from a worker that sends no Span), unless the governor's
// own clock disagrees. Longer by more than spanSlack than the time since
// the worker's report before arrived (plus that one's length when obs
// reaches back over it), or zero or less (a wall clock stepped forward or
// back within the interval), it is taken as that time. Without a report
// before it to check against (a worker's first, or its first after
// MeasureWindow without one), a length longer than MeasureWindow, or zero
// or less, is unknown: 0, and the report's answers count over the time
// the other reports cover (at least minSpan).
func (d *Decider) span(now time.Time, obs Observation) time.Duration {
	claimed := obs.Span
	if claimed <= 0 {
		claimed = obs.To.Sub(obs.From)
	}
	prev, ok := d.State.Workers[obs.Worker]
	if !ok {
		if claimed <= 0 || claimed > d.Config.MeasureWindow {
			return 0
		}
		return claimed
	}
	bound := max(now.Sub(prev.at()), 0)
	if d.covers(obs, prev) {
		bound += d.length(prev)
	}
	if claimed <= 0 || claimed > bound+spanSlack {
		return bound
	}
	return claimed
}

// length returns how long o is taken to cover: with Spans the length
// Observe took, else its worker's To − From (0 when negative).
func (d *Decider) length(o Observation) time.Duration {
	if d.Spans {
		return max(o.Span, 0)
	}
	return max(o.To.Sub(o.From), 0)
}

// rate returns o's request rate over its length: with Spans at least
// minSpan (a report of unknown length counts over a second), else as
// Observation.Rate.
func (d *Decider) rate(o Observation) float64 {
	if !d.Spans {
		return o.Rate()
	}
	return perSpan(o.Requests, max(d.length(o), minSpan))
}

// failures sums the answers and failures of the reports received within
// the breaker's FailureWindow and since it last changed.
func (d *Decider) failures(now time.Time) (answers, failures int) {
	t := d.tally(now, d.Config.Breaker.FailureWindow, d.State.Breaker.Since)
	return t.requests, t.failed
}

// recentTally is the sum of a run of reports: their counts (a report
// reaching back over its worker's one before counts that one's once) and
// the time they cover together on the governor's clock.
type recentTally struct {
	requests, accepted, failed int
	from, to                   time.Time
}

// tally sums the reports received within window of now and not before
// since (zero: no bound), in the order received. Each report ends when it
// arrived and is as long as Decider.length says.
func (d *Decider) tally(now time.Time, window time.Duration, since time.Time) recentTally {
	var t recentTally
	last := map[string]Observation{}
	for _, o := range d.State.Recent {
		if now.Sub(o.at()) > window || o.at().Before(since) {
			continue
		}
		if prev, ok := last[o.Worker]; ok && d.covers(o, prev) {
			t.requests, t.accepted, t.failed = t.requests-prev.Requests, t.accepted-prev.Accepted, t.failed-prev.Failed
		}
		last[o.Worker] = o
		t.requests, t.accepted, t.failed = t.requests+o.Requests, t.accepted+o.Accepted, t.failed+o.Failed
		end := o.at()
		start := end.Add(-d.length(o))
		if t.from.IsZero() || start.Before(t.from) {
			t.from = start
		}
		t.to = latest(t.to, end)
	}
	return t
}

// covers reports whether o, a worker's report, reaches back over prev,
// its report before (an urgent report sent right after it counts it
// again, see Reporter.report): with Spans, whether it begins where prev
// began (the reporter copies prev's From, whatever its wall clock did
// since); else whether it spans prev on the worker's wall clock.
func (d *Decider) covers(o, prev Observation) bool {
	if o.Worker != prev.Worker {
		return false
	}
	if d.Spans {
		return o.From.Equal(prev.From)
	}
	return !o.From.After(prev.From) && !o.To.Before(prev.To)
}

// Next returns when the next decision is due, and false when none is.
func (d *Decider) Next(now time.Time) (time.Time, bool) {
	at, armed := d.raiseAt(now)
	earlier := func(t time.Time) {
		if !t.IsZero() && (!armed || t.Before(at)) {
			at, armed = t, true
		}
	}
	earlier(d.State.CutAt)
	if d.Rules >= RulesV1 {
		earlier(d.State.CorrectAt)
		earlier(d.State.Breaker.TripAt)
		earlier(d.State.Breaker.RampAt)
		if t, ok := d.saturatedAt(now); ok {
			earlier(t)
		}
	}
	return at, armed
}

// Decide makes the decision due at now and returns the change to write,
// if any. Whatever it returns, the decision is no longer due: a change
// whose write fails is not retried until the next decision.
func (d *Decider) Decide(now time.Time) (Change, bool) {
	st := &d.State
	due := func(t time.Time) bool { return !t.IsZero() && !now.Before(t) }
	if d.Rules >= RulesV1 && due(st.Breaker.TripAt) {
		st.Breaker.TripAt = time.Time{}
		return d.open(now)
	}
	if due(st.CutAt) {
		st.CutAt = time.Time{}
		d.prune(now)
		st.Measured = d.measured(now)
		st.Accepted, _ = d.accepted(now)
		return d.cut(now)
	}
	if d.Rules >= RulesV1 {
		if due(st.CorrectAt) {
			st.CorrectAt = time.Time{}
			return d.correct(now)
		}
		if due(st.Breaker.RampAt) {
			st.Breaker.RampAt = time.Time{}
			return d.ramp(now)
		}
		if at, ok := d.saturatedAt(now); ok && due(at) {
			return d.saturatedRaise(now)
		}
		if at, ok := d.raiseAt(now); !ok || !due(at) {
			return Change{}, false
		}
	}
	return d.considerRaise(now)
}

// Applied records the outcome of writing ch at now: the queue's config as
// SetRate reported it, or err.
func (d *Decider) Applied(now time.Time, ch Change, res SetRateResult, err error) {
	st := &d.State
	if err != nil {
		st.Error = err.Error()
		var appErr *temporal.ApplicationError
		if errors.As(err, &appErr) && appErr.Type() == ErrTypeUnsupported {
			st.Status = StatusUnsupported
			st.Error = appErr.Error()
		}
		return
	}
	st.Error = ""
	st.InForce = 0
	if res.Limited {
		st.InForce = res.InForce
	}
	if res.Overridden() {
		st.Status = StatusOverridden
		return
	}
	before, from := st.Rate, st.Status
	wasOpen := st.Status == StatusOpen || st.Breaker.Ramping
	st.Status = StatusLimited
	st.Rate, st.LastWrite = ch.Rate, now
	switch ch.Kind {
	case ChangeCut:
		st.LastCut = now
		st.Breaker.Ramping, st.Breaker.RampAt = false, time.Time{}
	case ChangeRaise:
		st.LastRaise = now
	case ChangeOpen:
		d.opened(now, before, wasOpen)
	case ChangeRamp:
		d.ramped(now, from)
	}
}

// writing reports whether the governor may still write.
func (d *Decider) writing() bool {
	return d.State.Status != StatusOverridden && d.State.Status != StatusUnsupported
}

// prune forgets observations that ended more than MeasureWindow before
// now, and the recent ones older than AcceptWindow (RulesV1: than the
// longer of it and the breaker's FailureWindow).
func (d *Decider) prune(now time.Time) {
	st, cfg := &d.State, d.Config
	for w, o := range st.Workers {
		if now.Sub(o.at()) > cfg.MeasureWindow {
			delete(st.Workers, w)
		}
	}
	keep := cfg.AcceptWindow
	if d.Rules >= RulesV1 && !cfg.Breaker.Off {
		keep = max(keep, cfg.Breaker.FailureWindow)
	}
	st.Recent = slices.DeleteFunc(st.Recent, func(o Observation) bool { return now.Sub(o.at()) > keep })
}

// measured returns the sum of the request rates of each worker's latest
// observation that ended within MeasureWindow of now (summed in worker
// order, so replays compute the same bits).
func (d *Decider) measured(now time.Time) float64 {
	m := 0.0
	for _, w := range slices.Sorted(maps.Keys(d.State.Workers)) {
		if o := d.State.Workers[w]; now.Sub(o.at()) <= d.Config.MeasureWindow {
			m += d.rate(o)
		}
	}
	return m
}

// accepted returns the rate the API accepted from all workers: for each
// worker, the answers it reports accepted within AcceptWindow over the
// time its reports cover (at least a second), summed (in worker order, so
// replays compute the same bits). One report covers a second; several
// smooth out an API that counts its limit per window. sent is the rate of
// the requests over the same reports.
func (d *Decider) accepted(now time.Time) (accepted, sent float64) {
	if d.Rules >= RulesV1 {
		return d.acceptedV1(now)
	}
	byWorker := map[string]Observation{}
	for _, o := range d.State.Recent {
		if now.Sub(o.at()) > d.Config.AcceptWindow {
			continue
		}
		sum, ok := byWorker[o.Worker]
		if !ok {
			byWorker[o.Worker] = o
			continue
		}
		sum.Accepted += o.Accepted
		sum.Requests += o.Requests
		sum.From, sum.To = earliest(sum.From, o.From), latest(sum.To, o.To)
		byWorker[o.Worker] = sum
	}
	for _, w := range slices.Sorted(maps.Keys(byWorker)) {
		accepted += byWorker[w].AcceptedRate()
		sent += byWorker[w].Rate()
	}
	return accepted, sent
}

// acceptedV1 is RulesV1's accepted: every report within AcceptWindow
// summed, over the time they cover together on the governor's clock (each
// ends when it arrived and is as long as its worker says), at least a
// second. Summing each worker's own rate instead overstates it when the
// workers are many and each sends little: a worker reports only intervals
// with a request in them (with 1000 workflows on 8 workers: 8.8/s for an
// API taking 6). An urgent report reaching back over the one before
// (Reporter) counts that one's answers once.
func (d *Decider) acceptedV1(now time.Time) (accepted, sent float64) {
	t := d.tally(now, d.Config.AcceptWindow, time.Time{})
	if t.requests <= 0 {
		return 0, 0
	}
	span := max(t.to.Sub(t.from), minSpan).Seconds()
	return float64(t.accepted) / span, float64(t.requests) / span
}

// cutTarget is the rate a cut goes to from the accepted rate acc and the
// measured rate m, and false when no cut is due: the API takes about the
// limit in force (its throttles come from the bursts of dispatch or from
// other clients; cutting again would only slow the queue).
func (d *Decider) cutTarget(acc, m, rate float64) (float64, bool) {
	base := acc
	if base <= 0 {
		// Nothing accepted yet (or reported without the count): the
		// requests sent, or the rate in force if lower.
		base = rate
		if base == 0 || (m > 0 && m < base) {
			base = m
		}
	}
	if rate > 0 {
		if acc >= d.Config.Beta*rate {
			return 0, false
		}
		base = min(base, rate)
	}
	return representable(max(d.Config.Floor, d.Config.Beta*base)), true
}

// cut lowers the rate after a throttle, at most once per CutInterval.
func (d *Decider) cut(now time.Time) (Change, bool) {
	st := &d.State
	if !d.writing() || st.Status == StatusOpen {
		return Change{}, false
	}
	if !st.LastCut.IsZero() && now.Sub(st.LastCut) < d.Config.CutInterval {
		return Change{}, false
	}
	acc := st.Accepted
	// sent is over the same reports as acc: the check for incidental
	// throttles and the reason compare the two (the measured rate, the
	// latest report of each worker, may be another span).
	_, sent := d.accepted(now)
	if d.Incidental && st.Rate > 0 && sent > 0 && acc >= d.Config.Beta*sent {
		return Change{}, false // incidental throttles: the API took the rest
	}
	target, ok := d.cutTarget(acc, st.Measured, st.Rate)
	if ok && d.Rules >= RulesV1 {
		target = d.bracket(target, acc)
	}
	if !ok || (st.Rate > 0 && target >= st.Rate) {
		return Change{}, false // at the floor already
	}
	if d.Rules >= RulesV1 {
		st.CutFrom = st.Rate
		if d.Config.Gather > 0 {
			st.CorrectAt = now.Add(d.Config.Gather)
		}
	}
	return Change{Kind: ChangeCut, Rate: target, Reason: learned("throttles",
		fmt.Sprintf("cut to %.3g/s (accepted %.3g/s of %.3g/s sent)", target, acc, sent))}, true
}

// bracket is RulesV1's part of a cut to target from the accepted rate
// acc: the limit in force throttled, so it bounds what the API takes from
// above (the ceiling, the lowest such bound); a rate proven below it
// (saturated without a throttle) is where the cut goes back to when it is
// higher than target (an API counting per window accepts less than its
// limit while it throttles, so acc runs low). Without a limit in force the
// ceiling is acc, the only estimate.
func (d *Decider) bracket(target, acc float64) float64 {
	st := &d.State
	if st.Rate <= 0 {
		// No limit was in force: the estimate from the herd's reports is
		// no bound (it runs low or high by the reports' phases).
		st.Ceiling, st.Proven = 0, 0
		return target
	}
	if st.Ceiling <= 0 || st.Rate < st.Ceiling {
		st.Ceiling = st.Rate
	}
	if st.Proven >= st.Rate {
		st.Proven = 0 // it throttles at the proven rate: no longer proven
	}
	return max(target, st.Proven)
}

// correct redoes the last cut from every worker's reports by now (a cut
// at once counts only the reports so far) and writes it when it differs
// from the rate in force by MinChange or more.
func (d *Decider) correct(now time.Time) (Change, bool) {
	st := &d.State
	if !d.writing() || st.Status != StatusLimited || st.Rate <= 0 {
		return Change{}, false
	}
	d.prune(now)
	st.Measured = d.measured(now)
	acc, sent := d.accepted(now)
	st.Accepted = acc
	target := representable(max(d.Config.Floor, d.Config.Beta*acc))
	if st.CutFrom > 0 {
		target = min(target, representable(d.Config.Beta*st.CutFrom))
		target = max(target, st.Proven)
	}
	if acc <= 0 || abs(target-st.Rate)/st.Rate < d.Config.MinChange {
		return Change{}, false
	}
	return Change{Kind: ChangeCorrect, Rate: target, Reason: learned("throttles",
		fmt.Sprintf("cut corrected to %.3g/s (accepted %.3g/s of %.3g/s sent, every worker's reports)", target, acc, sent))}, true
}

// raiseAt returns when the next raise after a calm is due, and false when
// none is: before a limit is written, after the governor stopped writing,
// and while no worker has reported within MeasureWindow (an idle queue).
func (d *Decider) raiseAt(now time.Time) (time.Time, bool) {
	st := &d.State
	if st.Status != StatusLimited || st.Rate <= 0 || d.measured(now) <= 0 || st.Breaker.Ramping {
		return time.Time{}, false
	}
	at := st.CalmSince.Add(d.Config.Calm)
	if !st.LastRaise.IsZero() {
		at = latest(at, st.LastRaise.Add(d.Config.MinGap))
	}
	return at, true
}

// considerRaise raises the rate by Raise, up to twice the measured rate,
// unless the change is under MinChange; either way a new calm period
// begins.
func (d *Decider) considerRaise(now time.Time) (Change, bool) {
	st := &d.State
	d.prune(now)
	m := d.measured(now)
	st.Measured = m
	if m <= 0 || !d.writing() || st.Rate <= 0 {
		return Change{}, false // idle: the next report brings the check back
	}
	st.CalmSince = now
	if d.Rules >= RulesV1 {
		if _, sent := d.accepted(now); sent >= d.Config.Saturation*st.Rate {
			d.prove() // saturated for a calm without a throttle
		}
	}
	target := representable(min(st.Rate*(1+d.Config.Raise), 2*m))
	if target <= st.Rate || (target-st.Rate)/st.Rate < d.Config.MinChange {
		return Change{}, false
	}
	return Change{Kind: ChangeRaise, Rate: target, Reason: learned("throttles",
		fmt.Sprintf("raised to %.3g/s after %s without a throttle (measured %.3g/s)", target, d.Config.Calm, m))}, true
}

// saturatedAt returns when a raise of a saturated queue is due (RulesV1):
// SaturatedCalm after the last throttle, write or attempt, while the
// workers' reports within AcceptWindow show them sending at least
// Saturation × the limit, and the limit is below Approach × the ceiling
// (the lowest limit that throttled; without one, no bound).
func (d *Decider) saturatedAt(now time.Time) (time.Time, bool) {
	st, cfg := &d.State, d.Config
	if st.Status != StatusLimited || st.Rate <= 0 || st.Breaker.Ramping || !st.CorrectAt.IsZero() {
		return time.Time{}, false
	}
	if st.Ceiling > 0 && st.Rate >= representable(cfg.Approach*st.Ceiling) {
		return time.Time{}, false
	}
	if _, sent := d.accepted(now); sent < cfg.Saturation*st.Rate {
		return time.Time{}, false
	}
	return latest(latest(st.LastThrottle, st.LastWrite), st.SaturatedTried).Add(cfg.SaturatedCalm), true
}

// saturatedRaise proves the rate in force (the queue saturated without a
// throttle) and raises it by SaturatedRaise, or halfway to the ceiling
// when there is one.
func (d *Decider) saturatedRaise(now time.Time) (Change, bool) {
	st, cfg := &d.State, d.Config
	st.SaturatedTried = now
	_, m := d.accepted(now)
	d.prove()
	target := st.Rate * (1 + cfg.SaturatedRaise)
	if st.Ceiling > 0 {
		// Halfway to the ceiling: a bisection between the proven rate and
		// the lowest that throttled.
		target = (st.Rate + st.Ceiling) / 2
	}
	target = representable(target)
	if target <= st.Rate {
		return Change{}, false
	}
	return Change{Kind: ChangeRaise, Rate: target, Reason: learned("throttles",
		fmt.Sprintf("raised to %.3g/s: the queue is saturated (sent %.3g/s) without a throttle for %s", target, m, cfg.SaturatedCalm))}, true
}

// prove records the rate in force as proven: the queue ran saturated at
// it without a throttle (RulesV1). A proven rate at or above the ceiling
// clears it: the API takes more than it did.
func (d *Decider) prove() {
	st := &d.State
	st.Proven = max(st.Proven, st.Rate)
	if st.Ceiling > 0 && st.Proven >= st.Ceiling {
		st.Ceiling = 0
	}
}

// learned is a limit's stored reason: what it was learned from, and why.
func learned(from, why string) string { return "learned from " + from + ": " + why }

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// representable rounds r to what the server stores (a float32), so the
// rate written and the rate read back are equal.
func representable(r float64) float64 { return float64(float32(r)) }

func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
