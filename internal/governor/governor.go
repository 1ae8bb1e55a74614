// Package governor keeps one learned request rate per activity task queue
// and has the Temporal server enforce it across every worker.
//
// Each worker learning a rate from an API's throttles on its own (package
// admission) lets N workers together send N times what the API accepts.
// Here each origin's HTTP activities run on an activity task queue of their
// own, and that queue's server-side rate limit (UpdateTaskQueueConfig,
// UpdateQueueRateLimit) is set to one learned rate: matching paces the
// activity starts of every worker polling the queue.
//
// UpdateTaskQueueConfig is last-writer-wins, so each queue has exactly one
// writer: a governor workflow ([Workflow]) with the fixed ID
// [WorkflowID](queue). Workers count their requests and throttles per queue
// with a [Reporter], which sends an [Observation] at most once per report
// interval with SignalWithStartWorkflow (starting the governor if needed),
// and none while the queue has no limit in force and has seen neither a
// throttle nor a failure for [QuietAfter]: each is a Temporal action, and
// a governor that is learning decides nothing on them. Nor does a worker
// that the server shows as the queue's only poller while no limit is in
// force: it is the API's only client, and its own limiter decides at once
// what the governor would a second or two later.
// The governor decides with hysteresis, so the limit does not flap:
//
//   - nothing is written before the first throttle;
//   - a throttle cuts the rate to Beta (0.9) × the rate the API accepted
//     from all workers (their answers that were neither throttles nor
//     failures: what it takes while it throttles), never above the rate in
//     force, at most once per CutInterval (5 s; the server needs about 1 s
//     to apply a change), never below Floor (0.5/s); without accepted
//     answers it cuts from the requests sent instead;
//   - after Calm (30 s) without a throttle the rate grows by Raise (20 %),
//     again after each further Calm, at least MinGap (10 s) apart, and
//     never above twice the measured rate (a limit far above the demand
//     learns nothing and would grow without bound while the queue idles);
//   - a raise that changes the rate by less than MinChange (10 %) is not
//     written.
//
// Those are RulesV0, which a governor recorded before version "rules-v1"
// keeps until its next continue-as-new. A new governor decides by
// RulesV1 (a pure [Decider], which the benchmarks' simulation runs too):
//
//   - the first throttle's report cuts at once, from every report within
//     AcceptWindow (summed over the time they cover together), and Gather
//     later the cut is corrected from every worker's reports when it was
//     off by MinChange or more;
//   - a limit that throttled is a ceiling; a rate the queue ran saturated
//     at (the workers sending Saturation × the limit) without a throttle
//     for SaturatedCalm is proven: a saturated queue is raised halfway to
//     the ceiling (by Raise without one) every SaturatedCalm, up to
//     Approach × the ceiling, and a cut above the proven rate goes back to
//     it; the raise after Calm still probes above the ceiling;
//   - the cluster's breaker: when the workers' reports (Observation.Failed)
//     trip admission's breaker rule (Config.Breaker), the limit is set to
//     one attempt per OpenTime (status "open"), so the cluster sends one
//     probe a second however many workers poll; the first report of an
//     answer doubles the limit every RampInterval back to the rate before
//     (without one: while the queue stays saturated); failures during the
//     ramp open it again.
//
// A report's age is the governor's own (when it arrived) and its length
// the worker's monotonic clock's (Observation.Span), checked against the
// governor's clock: a worker whose wall clock is off, or steps (NTP, a
// VM's resume), moves neither (version "report-spans"; a governor
// recorded before it takes To − From until its next continue-as-new).
//
// Governors of an origin queue (base@origin) run on [TaskQueue](base), a
// task queue of their own, so a decision never waits behind the business
// workflows' tasks; one running elsewhere moves there at its next
// continue-as-new.
//
// The governor writes through a local activity ([Activities.SetRate]) that
// reads the queue's config back and reports what is in force. A limit set
// by anyone else (an operator with `temporal task-queue config set`) stops
// the governor's writes for good (status "overridden"); a server that
// refuses the call (PermissionDenied, Unimplemented, InvalidArgument)
// stops them too (status "unsupported"). Query [QueryName] returns the
// governor's [State].
//
// The limit paces activity starts (attempts, retries included), not HTTP
// requests, and every activity on the queue counts: the queue must carry
// only that origin's HTTP activities, with eager execution off.
package governor

