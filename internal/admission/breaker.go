package admission

import (
	"math"
	"time"
)

// Breaker configures an origin's circuit breaker; zero fields take the
// defaults. It is activities.Breaker (an alias, whose doc explains the
// breaker to users): the field docs state each default for users, the
// reasons behind the values are here.
//
// The breaker is closed while the origin answers. It opens when, within
// the last FailureWindow, at least MinFailures requests failed and they
// are at least FailureRatio of the answered requests by TripMargin
// standard errors (Trips): a failure is a 5xx
// that is not about the request, or no answer at all (Observation.Failed);
// throttles and other 4xx are answers, not failures. Open, it admits
// nothing for OpenTime (or the failing answer's Retry-After), then goes
// half open: the next request is admitted as the probe and every other
// waits. The probe's answer closes the breaker (the origin starts again
// from a slow start at RestartRate, one more request per second for each
// answer) or, when it fails, opens it again, for twice the last open time
// up to MaxOpenTime. A probe that has had no answer within
// probeTimeout (its attempt was lost) makes way for another.
//
// The choice, measured in the benchmarks' simulation and on the dev
// server (docs/protecting-an-api.md): the failure ratio over a time
// window is Envoy's and failsafe-go's time-based threshold; MinFailures is
// Envoy's consecutive_5xx default (5); one probe at a time is
// failsafe-go's half-open state with one permit. The open time is short
// (Envoy grows its ejection time with each ejection; here only up to
// MaxOpenTime) because a waiting attempt costs Temporal an activity task
// but the API nothing, and the recovery is found within MaxOpenTime: a
// worker sends an API that is down one probe a second. In the simulation
// of 50 workflows against 6 requests/s after a 30 s outage, the last
// success came 1.27 × the limit after the recovery with probes every 2 s
// and 1.16 × with probes every second. Restarting at half the slow start's
// rate sends fewer requests to an API that has just come back (100
// workflows after a 60 s outage: 176 in all against 182 from 10/s) for
// about the same time (from 3 to 10/s all within 1.11-1.18 ×).
type Breaker struct {
	// Off turns the breaker off: failures only cost backoff.
	Off bool
	// FailureRatio is the share of the answered requests within
	// FailureWindow that must have failed to open the breaker, by two
	// standard errors of the measured share (Trips), above 0 and at most 1
	// (default 0.5).
	FailureRatio float64
	// MinFailures is the least number of failures within FailureWindow
	// that opens the breaker (default 5, as Envoy's consecutive_5xx).
	MinFailures int
	// FailureWindow is the sliding window the failures are counted in
	// (default 10 s).
	FailureWindow time.Duration
	// OpenTime is how long the breaker stays open before a probe (default
	// 1 s); a failing answer's Retry-After replaces it.
	OpenTime time.Duration
	// MaxOpenTime is the longest open time: each failed probe doubles the
	// last up to this (default 1 s, at least OpenTime). It is the longest a
	// recovered API waits for its first probe.
	MaxOpenTime time.Duration
	// RestartRate is the rate, in requests per second, an origin starts
	// again at when its breaker closes (default half of
	// Admission.InitialRate, at most InitialRate).
	RestartRate float64
}

// Circuit is the state of an origin's breaker.
type Circuit int

// The breaker's states.
const (
	// Closed: requests go through the limiter.
	Closed Circuit = iota
	// Open: nothing is admitted until the open time has passed.
	Open
	// HalfOpen: one probe is on the way; nothing else is admitted.
	HalfOpen
)

// String returns "closed", "open" or "half_open".
func (c Circuit) String() string {
	switch c {
	case Open:
		return "open"
	case HalfOpen:
		return "half_open"
	}
	return "closed"
}

const (
	// breakerSlots divide the failure window.
	breakerSlots = 20
	// probeTimeout is how long a probe may go unanswered before another
	// request may be the probe: the probe's attempt may have been lost.
	probeTimeout = 10 * time.Second
	// probeWait is how long a request waits for the probe's answer
	// before it asks again.
	probeWait = 100 * time.Millisecond
)

// WithDefaults returns c with its zero fields set to the defaults;
// initialRate is the limiter's Config.InitialRate (with its default).
func (c Breaker) WithDefaults(initialRate float64) Breaker {
	if c.FailureRatio <= 0 {
		c.FailureRatio = DefaultFailureRatio
	}
	if c.MinFailures <= 0 {
		c.MinFailures = DefaultMinFailures
	}
	if c.FailureWindow <= 0 {
		c.FailureWindow = DefaultFailureWindow
	}
	if c.OpenTime <= 0 {
		c.OpenTime = DefaultOpenTime
	}
	if c.MaxOpenTime <= 0 {
		c.MaxOpenTime = max(DefaultMaxOpenTime, c.OpenTime)
	}
	c.MaxOpenTime = max(c.MaxOpenTime, c.OpenTime)
	if c.RestartRate <= 0 {
		c.RestartRate = initialRate / 2
	}
	c.RestartRate = min(c.RestartRate, initialRate)
	return c
}

