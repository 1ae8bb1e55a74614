package request

import (
	"hash/fnv"
	"math"
	"math/rand/v2"
	"time"
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
