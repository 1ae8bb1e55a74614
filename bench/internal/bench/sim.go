package bench

import (
	"container/heap"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/internal/admission"
	"github.com/idemhttp/temporal-idempotent-http/internal/backoff"
	"github.com/idemhttp/temporal-idempotent-http/internal/defaults"
	"github.com/idemhttp/temporal-idempotent-http/internal/governor"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// strategies are the retry strategies compared, in report order: Temporal's
// own deterministic exponential backoff first (the baseline), then the
// jittered ones the activity computes.
var strategies = []workflows.Jitter{
	backoff.JitterNone, workflows.JitterFull, workflows.JitterEqual, workflows.JitterDecorrelated,
}

// runName is the label of a run in tables and plots: its strategy, or
// adaptive admission (whose retries are paced by the limiter).
func runName(j workflows.Jitter, admission bool) string {
	if admission {
		return "adaptive admission"
	}
	return strategyName(j)
}

// strategyName is the label of a strategy in tables and plots.
func strategyName(j workflows.Jitter) string {
	switch j {
	case backoff.JitterNone:
		return "none (Temporal's backoff)"
	case workflows.JitterFull:
		return "full jitter"
	case workflows.JitterEqual:
		return "equal jitter"
	case workflows.JitterDecorrelated:
		return "decorrelated jitter"
	}
	return string(j)
}

// model is the contended resource of a simulation: it decides, at virtual
// time t, whether one request succeeds. Models are stateful and are used by
// one simulation at a time.
type model interface {
	// request is one request arriving at t (non-decreasing between calls).
	// It reports whether the request succeeds. For the OCC model it is the
	// write, which succeeds if the row is still at version.
	request(t time.Duration, version int) bool
	// read returns the version a client reads at t (OCC); other models return 0.
	read(t time.Duration) int
	// needsRead reports whether every attempt is a read then a write (two
	// round trips, as in Brooker's OCC simulator) instead of one request.
	needsRead() bool
}

// occModel is Brooker's model: one row with a version; a client reads the
// version, then writes with it, and the write succeeds only if no other write
// succeeded in between. Exactly one of the clients contending in a round wins.
type occModel struct{ version int }

func (m *occModel) request(_ time.Duration, version int) bool {
	if version == m.version {
		m.version++
		return true
	}
	return false
}

func (m *occModel) read(time.Duration) int { return m.version }

func (m *occModel) needsRead() bool { return true }

// capacityModel is the reference server's contention model
// (testsuite.Options Capacity and CapacityWindow): at most k requests
// succeed per window; the window starts at the first request after the
// previous one ended; every other request is answered 429 without
// Retry-After.
type capacityModel struct {
	k      int
	window time.Duration

	start time.Duration
	n     int
	began bool
}

func (m *capacityModel) request(t time.Duration, _ int) bool {
	if !m.began || t-m.start >= m.window {
		m.start, m.n, m.began = t, 0, true
	}
	m.n++
	return m.n <= m.k
}

func (m *capacityModel) read(time.Duration) int { return 0 }

func (m *capacityModel) needsRead() bool { return false }

// simConfig is one simulation run: Clients clients start at once, each
// retrying one operation until it succeeds, with the delays of
// Backoff.Delay for Backoff.Jitter (Ceiling for JitterNone, as Temporal's own
// retry policy computes it).
type simConfig struct {
	Clients int
	Backoff backoff.Backoff
	// NewModel returns a fresh contended resource.
	NewModel func() model
	// NetMean and NetSD are the one-way network delay, drawn as
	// |Normal(NetMean, NetSD)| like Brooker's simulator (10 ms and 2 ms there).
	NetMean, NetSD time.Duration
	// MinRetryDelay, if positive, raises every retry delay to at least this
	// value. It models a scheduler that cannot wait less (Temporal's timer
	// queue shifts timers shorter than history.timerProcessorMaxTimeShift,
	// 1 s by default, to about that long).
	MinRetryDelay time.Duration
	// StartSpread, if positive, spreads the clients' first requests
	// uniformly over [0, StartSpread], as starting many workflows at once
	// does on a real server (start calls, workflow tasks, dispatch).
	StartSpread time.Duration
	// Seed makes the run reproducible.
	Seed uint64
	// Trace, if true, records the time of every contended request.
	Trace bool
	// Admission, if set, puts every request through the limiter the
	// activity uses (package admission), one per simulated worker: a
	// request not admitted waits as the activity's admit does, within its
	// attempt (of the default start-to-close) while
	// admission.Limiter.InAttempt says so, else the attempt ends and the next asks again after admission.Limiter.Hop (at
	// least MinRetryDelay): a new attempt, which a shared rate's matching
	// dispatches again (simResult.Hops counts them).
	Admission *simAdmission
	// Outage, if positive, makes the model answer every request as a
	// failure (a 503 without Retry-After) until then: an API that is down,
	// then recovers.
	Outage time.Duration
}

// simAdmission is the activity's admission in a simulation.
type simAdmission struct {
	Config admission.Config
	// Workers is how many workers (each its own limiter) the clients are
	// spread over; each attempt runs on a worker drawn at random, as
	// Temporal's matching hands activity tasks to any poller (default 1).
	Workers int
	// Shared, if set, models one rate for every worker kept by the
	// Temporal server (see simShared).
	Shared *simShared
}

// simShared models the queue rate limit that package governor sets from
// the workers' reports, with the governor's own decision code
// (governor.Decider, RulesV1): each worker reports every Report, and at
// once on the first throttle or failure after a report without one and on
// the first accepted answer after a report of failures alone (a worker
// alone, with no limit in force, does not report: Reporter); a
// report reaches the governor Signal later; a limit it writes is in force
// Delay later. Until a limit is in force each worker's limiter admits as
// usual; then matching dispatches the attempts at most the limit per
// second, evenly spaced (one partition, as the workers' local pacing
// smooths matching's bursts), and the workers' limiters only gate them
// (breaker, retry budget).
type simShared struct {
	// Report is how often each worker reports (default 1 s); Signal is
	// from a report to the governor's decision (default 50 ms); Delay is
	// from a decision to the limit in force (default 1 s: SetRate and the
	// server applying it).
	Report, Signal, Delay time.Duration
	// Governor holds the governor's parameters (zero fields: its defaults).
	Governor governor.Config
}

// simResult is what one simulation measured.
type simResult struct {
	// Requests counts the contended requests (the writes, for OCC), as
	// Brooker's "calls" and the reference server's Stats().Requests do.
	Requests int
	// DuringOutage counts the requests that arrived during cfg.Outage.
	DuringOutage int
	// Hops counts the attempts admission ended to wait (each an activity
	// attempt for Temporal: an action), the attempts the server's limit
	// held in its queue not included.
	Hops int
	// Duration is the virtual time until the last client succeeded.
	Duration time.Duration
	// Times and OK are each contended request's time and outcome, when Trace is set.
	Times []time.Duration
	OK    []bool
}

type simEvent struct {
	t      time.Duration
	seq    int
	client int
	kind   int // evRead or evWrite: arrival at the server; evAdmit
	ver    int
	// worker is the limiter that admitted the request (admission only).
	worker *admission.Limiter
	sent   time.Duration
	// dispatched: the server's queue limit has dispatched it (Shared).
	dispatched bool
}

const (
	evRead = iota
	evWrite
	evAdmit  // the client asks the limiter before sending
	evReport // a worker reports to the governor (Shared; client: the worker, ver 1: urgent)
	evSignal // a report reaches the governor (Shared; client: its index)
	evGovern // the governor's timer fires (Shared)
	evMatch  // matching may dispatch the next task of its backlog (Shared)
)

type eventQueue []simEvent

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if q[i].t != q[j].t {
		return q[i].t < q[j].t
	}
	return q[i].seq < q[j].seq
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(simEvent)) }
func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// simulate runs cfg as a discrete-event simulation in virtual time. It is
// deterministic for a given cfg (Seed included) and never sleeps.
func simulate(cfg simConfig) simResult {
	rng := rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x5851f42d4c957f2d))
	uniform := rng.Float64
	net := func() time.Duration {
		return time.Duration(math.Abs(rng.NormFloat64()*float64(cfg.NetSD) + float64(cfg.NetMean)))
	}
	contended := cfg.NewModel()
	first := evWrite
	if contended.needsRead() {
		first = evRead
	}
	var limiters []*admission.Limiter
	var tickets []admission.Ticket
	var sent []bool
	// waited is each client's wait within its current attempt, an
	// attempt of the activity's default start-to-close.
	var waited []time.Duration
	epoch := time.Unix(1_800_000_000, 0)
	if a := cfg.Admission; a != nil {
		for range max(a.Workers, 1) {
			limiters = append(limiters, admission.New(a.Config))
		}
		tickets = make([]admission.Ticket, cfg.Clients)
		sent = make([]bool, cfg.Clients)
		waited = make([]time.Duration, cfg.Clients)
	}
	worker := func() *admission.Limiter { return limiters[rng.IntN(len(limiters))] }
	var sh *sharedState
	if a := cfg.Admission; a != nil && a.Shared != nil {
		sh = newSharedState(*a.Shared, limiters, epoch)
	}
	retryKind := first
	if limiters != nil {
		retryKind = evAdmit
	}
	attempts := make([]int32, cfg.Clients)
	seeds := make([]uint64, cfg.Clients)
	q := make(eventQueue, 0, cfg.Clients)
	seq := 0
	push := func(e simEvent) {
		seq++
		e.seq = seq
		heap.Push(&q, e)
	}
	for c := range cfg.Clients {
		seeds[c] = rng.Uint64()
		t0 := net()
		if cfg.StartSpread > 0 {
			t0 += time.Duration(uniform() * float64(cfg.StartSpread))
		}
		push(simEvent{t: t0, client: c, kind: retryKind})
	}
	if sh != nil {
		for i := range sh.workers {
			// The workers' reporters tick at phases of their own.
			push(simEvent{t: time.Duration(uniform() * float64(sh.cfg.Report)), client: i, kind: evReport})
		}
	}
	var res simResult
	succeeded := 0
	for q.Len() > 0 {
		e := heap.Pop(&q).(simEvent)
		if e.kind >= evReport {
			sh.event(e, push, succeeded < cfg.Clients)
			continue
		}
		if e.kind == evAdmit {
			if sh != nil && !e.dispatched && sh.enqueue(e, push) {
				continue
			}
			l := worker()
			var d admission.Decision
			if sh != nil && sh.inForce(e.t) {
				d = l.Gate("api", epoch.Add(e.t), sent[e.client])
			} else {
				if sh != nil {
					// As the activity: each worker starts at its share.
					l.StartShared("api", epoch.Add(e.t), len(limiters))
				}
				d = l.Admit("api", epoch.Add(e.t), tickets[e.client], sent[e.client])
			}
			if d.Admitted {
				tickets[e.client], sent[e.client], waited[e.client] = admission.Ticket{}, true, 0
				push(simEvent{t: e.t + net(), client: e.client, kind: first, ver: e.ver, worker: l, sent: e.t})
				continue
			}
			tickets[e.client] = d.Ticket
			if l.InAttempt(waited[e.client], d, defaults.StartToCloseTimeout-waited[e.client]) {
				// Within the attempt (as the activity's admit): it asks
				// again in it, past matching.
				waited[e.client] += d.Wait
				push(simEvent{t: e.t + d.Wait, client: e.client, kind: evAdmit, dispatched: e.dispatched})
				continue
			}
			// The attempt ends; the next asks again after the hop, a new
			// attempt that matching dispatches.
			wait := l.Hop(d.Wait, d.Reason)
			if wait == 0 {
				wait = d.Wait
			}
			waited[e.client] = 0
			res.Hops++
			push(simEvent{t: e.t + max(wait, cfg.MinRetryDelay), client: e.client, kind: evAdmit})
			continue
		}
		if e.kind == evRead {
			// The version travels back, then the write travels out.
			push(simEvent{t: e.t + net() + net(), client: e.client, kind: evWrite, ver: contended.read(e.t)})
			continue
		}
		ok := contended.request(e.t, e.ver)
		if e.t < cfg.Outage {
			ok = false
		}
		res.Requests++
		if e.t < cfg.Outage {
			res.DuringOutage++
		}
		if cfg.Trace {
			res.Times = append(res.Times, e.t)
			res.OK = append(res.OK, ok)
		}
		back := e.t + net() // the answer reaches the client
		if e.worker != nil {
			e.worker.Observe("api", epoch.Add(e.sent), epoch.Add(back), simObservation(ok, e.t < cfg.Outage))
			if sh != nil {
				sh.answer(back, e.worker, ok, e.t < cfg.Outage, push)
			}
		}
		if ok {
			succeeded++
			res.Duration = max(res.Duration, back)
			continue
		}
		attempts[e.client]++
		b := cfg.Backoff
		delay := b.Delay(attempts[e.client], uniform, seeds[e.client])
		if b.Jitter == backoff.JitterNone {
			delay = b.Ceiling(attempts[e.client])
		}
		if limiters != nil && e.t >= cfg.Outage {
			// A throttled request's retry is paced by the limiter, as in
			// the activity; a failure's waits the backoff.
			delay = 0
		}
		delay = max(delay, cfg.MinRetryDelay)
		push(simEvent{t: back + delay + net(), client: e.client, kind: retryKind})
	}
	return res
}

