package governor

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// setRateTimeout bounds one SetRate call (two reads and a write).
const setRateTimeout = 10 * time.Second

// Workflow is the governor of one activity task queue (registered as
// [WorkflowName], started with ID [WorkflowID](in.TaskQueue)). It receives
// [Observation]s on [SignalName], decides the queue's rate limit as the
// package comment describes, writes it with the SetRate local activity and
// answers [QueryName] with its [State]. It runs until cancelled,
// continuing as new after Config.MaxSignals signals or when the server
// suggests it.
func Workflow(ctx workflow.Context, in Input) error {
	g, err := newGovernor(ctx, in)
	if err != nil {
		return err
	}
	ch := workflow.GetSignalChannel(ctx, SignalName)
	var timer decisionTimer
	for {
		if g.continueDue(ctx) {
			return g.continueAsNew(ctx, ch, &timer)
		}
		now := workflow.Now(ctx)
		at, armed := g.nextAt(now)
		if armed && !now.Before(at) {
			timer.stop()
			g.decide(ctx)
			continue
		}
		timer.set(ctx, now, at, armed)
		if err := g.await(ctx, ch, &timer); err != nil {
			return err
		}
	}
}

// newGovernor begins a run of in: the defaults and the namespace filled
// in, and the query handler set.
func newGovernor(ctx workflow.Context, in Input) (*governor, error) {
	g := &governor{in: in, cfg: in.Config.WithDefaults(), st: in.State}
	g.arrival = workflow.GetVersion(ctx, versionArrival, workflow.DefaultVersion, 1) == 1
	if g.in.Namespace == "" {
		g.in.Namespace = workflow.GetInfo(ctx).Namespace
	}
	if g.st.Status == "" {
		g.st.Status = StatusLearning
	}
	if err := workflow.SetQueryHandler(ctx, QueryName, func() (State, error) {
		st := g.st
		st.Workers = maps.Clone(g.st.Workers)
		return st, nil
	}); err != nil {
		return nil, err
	}
	return g, nil
}

// decisionTimer is the timer of the next decision due, if any.
type decisionTimer struct {
	at     time.Time // its deadline (zero: none)
	cancel workflow.CancelFunc
	future workflow.Future
}

// set makes the timer fire at at, or not at all when !armed; a timer
// already set for at is kept.
func (t *decisionTimer) set(ctx workflow.Context, now, at time.Time, armed bool) {
	if !armed {
		t.stop()
		return
	}
	if at.Equal(t.at) {
		return
	}
	t.stop()
	tctx, cancel := workflow.WithCancel(ctx)
	*t = decisionTimer{at: at, cancel: cancel, future: workflow.NewTimer(tctx, at.Sub(now))}
}

// stop cancels the timer, if one is set.
func (t *decisionTimer) stop() {
	if t.cancel != nil {
		t.cancel()
	}
	*t = decisionTimer{}
}

// await waits for a signal, which it observes, for the timer, on which it
// makes the decision due, or for cancellation, which it returns.
func (g *governor) await(ctx workflow.Context, ch workflow.ReceiveChannel, timer *decisionTimer) error {
	fired := false
	sel := workflow.NewSelector(ctx)
	sel.AddReceive(ch, func(c workflow.ReceiveChannel, _ bool) {
		var obs Observation
		c.Receive(ctx, &obs)
		g.signals++
		g.observe(ctx, obs)
	})
	sel.AddReceive(ctx.Done(), func(workflow.ReceiveChannel, bool) {})
	if timer.future != nil {
		sel.AddFuture(timer.future, func(workflow.Future) { fired = true })
	}
	sel.Select(ctx)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if fired {
		*timer = decisionTimer{} // fired: nothing to cancel
		g.decide(ctx)
	}
	return nil
}

// continueDue reports whether this run should continue as new: after
// Config.MaxSignals signals, or when the server suggests it after one.
func (g *governor) continueDue(ctx workflow.Context) bool {
	return g.signals > 0 && (g.signals >= g.cfg.MaxSignals || workflow.GetInfo(ctx).GetContinueAsNewSuggested())
}

// continueAsNew ends the run and carries its state to the next: every
// signal already delivered is handled first (none may be lost), and a
// decision due now is made here, while a later one is carried.
func (g *governor) continueAsNew(ctx workflow.Context, ch workflow.ReceiveChannel, timer *decisionTimer) error {
	for {
		var obs Observation
		if !ch.ReceiveAsync(&obs) {
			break
		}
		g.observe(ctx, obs)
	}
	timer.stop()
	if at, ok := g.nextAt(workflow.Now(ctx)); ok && !workflow.Now(ctx).Before(at) {
		g.decide(ctx)
	}
	g.prune(workflow.Now(ctx))
	next := g.in
	next.State = g.st
	return workflow.NewContinueAsNewError(ctx, WorkflowName, next)
}

