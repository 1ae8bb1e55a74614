// Package admission decides, per origin, when a worker may send the next
// request: an adaptive rate learned from the API's answers, served in
// ticket order, and a retry budget.
//
// The rate follows the AWS SDKs' adaptive retry mode (a token bucket whose
// fill rate follows CUBIC: cut by Beta on a throttle, grown back along a cubic
// curve through the rate of the last throttle, never above twice the rate
// measured), with a slow start before the first throttle: an origin starts at
// Config.InitialRate and gains one request per second for every answer that is
// not a throttle, so a herd of first requests reaches an unknown API at a
// bounded rate and an API that keeps up is soon not held back at all.
// Throttles are the answers the caller says mean "too fast" (Observe; the
// activity: 429 unless configured).
//
// Requests are served in the order they asked (tickets): a request that
// must wait holds a ticket whose turn comes at the current rate, so a
// change of rate moves every waiting turn. The activity carries the ticket
// between its attempts; a ticket from another worker (or an earlier process)
// is honoured at the time it was due.
//
// The retry budget (gRPC's retry throttling, Finagle's RetryBudget): over a
// sliding window, retries may be at most Config.RetryRatio of the requests
// plus Config.MinRetries; a retry over budget waits for the window to slide.
//
// The circuit breaker (breaker.go) stops every request to an origin that is
// failing, first requests included, except one probe at a time: when the
// probe is answered the origin starts again from the slow start.
//
// Every method takes the time explicitly, so the limiter is deterministic
// under a fake clock; the same code runs in the activity and in the
// benchmarks' simulation. Each origin keeps its own clock, which only goes
// forward (bucket.tick): a step of the caller's clock back neither freezes
// nor mis-indexes its windows.
package admission

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"
)

// Defaults of Config and Breaker: the one place of their values, which
// the fields' docs state for users.
const (
	DefaultInitialRate = 10.0
	DefaultMinRate     = 0.5
	DefaultBurst       = time.Second
	DefaultRetryRatio  = 0.2
	DefaultRetryWindow = 10 * time.Second
	DefaultMinRetries  = 100
	DefaultMaxWait     = time.Second
	DefaultMaxDelay    = 3 * time.Second

	DefaultFailureRatio  = 0.5
	DefaultMinFailures   = 5
	DefaultFailureWindow = 10 * time.Second
	DefaultOpenTime      = time.Second
	DefaultMaxOpenTime   = time.Second

	// DefaultThrottle is the one status of the default Throttles: 429 Too
	// Many Requests.
	DefaultThrottle = 429
)

// CUBIC's constants. The AWS SDKs cut to 0.7 of the rate; 0.8 keeps an API
// that accepts a fixed number of requests per window busier: in the
// benchmarks' simulation of 100 workflows against 6 requests per second, the
// last success came at 1.13 × the limit (100 ÷ 6 s) with 0.8 and 1.23 × with
// 0.7, for the same number of requests.
const (
	beta  = 0.8 // the rate after a throttle, as a fraction of the rate before
	cubeC = 0.4 // the scaling constant of the cubic curve
	// measureInterval is the bucket of the measured answer rate, smoothed
	// with weight smooth for the newest bucket.
	measureInterval = 500 * time.Millisecond
	smooth          = 0.8
	// budgetSlots divide the retry window.
	budgetSlots = 20
	// minBehind is the least of Limiter.behind.
	minBehind = time.Second
)

