package governor

import (
	"context"
	"log/slog"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
)

// Defaults of [ReporterConfig].
const (
	DefaultReportInterval = time.Second
	DefaultLimitInterval  = 5 * time.Second
	DefaultCallTimeout    = 5 * time.Second
)

// ReporterConfig configures a [Reporter]; zero fields take the defaults.
type ReporterConfig struct {
	// ReportInterval is the least time between two observations of one
	// queue (default 1 s), except that the first throttle after an
	// interval without one is sent at once, and so is the first failure
	// after an interval without one (the cluster's breaker opens on them).
	ReportInterval time.Duration
	// LimitInterval is how often the rate limit in force on an idle
	// queue is read for [Reporter.Limit] (default 5 s). A queue this
	// worker sent requests to within the last two report intervals is
	// read every ReportInterval: a change its governor writes (a cut, the
	// breaker opening or closing) reaches this worker's pace within about
	// a second (DescribeTaskQueue, a read: no Temporal action).
	LimitInterval time.Duration
	// CallTimeout bounds each call to the server (default 5 s).
	CallTimeout time.Duration
	// Governor is the Config of a governor this reporter starts; a running
	// governor keeps its own.
	Governor Config
	// GovernorFor, if set, returns the Config of the governor of queue
	// that this reporter starts, in place of Governor: each origin's
	// queue's governor with that origin's breaker settings.
	GovernorFor func(queue string) Config
	// StartOptions is the template of the governor's start options (ID and
	// TaskQueue are always set by the reporter).
	StartOptions client.StartWorkflowOptions
	// Logger gets the errors (default: slog.Default()).
	Logger log.Logger
}

// Reporter counts a worker's requests and throttles per activity task
// queue and reports them to each queue's governor. Its methods are safe
// for concurrent use; Record never waits on the server.
type Reporter struct {
	c          client.Client
	governorTQ string
	namespace  string
	identity   string
	cfg        ReporterConfig

	kick  chan struct{}
	clock clock

	mu     sync.Mutex
	queues map[string]*queueStats
	cancel context.CancelFunc
	done   chan struct{}
}

// queueStats is one queue's counts since its last report.
type queueStats struct {
	from                instant // the start of the current interval
	requests, throttles int
	accepted            int // answers neither throttles nor failures
	failed              int // answers that were failures
	lastSent            instant
	quiet               bool    // the last report had no throttle (or there was none)
	calm                bool    // the last report had no failure (or there was none)
	urgent              bool    // a throttle or failure after a quiet interval waits to be sent
	trouble             instant // the last throttle or failure recorded (zero: none)
	active              instant // the last request recorded (zero: none)
	// idle: no request recorded since from, which began with the queue or
	// at a report without requests: the first request begins the
	// interval instead, so that a report's rate does not count the idle
	// moment before a herd's first request.
	idle bool
	// The last report's own interval and count, which an urgent report
	// that follows it at once extends back over.
	prevFrom, prevTo instant
	prevRequests     int
	prevAccepted     int
	prevFailed       int
	limit            float64
	limited          bool
	limitChecked     instant
	pollers          int  // distinct identities polling the queue (at least 1), read with the limit
	alone            bool // the last read found one poller (this worker) and no limit in force
	down             bool // the last report sent had failures and no accepted answer
}

// NewReporter returns a reporter that signals the governors of queues in
// namespace, as worker identity. The governor of an origin queue
// (base@origin) runs on [TaskQueue](base); of any other queue on
// governorTaskQueue. Either is a queue polled by a worker with
// [Activities.Register]. Call [Reporter.Start].
func NewReporter(c client.Client, governorTaskQueue, namespace, identity string, cfg ReporterConfig) *Reporter {
	if cfg.ReportInterval <= 0 {
		cfg.ReportInterval = DefaultReportInterval
	}
	if cfg.LimitInterval <= 0 {
		cfg.LimitInterval = DefaultLimitInterval
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = DefaultCallTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = log.NewStructuredLogger(slog.Default())
	}
	return &Reporter{
		c: c, governorTQ: governorTaskQueue, namespace: namespace, identity: identity, cfg: cfg,
		kick:   make(chan struct{}, 1),
		clock:  newSystemClock(),
		queues: map[string]*queueStats{},
	}
}

// clock is where a Reporter reads the time: the wall clock, which a
// report's From and To are on, and a monotonic reading, which every length
// it measures is taken on (a report's Span, the time since its last
// report): a step of the wall clock (NTP, a VM's resume) does not move it.
type clock interface {
	now() instant
}

// instant is a moment on a reporter's clock.
type instant struct {
	wall time.Time     // the wall clock's reading (no monotonic one)
	mono time.Duration // the monotonic clock's, since the clock began
}

