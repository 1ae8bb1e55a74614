package backoff

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCeiling(t *testing.T) {
	b := Backoff{InitialInterval: 200 * time.Millisecond, BackoffCoefficient: 2, MaximumInterval: 10 * time.Second}
	tests := []struct {
		attempt int32
		want    time.Duration
	}{
		{0, 200 * time.Millisecond}, {1, 200 * time.Millisecond}, {2, 400 * time.Millisecond},
		{3, 800 * time.Millisecond}, {6, 6400 * time.Millisecond}, {7, 10 * time.Second},
		{20, 10 * time.Second}, {10000, 10 * time.Second},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, b.Ceiling(tt.attempt), "attempt %d", tt.attempt)
	}
	assert.Equal(t, 200*time.Millisecond, Backoff{}.Ceiling(1), "the default InitialInterval, as DefaultInitialInterval")
	assert.Equal(t, 10*time.Second, Backoff{}.Ceiling(100), "the default MaximumInterval, as DefaultMaximumInterval")
	assert.Equal(t, 5*time.Second, Backoff{InitialInterval: 5 * time.Second, MaximumInterval: time.Second}.Ceiling(3), "MaximumInterval is at least InitialInterval")
}

// TestFullJitterBounds draws many delays for attempts 1–20: none is above the
// ceiling (and so never above the cap), and they spread over the whole range.
func TestFullJitterBounds(t *testing.T) {
	b := Backoff{InitialInterval: 200 * time.Millisecond, BackoffCoefficient: 2, MaximumInterval: 10 * time.Second}
	r := rand.New(rand.NewPCG(1, 2))
	for attempt := int32(1); attempt <= 20; attempt++ {
		ceil := b.Ceiling(attempt)
		var lo, hi = ceil, time.Duration(0)
		var buckets [10]int
		const n = 4000
		for range n {
			d := b.Delay(attempt, r.Float64, 0)
			require.GreaterOrEqual(t, d, MinRetryDelay)
			require.LessOrEqual(t, d, ceil, "attempt %d", attempt)
			require.LessOrEqual(t, d, b.MaximumInterval)
			lo, hi = min(lo, d), max(hi, d)
			buckets[min(int(float64(d)/float64(ceil)*10), 9)]++
		}
		assert.Less(t, lo, ceil/50, "attempt %d: lowest draw should be near 0", attempt)
		assert.Greater(t, hi, ceil*49/50, "attempt %d: highest draw should be near the ceiling", attempt)
		for i, c := range buckets {
			// Uniform: 400 expected per tenth; 250 is far outside sampling noise.
			assert.Greater(t, c, 250, "attempt %d: tenth %d of [0, %v] got %d of %d draws", attempt, i, ceil, c, n)
		}
	}
}

func TestJitterStrategies(t *testing.T) {
	base, cap := 100*time.Millisecond, 5*time.Second
	r := rand.New(rand.NewPCG(3, 4))
	for _, j := range []Jitter{JitterFull, JitterEqual, JitterDecorrelated, JitterNone, ""} {
		b := Backoff{InitialInterval: base, BackoffCoefficient: 2, MaximumInterval: cap, Jitter: j}
		for attempt := int32(1); attempt <= 20; attempt++ {
			ceil := b.Ceiling(attempt)
			for seed := range uint64(50) {
				d := b.Delay(attempt, r.Float64, seed)
				require.LessOrEqual(t, d, cap, "%s attempt %d", j, attempt)
				require.GreaterOrEqual(t, d, MinRetryDelay)
				switch j {
				case JitterEqual:
					require.GreaterOrEqual(t, d, ceil/2, "equal jitter keeps half the ceiling")
					require.LessOrEqual(t, d, ceil)
				case JitterDecorrelated:
					require.GreaterOrEqual(t, d, base, "decorrelated never goes below base")
				case JitterNone:
					require.Equal(t, ceil, d, "no jitter is Temporal's own interval")
				default:
					require.LessOrEqual(t, d, ceil)
				}
			}
		}
	}
}

func TestDecorrelatedIsStablePerSeed(t *testing.T) {
	b := Backoff{InitialInterval: 100 * time.Millisecond, MaximumInterval: 20 * time.Second, Jitter: JitterDecorrelated}
	seed := DecorrelatedSeed("key-1", time.Unix(1700000000, 0))
	for attempt := int32(1); attempt <= 8; attempt++ {
		assert.Equal(t, b.Delay(attempt, nil, seed), b.Delay(attempt, nil, seed), "same seed, same chain")
	}
	other := DecorrelatedSeed("key-2", time.Unix(1700000000, 0))
	assert.NotEqual(t, seed, other)
	differ := false
	for attempt := int32(1); attempt <= 8; attempt++ {
		differ = differ || b.Delay(attempt, nil, seed) != b.Delay(attempt, nil, other)
	}
	assert.True(t, differ, "different keys must not retry in lockstep")
}

func TestFullJitterZeroDrawUsesFloor(t *testing.T) {
	b := Backoff{InitialInterval: time.Second}
	assert.Equal(t, MinRetryDelay, b.Delay(1, func() float64 { return 0 }, 0), "0 would mean 'not set' to Temporal")
}

func TestBackoffWithDefaults(t *testing.T) {
	got := Backoff{}.WithDefaults()
	want := Backoff{InitialInterval: DefaultInitialInterval, BackoffCoefficient: DefaultBackoffCoefficient, MaximumInterval: DefaultMaximumInterval, Jitter: JitterFull}
	if got != want {
		t.Fatalf("zero Backoff: got %+v, want %+v", got, want)
	}
	got = Backoff{InitialInterval: -1, BackoffCoefficient: 0.5, MaximumInterval: -1}.WithDefaults()
	if got != want {
		t.Fatalf("out-of-range Backoff: got %+v, want %+v", got, want)
	}
	got = Backoff{InitialInterval: 30 * time.Second}.WithDefaults()
	if got.MaximumInterval != 30*time.Second {
		t.Fatalf("InitialInterval 30s above the default maximum: MaximumInterval %s, want 30s (Temporal refuses a maximum below the initial interval)", got.MaximumInterval)
	}
	set := Backoff{InitialInterval: time.Second, BackoffCoefficient: 1, MaximumInterval: time.Minute, Jitter: "equal"}
	if got := set.WithDefaults(); got != set {
		t.Fatalf("set fields changed: got %+v, want %+v", got, set)
	}
}

func TestAttemptCeiling(t *testing.T) {
	tests := []struct {
		budget int32
		s2c    time.Duration
		want   int32
	}{
		{5, 2 * time.Minute, 5 + 1200 + 1},
		{1, 0, 2},
		{0, time.Second, 11},
		{5, 50 * time.Millisecond, 6},
		{math.MaxInt32, time.Hour, math.MaxInt32},
		{5, time.Duration(math.MaxInt64), math.MaxInt32},
	}
	for _, tt := range tests {
		if got := AttemptCeiling(tt.budget, tt.s2c); got != tt.want {
			t.Errorf("AttemptCeiling(%d, %s) = %d, want %d", tt.budget, tt.s2c, got, tt.want)
		}
	}
}