import (
	"strings"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/internal/admission"
)

// Names under which the governor is registered and addressed.
const (
	// WorkflowName is the governor workflow's type name.
	WorkflowName = "idemhttp.governor"
	// SetRateName is the SetRate local activity's type name.
	SetRateName = "idemhttp.governor.SetRate"
	// SignalName is the signal channel on which the governor receives
	// observations.
	SignalName = "observation"
	// QueryName is the query that returns the governor's [State].
	QueryName = "state"
	// Identity is the identity the governor writes the queue's config with;
	// a rate limit carrying another identity was set by someone else.
	Identity = "idemhttp-governor"
)

// Status values of [State].
const (
	// StatusLearning: no limit written yet (no throttle reported, or the
	// first write failed).
	StatusLearning = "learning"
	// StatusLimited: the governor's limit is in force.
	StatusLimited = "limited"
	// StatusOverridden: someone else set the queue's rate limit; the
	// governor no longer writes.
	StatusOverridden = "overridden"
	// StatusOpen: the cluster's breaker is open (the workers' reports
	// showed the origin failing): the queue's limit is one probe per
	// Breaker.OpenTime until an answer starts the ramp back.
	StatusOpen = "open"
	// StatusUnsupported: the server refused the call (no permission, an
	// older server, an invalid request); the governor no longer writes.
	StatusUnsupported = "unsupported"
)

// ErrTypeUnsupported is the ApplicationError type [Activities.SetRate]
// fails with when the server refuses UpdateTaskQueueConfig for good
// (PermissionDenied, Unimplemented, InvalidArgument).
const ErrTypeUnsupported = "GovernorUnsupported"

// WorkflowID returns the fixed workflow ID of the governor of taskQueue.
func WorkflowID(taskQueue string) string { return "idemhttp-governor/" + taskQueue }

// TaskQueue returns the task queue the governors of base's origin queues
// (base@origin) run on: base + "@governor", a queue of their own, so that
// a decision never waits behind the business workflows' tasks.
func TaskQueue(base string) string { return base + "@governor" }

// governorQueue returns the task queue the governor of the activity task
// queue governed should run on: TaskQueue of its base (the name before
// its last "@"), and false for a queue that is not an origin queue.
func governorQueue(governed string) (string, bool) {
	i := strings.LastIndex(governed, "@")
	if i <= 0 {
		return "", false
	}
	return TaskQueue(governed[:i]), true
}

// Observation is what one worker saw on one queue since its last report.
type Observation struct {
	// Worker is the worker's identity.
	Worker string `json:"worker"`
	// Requests is the number of requests sent from From to To. From is
	// normally the end of the worker's last report; a report sent at once
	// on a throttle may reach back over the last one (see [Reporter]), as
	// the governor uses each worker's latest observation only.
	Requests int `json:"requests"`
	// Throttles is the number of answers that meant "too fast" (429, say).
	Throttles int `json:"throttles"`
	// Accepted is the number of answers that were neither throttles nor
	// failures (a 5xx, no answer): what the API took.
	Accepted int `json:"accepted,omitempty"`
	// Failed is the number of answers that were failures (a 5xx that is
	// not about the request, or no answer), as admission's breaker counts
	// them: the cluster's breaker opens on them.
	Failed int `json:"failed,omitempty"`
	// From and To bound the interval, on the worker's wall clock, which
	// need not agree with anyone's and may step (NTP, a VM's resume): a
	// governor takes the interval's length from Span, and from To − From
	// only for a worker that sends no Span; it reads From to tell a
	// report that reaches back over the worker's one before (the same
	// From).
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
	// Span is the interval's length on the worker's monotonic clock, which
	// a step of its wall clock does not move; 0 from a worker from before
	// it was sent. A governor checks it against its own clock when the
	// report arrives and keeps what it takes instead (see
	// [Decider.Observe]).
	Span time.Duration `json:"span,omitempty"`
	// Received is when the governor received it, on the governor's
	// (workflow) clock, set by the governor: an observation's age is
	// judged by it (zero, in a state from before it was kept: by To).
	Received time.Time `json:"received,omitzero"`
}