// Config holds the limiter's parameters; zero fields take the defaults.
// It is activities.Admission (an alias, whose doc explains admission to
// users): the field docs state each default for users, the reasons behind
// the values are here. Off and Throttles are applied by the caller (the
// activity): the Limiter reads neither.
type Config struct {
	// Off turns admission and the retry budget off: every attempt is sent
	// at once, and throttles are retried after the backoff.
	Off bool
	// InitialRate is the rate, in requests per second, of an origin that
	// has not throttled yet (default 10); with activities.SharedRate, the
	// workers polling the origin's queue start at their share of it.
	InitialRate float64
	// MinRate is the lowest rate throttles can bring an origin to (default 0.5).
	MinRate float64
	// RetryRatio is the share of an origin's requests that retries may be,
	// beyond MinRetries, within RetryWindow (default 0.2; negative: no
	// retry budget).
	RetryRatio float64
	// MinRetries is how many retries per RetryWindow are always allowed
	// (default 100: 10 a second, as Finagle's RetryBudget).
	MinRetries int
	// RetryWindow is the retry budget's sliding window (default 10 s).
	RetryWindow time.Duration
	// MaxWait is the longest wait for the rate or the retry budget spent
	// inside an attempt (default 1 s, at most a fifth of the attempt's
	// start-to-close timeout). An open circuit breaker's waits of up to
	// MaxWait each are spent inside the attempt up to a fifth of its time
	// in all (Limiter.InAttempt). A followed operation's start answer's
	// Retry-After (the wait before its first poll) of at most MaxWait is
	// spent inside the start request's attempt too, within the same fifth
	// (Limiter.WaitInside), which saves the workflow a timer (an action).
	MaxWait time.Duration
	// MaxDelay is the longest an attempt that ended to wait stays away
	// before it asks again (default 3 s).
	//
	// In the benchmarks' simulation with two workers (each attempt on
	// either), 5 s made the last success 1.39 × the limit and 3 s 1.27 ×;
	// each hop is an activity task for Temporal.
	MaxDelay time.Duration
	// Breaker is the circuit breaker per origin (default on).
	Breaker Breaker
	// Throttles are the statuses that say "too fast": each cuts the
	// origin's rate, and a throttle without Retry-After is retried as soon
	// as the limiter admits it (default: 429 only). Other retryable
	// failures, 503 included, are failures, not a rate: the retry budget
	// bounds them and the backoff spaces them (as the AWS SDKs' adaptive
	// mode treats 5xx as transient, not as throttles), so an API that
	// fails some requests at random is not slowed to MinRate. Add 503 for
	// an API that sheds load with it.
	Throttles []int

	// burst is how much unused rate an idle origin saves up, as a duration
	// at the current rate (default 1 s, at least one request); the
	// activity leaves it at its default, so it is not a setting.
	burst time.Duration
}

// Validate checks the parameters of a Config that is on; its errors name
// the fields as the activity's user writes them (Config.Admission…).
func (c Config) Validate() error {
	for _, f := range []float64{c.InitialRate, c.MinRate, c.RetryRatio, c.Breaker.FailureRatio, c.Breaker.RestartRate} {
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("Config.Admission: InitialRate, MinRate, RetryRatio, Breaker.FailureRatio and Breaker.RestartRate must be numbers, not NaN or infinite (a NaN rate admits nothing)")
		}
	}
	switch {
	case c.InitialRate < 0, c.MinRate < 0, c.MinRetries < 0, c.RetryWindow < 0, c.MaxWait < 0, c.MaxDelay < 0:
		return fmt.Errorf("Config.Admission: InitialRate, MinRate, MinRetries, RetryWindow, MaxWait and MaxDelay may not be negative (0 takes the default); set Off to turn admission off")
	case c.MinRate > 0 && c.InitialRate > 0 && c.MinRate > c.InitialRate:
		return fmt.Errorf("Config.Admission: MinRate %g is above InitialRate %g", c.MinRate, c.InitialRate)
	}
	b := c.Breaker
	switch {
	case b.FailureRatio < 0, b.FailureRatio > 1:
		return fmt.Errorf("Config.Admission.Breaker: FailureRatio %g is not a share: use a value above 0 and at most 1 (0 takes the default 0.5); set Breaker.Off to turn the breaker off", b.FailureRatio)
	case b.MinFailures < 0, b.FailureWindow < 0, b.OpenTime < 0, b.MaxOpenTime < 0, b.RestartRate < 0:
		return fmt.Errorf("Config.Admission.Breaker: MinFailures, FailureWindow, OpenTime, MaxOpenTime and RestartRate may not be negative (0 takes the default); set Breaker.Off to turn the breaker off")
	}
	for _, s := range c.Throttles {
		if s < 400 || s > 599 {
			return fmt.Errorf("Config.Admission.Throttles: %d is not an HTTP error status: list statuses from 400 to 599, such as 429 or 503", s)
		}
	}
	return nil
}