// sharedState is the governor and the queue limit of a Shared
// simulation: the workers' reporters, the governor's decision code
// (governor.Decider, the very code the governor workflow runs) on the
// simulated clock, and matching's pacing by the limit in force.
type sharedState struct {
	cfg     simShared
	epoch   time.Time
	d       *governor.Decider
	workers []*simReporter
	index   map[*admission.Limiter]int
	// inflight holds the observations on their way to the governor, by
	// the index their evSignal event carries.
	inflight []governor.Observation
	timerAt  time.Duration // the governor's timer (-1: none)
	rate     float64       // the limit decided (0: none)
	at       time.Duration // when it is in force
	prev     float64       // the limit in force before at
	// backlog holds the attempts matching has not dispatched yet, in
	// order; last is when it last dispatched one (under a limit).
	backlog []simEvent
	last    time.Duration
	// Writes counts the limits written.
	writes int
}

// simReporter is one worker's governor.Reporter: its counts since its
// last report.
type simReporter struct {
	name                                  string
	requests, accepted, throttles, failed int
	from, lastSent                        time.Duration
	quiet, calm, urgent                   bool
	down                                  bool // the last report sent had failures and nothing accepted
	prevFrom, prevTo                      time.Duration
	prev                                  [3]int // requests, accepted, failed of the last report
	sent                                  bool   // a report was sent
	idle                                  bool   // no request since from: the first begins the interval
}