// at is when o counts as taken for its age: when it arrived, or its end
// for an observation received before arrivals were kept.
func (o Observation) at() time.Time {
	if o.Received.IsZero() {
		return o.To
	}
	return o.Received
}

// Rate returns the observation's request rate (requests per second), 0
// for an empty interval.
func (o Observation) Rate() float64 { return o.per(o.Requests) }

// AcceptedRate returns the rate of the answers the API accepted (requests
// per second), 0 for an empty interval.
func (o Observation) AcceptedRate() float64 { return o.per(o.Accepted) }

// minSpan is the least interval a rate is measured over: an API counts
// its limit per second or longer, and a report sent at once on a throttle
// may cover a few milliseconds (on the cluster, the first report of a
// herd counted 6 accepted requests over 20 ms: 300/s).
const minSpan = time.Second

func (o Observation) per(n int) float64 { return perSpan(n, o.To.Sub(o.From)) }

// perSpan returns n per second of span (at least minSpan), 0 for none or
// an empty span.
func perSpan(n int, span time.Duration) float64 {
	if n <= 0 || span <= 0 {
		return 0
	}
	return float64(n) / max(span, minSpan).Seconds()
}

// Defaults of [Config].
const (
	DefaultMeasureWindow  = 10 * time.Second
	DefaultAcceptWindow   = 3 * time.Second
	DefaultGather         = 1500 * time.Millisecond
	DefaultBeta           = 0.9
	DefaultCutInterval    = 5 * time.Second
	DefaultCalm           = 30 * time.Second
	DefaultRaise          = 0.2
	DefaultMinChange      = 0.1
	DefaultMinGap         = 10 * time.Second
	DefaultFloor          = 0.5
	DefaultMaxSignals     = 1000
	DefaultSaturation     = 0.85
	DefaultSaturatedCalm  = 3 * time.Second
	DefaultApproach       = 0.97
	DefaultSaturatedRaise = 0.5
	DefaultRampInterval   = time.Second
)

// Config holds the governor's parameters; zero fields take the defaults.
type Config struct {
	// MeasureWindow: the measured rate sums each worker's latest
	// observation whose end is at most this old (default 10 s).
	MeasureWindow time.Duration `json:"measureWindow,omitempty"`
	// AcceptWindow: the accepted rate a cut comes from is over each
	// worker's reports that ended within this (default 3 s).
	AcceptWindow time.Duration `json:"acceptWindow,omitempty"`
	// Gather is how long after a throttle is reported the cut is decided
	// (default 1.5 s: a report interval and a half), so that every
	// worker's report of that time counts, not the first one's alone (on
	// the cluster, a cut from the first of two workers' reports set 1.8/s
	// for an API taking 6/s). Negative: cut at once. RulesV1 cut at once
	// and correct the cut Gather later (not negative: no correction).
	Gather time.Duration `json:"gather,omitempty"`
	// Beta is the rate after a throttle as a fraction of the accepted rate
	// (default 0.9: in the benchmarks' simulation of 100 workflows against
	// 6 requests/s and two workers, 0.8 made the last success 1.21 × the
	// limit and 0.9 1.10 ×, for the same requests per success).
	Beta float64 `json:"beta,omitempty"`
	// CutInterval is the least time between two cuts (default 5 s): longer
	// than the server needs to apply a change (about 1 s), so the
	// throttles of requests sent before a cut took effect cut only once.
	CutInterval time.Duration `json:"cutInterval,omitempty"`
	// Calm is how long without a throttle before each raise (default 30 s).
	Calm time.Duration `json:"calm,omitempty"`
	// Raise is the fraction a raise adds to the rate (default 0.2).
	Raise float64 `json:"raise,omitempty"`
	// MinChange: a raise changing the rate by less than this fraction is
	// not written (default 0.1). Cuts are always written.
	MinChange float64 `json:"minChange,omitempty"`
	// MinGap is the least time between two raises (default 10 s).
	MinGap time.Duration `json:"minGap,omitempty"`
	// Floor is the lowest rate written, requests per second (default 0.5;
	// never 0, which pauses the queue).
	Floor float64 `json:"floor,omitempty"`
	// MaxSignals is the number of signals after which the governor
	// continues as new (default 1000); it also does when the server
	// suggests it.
	MaxSignals int `json:"maxSignals,omitempty"`

	// The fields below are read by RulesV1 only.

	// Saturation: the queue is saturated while the workers send at least
	// this fraction of the limit in force (default 0.85), by their reports
	// within AcceptWindow (a fast raise) or their latest ones (the ramp
	// after the breaker, against the rate before its last step).
	Saturation float64 `json:"saturation,omitempty"`
	// SaturatedCalm is how long a saturated queue goes without a throttle
	// (and after the last write) before each fast raise (default 3 s: in
	// the simulation of 100 workflows on 3 workers, 1.18 × the limit
	// against 1.19 × with 5 s and 1.16 × with 2 s, for 1.20, 1.20 and
	// 1.21 requests per success).
	SaturatedCalm time.Duration `json:"saturatedCalm,omitempty"`
	// SaturatedRaise is the fraction a fast raise adds to the rate while
	// no limit has throttled yet (no ceiling; default 0.5); with a ceiling
	// a fast raise goes halfway to it. On the cluster (100 workflows, two
	// and three workers, an API taking 6/s) the first cut's estimate from
	// the herd's reports ran at 3.1–3.4/s, and 20 % steps every 3 s took
	// 12 s back to 5.3/s: 1.27 × and 1.35 × the limit's time.
	SaturatedRaise float64 `json:"saturatedRaise,omitempty"`
	// Approach is how close to the ceiling (State.Ceiling) fast raises go,
	// as a fraction of it (default 0.97); above it only the raise after
	// Calm probes for more.
	Approach float64 `json:"approach,omitempty"`
	// RampInterval is the time between two doublings of the rate after the
	// cluster's breaker (default 1 s).
	RampInterval time.Duration `json:"rampInterval,omitempty"`
	// Breaker is the cluster's breaker: its trip rule (FailureRatio,
	// MinFailures, FailureWindow: admission.Breaker.Trips over every
	// worker's reports), OpenTime (the limit while open is one attempt
	// per OpenTime) and RestartRate (the limit it closes to when there was
	// none before it opened); zero fields take admission's defaults (0.5,
	// 5, 10 s, 1 s, 5/s). Off turns it off. Package host starts each
	// origin queue's governor with that origin's breaker settings
	// (ReporterConfig.GovernorFor); a governor keeps the Config it started
	// with across continue-as-new.
	Breaker admission.Breaker `json:"breaker,omitzero"`
}