// InAttempt reports whether an attempt that has waited waited for
// admission spends d's wait inside itself rather than ending to come back
// (Hop); left is the attempt's time before its deadline (0: none). Every
// wait leaves at least four fifths of the attempt's time for the request.
// A wait for the rate or the retry budget is spent inside while the waits
// add up to at most MaxWait: a longer one keeps its place and comes back
// shortly before its turn. A wait for the breaker (ReasonCircuitOpen) has
// no turn to come back to, and an open breaker's short waits repeat (its
// open time, its probe's answer, the next open time): each one up to
// MaxWait is spent inside for as long as the attempt's time allows, since
// each attempt that ends to wait is an activity task for Temporal (an
// action), and an attempt waiting inside is there the moment the breaker
// closes. A longer one (an open time above MaxWait, a Retry-After) ends
// the attempt at once. In the benchmarks' simulation of one worker, 50
// workflows and a 30 s outage, with attempts of 10 s (20 seeded runs):
// 15.1 attempts per workflow ended to wait, against 19.7 within MaxWait in
// all, and the last success 1.17 × the capacity's time after the outage,
// against 1.19 ×.
func (l *Limiter) InAttempt(waited time.Duration, d Decision, left time.Duration) bool {
	if d.Reason == ReasonCircuitOpen {
		return l.WaitInside(waited, d.Wait, left)
	}
	total := waited + d.Wait
	return (left <= 0 || total <= left/5) && total <= l.cfg.MaxWait
}

// WaitInside reports whether a wait that has no turn to come back to is
// spent inside an attempt that has waited waited already, with left
// before its deadline (0: none), as each of an open breaker's waits is
// (InAttempt): when it is at most MaxWait and the attempt's waits add up
// to at most a fifth of left (without a deadline, to MaxWait). The start
// request of a followed operation asks it for its start answer's
// Retry-After, the wait before the first poll: spent inside, before the
// attempt returns, it saves the workflow a timer (an action).
func (l *Limiter) WaitInside(waited, wait, left time.Duration) bool {
	if left <= 0 {
		return waited+wait <= l.cfg.MaxWait
	}
	return waited+wait <= left/5 && wait <= l.cfg.MaxWait
}

// Hop is how long an attempt that must wait for admission stays away
// before it asks again: a wait up to MaxWait is spent inside the attempt
// (Hop 0); a longer one ends the attempt and returns MaxWait/2 before the
// turn, to wait out the rest inside the next attempt (Temporal's timers
// are not precise below about a second), but after at most MaxDelay for a
// wait for the rate (which may grow in the meantime). An open breaker
// changes only at its open time: its wait is not cut to MaxDelay.
func (l *Limiter) Hop(wait time.Duration, why Reason) time.Duration {
	c := l.cfg
	if wait <= c.MaxWait {
		return 0
	}
	if why == ReasonCircuitOpen {
		return wait - c.MaxWait/2
	}
	return min(wait-c.MaxWait/2, c.MaxDelay)
}

// WithDefaults returns c with its zero fields set to the defaults.
func (c Config) WithDefaults() Config {
	if c.InitialRate <= 0 {
		c.InitialRate = DefaultInitialRate
	}
	if c.MinRate <= 0 {
		c.MinRate = DefaultMinRate
	}
	// A throttle must not raise the rate of an origin that starts below
	// the floor.
	c.MinRate = min(c.MinRate, c.InitialRate)
	if c.burst <= 0 {
		c.burst = DefaultBurst
	}
	if c.RetryRatio == 0 {
		c.RetryRatio = DefaultRetryRatio
	}
	if c.RetryWindow <= 0 {
		c.RetryWindow = DefaultRetryWindow
	}
	if c.MinRetries <= 0 {
		c.MinRetries = DefaultMinRetries
	}
	if c.MaxWait <= 0 {
		c.MaxWait = DefaultMaxWait
	}
	if c.MaxDelay <= 0 {
		c.MaxDelay = DefaultMaxDelay
	}
	c.Breaker = c.Breaker.WithDefaults(c.InitialRate)
	if len(c.Throttles) == 0 {
		c.Throttles = []int{DefaultThrottle}
	}
	return c
}