// sub returns a − b on the monotonic clock.
func (a instant) sub(b instant) time.Duration { return a.mono - b.mono }

// isZero reports whether a is no reading at all (never).
func (a instant) isZero() bool { return a.wall.IsZero() && a.mono == 0 }

// equal reports whether a and b are the same reading.
func (a instant) equal(b instant) bool { return a.mono == b.mono && a.wall.Equal(b.wall) }

// systemClock is the process's clock: time.Now, whose monotonic reading
// time.Time keeps within the process (and loses in JSON).
type systemClock struct{ start time.Time }

func newSystemClock() systemClock { return systemClock{start: time.Now()} }

func (c systemClock) now() instant {
	t := time.Now()
	// Both carry a monotonic reading: the difference is on that clock.
	return instant{wall: t.Round(0), mono: t.Sub(c.start)}
}

// queue returns queue's stats, created if needed; r.mu is held.
func (r *Reporter) queue(name string, now instant) *queueStats {
	q := r.queues[name]
	if q == nil {
		q = &queueStats{from: now, quiet: true, calm: true, idle: true}
		r.queues[name] = q
	}
	return q
}

// QuietAfter is how long a queue without a limit in force must have gone
// without a throttle or a failure for its reports to stop: they tell a
// learning governor nothing it decides on (it writes nothing before the
// first throttle, and its breaker counts failures over 10 s), and each is
// a Temporal action (a signal-with-start). The first throttle or failure
// is reported at once, reaching back over the interval before it; so is
// the first accepted answer after a report of failures alone (the origin
// answers again: the cluster's breaker closes on it), without reaching
// back.
const QuietAfter = 10 * time.Second

// untroubled reports whether q is known to have no limit in force (its
// limit was read) and has recorded neither a throttle nor a failure for
// QuietAfter (this interval included): its report would tell the
// governor nothing.
func (q *queueStats) untroubled(now instant) bool {
	return !q.limitChecked.isZero() && !q.limited && q.throttles == 0 && q.failed == 0 &&
		(q.trouble.isZero() || now.sub(q.trouble) >= QuietAfter)
}

// Record counts one request sent to queue's origin; throttled and failed say
// what its answer was (neither: the API accepted it). It is
// activities.SharedRate's Record; throttled says whether
// its answer meant "too fast".
func (r *Reporter) Record(queue string, throttled, failed bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.clock.now()
	q := r.queue(queue, now)
	if q.idle {
		q.from, q.idle = now, false
	}
	q.requests++
	q.active = now
	if throttled || failed {
		q.trouble = now
	}
	switch {
	case throttled:
		if q.throttles == 0 && q.quiet {
			r.urge(q)
		}
		q.throttles++
	case failed:
		if q.failed == 0 && q.calm {
			r.urge(q)
		}
		q.failed++
	default:
		if q.accepted == 0 && q.down {
			// The origin answers again: the governor's breaker closes
			// on this report, a second sooner than on the next tick.
			r.urge(q)
		}
		q.accepted++
	}
}

// urge has q's counts sent at once; r.mu is held.
func (r *Reporter) urge(q *queueStats) {
	if q.urgent {
		return
	}
	q.urgent = true
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// Limit returns queue's rate limit in force as last read from the server
// (whoever set it), and whether one is. It also makes the reporter watch
// queue from then on.
func (r *Reporter) Limit(queue string) (float64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	q := r.queue(queue, r.clock.now())
	return q.limit, q.limited
}

// PollerWindow is how recently a worker must have polled a queue to
// count among its pollers ([Reporter.Share]): longer than a long poll of
// an idle queue (the server answers an empty poll after a minute), so
// that a worker waiting on an idle queue still counts; a worker that
// stopped counts for this long after its last poll.
const PollerWindow = 70 * time.Second

// Pollers returns the number of workers (distinct identities) that polled
// queue within PollerWindow, as last read from the server with its limit,
// at least 1 (this worker). It also makes the reporter watch queue.
func (r *Reporter) Pollers(queue string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return max(r.queue(queue, r.clock.now()).pollers, 1)
}

// Share returns this worker's share of queue's rate limit in force: the
// limit ÷ [Reporter.Pollers], requests per second, or 0 without a limit.
// A worker pacing its attempts at its share smooths the server's release
// of a second's tokens after an idle moment (every worker together stays
// within the limit). It also makes the reporter watch queue.
func (r *Reporter) Share(queue string) float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	q := r.queue(queue, r.clock.now())
	if !q.limited || q.limit <= 0 {
		return 0
	}
	return q.limit / float64(max(q.pollers, 1))
}

