// Package backoff holds the retry backoff of a call, declared once for the
// workflow side (workflows.RetryOptions and workflows.Jitter are aliases
// of Backoff and Jitter) and the activity, which computes each wait: the
// defaults of its zero fields, the jitter strategies, the decorrelated
// chain's seed, and the attempt ceiling handed to Temporal when the
// activity counts the attempts itself; and the server's own word on the
// wait, a Retry-After header (RetryAfter). Backoff's JSON is what
// histories hold.
package backoff

import (
	"hash/fnv"
	"math"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/internal/wire"
)

// Jitter selects how the activity spreads the retries of a failure that
// carries no Retry-After: it is workflows.Jitter, and its values are the
// Jitter constants.
type Jitter string

// The jitter strategies (workflows.Jitter's values), after Marc Brooker,
// "Exponential Backoff And Jitter" (AWS Architecture Blog, 2015). With
// base = InitialInterval, cap = MaximumInterval and ceiling(n) = min(cap,
// base × BackoffCoefficient^(n−1)):
const (
	// JitterFull (the default, also for ""): uniform in [0, ceiling(attempt)].
	JitterFull = "full"
	// JitterEqual: ceiling/2 + uniform in [0, ceiling/2].
	JitterEqual = "equal"
	// JitterDecorrelated: d(n) = min(cap, uniform in [base, 3 × d(n−1)]),
	// d(0) = base. The chain is re-derived each attempt from a seed of the
	// idempotency key and the activity's scheduled time, so it needs no
	// state between attempts.
	JitterDecorrelated = "decorrelated"
	// JitterNone sets no NextRetryDelay and leaves the interval to
	// Temporal's retry policy: deterministic exponential backoff without
	// jitter, every client retrying in lockstep. It exists as the
	// benchmarks' baseline.
	JitterNone = "none"
)

// MinRetryDelay is the smallest NextRetryDelay the activity hands Temporal.
// Temporal reads a NextRetryDelay of 0 as "not set", so an immediate retry
// (full jitter drawing 0, or a Retry-After of 0 or a past date) uses this
// floor.
const MinRetryDelay = time.Millisecond

// Ceiling is min(MaximumInterval, InitialInterval ×
// BackoffCoefficient^(attempt−1)), with b's unset fields at their defaults:
// the interval Temporal itself would wait after the given attempt (from 1),
// and the upper bound of the full-jitter draw.
func (b Backoff) Ceiling(attempt int32) time.Duration {
	b = b.WithDefaults()
	if attempt < 1 {
		attempt = 1
	}
	c := float64(b.InitialInterval) * math.Pow(b.BackoffCoefficient, float64(attempt-1))
	if c >= float64(b.MaximumInterval) || math.IsInf(c, 0) || math.IsNaN(c) {
		return b.MaximumInterval
	}
	return time.Duration(c)
}

// Delay returns the wait after a failed attempt (from 1) for the strategy
// in b.Jitter, at least MinRetryDelay. uniform returns a value in [0, 1);
// nil uses math/rand/v2. seed is used by JitterDecorrelated only (see
// DecorrelatedSeed). JitterNone returns Ceiling(attempt), the interval
// Temporal will apply itself.
func (b Backoff) Delay(attempt int32, uniform func() float64, seed uint64) time.Duration {
	b = b.WithDefaults()
	if uniform == nil {
		uniform = rand.Float64
	}
	ceil := b.Ceiling(attempt)
	var d time.Duration
	switch b.Jitter {
	case JitterNone:
		d = ceil
	case JitterEqual:
		d = ceil/2 + time.Duration(uniform()*float64(ceil-ceil/2))
	case JitterDecorrelated:
		r := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
		d = b.InitialInterval
		for range max(attempt, 1) {
			hi := 3 * float64(d)
			lo := float64(b.InitialInterval)
			d = time.Duration(lo + r.Float64()*(hi-lo))
			if d > b.MaximumInterval {
				d = b.MaximumInterval
			}
		}
	default: // JitterFull
		d = time.Duration(uniform() * float64(ceil))
	}
	return max(d, MinRetryDelay)
}

// DecorrelatedSeed ties the decorrelated chain to one activity execution:
// its idempotency key and scheduled time.
func DecorrelatedSeed(key string, scheduled time.Time) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	_, _ = h.Write([]byte(scheduled.UTC().Format(time.RFC3339Nano)))
	return h.Sum64()
}