// Limiter holds the state of every origin. It is safe for concurrent use.
type Limiter struct {
	cfg Config
	id  uint64

	mu      sync.Mutex
	origins map[string]*bucket
}

// New returns a limiter with cfg (zero fields take the defaults).
func New(cfg Config) *Limiter {
	return &Limiter{cfg: cfg.WithDefaults(), id: rand.Uint64() | 1, origins: map[string]*bucket{}}
}

// Ticket is a place in an origin's queue. The zero Ticket is none.
type Ticket struct {
	// Limiter identifies the limiter that issued it (0: none).
	Limiter uint64 `json:"limiter,omitempty"`
	// Seq is the place: the ticket's turn comes when the origin has served
	// Seq requests.
	Seq int64 `json:"seq,omitempty"`
	// Due is when its turn was expected when last looked at; another
	// limiter admits the ticket from then on.
	Due time.Time `json:"due,omitzero"`
}

// Reason says why a request waits.
type Reason string

const (
	// ReasonRate: the origin's rate; its turn has not come.
	ReasonRate Reason = "rate"
	// ReasonRetryBudget: the origin's retries have used up the budget.
	ReasonRetryBudget Reason = "retry budget"
	// ReasonCircuitOpen: the origin's circuit breaker is open, or half open
	// with its probe on the way.
	ReasonCircuitOpen Reason = "circuit open"
)

// Decision is the answer of Admit.
type Decision struct {
	// Admitted: send now.
	Admitted bool
	// Wait is how long until the request's expected turn (when not admitted).
	Wait time.Duration
	// Ticket is the request's place, to carry to the next Admit (when not admitted).
	Ticket Ticket
	// Reason says why it waits.
	Reason Reason
	// Rate is the origin's rate (requests per second) at the decision.
	Rate float64
	// Throttled: the origin has throttled at least once (the rate is learned,
	// not the slow start's).
	Throttled bool
	// Circuit is the origin's breaker state after the decision.
	Circuit Circuit
	// Probe: the admitted request is the half-open breaker's probe.
	Probe bool
}

// State is an origin's state, for metrics and logs.
type State struct {
	Rate      float64
	Throttled bool
	// Waiting is how many tickets have not had their turn.
	Waiting int64
	// Circuit is the breaker's state.
	Circuit Circuit
}

// bucket is one origin's state.
type bucket struct {
	rate float64 // requests per second
	// tokens are the requests that may be sent now: they fill at rate up
	// to burst and each send takes one.
	tokens float64
	// served is how many tickets have had their turn (fractional): it
	// advances at rate too, whether the holders came back in time or not,
	// so it orders the waiting requests; tokens bound what is sent.
	served float64
	issued int64 // tickets issued

	// at is the origin's own time, as of the last call. Every time kept
	// here (at, lastThrottle, measureAt, the budget's slots) is on this
	// clock, which only goes forward; only tick reads the caller's.
	at time.Time
	// wall is the caller's time that at stands for: the latest the caller
	// handed in since its clock last stepped back.
	wall time.Time

	throttled    bool
	lastMax      float64
	lastThrottle time.Time

	measured  float64 // smoothed answer rate
	measureAt time.Time
	measureN  int

	// paceNext is the next free turn of Pace, on the origin's clock.
	paceNext time.Time

	slot    time.Duration // budget slot width
	slots   [budgetSlots]slotCount
	slotsAt int64 // index of the newest slot (time / slot)

	br breaker
}

type slotCount struct{ requests, retries int }

// behind is how far behind the latest time a caller's time may be and
// still count as that time (callers that read the clock before another got
// the lock; the activity's now plus a wait on a clock that stood still, at
// most MaxWait): nothing passes for those, and their waits count from the
// latest time. A time further behind is a step of the clock back.
func (l *Limiter) behind() time.Duration {
	return max(l.cfg.MaxWait, minBehind)
}

