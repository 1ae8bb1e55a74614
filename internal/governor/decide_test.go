package governor

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemhttp/temporal-idempotent-http/internal/admission"
)

var breakerOff = admission.Breaker{Off: true}

// change is one write a Decider decided, at a time since t0.
type change struct {
	At   time.Duration
	Kind ChangeKind
	Rate float64
}

func (c change) String() string {
	return fmt.Sprintf("{%s %d %.4g}", c.At, c.Kind, c.Rate)
}

// report is one observation received at At (since t0): Requests answers
// over the second before, of which Accepted, Throttles and Failed.
type report struct {
	At                                    time.Duration
	Worker                                string
	Requests, Accepted, Throttles, Failed int
}

// drive runs d through reports (in time order) up to end as the workflow
// does: every decision due is made at its time, each change is written
// and in force at once.
func drive(d *Decider, reports []report, end time.Duration) []change {
	arrivals := make([]arrival, 0, len(reports))
	for _, r := range reports {
		now := t0.Add(r.At)
		arrivals = append(arrivals, arrival{At: r.At, Obs: Observation{Worker: r.Worker, Requests: r.Requests, Accepted: r.Accepted,
			Throttles: r.Throttles, Failed: r.Failed, From: now.Add(-time.Second), To: now}})
	}
	return driveObs(d, arrivals, end)
}

// arrival is an observation the governor receives at At (since t0).
type arrival struct {
	At  time.Duration
	Obs Observation
}

// driveObs is drive with the observations as they arrive.
func driveObs(d *Decider, arrivals []arrival, end time.Duration) []change {
	var out []change
	cur := t0
	// decideUntil fires the decision timers due by until, as the
	// workflow's timers do: each at the time Next gave when it was set.
	decideUntil := func(until time.Time) {
		for n := 0; ; n++ {
			if n > 1000 {
				panic(fmt.Sprintf("no progress at %s: %+v", cur.Sub(t0), d.State))
			}
			at, ok := d.Next(cur)
			if !ok || at.After(until) {
				return
			}
			cur = latest(cur, at)
			if at, ok := d.Next(cur); !ok || at.After(cur) {
				continue
			}
			if ch, ok := d.Decide(cur); ok {
				d.Applied(cur, ch, SetRateResult{Written: true, Limited: true, InForce: representable(ch.Rate), Owner: Identity}, nil)
				out = append(out, change{cur.Sub(t0), ch.Kind, ch.Rate})
			}
		}
	}
	for _, a := range arrivals {
		now := t0.Add(a.At)
		decideUntil(now)
		cur = now
		d.Observe(now, a.Obs)
		decideUntil(now)
	}
	decideUntil(t0.Add(end))
	return out
}

// steady returns a report from worker every second from from to to with
// n requests, all accepted.
func steady(worker string, n int, from, to time.Duration) []report {
	var out []report
	for at := from; at <= to; at += time.Second {
		out = append(out, report{At: at, Worker: worker, Requests: n, Accepted: n})
	}
	return out
}

