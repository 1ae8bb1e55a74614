package activities

import (
	"hash/fnv"
	"math"
	"math/rand/v2"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/internal/request"
)

// Jitter selects how the activity spreads retries of a retryable failure
// that carries no Retry-After header.
type Jitter string

// The jitter strategies, after Marc Brooker, "Exponential Backoff And Jitter"
// (AWS Architecture Blog, 2015). With base = InitialInterval, cap =
// MaximumInterval and ceiling(n) = min(cap, base × BackoffCoefficient^(n−1)):
const (
	// JitterFull (the default, also for ""): uniform in [0, ceiling(attempt)].
	JitterFull Jitter = request.JitterFull
	// JitterEqual: ceiling/2 + uniform in [0, ceiling/2].
	JitterEqual Jitter = "equal"
	// JitterDecorrelated: d(n) = min(cap, uniform in [base, 3 × d(n−1)]), d(0) = base.
	// The chain is re-derived each attempt from a seed of the idempotency key
	// and the activity's scheduled time, so it needs no state between attempts.
	JitterDecorrelated Jitter = "decorrelated"
	// JitterNone sets no NextRetryDelay and leaves the interval to Temporal's
	// retry policy: deterministic exponential backoff without jitter. It exists
	// as the baseline for benchmarks; every client then retries in lockstep.
	JitterNone Jitter = "none"
)

// MinRetryDelay is the smallest NextRetryDelay the activity hands Temporal.
// Temporal reads a NextRetryDelay of 0 as "not set", so an immediate retry
// (full jitter drawing 0, or a Retry-After of 0 or a past date) uses this floor.
const MinRetryDelay = time.Millisecond

// Backoff holds the retry-policy fields the delay is computed from. The
// activity reads them from activity.GetInfo(ctx).RetryPolicy when the server
// sends it, and from the activity input's backoff otherwise (Temporal's test
// environment sends none; workflows.Call fills it from RetryOptions). Zero
// fields take the defaults of workflows.RetryOptions:
// InitialInterval 200 ms, BackoffCoefficient 2, MaximumInterval 10 s (at
// least InitialInterval), full jitter.
type Backoff struct {
	InitialInterval    time.Duration
	BackoffCoefficient float64
	MaximumInterval    time.Duration
	Jitter             Jitter
}

// withDefaults returns b with the defaults of package request (those of
// workflows.RetryOptions) for its unset fields, and a MaximumInterval of at
// least InitialInterval (request.Backoff.WithDefaults).
func (b Backoff) withDefaults() Backoff {
	return backoffOf(b.inputForm().WithDefaults())
}

// backoffOf is the Backoff of the activity input's wire form.
func backoffOf(w request.Backoff) Backoff {
	return Backoff{
		InitialInterval: w.InitialInterval, BackoffCoefficient: w.BackoffCoefficient,
		MaximumInterval: w.MaximumInterval, Jitter: Jitter(w.Jitter),
	}
}

// inputForm is b as the activity input holds it.
func (b Backoff) inputForm() request.Backoff {
	return request.Backoff{
		InitialInterval: b.InitialInterval, BackoffCoefficient: b.BackoffCoefficient,
		MaximumInterval: b.MaximumInterval, Jitter: string(b.Jitter),
	}
}

// Ceiling is min(MaximumInterval, InitialInterval × BackoffCoefficient^(attempt−1)):
// the interval Temporal itself would wait after the given attempt (from 1),
// and the upper bound of the full-jitter draw.
func (b Backoff) Ceiling(attempt int32) time.Duration {
	b = b.withDefaults()
	if attempt < 1 {
		attempt = 1
	}
	c := float64(b.InitialInterval) * math.Pow(b.BackoffCoefficient, float64(attempt-1))
	if c >= float64(b.MaximumInterval) || math.IsInf(c, 0) || math.IsNaN(c) {
		return b.MaximumInterval
	}
	return time.Duration(c)
}

// Delay returns the wait after a failed attempt (from 1) for the strategy in
// b.Jitter. uniform returns a value in [0, 1); nil uses math/rand/v2. seed is
// used by JitterDecorrelated only. JitterNone returns Ceiling(attempt), the
// interval Temporal will apply itself.
func (b Backoff) Delay(attempt int32, uniform func() float64, seed uint64) time.Duration {
	b = b.withDefaults()
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

// decorrelatedSeed ties the decorrelated chain to one activity execution.
func decorrelatedSeed(key string, scheduled time.Time) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	_, _ = h.Write([]byte(scheduled.UTC().Format(time.RFC3339Nano)))
	return h.Sum64()
}