// bucket returns origin's bucket advanced to the caller's time now.
func (l *Limiter) bucket(origin string, now time.Time) *bucket {
	b := l.origins[origin]
	if b == nil {
		b = l.start(origin, now, l.cfg.InitialRate)
	}
	b.advance(b.tick(now, l.behind()), l.cfg)
	return b
}

// start returns a new bucket for origin, at rate with a full burst, as of
// the caller's time now; l.mu is held.
func (l *Limiter) start(origin string, now time.Time, rate float64) *bucket {
	burst := max(rate*l.cfg.burst.Seconds(), 1)
	// The origin's clock keeps no monotonic reading: it indexes the
	// budget's slots and the measuring intervals by its wall time.
	b := &bucket{rate: rate, at: now.Round(0), wall: now, served: burst, tokens: burst, slot: max(l.cfg.RetryWindow/budgetSlots, 1)}
	b.br.slot = max(l.cfg.Breaker.FailureWindow/breakerSlots, 1)
	l.origins[origin] = b
	return b
}

// StartShared says that workers workers, each with a limiter of its own,
// send origin's requests (the workers polling the task queue the requests
// come from): an origin this limiter has no state for yet starts at its
// share, InitialRate ÷ workers (at least MinRate), with a burst of as
// much, so that the workers together start as one worker would; each
// then grows by the answers it gets, as one worker would. Without it, N
// workers reaching an origin at once send it N × InitialRate in their
// first second. An origin with state keeps what it learned, and fewer
// than two workers change nothing. now is the caller's time, as Admit's.
func (l *Limiter) StartShared(origin string, now time.Time, workers int) {
	if workers < 2 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.origins[origin] == nil {
		l.start(origin, now, max(l.cfg.InitialRate/float64(workers), l.cfg.MinRate))
	}
}

// tick moves the origin's clock to the caller's time now and returns how
// much of the origin's time passed. It is the one place where the caller's
// time becomes the origin's:
//   - a time after wall passes as much time, measured by the monotonic
//     clock when both times carry a reading (time.Now's), so a step of the
//     wall clock is not seen at all; a step forward of a clock without one
//     passes that time, once (the windows expire);
//   - a time before wall by at most behind counts as wall: no time
//     passes, and its waits count from wall (callerWait);
//   - a time further before wall is a step of the clock back: no time
//     passes at the step, and the origin's time goes on from now, so no
//     window stands still until the caller's clock has caught up again.
func (b *bucket) tick(now time.Time, behind time.Duration) time.Duration {
	switch d := now.Sub(b.wall); {
	case d > 0:
		b.at, b.wall = b.at.Add(d), now
		return d
	case d < -behind:
		b.wall = now
	}
	return 0
}

// callerWait returns a wait w on the origin's clock as a wait from the
// caller's time now: longer by how far now is behind wall.
func (b *bucket) callerWait(now time.Time, w time.Duration) time.Duration {
	return w + max(b.wall.Sub(now), 0)
}

// own returns the caller's time t, not after the latest, on the origin's
// clock (at most at): a time after the latest, from before a step of the
// clock back, counts as the latest.
func (b *bucket) own(t time.Time) time.Time {
	return b.at.Add(-max(b.wall.Sub(t), 0))
}

// advance serves the queue at the current rate for dt of the origin's
// time; an idle origin saves up at most burst.
func (b *bucket) advance(dt time.Duration, cfg Config) {
	if dt > 0 {
		b.served += b.rate * dt.Seconds()
		b.tokens += b.rate * dt.Seconds()
	}
	burst := max(b.rate*cfg.burst.Seconds(), 1)
	b.served = min(b.served, float64(b.issued)+burst)
	b.tokens = min(b.tokens, burst)
}

// take admits one request when a token is there, else returns the wait
// until one is. A token short by a rounding error is there: a request that
// comes back after the wait returned is admitted.
func (b *bucket) take() (time.Duration, bool) {
	if b.tokens >= 1-1e-9 {
		b.tokens--
		return 0, true
	}
	return time.Duration(math.Ceil((1 - b.tokens) / b.rate * float64(time.Second))), false
}