// merged sorts the reports of several lists by time (stable).
func merged(lists ...[]report) []report {
	var out []report
	for _, l := range lists {
		out = append(out, l...)
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].At < out[j-1].At; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

func TestDeciderRulesV1(t *testing.T) {
	s, ms := time.Second, time.Millisecond
	limited := func(rate, ceiling float64) State {
		return State{Status: StatusLimited, Rate: rate, Ceiling: ceiling, LastWrite: t0, LastCut: t0, LastThrottle: t0, CalmSince: t0}
	}
	// underLimit is a limit of 5.4/s that may be cut at once;
	// throttlesAfter(n) is two seconds at 6 accepted a second under it,
	// then a report of n throttles.
	underLimit := State{Status: StatusLimited, Rate: 5.4, LastWrite: t0, CalmSince: t0}
	throttlesAfter := func(n int) []report {
		return []report{
			{At: 1 * s, Worker: "a", Requests: 6, Accepted: 6},
			{At: 2 * s, Worker: "a", Requests: 6, Accepted: 6},
			{At: 2*s + 500*ms, Worker: "a", Requests: n, Throttles: n},
		}
	}
	cases := []struct {
		name    string
		cfg     Config
		st      State
		reports []report
		end     time.Duration
		want    []change
		status  string
		check   func(t *testing.T, st State)
		// ramp: a governor recorded before versionRestore, whose
		// breaker ramps back (Decider.Restore false).
		ramp bool
		// ratioAlone: a governor recorded before versionTripMargin,
		// whose breaker trips on the ratio alone (Decider.TripMargin
		// false).
		ratioAlone bool
		// doubling: a governor recorded before versionRestart, whose
		// breaker closes without a rate before by doubling the probes'
		// rate (Decider.Restart false).
		doubling bool
		// anyThrottle: a governor recorded before versionIncidental,
		// whose limit in force is cut on any throttle (Decider.Incidental
		// false).
		anyThrottle bool
	}{
		{
			name:    "a limit in force is not cut on incidental throttles: the API took Beta of the requests or more",
			cfg:     Config{Breaker: breakerOff},
			st:      underLimit,
			reports: throttlesAfter(1),
			end:     4 * s,
			want:    nil,
			status:  StatusLimited,
		},
		{
			name:    "before versionIncidental, the same throttle cut it",
			cfg:     Config{Breaker: breakerOff},
			st:      underLimit,
			reports: throttlesAfter(1),
			end:     4 * s,
			// 0.9 × 12 accepted over the 2.5 s the reports cover.
			want:        []change{{2*s + 500*ms, ChangeCut, 4.32}},
			status:      StatusLimited,
			anyThrottle: true,
		},
		{
			name:    "a limit in force is cut when more than incidental throttles come",
			cfg:     Config{Breaker: breakerOff},
			st:      underLimit,
			reports: throttlesAfter(2),
			end:     4 * s,
			// 12 accepted of 14 sent: 0.9 × 12 over the 2.5 s.
			want:   []change{{2*s + 500*ms, ChangeCut, 4.32}},
			status: StatusLimited,
		},
		{
			name: "the first throttle's report cuts at once; every worker's reports correct it after Gather",
			reports: []report{
				// b's report of the same second comes after a's.
				{At: 2 * s, Worker: "a", Requests: 10, Accepted: 3, Throttles: 7},
				{At: 2 * s, Worker: "b", Requests: 10, Accepted: 3, Throttles: 7},
			},
			end: 5 * s,
			// 0.9 × 3 at once; at 3.5 s: 0.9 × (3 + 3) over the second.
			want:   []change{{2 * s, ChangeCut, 2.7}, {3*s + 500*ms, ChangeCorrect, 5.4}},
			status: StatusLimited,
			// No limit was in force: the herd's estimate bounds nothing.
			check: func(t *testing.T, st State) { assert.Zero(t, st.Ceiling) },
		},
		{
			name: "a cut that was right is not corrected",
			reports: []report{
				{At: 2 * s, Worker: "a", Requests: 10, Accepted: 6, Throttles: 4},
				{At: 3 * s, Worker: "a", Requests: 6, Accepted: 6},
			},
			end:    4 * s,
			want:   []change{{2 * s, ChangeCut, 5.4}},
			status: StatusLimited,
		},
		{
			name: "a correction may go down too (a's reports cover 1.5 s)",
			reports: []report{
				{At: 2 * s, Worker: "a", Requests: 10, Accepted: 6, Throttles: 4},
				{At: 2*s + 500*ms, Worker: "a", Requests: 10, Accepted: 0, Throttles: 10},
			},
			end: 5 * s,
			// a's two reports: 6 accepted over 1.5 s: 0.9 × 4.
			want:   []change{{2 * s, ChangeCut, 5.4}, {3*s + 500*ms, ChangeCorrect, 3.6}},
			status: StatusLimited,
		},
		{
			name:    "a saturated queue is raised every SaturatedCalm, halfway to the ceiling, up to Approach × it",
			st:      limited(5.4, 6),
			reports: steady("a", 5, 1*s, 20*s),
			end:     20 * s,
			// Halfway from 5.4 to 6, then from 5.7; 5.85 ≥ 0.97 × 6.
			want:   []change{{3 * s, ChangeRaise, 5.7}, {6 * s, ChangeRaise, 5.85}},
			status: StatusLimited,
			check:  func(t *testing.T, st State) { assert.InDelta(t, 5.7, st.Proven, 1e-6) },
		},
		{
			name: "a throttle above the proven rate cuts back to it, and lowers the ceiling",
			st:   State{Status: StatusLimited, Rate: 5.85, Proven: 5.7, Ceiling: 6, LastWrite: t0, LastCut: t0, LastThrottle: t0, CalmSince: t0},
			reports: []report{
				{At: 6 * s, Worker: "a", Requests: 6, Accepted: 4, Throttles: 2},
				{At: 7 * s, Worker: "a", Requests: 6, Accepted: 5, Throttles: 1},
			},
			end:    8 * s,
			want:   []change{{6 * s, ChangeCut, 5.7}}, // not 0.9 × 4
			status: StatusLimited,
			check:  func(t *testing.T, st State) { assert.InDelta(t, 5.85, st.Ceiling, 1e-6) },
		},
		{
			name:    "a calm raise of a saturated queue proves its rate; proven at the ceiling clears it",
			st:      State{Status: StatusLimited, Rate: 6, Ceiling: 6, LastWrite: t0, LastCut: t0, LastThrottle: t0, CalmSince: t0},
			reports: steady("a", 6, 1*s, 31*s),
			end:     31 * s,
			want:    []change{{30 * s, ChangeRaise, 7.2}},
			status:  StatusLimited,
			check: func(t *testing.T, st State) {
				assert.InDelta(t, 6, st.Proven, 1e-9)
				assert.Zero(t, st.Ceiling)
			},
		},
		{
			name: "a throttle at the proven rate is no longer proven: Beta × the accepted rate",
			st:   State{Status: StatusLimited, Rate: 5.7, Proven: 5.7, Ceiling: 6, LastWrite: t0, LastCut: t0, LastThrottle: t0, CalmSince: t0},
			reports: []report{
				{At: 6 * s, Worker: "a", Requests: 6, Accepted: 4, Throttles: 2},
			},
			end:    7 * s,
			want:   []change{{6 * s, ChangeCut, 3.6}},
			status: StatusLimited,
			check:  func(t *testing.T, st State) { assert.Zero(t, st.Proven) },
		},
		{
			name:    "a queue sending less than Saturation × the limit is not raised fast",
			st:      limited(5.4, 6),
			reports: steady("a", 4, 1*s, 20*s),
			end:     20 * s,
		},
		{
			name:    "without a ceiling a saturated queue is raised by SaturatedRaise every SaturatedCalm",
			st:      limited(5, 0),
			reports: steady("a", 5, 1*s, 11*s),
			end:     11 * s,
			// 5 → 7.5 at 3 s (sent 5 ≥ 0.85 × 5); 7.5 at 6 s: 5 < 0.85 × 7.5.
			want: []change{{3 * s, ChangeRaise, 7.5}},
		},
		{
			name: "the workers' failures trip the breaker: one probe a second for the cluster",
			reports: []report{
				{At: 1 * s, Worker: "a", Requests: 4, Failed: 4},
				{At: 1*s + 200*ms, Worker: "b", Requests: 3, Failed: 3}, // 7 of 7
				{At: 1*s + 300*ms, Worker: "c", Requests: 3, Failed: 3},
				{At: 2 * s, Worker: "a", Requests: 1, Failed: 1},
				{At: 3 * s, Worker: "b", Requests: 1, Failed: 1},
				{At: 4 * s, Worker: "c", Requests: 1, Failed: 1},
			},
			end:    10 * s,
			want:   []change{{1*s + 200*ms, ChangeOpen, 1}},
			status: StatusOpen,
			check: func(t *testing.T, st State) {
				assert.Equal(t, 1, st.Breaker.Opened)
				assert.Zero(t, st.Breaker.Before)
			},
		},
		{
			name: "too few failures do not trip it; nor do half the answers failing with one worker in five",
			reports: []report{
				{At: 1 * s, Worker: "a", Requests: 4, Failed: 4},
				{At: 1 * s, Worker: "b", Requests: 10, Accepted: 10},
				{At: 2 * s, Worker: "a", Requests: 2, Failed: 2},
			},
			end: 5 * s,
		},
		{
			name: "errors at random do not trip it: 5 of 9 answers failed is not half by two standard errors",
			reports: []report{
				{At: 1 * s, Worker: "a", Requests: 5, Accepted: 2, Failed: 3},
				{At: 1*s + 200*ms, Worker: "b", Requests: 4, Accepted: 2, Failed: 2},
			},
			end: 5 * s,
		},
		{
			name:       "before breaker-trip-margin, 5 of 9 trips it",
			ratioAlone: true,
			reports: []report{
				{At: 1 * s, Worker: "a", Requests: 5, Accepted: 2, Failed: 3},
				{At: 1*s + 200*ms, Worker: "b", Requests: 4, Accepted: 2, Failed: 2},
			},
			end:    5 * s,
			want:   []change{{1*s + 200*ms, ChangeOpen, 1}},
			status: StatusOpen,
		},
		{
			name: "an answer ramps the rate back, doubling each RampInterval, to the rate before",
			ramp: true,
			st:   limited(5.4, 6),
			reports: []report{
				{At: 1 * s, Worker: "a", Requests: 5, Failed: 5},
				{At: 2 * s, Worker: "a", Requests: 1, Failed: 1},
				{At: 5 * s, Worker: "b", Requests: 1, Accepted: 1},
				{At: 6 * s, Worker: "b", Requests: 2, Accepted: 2},
				{At: 7 * s, Worker: "b", Requests: 4, Accepted: 4},
			},
			end:    8 * s,
			want:   []change{{1 * s, ChangeOpen, 1}, {5 * s, ChangeRamp, 2}, {6 * s, ChangeRamp, 4}, {7 * s, ChangeRamp, 5.4}},
			status: StatusLimited,
			check: func(t *testing.T, st State) {
				assert.False(t, st.Breaker.Ramping)
				assert.InDelta(t, 5.4, st.Breaker.Before, 1e-6)
			},
		},
		{
			name:     "without a rate before, the ramp doubles while the queue fills the rate before the last step",
			doubling: true,
			reports: []report{
				{At: 1 * s, Worker: "a", Requests: 5, Failed: 5},
				{At: 3 * s, Worker: "a", Requests: 1, Accepted: 1},
				{At: 4 * s, Worker: "a", Requests: 2, Accepted: 2},
				{At: 5 * s, Worker: "a", Requests: 3, Accepted: 3}, // 3 < 0.85 × 8 / 2: it ends
			},
			end: 9 * s,
			// Each step is judged on the reports before it (the timer
			// comes first at the same instant): 1 ≥ 0.85 × 1 at 4 s,
			// 2 ≥ 0.85 × 2 at 5 s.
			want:   []change{{1 * s, ChangeOpen, 1}, {3 * s, ChangeRamp, 2}, {4 * s, ChangeRamp, 4}, {5 * s, ChangeRamp, 8}},
			status: StatusLimited,
			check:  func(t *testing.T, st State) { assert.False(t, st.Breaker.Ramping) },
		},
		{
			name: "without a rate before, the breaker closes at the restart rate",
			reports: []report{
				{At: 1 * s, Worker: "a", Requests: 5, Failed: 5},
				{At: 3 * s, Worker: "a", Requests: 1, Accepted: 1},
				{At: 4 * s, Worker: "a", Requests: 3, Accepted: 3},
			},
			end: 9 * s,
			// 5/s, Breaker.RestartRate's default (half of
			// admission.DefaultInitialRate), rather than 2 and 4 over the
			// next two seconds. The step after is judged as the doubling
			// is, on the reports before it: 1 < 0.85 × 5 / 2 at 4 s ends
			// the ramp at 5; the saturated raise takes it on from there.
			want:   []change{{1 * s, ChangeOpen, 1}, {3 * s, ChangeRamp, 5}},
			status: StatusLimited,
			check: func(t *testing.T, st State) {
				assert.False(t, st.Breaker.Ramping)
				assert.Equal(t, 5.0, st.Rate)
			},
		},
		{
			name: "failures during the ramp trip it again; the ramp goes back to the rate before the first",
			ramp: true,
			st:   limited(5.4, 6),
			reports: []report{
				{At: 1 * s, Worker: "a", Requests: 5, Failed: 5},
				{At: 3 * s, Worker: "a", Requests: 1, Accepted: 1},
				{At: 4 * s, Worker: "a", Requests: 2, Failed: 2},
				{At: 4*s + 500*ms, Worker: "b", Requests: 3, Failed: 3},
				{At: 7 * s, Worker: "a", Requests: 1, Accepted: 1},
				{At: 8 * s, Worker: "a", Requests: 2, Accepted: 2},
				{At: 9 * s, Worker: "a", Requests: 4, Accepted: 4},
			},
			end: 10 * s,
			want: []change{{1 * s, ChangeOpen, 1}, {3 * s, ChangeRamp, 2}, {4 * s, ChangeRamp, 4}, {4*s + 500*ms, ChangeOpen, 1},
				{7 * s, ChangeRamp, 2}, {8 * s, ChangeRamp, 4}, {9 * s, ChangeRamp, 5.4}},
			status: StatusLimited,
			check:  func(t *testing.T, st State) { assert.Equal(t, 2, st.Breaker.Opened) },
		},
		{
			name: "a throttle while open does not cut; one during the ramp cuts and ends it",
			ramp: true,
			st:   State{Status: StatusLimited, Rate: 5.4},
			reports: []report{
				{At: 1 * s, Worker: "a", Requests: 5, Failed: 5},
				{At: 1*s + 500*ms, Worker: "b", Requests: 3, Accepted: 0, Throttles: 2, Failed: 1},
				{At: 3 * s, Worker: "a", Requests: 1, Accepted: 1},
				// a's reports within 3 s (its failures at 1 s too): 1
				// accepted over 3.5 s: the floor; corrected at 5 s from
				// those since 2 s: 1 over 1.5 s, × 0.9.
				{At: 3*s + 500*ms, Worker: "a", Requests: 2, Accepted: 0, Throttles: 2},
			},
			end:    6 * s,
			want:   []change{{1 * s, ChangeOpen, 1}, {3 * s, ChangeRamp, 2}, {3*s + 500*ms, ChangeCut, 0.5}, {5 * s, ChangeCorrect, 0.6}},
			status: StatusLimited,
			check:  func(t *testing.T, st State) { assert.False(t, st.Breaker.Ramping) },
		},
		{
			// The rate before the breaker (a cut to 0.8/s) is under one
			// probe per OpenTime: the first answer closes the breaker
			// back at that rate; it does not stay open at 1/s, where no
			// throttle cuts and no calm raises.
			name: "an answer closes a breaker opened from a rate under one probe per OpenTime",
			st:   limited(0.8, 0),
			reports: []report{
				{At: 1 * s, Worker: "a", Requests: 5, Failed: 5},
				{At: 3 * s, Worker: "a", Requests: 1, Accepted: 1},
				{At: 4 * s, Worker: "a", Requests: 1, Accepted: 1},
			},
			end: 6 * s,
			// Governed again: the saturated queue is raised 3 s later.
			want:   []change{{1 * s, ChangeOpen, 1}, {3 * s, ChangeRamp, 0.8}, {6 * s, ChangeRaise, 1.2}}, // by SaturatedRaise
			status: StatusLimited,
			check:  func(t *testing.T, st State) { assert.False(t, st.Breaker.Ramping) },
		},
		{
			name: "an answer closes the breaker at once, back to the rate before",
			st:   limited(5.4, 6),
			reports: []report{
				{At: 1 * s, Worker: "a", Requests: 5, Failed: 5},
				{At: 2 * s, Worker: "a", Requests: 1, Failed: 1},
				{At: 5 * s, Worker: "b", Requests: 1, Accepted: 1},
				{At: 6 * s, Worker: "b", Requests: 5, Accepted: 5},
			},
			end:    8 * s,
			want:   []change{{1 * s, ChangeOpen, 1}, {5 * s, ChangeRamp, 5.4}},
			status: StatusLimited,
			check: func(t *testing.T, st State) {
				assert.False(t, st.Breaker.Ramping)
				assert.Zero(t, st.Breaker.RampAt)
			},
		},
		{
			name:    "the breaker off: failures change nothing",
			cfg:     Config{Breaker: breakerOff},
			reports: []report{{At: 1 * s, Worker: "a", Requests: 10, Failed: 10}},
			end:     5 * s,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := NewDecider(c.cfg, RulesV1, c.st)
			d.Restore = !c.ramp
			d.TripMargin = !c.ratioAlone
			d.Restart = !c.doubling
			d.Incidental = !c.anyThrottle
			got := drive(d, c.reports, c.end)
			requireChanges(t, c.want, got)
			if c.status != "" {
				assert.Equal(t, c.status, d.State.Status)
			}
			if c.check != nil {
				c.check(t, d.State)
			}
		})
	}
}