// countPollers returns the number of distinct identities among pollers
// whose last access is within PollerWindow of now.
func countPollers(pollers []*taskqueuepb.PollerInfo, now time.Time) int {
	seen := map[string]bool{}
	for _, p := range pollers {
		if t := p.GetLastAccessTime(); t != nil && now.Sub(t.AsTime()) <= PollerWindow {
			seen[p.GetIdentity()] = true
		}
	}
	return len(seen)
}

// Start starts the reporting loop, which runs until ctx is done or
// [Reporter.Close]. Calling it again does nothing.
func (r *Reporter) Start(ctx context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done != nil {
		return
	}
	ctx, r.cancel = context.WithCancel(ctx)
	r.done = make(chan struct{})
	go r.loop(ctx, r.done)
}

// Close stops the loop and waits for it; counts not yet reported are
// dropped.
func (r *Reporter) Close() {
	r.mu.Lock()
	cancel, done := r.cancel, r.done
	r.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
}

func (r *Reporter) loop(ctx context.Context, done chan struct{}) {
	defer close(done)
	tick := time.NewTicker(r.cfg.ReportInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.kick:
			r.report(ctx, true)
		case <-tick.C:
			r.report(ctx, false)
			r.refreshLimits(ctx)
		}
	}
}

// pending is one observation to send.
type pending struct {
	queue string
	obs   Observation
	// requests, accepted and failed were counted since from (obs may
	// reach further back, over a report already sent).
	requests, accepted, failed int
	from                       instant
}

// report sends the observations due: only the urgent ones (a throttle
// or a failure after an interval without one) when urgentOnly, else each queue's whose last
// report is at least ReportInterval old. A queue without requests sends
// nothing and its interval starts again. An urgent report less than
// ReportInterval after the last one covers that one's interval as well
// (Requests counts both), so the governor, which keeps each worker's
// latest observation only, measures the rate over a whole interval.
func (r *Reporter) report(ctx context.Context, urgentOnly bool) {
	now := r.clock.now()
	// A tick may come a little early against the last send.
	slack := r.cfg.ReportInterval / 10
	var due []pending
	r.mu.Lock()
	for name, q := range r.queues {
		if q.requests == 0 {
			if !urgentOnly {
				q.from, q.idle = now, true
			}
			continue
		}
		if urgentOnly && !q.urgent {
			continue
		}
		if !q.urgent && !q.lastSent.isZero() && now.sub(q.lastSent) < r.cfg.ReportInterval-slack {
			continue
		}
		if q.alone {
			// A worker alone on a queue without a limit is the API's
			// only client: its own admission decides at once what a
			// governor would a second or two later (one worker, 50
			// workflows after a 30 s outage: the last success 1.18 ×
			// the capacity's time on its own in the benchmarks'
			// simulation, 1.13–1.19 × on the dev server; through the
			// governor 1.27 × in the simulation, 1.70 × on the dev
			// server, and 2.13 × with only its failures reported, the
			// governor's restart reaching it about 4 s after the
			// recovery). The
			// price is in actions while the origin fails: its breaker
			// hands the attempts it holds back to Temporal (15 per
			// workflow over those 30 s in the simulation), where the
			// governor's limit holds them in matching's queue (0.8).
			// The governor hears from it once another worker polls the
			// queue (or a limit is in force, whoever set it).
			q.requests, q.throttles, q.accepted, q.failed, q.urgent = 0, 0, 0, 0, false
			q.quiet, q.calm, q.down = true, true, false
			q.prevTo = instant{}
			q.from = now
			continue
		}
		if !q.urgent && q.untroubled(now) {
			// Nothing for the governor to decide: keep the interval for
			// an urgent report that follows at once to reach back over.
			q.prevFrom, q.prevTo, q.prevRequests, q.prevAccepted, q.prevFailed = q.from, now, q.requests, q.accepted, q.failed
			q.requests, q.accepted, q.failed = 0, 0, 0
			q.from = now
			continue
		}
		p := pending{queue: name, requests: q.requests, accepted: q.accepted, failed: q.failed, from: q.from, obs: Observation{
			Worker: r.identity, Requests: q.requests, Throttles: q.throttles, Accepted: q.accepted, Failed: q.failed,
			From: q.from.wall, To: now.wall, Span: now.sub(q.from),
		}}
		if q.urgent && !(q.down && q.accepted > 0) && now.sub(q.from) < r.cfg.ReportInterval && !q.prevTo.isZero() && q.prevTo.equal(q.from) {
			// A throttle right after a report: measure the rate over that
			// report's interval too, not over a few milliseconds. (Not the
			// first answer after a report of failures only: that report
			// would count them again, and the governor would see no
			// answer without a failure.)
			p.obs.From, p.obs.Span = q.prevFrom.wall, now.sub(q.prevFrom)
			p.obs.Requests += q.prevRequests
			p.obs.Accepted += q.prevAccepted
			p.obs.Failed += q.prevFailed
		}
		due = append(due, p)
		q.prevFrom, q.prevTo, q.prevRequests, q.prevAccepted, q.prevFailed = q.from, now, q.requests, q.accepted, q.failed
		q.quiet, q.calm = q.throttles == 0, q.failed == 0
		q.down = p.obs.Failed > 0 && p.obs.Accepted == 0
		q.requests, q.throttles, q.accepted, q.failed, q.urgent = 0, 0, 0, 0, false
		q.from, q.lastSent = now, now
	}
	r.mu.Unlock()
	for _, p := range due {
		if err := r.send(ctx, p); err != nil {
			if ctx.Err() != nil {
				return
			}
			r.cfg.Logger.Warn("governor: reporting to the governor failed; the counts go into the next report",
				"TaskQueue", p.queue, "WorkflowID", WorkflowID(p.queue), "Error", err)
			r.mu.Lock()
			q := r.queues[p.queue]
			q.requests += p.requests
			q.throttles += p.obs.Throttles
			q.accepted += p.accepted
			q.failed += p.failed
			q.from = p.from
			q.prevTo = instant{}
			r.mu.Unlock()
		}
	}
}