func newSharedState(cfg simShared, ls []*admission.Limiter, epoch time.Time) *sharedState {
	if cfg.Report <= 0 {
		cfg.Report = time.Second
	}
	if cfg.Delay <= 0 {
		cfg.Delay = time.Second
	}
	if cfg.Signal <= 0 {
		cfg.Signal = 50 * time.Millisecond
	}
	s := &sharedState{cfg: cfg, epoch: epoch, index: map[*admission.Limiter]int{}, timerAt: -1,
		d: governor.NewDecider(cfg.Governor, governor.RulesV1, governor.State{})}
	for i, l := range ls {
		s.index[l] = i
		s.workers = append(s.workers, &simReporter{name: fmt.Sprintf("worker-%d", i+1), quiet: true, calm: true, idle: true})
	}
	return s
}

// limit is the rate in force at t (0: none).
func (s *sharedState) limit(t time.Duration) float64 {
	if t >= s.at {
		return s.rate
	}
	return s.prev
}

func (s *sharedState) inForce(t time.Duration) bool { return s.limit(t) > 0 }

// enqueue hands matching the attempt e, ready at e.t, and reports whether
// it must wait in the backlog: under a limit, matching dispatches one
// task per 1/limit, at the limit in force at each dispatch (a change
// re-paces the backlog at once).
func (s *sharedState) enqueue(e simEvent, push func(simEvent)) bool {
	r := s.limit(e.t)
	if r <= 0 {
		return false
	}
	if len(s.backlog) == 0 && e.t >= s.last+interval(r) {
		s.last = e.t
		return false
	}
	s.backlog = append(s.backlog, e)
	push(simEvent{t: max(e.t, s.last+interval(r)), kind: evMatch})
	return true
}