// governor is one run's decision state.
type governor struct {
	in  Input
	cfg Config
	st  State
	// arrival: observations are aged by when they arrive
	// (Observation.Received), not by their worker's clock; false only
	// when replaying a history from before that (versionArrival).
	arrival bool
	// signals counts the signals received by this run.
	signals int
}

// versionArrival is the change that ages observations by their arrival
// (workflow.GetVersion): a governor running when the worker is upgraded
// replays its history as it was decided, and ages by arrival from its
// next run (continue-as-new).
const versionArrival = "observation-arrival"

// nextAt returns when the next decision is due (a cut gathering reports,
// or a raise), and false when none is.
func (g *governor) nextAt(now time.Time) (time.Time, bool) {
	at, armed := g.raiseAt(now)
	if c := g.st.CutAt; !c.IsZero() && (!armed || c.Before(at)) {
		return c, true
	}
	return at, armed
}

// decide makes the decision due: the pending cut, else a raise.
func (g *governor) decide(ctx workflow.Context) {
	now := workflow.Now(ctx)
	if c := g.st.CutAt; !c.IsZero() && !now.Before(c) {
		g.st.CutAt = time.Time{}
		g.prune(now)
		g.st.Measured = g.measured(now)
		g.st.Accepted, _ = g.accepted(now)
		g.cut(ctx, now)
		return
	}
	g.considerRaise(ctx)
}

// observe records obs and cuts the rate if it reports throttles.
func (g *governor) observe(ctx workflow.Context, obs Observation) {
	now := workflow.Now(ctx)
	if g.arrival {
		// Its age is judged on this clock, not the worker's (which may be
		// off by any amount).
		obs.Received = now
	}
	if g.st.Workers == nil {
		g.st.Workers = map[string]Observation{}
	}
	if old, ok := g.st.Workers[obs.Worker]; !ok || !obs.To.Before(old.To) {
		g.st.Workers[obs.Worker] = obs
	}
	g.st.Recent = append(g.st.Recent, obs)
	g.prune(now)
	g.st.Measured = g.measured(now)
	g.st.Accepted, _ = g.accepted(now)
	if obs.Throttles <= 0 {
		return
	}
	g.st.LastThrottle, g.st.CalmSince = now, now
	// Cut after Gather, from every worker's reports by then: the first
	// report of a throttle alone undercounts what the API accepted.
	if g.writing() && g.st.CutAt.IsZero() && (g.st.LastCut.IsZero() || now.Sub(g.st.LastCut) >= g.cfg.CutInterval) {
		g.st.CutAt = now.Add(max(g.cfg.Gather, 0))
	}
}

// prune forgets observations that ended more than MeasureWindow before
// now, and the recent ones that ended more than AcceptWindow before.
func (g *governor) prune(now time.Time) {
	for w, o := range g.st.Workers {
		if now.Sub(o.at()) > g.cfg.MeasureWindow {
			delete(g.st.Workers, w)
		}
	}
	g.st.Recent = slices.DeleteFunc(g.st.Recent, func(o Observation) bool { return now.Sub(o.at()) > g.cfg.AcceptWindow })
}