// TestDeciderRulesV0: the old rules have neither the cut at once nor the
// breaker.
func TestDeciderRulesV0(t *testing.T) {
	s, ms := time.Second, time.Millisecond
	d := NewDecider(Config{}, RulesV0, State{})
	got := drive(d, []report{
		{At: 1 * s, Worker: "c", Requests: 10, Failed: 10},
		{At: 2 * s, Worker: "a", Requests: 10, Accepted: 3, Throttles: 7},
		{At: 2*s + 300*ms, Worker: "b", Requests: 10, Accepted: 3, Throttles: 7},
	}, 5*s)
	requireChanges(t, []change{{3*s + 500*ms, ChangeCut, 5.4}}, got)
	assert.Zero(t, d.State.Breaker)
}

// TestDeciderProgresses: whatever the reports, every decision due is
// made and the next one comes later (the workflow would otherwise loop in
// one task), and a change is never 0 (which pauses the queue).
func TestDeciderProgresses(t *testing.T) {
	for seed := uint64(1); seed <= 50; seed++ {
		rng := rand.New(rand.NewPCG(seed, 0))
		var reports []report
		for at := 100 * time.Millisecond; at < 300*time.Second; at += time.Duration(rng.IntN(1000)) * time.Millisecond {
			n := rng.IntN(12)
			thr, failed := 0, 0
			switch rng.IntN(6) {
			case 0:
				thr = rng.IntN(n + 1)
			case 1:
				failed = n
			}
			reports = append(reports, report{At: at, Worker: fmt.Sprintf("w%d", rng.IntN(4)), Requests: n, Accepted: n - thr - failed, Throttles: thr, Failed: failed})
		}
		d := NewDecider(Config{}, RulesV1, State{})
		for _, c := range drive(d, reports, 400*time.Second) {
			require.Positive(t, c.Rate, "seed %d: %v", seed, c)
		}
	}
}