// match is an evMatch event at t: the next task of the backlog is
// dispatched if its time has come (any number of evMatch events may be
// pending: each checks).
func (s *sharedState) match(t time.Duration, push func(simEvent)) {
	if len(s.backlog) == 0 {
		return
	}
	r := s.limit(t)
	if r <= 0 {
		for _, e := range s.backlog {
			push(simEvent{t: t, client: e.client, kind: evAdmit, dispatched: true})
		}
		s.backlog = s.backlog[:0]
		return
	}
	if due := s.last + interval(r); t < due {
		push(simEvent{t: due, kind: evMatch})
		return
	}
	e := s.backlog[0]
	s.backlog = s.backlog[1:]
	s.last = t
	push(simEvent{t: t, client: e.client, kind: evAdmit, dispatched: true})
	if len(s.backlog) > 0 {
		push(simEvent{t: t + interval(r), kind: evMatch})
	}
}

// interval is the time between two dispatches at rate r.
func interval(r float64) time.Duration { return time.Duration(float64(time.Second) / r) }

// answer counts an answer of worker l's at t, as Reporter.Record does: the
// first throttle or failure after a report without one is reported at
// once (an urgent evReport).
func (s *sharedState) answer(t time.Duration, l *admission.Limiter, ok, failed bool, push func(simEvent)) {
	i := s.index[l]
	w := s.workers[i]
	if w.idle {
		w.from, w.idle = t, false
	}
	w.requests++
	urgent := false
	switch {
	case ok:
		urgent = w.accepted == 0 && w.down
		w.accepted++
	case failed:
		urgent = w.failed == 0 && w.calm
		w.failed++
	default:
		urgent = w.throttles == 0 && w.quiet
		w.throttles++
	}
	if urgent && !w.urgent {
		w.urgent = true
		push(simEvent{t: t, client: i, kind: evReport, ver: 1})
	}
}