// TripMargin is how many standard errors the failure ratio of a
// window's answers must stand above FailureRatio to open the breaker
// (Breaker.Trips). A ratio measured over few answers is noisy: against an
// API with ample capacity that fails 30 % of its requests at random, a
// window that starts empty (a new worker, a breaker just closed) trips on
// the ratio alone (5 failures, at least half the answers) in one of five
// runs, and the breaker then holds back an API that answers. With the
// margin it trips in one of eighty (TestBreakerTripsOnErrorsAtRandom): 5
// of 6 or 8 of 10 still trip; and an API that answers nothing trips at
// MinFailures as before: every answer failed, so the ratio has no error
// to allow for. Its price: an origin that answered 10 requests a second,
// then fails every one, opens the breaker 5.9 s into the failures rather
// than 4.9 s, the answers of before still in the window
// (TestBreakerOpensAfterAnswering).
const TripMargin = 2.0

// Trips reports whether failures among answers, the answers within one
// FailureWindow, open the breaker: at least MinFailures failures, and a
// failure ratio at least FailureRatio by TripMargin standard errors
// (zero fields: their defaults). It is the one rule of the per-process
// breaker and of the cluster's (the governor's, package governor, over
// every worker's reports). An Off breaker never trips.
func (c Breaker) Trips(answers, failures int) bool {
	return c.TripsBy(answers, failures, TripMargin)
}

// TripsBy is Trips with margin standard errors in place of TripMargin:
// failures f among n answers trip when f ≥ MinFailures and
// f/n − margin·√(p(1−p)/n) ≥ FailureRatio, where p = f/n (the Wald
// interval's lower bound). Margin 0 is the rule before TripMargin, which
// governors recorded before it keep (package governor).
func (c Breaker) TripsBy(answers, failures int, margin float64) bool {
	if c.Off || failures <= 0 {
		return false
	}
	c = c.WithDefaults(DefaultInitialRate)
	if failures < c.MinFailures {
		return false
	}
	n, f := float64(max(answers, failures)), float64(failures)
	if margin <= 0 {
		return f >= c.FailureRatio*float64(answers)
	}
	p := f / n
	return f-margin*math.Sqrt(n*p*(1-p)) >= c.FailureRatio*n
}

// breaker is one origin's circuit breaker. Its times are on the origin's
// clock (bucket.at).
type breaker struct {
	state Circuit
	// until is when an open breaker goes half open.
	until time.Time
	// open is the last open time (for the next, doubled).
	open time.Duration
	// since is when the breaker last changed state: an answer to a request
	// sent before it belongs to the state before (a straggler from before
	// the breaker opened, or a request of the closed breaker), and is
	// not counted.
	since time.Time
	// probe is when the probe was sent (half open).
	probe time.Time

	slot    time.Duration // failure window slot width
	slots   [breakerSlots]failureCount
	slotsAt int64 // index of the newest slot
}

type failureCount struct{ answers, failures int }

// gate decides for one request at the origin's time: wait > 0, it must
// wait that long (the breaker is open, or its probe is on the way); else
// it may go on to the limiter, or (probe) go now as the probe.
func (b *bucket) gate() (wait time.Duration, probe bool) {
	br := &b.br
	switch br.state {
	case Open:
		if b.at.Before(br.until) {
			return br.until.Sub(b.at), false
		}
		br.state, br.since = HalfOpen, b.at
		fallthrough
	case HalfOpen:
		if !br.probe.IsZero() && b.at.Sub(br.probe) < probeTimeout {
			return probeWait, false
		}
		br.probe = b.at
		return 0, true
	}
	return 0, false
}

// observeBreaker records the observation o of a request sent at sent (on the
// origin's clock).
func (b *bucket) observeBreaker(sent time.Time, o Observation, cfg Config) {
	br := &b.br
	if sent.Before(br.since) {
		return
	}
	failed := o.Failed && !o.Throttled
	switch br.state {
	case Open:
		// Sent after it opened: only a probe's answer arrives here (after a
		// probe timeout made way for another), or a request that was
		// admitted as the breaker opened; wait for the next probe.
		return
	case HalfOpen:
		if failed {
			b.openBreaker(min(br.open*2, cfg.Breaker.MaxOpenTime), o.RetryAfter)
			return
		}
		// The origin answers: closed, and the slow start again.
		br.state, br.since, br.probe, br.open = Closed, b.at, time.Time{}, 0
		br.slots = [breakerSlots]failureCount{}
		b.rate, b.throttled = cfg.Breaker.RestartRate, false
		return
	}
	b.shiftFailures()
	s := &br.slots[breakerSlots-1]
	s.answers++
	if !failed {
		return
	}
	s.failures++
	var answers, failures int
	for _, s := range br.slots {
		answers, failures = answers+s.answers, failures+s.failures
	}
	if cfg.Breaker.Trips(answers, failures) {
		b.openBreaker(cfg.Breaker.OpenTime, o.RetryAfter)
	}
}

// openBreaker opens the breaker for d, or for retryAfter when the server
// gave one.
func (b *bucket) openBreaker(d, retryAfter time.Duration) {
	br := &b.br
	br.open = d
	if retryAfter > 0 {
		d = retryAfter
	}
	br.state, br.since, br.until, br.probe = Open, b.at, b.at.Add(d), time.Time{}
	br.slots = [breakerSlots]failureCount{}
}

// shiftFailures moves the failure window's slots to the origin's time.
func (b *bucket) shiftFailures() {
	shiftSlots(b.br.slots[:], &b.br.slotsAt, b.at.UnixNano()/int64(b.br.slot))
}