func requireChanges(t *testing.T, want, got []change) {
	t.Helper()
	require.Len(t, got, len(want), "changes: got %v, want %v", got, want)
	for i := range want {
		assert.Equal(t, want[i].At, got[i].At, "change %d time (got %v)", i, got)
		assert.Equal(t, want[i].Kind, got[i].Kind, "change %d kind (got %v)", i, got)
		assert.InDelta(t, want[i].Rate, got[i].Rate, 1e-5, "change %d rate (got %v)", i, got)
	}
}

// TestDeciderTakesSpansOnItsClock: the length the governor takes a report
// to cover is what its worker measured (Span, on its monotonic clock, or
// To − From from a worker that sends none) unless the governor's clock
// disagrees: a length longer, by more than 2 s, than since the
// worker's report before arrived (plus that one's length when the report
// reaches back over it), or none at all, is taken as that time; without
// a report before to check against, a length over MeasureWindow, or none,
// is unknown (0).
func TestDeciderTakesSpansOnItsClock(t *testing.T) {
	s, ms := time.Second, time.Millisecond
	// obs is a's report arriving at at, over wall (To − From, on a's wall
	// clock, its From at from) and span (0: none sent).
	obs := func(from, wall, span time.Duration) Observation {
		return Observation{Worker: "a", Requests: 5, Accepted: 5, From: t0.Add(from), To: t0.Add(from + wall), Span: span}
	}
	prev := obs(0, s, s) // a's report before, arriving at 1 s
	cases := []struct {
		name string
		prev bool // a's report before arrived at 1 s
		at   time.Duration
		obs  Observation
		want time.Duration
	}{
		{"the worker's Span, not its wall clock's", true, 2 * s, obs(s, time.Hour, s), s},
		{"To − From from a worker without Span", true, 2 * s, obs(s, 900*ms, 0), 900 * ms},
		{"up to 2 s longer than since the report before is kept", true, 1*s + 500*ms, obs(s, s, 2500*ms), 2500 * ms},
		{"more than 2 s longer: since the report before", true, 1*s + 500*ms, obs(s, s, 2600*ms), 500 * ms},
		{"two reports in one workflow task", true, 1 * s, obs(s, s, s), s},
		{"an hour forward: since the report before", true, 2*s + 100*ms, obs(s, time.Hour+s, 0), s + 100*ms},
		{"5 s forward: since the report before", true, 2*s + 100*ms, obs(s, 6*s, 0), s + 100*ms},
		{"an hour back: since the report before", true, 2*s + 100*ms, obs(s, s-time.Hour, 0), s + 100*ms},
		{"a Span longer than the governor's clock allows", true, 2 * s, obs(s, s, time.Hour), s},
		{"reaching back over the report before: since it, and its length", true, 1*s + 500*ms, obs(0, time.Hour, 0), s + 500*ms},
		{"a first report as its worker says", false, 2 * s, obs(s, 4*s, 0), 4 * s},
		{"a first report over MeasureWindow: unknown", false, 2 * s, obs(s, time.Hour, 0), 0},
		{"a first report of no length: unknown", false, 2 * s, obs(s, -time.Hour, 0), 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := NewDecider(Config{}, RulesV1, State{})
			if c.prev {
				d.Observe(t0.Add(s), prev)
			}
			d.Observe(t0.Add(c.at), c.obs)
			require.Contains(t, d.State.Workers, "a")
			assert.Equal(t, c.want, d.State.Workers["a"].Span)
			last := d.State.Recent[len(d.State.Recent)-1]
			assert.Equal(t, c.want, last.Span)
		})
	}
}