// send signals p's governor, starting it if needed: the governor of an
// origin queue (base@origin) on TaskQueue(base), the governors' own
// queue; of any other queue on the reporter's governor task queue.
func (r *Reporter) send(ctx context.Context, p pending) error {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.CallTimeout)
	defer cancel()
	opts := r.cfg.StartOptions
	opts.ID = WorkflowID(p.queue)
	opts.TaskQueue = r.governorTQ
	if tq, ok := governorQueue(p.queue); ok {
		opts.TaskQueue = tq
	}
	if opts.WorkflowIDConflictPolicy == enumspb.WORKFLOW_ID_CONFLICT_POLICY_UNSPECIFIED {
		opts.WorkflowIDConflictPolicy = enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING
	}
	cfg := r.cfg.Governor
	if r.cfg.GovernorFor != nil {
		cfg = r.cfg.GovernorFor(p.queue)
	}
	_, err := r.c.SignalWithStartWorkflow(ctx, opts.ID, SignalName, p.obs, opts, WorkflowName,
		Input{TaskQueue: p.queue, Namespace: r.namespace, Config: cfg})
	return err
}

// refreshLimits reads the queue rate limit of each queue not read for
// LimitInterval (an active queue's: for ReportInterval), and in the same call the workers polling it (the root
// partition's pollers, which every polling worker reaches in turn).
func (r *Reporter) refreshLimits(ctx context.Context) {
	now := r.clock.now()
	var names []string
	r.mu.Lock()
	// A tick may come a little early against the last read.
	slack := r.cfg.ReportInterval / 10
	for name, q := range r.queues {
		every := r.cfg.LimitInterval
		if !q.active.isZero() && now.sub(q.active) < 2*r.cfg.ReportInterval {
			every = r.cfg.ReportInterval
		}
		if q.limitChecked.isZero() || now.sub(q.limitChecked) >= every-slack {
			names = append(names, name)
		}
	}
	r.mu.Unlock()
	for _, name := range names {
		cctx, cancel := context.WithTimeout(ctx, r.cfg.CallTimeout)
		resp, err := r.c.WorkflowService().DescribeTaskQueue(cctx, &workflowservice.DescribeTaskQueueRequest{
			Namespace:     r.namespace,
			TaskQueue:     &taskqueuepb.TaskQueue{Name: name, Kind: enumspb.TASK_QUEUE_KIND_NORMAL},
			TaskQueueType: enumspb.TASK_QUEUE_TYPE_ACTIVITY,
			// The answer carries the pollers too (ReportPollers is the
			// deprecated enhanced mode's).
			ReportConfig: true,
		})
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			r.cfg.Logger.Warn("governor: reading the queue rate limit failed", "TaskQueue", name, "Error", err)
			continue
		}
		l := queueLimit(resp.GetConfig())
		now := r.clock.now()
		r.mu.Lock()
		q := r.queues[name]
		q.limit, q.limited, q.limitChecked = l.InForce, l.Limited, now
		// The pollers' last access is on the server's wall clock.
		n := countPollers(resp.GetPollers(), now.wall)
		q.pollers = max(n, 1)
		q.alone = n == 1 && !l.Limited
		r.mu.Unlock()
	}
}