// Admit decides whether a request to origin may be sent at now. t is the
// ticket the request got from an earlier Admit (zero for none); retry says
// whether it is a retry (an earlier request of the same operation was sent).
// An admitted request counts as sent at now.
func (l *Limiter) Admit(origin string, now time.Time, t Ticket, retry bool) Decision {
	return l.admit(origin, now, t, retry, true, 0)
}

// Gate decides like Admit for a request whose rate is kept elsewhere (the
// Temporal server's rate limit of the task queue it came from): only the
// breaker and the retry budget apply, and the request takes no turn and
// no token. An admitted request counts as sent at now.
func (l *Limiter) Gate(origin string, now time.Time, retry bool) Decision {
	return l.admit(origin, now, Ticket{}, retry, false, 0)
}

// Pace decides like Gate, and also paces the requests at share requests
// per second with a burst of one: the worker's share of a rate kept
// elsewhere (the task queue's limit ÷ the workers polling it), so that
// the Temporal server's release of a second's tokens after an idle moment
// reaches the origin spread over that second, not at once. A request
// that waits gets a turn of its own (Decision.Ticket, due at
// Decision.Wait): it is admitted when it comes back with that ticket at
// its turn. A share of 0 or less paces nothing (Gate). A share below one
// request per MaxWait paces at one per MaxWait: a turn further away would
// send the attempt back through the server's queue (Hop), spending one of
// the limit's starts, and the server's burst after an idle moment is then
// under one task per worker anyway. The learned rate's turns and tokens
// are neither taken nor spent.
func (l *Limiter) Pace(origin string, now time.Time, share float64, t Ticket, retry bool) Decision {
	if share > 0 {
		share = max(share, 1/l.cfg.MaxWait.Seconds())
	}
	return l.admit(origin, now, t, retry, false, share)
}

// admit is Admit, Gate when rate is false, and Pace when pace is above 0.
func (l *Limiter) admit(origin string, now time.Time, t Ticket, retry, rate bool, pace float64) Decision {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.bucket(origin, now)
	d := Decision{Rate: b.rate, Throttled: b.throttled}
	if !l.cfg.Breaker.Off {
		w, probe := b.gate()
		d.Circuit = b.br.state
		switch {
		case w > 0:
			d.Ticket, d.Reason, d.Wait = t, ReasonCircuitOpen, b.callerWait(now, w)
			return d
		case probe:
			// The probe goes now, whatever its turn: it is the only
			// request to the origin. It spends a token if there is one.
			b.tokens = max(b.tokens-1, min(b.tokens, 0))
			b.record(retry)
			d.Admitted, d.Probe = true, true
			return d
		}
	}
	switch {
	case pace > 0 && t.Seq == 0 && t.Limiter == l.id && !t.Due.IsZero():
		// A turn of the pace, taken (and counted) when the ticket was
		// issued: its turn has come, or it waits for it.
		if w := t.Due.Sub(now); w > 0 {
			d.Ticket, d.Reason, d.Wait = t, ReasonRate, w
			return d
		}
		d.Admitted = true
		return d
	case !rate:
	case t.Seq > 0 && t.Limiter == l.id:
		return b.admitTicket(d, now, t)
	case t.Seq > 0:
		// Issued elsewhere: admitted when a token is there (as this
		// limiter's own tickets are), else its turn is when it was due;
		// charged here by moving every waiting turn back by one.
		w, ok := b.take()
		if !ok {
			d.Ticket, d.Reason, d.Wait = t, ReasonRate, max(b.callerWait(now, w), t.Due.Sub(now))
			return d
		}
		b.served--
		d.Admitted = true
		return d
	}
	if retry && l.cfg.RetryRatio > 0 {
		if w := b.budgetWait(l.cfg); w > 0 {
			d.Reason, d.Wait = ReasonRetryBudget, b.callerWait(now, w)
			return d
		}
	}
	if pace > 0 {
		return b.paceTurn(d, now, pace, l.cfg.MaxWait, l.id, retry)
	}
	b.record(retry)
	if !rate {
		d.Admitted = true
		return d
	}
	b.issued++
	return b.admitTicket(d, now, Ticket{Limiter: l.id, Seq: b.issued})
}