// WithDefaults returns c with every zero (or invalid) field set to its
// default.
func (c Config) WithDefaults() Config {
	if c.MeasureWindow <= 0 {
		c.MeasureWindow = DefaultMeasureWindow
	}
	if c.AcceptWindow <= 0 {
		c.AcceptWindow = DefaultAcceptWindow
	}
	if c.Gather == 0 {
		c.Gather = DefaultGather
	}
	if c.Beta <= 0 || c.Beta >= 1 {
		c.Beta = DefaultBeta
	}
	if c.CutInterval <= 0 {
		c.CutInterval = DefaultCutInterval
	}
	if c.Calm <= 0 {
		c.Calm = DefaultCalm
	}
	if c.Raise <= 0 {
		c.Raise = DefaultRaise
	}
	if c.MinChange <= 0 {
		c.MinChange = DefaultMinChange
	}
	if c.MinGap <= 0 {
		c.MinGap = DefaultMinGap
	}
	if c.Floor <= 0 {
		c.Floor = DefaultFloor
	}
	if c.MaxSignals <= 0 {
		c.MaxSignals = DefaultMaxSignals
	}
	if c.Saturation <= 0 || c.Saturation > 1 {
		c.Saturation = DefaultSaturation
	}
	if c.SaturatedCalm <= 0 {
		c.SaturatedCalm = DefaultSaturatedCalm
	}
	if c.SaturatedRaise <= 0 {
		c.SaturatedRaise = DefaultSaturatedRaise
	}
	if c.Approach <= 0 || c.Approach > 1 {
		c.Approach = DefaultApproach
	}
	if c.RampInterval <= 0 {
		c.RampInterval = DefaultRampInterval
	}
	// A RestartRate set (a worker's, ReporterConfig.GovernorFor) is kept
	// whatever that worker's InitialRate; unset, it is admission's
	// default.
	c.Breaker = c.Breaker.WithDefaults(max(admission.DefaultInitialRate, c.Breaker.RestartRate))
	return c
}