// report is worker i's reporter at t (urgent: the event an answer
// pushed), as Reporter.report: an urgent report right after a regular one
// reaches back over it.
func (s *sharedState) report(t time.Duration, i int, urgent bool, push func(simEvent)) {
	w := s.workers[i]
	if w.requests == 0 {
		if !urgent {
			w.from, w.idle = t, true
		}
		return
	}
	if urgent != w.urgent || (!w.urgent && w.sent && t-w.lastSent < s.cfg.Report*9/10) {
		return
	}
	if len(s.workers) == 1 && !s.inForce(t) {
		// A worker alone on a queue without a limit does not report
		// (Reporter.report): its own limiter decides.
		w.requests, w.accepted, w.throttles, w.failed, w.urgent = 0, 0, 0, 0, false
		w.quiet, w.calm, w.down, w.sent = true, true, false, false
		w.from = t
		return
	}
	o := governor.Observation{Worker: w.name, Requests: w.requests, Accepted: w.accepted, Throttles: w.throttles, Failed: w.failed,
		From: s.epoch.Add(w.from), To: s.epoch.Add(t), Span: t - w.from}
	if w.urgent && !(w.down && w.accepted > 0) && t-w.from < s.cfg.Report && w.sent && w.prevTo == w.from {
		o.From, o.Span = s.epoch.Add(w.prevFrom), t-w.prevFrom
		o.Requests += w.prev[0]
		o.Accepted += w.prev[1]
		o.Failed += w.prev[2]
	}
	w.prevFrom, w.prevTo, w.prev = w.from, t, [3]int{w.requests, w.accepted, w.failed}
	w.quiet, w.calm = w.throttles == 0, w.failed == 0
	w.down = o.Failed > 0 && o.Accepted == 0
	w.requests, w.accepted, w.throttles, w.failed, w.urgent = 0, 0, 0, 0, false
	w.from, w.lastSent, w.sent = t, t, true
	s.inflight = append(s.inflight, o)
	push(simEvent{t: t + s.cfg.Signal, client: len(s.inflight) - 1, kind: evSignal})
}

// signal is the observation of event index i reaching the governor at t.
func (s *sharedState) signal(t time.Duration, i int, push func(simEvent)) {
	s.d.Observe(s.epoch.Add(t), s.inflight[i])
	s.govern(t, push)
}