// paceTurn gives the request the next free turn of a pace of rate
// requests per second: now after an idle moment (a burst of one), else
// 1/rate after the last turn given; a later turn comes with a ticket of
// limiter id due then, from the caller's time now. A turn further away
// than maxWait is not given: the request is told the wait and goes back
// to the server's queue (Hop), where any worker may take it, and a turn
// it would not come back for must not push this worker's later ones out
// (nor count against the retry budget).
func (b *bucket) paceTurn(d Decision, now time.Time, rate float64, maxWait time.Duration, id uint64, retry bool) Decision {
	turn := b.at
	if b.paceNext.After(turn) {
		turn = b.paceNext
	}
	w := turn.Sub(b.at)
	d.Reason, d.Wait = ReasonRate, b.callerWait(now, w)
	if w > maxWait {
		return d
	}
	// A turn given is counted once, when it is given (for the retry
	// budget); the request that comes back with its ticket is not.
	b.record(retry)
	b.paceNext = turn.Add(time.Duration(math.Ceil(float64(time.Second) / rate)))
	if w <= 0 {
		return Decision{Admitted: true, Rate: d.Rate, Throttled: d.Throttled, Circuit: d.Circuit}
	}
	d.Ticket = Ticket{Limiter: id, Due: now.Add(d.Wait)}
	return d
}

// admitTicket admits the request holding this limiter's ticket t when a
// token is there, whether its turn has come or not (a token is only there
// when no request whose turn has come is present to take it: the holders
// of earlier tickets are away, possibly at another worker); else its wait
// is until its turn, or until the next token if that is later, from the
// caller's time now.
func (b *bucket) admitTicket(d Decision, now time.Time, t Ticket) Decision {
	w, ok := b.take()
	if ok {
		return Decision{Admitted: true, Rate: d.Rate, Throttled: d.Throttled, Circuit: d.Circuit}
	}
	if b.served < float64(t.Seq) {
		w = max(w, time.Duration(math.Ceil((float64(t.Seq)-b.served)/b.rate*float64(time.Second))))
	}
	d.Ticket, d.Reason, d.Wait = t, ReasonRate, b.callerWait(now, w)
	d.Ticket.Due = now.Add(d.Wait)
	return d
}

// Observation is what the answer to one request says about its origin's
// health: the limiter and the breaker learn from it (Limiter.Observe).
type Observation struct {
	// Throttled: the answer means "too fast" (a 429): it cuts the rate.
	Throttled bool
	// Failed: the origin is failing (a 5xx that is not about the request,
	// or no answer at all: a transport error, a timeout, a body that broke
	// off): it counts toward opening the breaker, and a failed probe keeps
	// it open.
	Failed bool
	// RetryAfter is the server's Retry-After with a failure (0: none): the
	// breaker, when this failure opens it or keeps it open, stays open that
	// long instead of its own open time.
	RetryAfter time.Duration
}

