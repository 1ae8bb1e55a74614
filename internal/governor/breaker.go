package governor

import (
	"fmt"
	"time"
)

// The cluster's breaker (RulesV1). When the reports of every worker trip
// the admission.Breaker rule (Config.Breaker), the governor writes the
// queue's limit to one attempt per OpenTime: matching then lets one probe
// a second through for the whole cluster, whatever the number of workers,
// and a worker that (re)starts joins that pace. The first report of an
// answer that was not a failure closes it (Decider.Restore): the limit
// goes back at once to the rate in force before the breaker opened (a
// governor recorded before Restore doubles the rate back to it every
// RampInterval: each step waits for a report, a write and the server
// applying it). Without a rate before, the first step goes to
// Breaker.RestartRate, the rate a worker's own breaker restarts at
// (Decider.Restart; before it, from the probes' rate), and the rate
// doubles every RampInterval from there while the queue stays saturated.
// A worker reports the first accepted answer after a report of failures
// alone at once (Reporter.Record). Failures after it trip the breaker
// again.
//
// Lifting the limit instead when there is no rate before (letting the
// next throttle cut it) was tried and is not better: the cut then comes
// from the few answers of the seconds right after the outage, while the
// herd's retries are still on their way back (one worker, 50 workflows,
// 30 s of 503s, then 6/s: 2.74 × the capacity's time, in a run where the
// ramp took 1.61 ×; the ramp's end on an unfilled rate has the same
// cause: the slowest part of a recovery on the defaults).

// open opens the breaker: the queue's limit to one probe per OpenTime.
func (d *Decider) open(now time.Time) (Change, bool) {
	st := &d.State
	if !d.writing() || st.Status == StatusOpen {
		return Change{}, false
	}
	answers, failures := d.failures(now)
	rate := representable(1 / d.Config.Breaker.OpenTime.Seconds())
	return Change{Kind: ChangeOpen, Rate: rate, Reason: learned("failures",
		fmt.Sprintf("breaker open: %d of %d answers failed; one probe per %s", failures, answers, d.Config.Breaker.OpenTime))}, true
}

// opened records the breaker opened at now; before is the rate in force
// until then, and wasOpen whether it was open or ramping already (then
// the rate to ramp back to is the one from before it first opened).
func (d *Decider) opened(now time.Time, before float64, wasOpen bool) {
	st, b := &d.State, &d.State.Breaker
	st.Status = StatusOpen
	if !wasOpen {
		b.Before = before
	}
	b.OpenedAt, b.Since, b.Opened = now, now, b.Opened+1
	b.Ramping, b.RampAt = false, time.Time{}
	st.CutAt, st.CorrectAt = time.Time{}, time.Time{}
}

// observeOpen starts the ramp on a report, received at now, of answers
// that were not failures and none that was: the origin answers the
// probes. Reports received within OpenTime of the opening may count
// requests sent before it and are not taken as the probes' answers.
func (d *Decider) observeOpen(now time.Time, obs Observation) {
	b := &d.State.Breaker
	if obs.Failed == 0 && obs.Requests > 0 && b.RampAt.IsZero() && now.Sub(b.OpenedAt) >= d.Config.Breaker.OpenTime {
		b.RampAt = now
	}
}

// ramp closes the breaker on an answer: with Restore, at once
// (restore); else by doubling the rate (with Restart, the first step to
// at least Breaker.RestartRate when there is no rate before): up to the
// rate before it opened, or, without one, while the queue stays
// saturated (the workers send Saturation × the rate before the last
// step: their reports lag a step); an unsaturated queue ends the ramp at
// the rate in force.
func (d *Decider) ramp(now time.Time) (Change, bool) {
	st, b, cfg := &d.State, &d.State.Breaker, d.Config
	if !d.writing() || (st.Status != StatusOpen && !b.Ramping) || st.Rate <= 0 {
		return Change{}, false
	}
	if d.Restore && b.Before > 0 {
		return d.restore(now)
	}
	d.prune(now)
	m := d.measured(now)
	st.Measured = m
	if st.Status != StatusOpen && st.LastThrottle.Before(b.Since) {
		// What the workers sent since the ramp began was taken.
		st.Proven = max(st.Proven, min(m, st.Rate))
	}
	target := 2 * st.Rate
	if d.Restart && st.Status == StatusOpen && b.Before <= 0 {
		// The first step closes to the rate a worker's own breaker
		// restarts at: doubling from the probes' rate spends the first
		// seconds of a recovery at 2 and 4 a second while the herd waits.
		target = max(target, cfg.Breaker.RestartRate)
	}
	if b.Before > 0 {
		target = min(target, b.Before)
	} else if st.Status != StatusOpen && m < cfg.Saturation*st.Rate/2 {
		// The workers did not fill the rate before the last step (the
		// reports lag a step): the limit no longer binds.
		b.Ramping = false
		return Change{}, false
	}
	target = representable(target)
	if target <= st.Rate && st.Status != StatusOpen {
		b.Ramping = false
		return Change{}, false
	}
	// Open at one probe per OpenTime above the rate before it (a limit
	// under 1/s): the answer closes it at that rate, or it would stay open
	// for good (no throttle cuts an open queue, no calm raises it).
	// A failed write is tried again at the next step.
	b.RampAt = now.Add(cfg.RampInterval)
	return Change{Kind: ChangeRamp, Rate: target, Reason: learned("failures",
		fmt.Sprintf("breaker closing: ramped to %.3g/s on answers (measured %.3g/s)", target, m))}, true
}

// ramped records a ramp step written at now; from says the breaker was
// open until then (the first step).
func (d *Decider) ramped(now time.Time, from string) {
	b := &d.State.Breaker
	if from == StatusOpen {
		// The trip rule counts from here: the probes' failures are over.
		b.Since, b.Ramping = now, true
	}
	if b.Before > 0 && d.State.Rate >= representable(b.Before) {
		b.Ramping, b.RampAt = false, time.Time{}
	}
}

// restore closes the breaker at once, back to the rate before it opened.
func (d *Decider) restore(now time.Time) (Change, bool) {
	b := &d.State.Breaker
	b.RampAt = time.Time{}
	return Change{Kind: ChangeRamp, Rate: representable(b.Before), Reason: learned("failures",
		fmt.Sprintf("breaker closed on an answer: back to %.3g/s, the rate before it opened", b.Before))}, true
}