// govern makes every decision due at t, as the governor workflow does,
// and sets its timer for the next one. A change is in force Delay later.
func (s *sharedState) govern(t time.Duration, push func(simEvent)) {
	now := s.epoch.Add(t)
	for range 16 {
		at, ok := s.d.Next(now)
		if !ok || at.After(now) {
			break
		}
		ch, ok := s.d.Decide(now)
		if !ok {
			continue
		}
		s.d.Applied(now, ch, governor.SetRateResult{Written: true, Limited: true, InForce: ch.Rate, Owner: governor.Identity}, nil)
		s.prev, s.rate, s.at = s.limit(t), ch.Rate, t+s.cfg.Delay
		s.writes++
		push(simEvent{t: s.at, kind: evMatch}) // the backlog re-paced
	}
	s.timerAt = -1
	if at, ok := s.d.Next(now); ok {
		s.timerAt = max(at.Sub(s.epoch), t)
		push(simEvent{t: s.timerAt, kind: evGovern})
	}
}

// event handles a reporter's, a signal's or the governor's timer event;
// live says whether any client still waits (the reporters tick on until
// none does).
func (s *sharedState) event(e simEvent, push func(simEvent), live bool) {
	switch e.kind {
	case evReport:
		s.report(e.t, e.client, e.ver == 1, push)
		if e.ver == 0 && live {
			push(simEvent{t: e.t + s.cfg.Report, client: e.client, kind: evReport})
		}
	case evSignal:
		s.signal(e.t, e.client, push)
	case evGovern:
		if e.t == s.timerAt && live {
			s.govern(e.t, push)
		}
	case evMatch:
		s.match(e.t, push)
	}
}

// simObservation is what a simulated answer tells the limiter: a failure (503)
// during the outage, else a throttle (429) when it did not succeed.
func simObservation(ok, outage bool) admission.Observation {
	return admission.Observation{Failed: outage, Throttled: !ok && !outage}
}

// SimSummary is the mean over several seeded runs of one configuration.
type SimSummary struct {
	Clients  int
	Strategy workflows.Jitter
	// Admission: the limiter admitted every request (Workers limiters).
	Admission bool `json:",omitempty"`
	Workers   int  `json:",omitempty"`
	// Shared: one rate for every worker, kept by the server (simShared).
	Shared   bool `json:",omitempty"`
	Runs     int
	Requests float64
	Duration time.Duration
}

// simulateMean runs cfg runs times with seeds cfg.Seed, cfg.Seed+1, … and
// returns the mean requests and duration.
func simulateMean(cfg simConfig, runs int) SimSummary {
	s := SimSummary{Clients: cfg.Clients, Strategy: workflows.Jitter(cfg.Backoff.Jitter), Runs: runs}
	if a := cfg.Admission; a != nil {
		s.Admission, s.Workers, s.Shared = true, max(a.Workers, 1), a.Shared != nil
	}
	var reqs, dur float64
	for i := range runs {
		c := cfg
		c.Seed = cfg.Seed + uint64(i)
		r := simulate(c)
		reqs += float64(r.Requests)
		dur += float64(r.Duration)
	}
	s.Requests = reqs / float64(runs)
	s.Duration = time.Duration(dur / float64(runs))
	return s
}

// brookerConfig is Brooker's simulator setup for n clients and a strategy:
// OCC against one row, network delay |N(10 ms, 2 ms)|, base 5 ms and cap 2 s
// with his backoff(n) = min(cap, base × 2^n), which is our Ceiling with
// InitialInterval 10 ms (his base × 2). Decorrelated jitter therefore starts
// from 10 ms here instead of his 5 ms.
func brookerConfig(n int, j workflows.Jitter, seed uint64) simConfig {
	return simConfig{
		Clients: n,
		Backoff: backoff.Backoff{
			InitialInterval: 10 * time.Millisecond, BackoffCoefficient: 2,
			MaximumInterval: 2 * time.Second, Jitter: j,
		},
		NewModel: func() model { return &occModel{} },
		NetMean:  10 * time.Millisecond, NetSD: 2 * time.Millisecond,
		Seed: seed,
	}
}