// Observe records the observation o of a request to origin sent at sent and
// answered (or given up on) at now. A throttle of a request sent before
// the last cut does not cut again: it belongs to the same overload, which
// the cut already answered (as TCP cuts once per round trip). A request
// sent before a step of the clock back counts as sent at now. Every answer
// that is neither a throttle nor a failure grows the slow start by one
// request per second; a failure leaves the rate as it is (the breaker
// answers failures).
func (l *Limiter) Observe(origin string, sent, now time.Time, o Observation) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.bucket(origin, now)
	if !l.cfg.Breaker.Off {
		b.observeBreaker(b.own(sent), o, l.cfg)
	}
	if o.Failed && !o.Throttled {
		return
	}
	throttled := o.Throttled
	b.measure()
	switch {
	case throttled && b.throttled && b.own(sent).Before(b.lastThrottle):
	case throttled:
		use := b.rate
		if b.throttled && b.measured > 0 {
			use = min(b.measured, b.rate)
		}
		b.lastMax, b.lastThrottle, b.throttled = use, b.at, true
		b.rate = max(use*beta, l.cfg.MinRate)
		// What was saved up is spent: the API is full now.
		b.tokens = min(b.tokens, 0)
	case !b.throttled:
		b.rate++
	default:
		t := b.at.Sub(b.lastThrottle).Seconds()
		k := math.Cbrt(b.lastMax * (1 - beta) / cubeC)
		rate := cubeC*math.Pow(t-k, 3) + b.lastMax
		// Never above twice the measured answer rate, once there is a
		// measurement. botocore (retries/adaptive.py, ClientRateLimiter.
		// on_receiving_response) and aws-sdk-go-v2 (aws/retry/
		// adaptive_ratelimit.go, Update) apply min(rate, 2·measured)
		// always, measured or not; but they also cut from the measured
		// rate (their bucket is off until the first throttle, so there is
		// no other rate), so cap and cut come from one figure, and a
		// throttle before any measurement takes them to their minimum
		// rate too. Here the first cut is from the rate that was being
		// sent (the slow start's) and later cuts use the measured rate
		// only once there is one; the cap follows the cut: 2 × 0 would
		// drop the rate to MinRate on the first success after the first
		// throttle. Before a measurement every answer since the first is
		// in one measuring interval, so t is under measureInterval and
		// the curve is still about lastMax·beta to lastMax.
		if b.measured > 0 {
			rate = min(rate, 2*b.measured)
		}
		b.rate = max(rate, l.cfg.MinRate)
	}
}

// measure updates the smoothed answer rate, in buckets of measureInterval
// of the origin's time.
func (b *bucket) measure() {
	b.measureN++
	if b.measureAt.IsZero() {
		b.measureAt = b.at.Truncate(measureInterval)
		return
	}
	t := b.at.Truncate(measureInterval)
	if dt := t.Sub(b.measureAt); dt > 0 {
		cur := float64(b.measureN) / dt.Seconds()
		b.measured = cur*smooth + b.measured*(1-smooth)
		b.measureN, b.measureAt = 0, t
	}
}

// State returns origin's state at now.
func (l *Limiter) State(origin string, now time.Time) State {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.bucket(origin, now)
	return State{Rate: b.rate, Throttled: b.throttled, Waiting: max(0, b.issued-int64(math.Floor(b.served))), Circuit: b.br.state}
}

// shift moves the budget's slots to the origin's time.
func (b *bucket) shift() {
	shiftSlots(b.slots[:], &b.slotsAt, b.at.UnixNano()/int64(b.slot))
}

// shiftSlots moves a sliding window of slots, the newest last, whose
// newest slot has the index *newest, on to the index idx: the slots that
// leave the window are dropped and the new ones are empty.
func shiftSlots[T any](slots []T, newest *int64, idx int64) {
	n := idx - *newest
	if n <= 0 {
		return
	}
	if n >= int64(len(slots)) {
		clear(slots)
	} else {
		copy(slots, slots[n:])
		clear(slots[int64(len(slots))-n:])
	}
	*newest = idx
}

func (b *bucket) record(retry bool) {
	b.shift()
	s := &b.slots[budgetSlots-1]
	s.requests++
	if retry {
		s.retries++
	}
}

// budgetWait returns 0 when one more retry fits in the budget, else the
// time until the oldest retry in the window leaves it (on the origin's
// clock).
func (b *bucket) budgetWait(cfg Config) time.Duration {
	b.shift()
	var reqs, retries int
	for _, s := range b.slots {
		reqs, retries = reqs+s.requests, retries+s.retries
	}
	// The retry itself is a request too.
	if float64(retries+1) <= cfg.RetryRatio*float64(reqs+1)+float64(cfg.MinRetries) {
		return 0
	}
	for i, s := range b.slots {
		if s.retries > 0 {
			// Slot i covers the slot index slotsAt-(budgetSlots-1)+i and
			// leaves the window when the newest index is slotsAt+i+1.
			end := time.Unix(0, (b.slotsAt+int64(i)+1)*int64(b.slot))
			return max(end.Sub(b.at), time.Millisecond)
		}
	}
	return b.slot
}