// measured returns the sum of the request rates of each worker's latest
// observation that ended within MeasureWindow of now (summed in worker
// order, so replays compute the same bits).
func (g *governor) measured(now time.Time) float64 {
	workers := make([]string, 0, len(g.st.Workers))
	for w := range g.st.Workers {
		workers = append(workers, w)
	}
	slices.Sort(workers)
	m := 0.0
	for _, w := range workers {
		if o := g.st.Workers[w]; now.Sub(o.at()) <= g.cfg.MeasureWindow {
			m += o.Rate()
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
func (g *governor) accepted(now time.Time) (accepted, sent float64) {
	byWorker := map[string]Observation{}
	for _, o := range g.st.Recent {
		if now.Sub(o.at()) > g.cfg.AcceptWindow {
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

// writing reports whether the governor may still write.
func (g *governor) writing() bool {
	return g.st.Status != StatusOverridden && g.st.Status != StatusUnsupported
}

// cut lowers the rate after a throttle, at most once per CutInterval.
func (g *governor) cut(ctx workflow.Context, now time.Time) {
	if !g.writing() {
		return
	}
	if !g.st.LastCut.IsZero() && now.Sub(g.st.LastCut) < g.cfg.CutInterval {
		return
	}
	m, acc := g.st.Measured, g.st.Accepted
	base := acc
	if base <= 0 {
		// Nothing accepted yet (or reported without the count): the
		// requests sent, or the rate in force if lower.
		base = g.st.Rate
		if base == 0 || (m > 0 && m < base) {
			base = m
		}
	}
	if g.st.Rate > 0 {
		if acc >= g.cfg.Beta*g.st.Rate {
			// The API takes about the limit: the throttles come from the
			// bursts of dispatch or from other clients, not from a limit
			// above what it takes; cutting again would only slow the queue.
			return
		}
		base = min(base, g.st.Rate)
	}
	target := representable(max(g.cfg.Floor, g.cfg.Beta*base))
	if g.st.Rate > 0 && target >= g.st.Rate {
		return // at the floor already
	}
	// The reason states the accepted rate and the sent one of the same
	// reports (m, the latest report of each worker, may be another span).
	_, sent := g.accepted(now)
	g.write(ctx, now, target, true, fmt.Sprintf("cut to %.3g/s (accepted %.3g/s of %.3g/s sent)", target, acc, sent))
}

// raiseAt returns when the next raise is due, and false when none is:
// before a limit is written, after the governor stopped writing, and while
// no worker has reported within MeasureWindow (an idle queue).
func (g *governor) raiseAt(now time.Time) (time.Time, bool) {
	if g.st.Status != StatusLimited || g.st.Rate <= 0 || g.measured(now) <= 0 {
		return time.Time{}, false
	}
	at := g.st.CalmSince.Add(g.cfg.Calm)
	if !g.st.LastRaise.IsZero() {
		at = latest(at, g.st.LastRaise.Add(g.cfg.MinGap))
	}
	return at, true
}

// considerRaise raises the rate by Raise, up to twice the measured rate,
// unless the change is under MinChange; either way a new calm period
// begins.
func (g *governor) considerRaise(ctx workflow.Context) {
	now := workflow.Now(ctx)
	g.prune(now)
	m := g.measured(now)
	g.st.Measured = m
	if m <= 0 || !g.writing() || g.st.Rate <= 0 {
		return // idle: the next report brings the check back
	}
	g.st.CalmSince = now
	target := representable(min(g.st.Rate*(1+g.cfg.Raise), 2*m))
	if target <= g.st.Rate || (target-g.st.Rate)/g.st.Rate < g.cfg.MinChange {
		return
	}
	g.write(ctx, now, target, false, fmt.Sprintf("raised to %.3g/s after %s without a throttle (measured %.3g/s)", target, g.cfg.Calm, m))
}

// write sets the queue's rate limit to rate through the SetRate local
// activity and records the outcome.
func (g *governor) write(ctx workflow.Context, now time.Time, rate float64, cut bool, why string) {
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: setRateTimeout,
		// A transient failure is retried by the next decision.
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	var a *Activities
	var res SetRateResult
	err := workflow.ExecuteLocalActivity(lctx, a.SetRate, SetRateRequest{
		Namespace: g.in.Namespace,
		TaskQueue: g.in.TaskQueue,
		Rate:      rate,
		Reason:    "idemhttp-governor: learned from throttles: " + why,
	}).Get(ctx, &res)
	if err != nil {
		g.st.Error = err.Error()
		var appErr *temporal.ApplicationError
		if errors.As(err, &appErr) && appErr.Type() == ErrTypeUnsupported {
			g.st.Status = StatusUnsupported
			g.st.Error = appErr.Error()
		}
		workflow.GetLogger(ctx).Warn("governor: writing the queue rate limit failed",
			"TaskQueue", g.in.TaskQueue, "Rate", rate, "Error", err)
		return
	}
	g.st.Error = ""
	g.st.InForce = 0
	if res.Limited {
		g.st.InForce = res.InForce
	}
	if res.Overridden() {
		g.st.Status = StatusOverridden
		workflow.GetLogger(ctx).Warn("governor: the queue rate limit was set by someone else; no longer writing",
			"TaskQueue", g.in.TaskQueue, "Owner", res.Owner, "InForce", res.InForce)
		return
	}
	g.st.Status = StatusLimited
	g.st.Rate, g.st.LastWrite = rate, now
	if cut {
		g.st.LastCut = now
	} else {
		g.st.LastRaise = now
	}
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