// Backoff is a call's retry policy: it is workflows.RetryOptions (declared
// here, where the activity input holds its backoff), and the activity
// input's Backoff, the fields a retry delay is computed from, with
// MaximumAttempts 0 there (Input.MaximumAttempts holds it). Its JSON is
// what histories hold: never rename a field.
//
// As workflows.RetryOptions it becomes the activity's Temporal
// RetryPolicy: a zero field takes the value of the RetryPolicy already on
// the workflow context (workflow.WithActivityOptions), else its default
// (DefaultInitialInterval, DefaultBackoffCoefficient,
// DefaultMaximumInterval, 5 attempts, JitterFull).
type Backoff struct {
	// InitialInterval, BackoffCoefficient and MaximumInterval shape the
	// backoff, as Temporal's RetryPolicy does: the wait after failure n is
	// at most min(MaximumInterval, InitialInterval ×
	// BackoffCoefficient^(n−1)). A MaximumInterval below InitialInterval
	// is raised to it (Temporal refuses such a policy).
	InitialInterval    time.Duration `json:"initial_interval,omitempty"`
	BackoffCoefficient float64       `json:"backoff_coefficient,omitempty"`
	MaximumInterval    time.Duration `json:"maximum_interval,omitempty"`
	// MaximumAttempts counts the attempts that fail; waiting for a
	// request the server is still processing, or for admission, does not
	// count (the activity keeps the count; Temporal's own MaximumAttempts
	// is a ceiling every wait before the schedule-to-close deadline fits
	// under).
	MaximumAttempts int32 `json:"maximum_attempts,omitempty"`
	// Jitter spreads the waits within that bound.
	Jitter Jitter `json:"jitter,omitempty"`
	// MaxRetryAfter, when more than 0, is the longest Retry-After this
	// call honours, in place of its origin's
	// (activities.Convention.MaxRetryAfter) and the worker's
	// (activities.Config.MaxRetryAfter, default 5 minutes): an operation of
	// days whose API asks for an hour between polls. A longer Retry-After
	// waits this long. The wait is Temporal's retry timer, durable and
	// free for the worker.
	MaxRetryAfter time.Duration `json:"max_retry_after,omitempty"`
}

// MarshalJSON encodes b as package wire does: durations as strings such as
// "10s".
func (b Backoff) MarshalJSON() ([]byte, error) {
	type plain Backoff
	return wire.Marshal(plain(b))
}

// UnmarshalJSON decodes what MarshalJSON encodes, and durations as
// nanoseconds (histories written before, or input typed by hand).
func (b *Backoff) UnmarshalJSON(data []byte) error {
	type plain Backoff
	return wire.Unmarshal(data, (*plain)(b))
}

// WithDefaults returns b with its unset fields at the defaults, the one
// place both sides take them from: an InitialInterval or MaximumInterval
// of 0 or less becomes DefaultInitialInterval or DefaultMaximumInterval, a
// BackoffCoefficient below 1 becomes DefaultBackoffCoefficient, and an empty
// Jitter becomes JitterFull. A MaximumInterval below InitialInterval is
// raised to it: Temporal refuses such a retry policy (the workflow task
// that schedules the activity would fail, and the workflow would not move).
func (b Backoff) WithDefaults() Backoff {
	if b.InitialInterval <= 0 {
		b.InitialInterval = DefaultInitialInterval
	}
	if b.BackoffCoefficient < 1 {
		b.BackoffCoefficient = DefaultBackoffCoefficient
	}
	if b.MaximumInterval <= 0 {
		b.MaximumInterval = DefaultMaximumInterval
	}
	if b.Jitter == "" {
		b.Jitter = JitterFull
	}
	b.MaximumInterval = max(b.MaximumInterval, b.InitialInterval)
	b.MaxRetryAfter = max(b.MaxRetryAfter, 0)
	return b
}

// The backoff defaults, for workflows.RetryOptions (whose field docs state them)
// and for a Backoff with zero fields: Backoff.WithDefaults applies them
// for both sides.
const (
	DefaultInitialInterval    = 200 * time.Millisecond
	DefaultBackoffCoefficient = 2.0
	DefaultMaximumInterval    = 10 * time.Second
)

// MinInFlightWait is the shortest wait before asking again about a key the
// server is still processing, or for admission.
const MinInFlightWait = 100 * time.Millisecond

// AttemptCeiling is the MaximumAttempts handed to Temporal when the activity
// counts the attempt budget itself: the budget plus every wait for a key in
// flight or for admission that fits before the schedule-to-close deadline
// (at least MinInFlightWait each). The activity ends the operation before Temporal's
// own count could; the ceiling is a guard (and Temporal's test environment
// would stop an unlimited MaximumAttempts at 10).
func AttemptCeiling(budget int32, scheduleToClose time.Duration) int32 {
	n := int64(budget) + int64(scheduleToClose/MinInFlightWait) + 1
	return int32(min(n, math.MaxInt32))
}

// RetryAfter reads a Retry-After header value (RFC 9110 §10.2.3) and
// returns how long to wait from now.
//
// Both forms are accepted: delay-seconds (one or more ASCII digits) and an
// HTTP-date in any of the three formats RFC 9110 §5.6.7 requires recipients to
// accept (IMF-fixdate, RFC 850, asctime). A date in the past means "retry now"
// and returns 0. A value that is neither, including a negative or fractional
// number, returns ok == false so the caller falls back to its own backoff.
// Digit strings too large for a time.Duration saturate at math.MaxInt64; the
// caller applies its own cap.
func RetryAfter(value string, now time.Time) (d time.Duration, ok bool) {
	v := strings.TrimSpace(value)
	if v == "" {
		return 0, false
	}
	if isDigits(v) {
		const maxSeconds = math.MaxInt64 / int64(time.Second)
		var secs int64
		for i := 0; i < len(v); i++ {
			secs = secs*10 + int64(v[i]-'0')
			if secs > maxSeconds {
				return time.Duration(math.MaxInt64), true
			}
		}
		return time.Duration(secs) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	if d := t.Sub(now); d > 0 {
		return d, true
	}
	return 0, true
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