// Input starts (or continues) a governor.
type Input struct {
	// TaskQueue is the activity task queue governed.
	TaskQueue string `json:"taskQueue"`
	// Namespace is TaskQueue's namespace (default: the governor's own).
	Namespace string `json:"namespace,omitempty"`
	// Config holds the decision parameters.
	Config Config `json:"config"`
	// State is carried over by continue-as-new (zero for a new governor).
	State State `json:"state"`
}

// State is the governor's state, returned by query [QueryName] and
// carried over by continue-as-new.
type State struct {
	// Rate is the rate last written (requests per second); 0: none.
	Rate float64 `json:"rate"`
	// InForce is the queue rate limit the server reported after the last
	// write or check (0: none), whoever set it.
	InForce float64 `json:"inForce"`
	// Status is one of StatusLearning, StatusLimited, StatusOpen,
	// StatusOverridden and StatusUnsupported ("" is read as learning).
	Status string `json:"status"`
	// LastCut and LastWrite are when the rate was last cut and written
	// (workflow time).
	LastCut   time.Time `json:"lastCut"`
	LastWrite time.Time `json:"lastWrite"`
	// Error is the last write's error ("" after a success); it stays set
	// when Status is StatusUnsupported.
	Error string `json:"error,omitempty"`
	// LastThrottle is when a throttle was last reported; LastRaise when the
	// rate was last raised; CalmSince when the current calm period (no
	// throttle, no raise considered) began.
	LastThrottle time.Time `json:"lastThrottle"`
	LastRaise    time.Time `json:"lastRaise"`
	CalmSince    time.Time `json:"calmSince"`
	// Measured is the request rate of all workers at the last decision;
	// Accepted the rate of their answers that the API accepted.
	Measured float64 `json:"measured"`
	Accepted float64 `json:"accepted,omitempty"`
	// CutAt is when a cut gathering reports is due (zero: none).
	CutAt time.Time `json:"cutAt,omitzero"`
	// Recent holds the observations of every worker within AcceptWindow.
	Recent []Observation `json:"recent,omitempty"`
	// Workers holds each worker's latest observation still within the
	// measure window.
	Workers map[string]Observation `json:"workers,omitempty"`

	// The fields below are kept by RulesV1 only.

	// CorrectAt is when the last cut, made at once, is corrected from
	// every worker's reports (zero: none due); CutFrom is the rate in
	// force before that cut (0: none).
	CorrectAt time.Time `json:"correctAt,omitzero"`
	CutFrom   float64   `json:"cutFrom,omitempty"`
	// Ceiling is the lowest limit in force that throttled, 0 for none (a
	// throttle with no limit in force sets none: the herd's estimate
	// bounds nothing); Proven the
	// highest limit the queue ran saturated at without a throttle. A
	// saturated queue is raised fast, by Config.SaturatedRaise without a
	// ceiling and halfway from the rate to it with one, up to
	// Config.Approach × it; a cut goes back to
	// the proven rate when that is higher than Beta × the accepted rate.
	Ceiling float64 `json:"ceiling,omitempty"`
	Proven  float64 `json:"proven,omitempty"`
	// SaturatedTried is when a fast raise was last considered.
	SaturatedTried time.Time `json:"saturatedTried,omitzero"`
	// Breaker is the cluster's breaker.
	Breaker BreakerState `json:"breaker,omitzero"`
}

// BreakerState is the cluster's breaker in [State].
type BreakerState struct {
	// Opened counts the times it opened; OpenedAt is the last.
	Opened   int       `json:"opened,omitempty"`
	OpenedAt time.Time `json:"openedAt,omitzero"`
	// Since is when it last opened or began its ramp: the trip rule counts
	// the reports received since.
	Since time.Time `json:"since,omitzero"`
	// Before is the rate in force before it first opened (0: none), the
	// rate the ramp goes back to.
	Before float64 `json:"before,omitempty"`
	// Ramping: the rate is doubling back after the breaker (Status is
	// limited); RampAt is when the next step is due.
	Ramping bool      `json:"ramping,omitempty"`
	RampAt  time.Time `json:"rampAt,omitzero"`
	// TripAt is when the reports tripped it, until it is written.
	TripAt time.Time `json:"tripAt,omitzero"`
}
