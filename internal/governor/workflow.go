package governor

import (
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
// in, the rules of its history selected, and the query handler set.
func newGovernor(ctx workflow.Context, in Input) (*governor, error) {
	rules := RulesV0
	arrival := workflow.GetVersion(ctx, versionArrival, workflow.DefaultVersion, 1) == 1
	if arrival && workflow.GetVersion(ctx, versionRules, workflow.DefaultVersion, 1) == 1 {
		rules = RulesV1
	}
	g := &governor{in: in, d: NewDecider(in.Config, rules, in.State)}
	g.d.Arrival = arrival
	g.d.Spans = rules >= RulesV1 && workflow.GetVersion(ctx, versionSpans, workflow.DefaultVersion, 1) == 1
	g.d.Restore = g.d.Spans && workflow.GetVersion(ctx, versionRestore, workflow.DefaultVersion, 1) == 1
	g.d.TripMargin = g.d.Restore && workflow.GetVersion(ctx, versionTripMargin, workflow.DefaultVersion, 1) == 1
	g.d.Restart = g.d.TripMargin && workflow.GetVersion(ctx, versionRestart, workflow.DefaultVersion, 1) == 1
	g.d.Incidental = g.d.Restart && workflow.GetVersion(ctx, versionIncidental, workflow.DefaultVersion, 1) == 1
	if g.in.Namespace == "" {
		g.in.Namespace = workflow.GetInfo(ctx).Namespace
	}
	if err := workflow.SetQueryHandler(ctx, QueryName, func() (State, error) {
		st := g.d.State
		st.Workers = maps.Clone(g.d.State.Workers)
		st.Recent = slices.Clone(g.d.State.Recent)
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
	return g.signals > 0 && (g.signals >= g.d.Config.MaxSignals || workflow.GetInfo(ctx).GetContinueAsNewSuggested())
}

// continueAsNew ends the run and carries its state to the next: every
// signal already delivered is handled first (none may be lost), and a
// decision due now is made here, while a later one is carried. A
// governor of an origin queue (base@origin) running on another task
// queue continues on TaskQueue(base), the governors' own.
func (g *governor) continueAsNew(ctx workflow.Context, ch workflow.ReceiveChannel, timer *decisionTimer) error {
	for {
		var obs Observation
		if !ch.ReceiveAsync(&obs) {
			break
		}
		g.observe(ctx, obs)
	}
	timer.stop()
	if at, ok := g.d.Next(workflow.Now(ctx)); ok && !workflow.Now(ctx).Before(at) {
		g.decide(ctx)
	}
	g.d.prune(workflow.Now(ctx))
	next := g.in
	next.State = g.d.State
	// Replay does not compare a continue-as-new's attributes (SDK
	// isCommandMatchEvent): a recorded run moves too.
	if tq, ok := governorQueue(g.in.TaskQueue); ok && tq != workflow.GetInfo(ctx).TaskQueueName {
		ctx = workflow.WithWorkflowTaskQueue(ctx, tq)
	}
	return workflow.NewContinueAsNewError(ctx, WorkflowName, next)
}

// governor is one run: the decider and what drives it.
type governor struct {
	in Input
	d  *Decider
	// signals counts the signals received by this run.
	signals int
}

// versionArrival is the change that ages observations by their arrival
// (workflow.GetVersion): a governor running when the worker is upgraded
// replays its history as it was decided, and ages by arrival from its
// next run (continue-as-new).
const versionArrival = "observation-arrival"

// versionRules is the change to RulesV1 (a cut at once, the saturated
// raise, the cluster's breaker, the governor's own task queue): a
// governor recorded with RulesV0 keeps them until its next run.
const versionRules = "rules-v1"

// versionSpans is the change to reports' lengths checked against the
// governor's clock (Decider.Spans: a worker's Span, not its wall clock's
// To − From, which a step of that clock makes an hour long): a governor
// recorded before it keeps To − From until its next run.
const versionSpans = "report-spans"

// versionRestore is the change to a breaker that closes at once on an
// answer, back to the rate before it (Decider.Restore): a governor
// recorded before it doubles the rate back until its next run.
const versionRestore = "breaker-restore"

// versionTripMargin is the change to a breaker that trips only when the
// workers' failures are above Breaker.FailureRatio by
// admission.TripMargin standard errors (Decider.TripMargin): a governor
// recorded before it trips on the ratio alone until its next run.
const versionTripMargin = "breaker-trip-margin"

// versionRestart is the change to a breaker that closes without a rate
// before it at Breaker.RestartRate (Decider.Restart): a governor recorded
// before it doubles the probes' rate until its next run.
const versionRestart = "breaker-restart-rate"

// versionIncidental is the change to a limit in force that is cut only
// when its throttles are more than incidental (Decider.Incidental): a
// governor recorded before it cuts on any throttle until its next run.
const versionIncidental = "incidental-throttles"

// nextAt returns when the next decision is due, and false when none is.
func (g *governor) nextAt(now time.Time) (time.Time, bool) { return g.d.Next(now) }

// observe hands obs to the decider.
func (g *governor) observe(ctx workflow.Context, obs Observation) {
	g.d.Observe(workflow.Now(ctx), obs)
}

// decide makes the decision due and writes the change it brings.
func (g *governor) decide(ctx workflow.Context) {
	now := workflow.Now(ctx)
	if ch, ok := g.d.Decide(now); ok {
		g.write(ctx, now, ch)
	}
}

// write sets the queue's rate limit to ch.Rate through the SetRate local
// activity and hands the outcome to the decider.
func (g *governor) write(ctx workflow.Context, now time.Time, ch Change) {
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
		Rate:      ch.Rate,
		Reason:    "idemhttp-governor: " + ch.Reason,
	}).Get(ctx, &res)
	g.d.Applied(now, ch, res, err)
	switch {
	case err != nil:
		workflow.GetLogger(ctx).Warn("governor: writing the queue rate limit failed",
			"TaskQueue", g.in.TaskQueue, "Rate", ch.Rate, "Error", err)
	case res.Overridden():
		workflow.GetLogger(ctx).Warn("governor: the queue rate limit was set by someone else; no longer writing",
			"TaskQueue", g.in.TaskQueue, "Owner", res.Owner, "InForce", res.InForce)
	}
}
