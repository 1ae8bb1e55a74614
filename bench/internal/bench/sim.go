package bench

import (
	"container/heap"
	"math"
	"math/rand/v2"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/internal/admission"
	"github.com/idemhttp/temporal-idempotent-http/internal/governor"
	"github.com/idemhttp/temporal-idempotent-http/internal/request"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// strategies are the retry strategies compared, in report order: Temporal's
// own deterministic exponential backoff first (the baseline), then the
// jittered ones the activity computes.
var strategies = []workflows.Jitter{
	workflows.JitterNone, workflows.JitterFull, workflows.JitterEqual, workflows.JitterDecorrelated,
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
	case workflows.JitterNone:
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
	Backoff request.Backoff
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
	// request not admitted waits as the activity does (admission.Limiter.Hop;
	// a hop at least MinRetryDelay).
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
// the workers' reports, with its rule and defaults (a throttle cuts to
// Beta × the accepted rate, never above the limit, at most every
// CutInterval; a raise by Raise after Calm without a throttle): until a
// limit is in force each worker's limiter admits as usual; then matching
// dispatches the attempts at most the limit per second, evenly spaced (one
// partition), and the workers' limiters only gate them (breaker, retry
// budget).
type simShared struct {
	// Report is how often each worker reports (default 1 s); Delay is from
	// a decision to the limit in force (default 1.5 s).
	Report, Delay time.Duration
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
	evReport // the workers report to the governor (Shared)
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
	epoch := time.Unix(1_800_000_000, 0)
	if a := cfg.Admission; a != nil {
		for range max(a.Workers, 1) {
			limiters = append(limiters, admission.New(a.Config))
		}
		tickets = make([]admission.Ticket, cfg.Clients)
		sent = make([]bool, cfg.Clients)
	}
	worker := func() *admission.Limiter { return limiters[rng.IntN(len(limiters))] }
	var sh *sharedState
	if a := cfg.Admission; a != nil && a.Shared != nil {
		sh = newSharedState(*a.Shared, limiters)
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
		push(simEvent{t: sh.cfg.Report, kind: evReport})
	}
	var res simResult
	for q.Len() > 0 {
		e := heap.Pop(&q).(simEvent)
		if e.kind == evReport {
			sh.report(e.t)
			if q.Len() > 0 {
				push(simEvent{t: e.t + sh.cfg.Report, kind: evReport})
			}
			continue
		}
		if e.kind == evAdmit {
			if sh != nil && !e.dispatched {
				if at, ok := sh.dispatch(e.t); ok && at > e.t {
					push(simEvent{t: at, client: e.client, kind: evAdmit, dispatched: true})
					continue
				}
			}
			l := worker()
			var d admission.Decision
			if sh != nil && sh.inForce(e.t) {
				d = l.Gate("api", epoch.Add(e.t), sent[e.client])
			} else {
				d = l.Admit("api", epoch.Add(e.t), tickets[e.client], sent[e.client])
			}
			if d.Admitted {
				tickets[e.client], sent[e.client] = admission.Ticket{}, true
				push(simEvent{t: e.t + net(), client: e.client, kind: first, ver: e.ver, worker: l, sent: e.t})
				continue
			}
			tickets[e.client] = d.Ticket
			wait := d.Wait
			if hop := l.Hop(wait, d.Reason); hop > 0 {
				wait = max(hop, cfg.MinRetryDelay)
			}
			push(simEvent{t: e.t + wait, client: e.client, kind: evAdmit})
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
				sh.answer(e.worker, ok)
			}
		}
		if ok {
			res.Duration = max(res.Duration, back)
			continue
		}
		attempts[e.client]++
		b := cfg.Backoff
		delay := b.Delay(attempts[e.client], uniform, seeds[e.client])
		if b.Jitter == request.JitterNone {
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

// sharedState is the governor and the queue limit of a Shared simulation.
type sharedState struct {
	cfg      simShared
	workers  map[*admission.Limiter]*workerCounts
	rate     float64       // the limit decided (0: none)
	at       time.Duration // when it is in force
	prev     float64       // the limit in force before at
	lastCut  time.Duration
	calm     time.Duration // the last report with throttles
	nextSlot time.Duration
}

type workerCounts struct{ requests, accepted, throttles int }

func newSharedState(cfg simShared, ls []*admission.Limiter) *sharedState {
	if cfg.Report <= 0 {
		cfg.Report = time.Second
	}
	if cfg.Delay <= 0 {
		cfg.Delay = 1500 * time.Millisecond
	}
	cfg.Governor = cfg.Governor.WithDefaults()
	s := &sharedState{cfg: cfg, workers: map[*admission.Limiter]*workerCounts{}, lastCut: -time.Hour}
	for _, l := range ls {
		s.workers[l] = &workerCounts{}
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

// dispatch returns when matching hands out a task that is ready at t.
func (s *sharedState) dispatch(t time.Duration) (time.Duration, bool) {
	r := s.limit(t)
	if r <= 0 {
		return t, false
	}
	at := max(t, s.nextSlot)
	s.nextSlot = at + time.Duration(float64(time.Second)/r)
	return at, true
}

func (s *sharedState) answer(l *admission.Limiter, ok bool) {
	c := s.workers[l]
	c.requests++
	if ok {
		c.accepted++
	} else {
		c.throttles++
	}
}

// report is the governor's decision at t from every worker's counts.
func (s *sharedState) report(t time.Duration) {
	var acc, thr int
	for _, c := range s.workers {
		acc, thr = acc+c.accepted, thr+c.throttles
		*c = workerCounts{}
	}
	g := s.cfg.Governor
	set := func(r float64) {
		s.prev, s.rate, s.at = s.limit(t), r, t+s.cfg.Delay
	}
	switch {
	case thr > 0 && t-s.lastCut >= g.CutInterval && (s.rate == 0 || float64(acc)/s.cfg.Report.Seconds() < g.Beta*s.rate):
		// No cut while the API accepts about the limit.
		s.calm, s.lastCut = t, t
		base := float64(acc) / s.cfg.Report.Seconds()
		if s.rate > 0 {
			base = min(base, s.rate)
		}
		set(max(g.Floor, g.Beta*base))
	case thr > 0:
		s.calm = t
	case s.rate > 0 && t-s.calm >= g.Calm && t-s.lastCut >= g.Calm:
		s.lastCut = t
		set(s.rate * (1 + g.Raise))
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
		Backoff: request.Backoff{
			InitialInterval: 10 * time.Millisecond, BackoffCoefficient: 2,
			MaximumInterval: 2 * time.Second, Jitter: j,
		},
		NewModel: func() model { return &occModel{} },
		NetMean:  10 * time.Millisecond, NetSD: 2 * time.Millisecond,
		Seed: seed,
	}
}
