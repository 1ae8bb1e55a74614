package admission

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// base is the fake clock's origin: a whole number of seconds since the Unix
// epoch, so it is aligned to the retry budget's slots (RetryWindow / 20).
var base = time.Unix(1_700_000_000, 0)

// at is the fake clock: base plus d.
func at(d time.Duration) time.Time { return base.Add(d) }

// throttle is the observation of a 429.
var throttle = Observation{Throttled: true}

// ms is n milliseconds.
func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

const origin = "https://api.example.com"

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

// bucketOf returns origin's bucket without advancing it.
func bucketOf(l *Limiter, o string) *bucket {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.origins[o]
}

// admitN admits n new requests to o at now and fails unless all are admitted.
func admitN(t *testing.T, l *Limiter, o string, now time.Time, n int) {
	t.Helper()
	for i := range n {
		if d := l.Admit(o, now, Ticket{}, false); !d.Admitted {
			t.Fatalf("request %d of %d at %v not admitted: %+v", i+1, n, now.Sub(base), d)
		}
	}
}

// TestValidate: Validate refuses what WithDefaults would silently replace
// or what cannot be a setting, naming the field as the activity's user
// writes it (Config.Admission…), and accepts the zero value.
func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want string // "" : valid
	}{
		{"zero", Config{}, ""},
		{"custom", Config{InitialRate: 3, MinRate: 1, RetryRatio: -1, Throttles: []int{429, 503}, Breaker: Breaker{FailureRatio: 1}}, ""},
		{"negative rate", Config{InitialRate: -1}, "Config.Admission: InitialRate, MinRate, MinRetries, RetryWindow, MaxWait and MaxDelay may not be negative"},
		{"negative wait", Config{MaxWait: -time.Second}, "may not be negative (0 takes the default); set Off to turn admission off"},
		{"min above initial", Config{InitialRate: 1, MinRate: 2}, "Config.Admission: MinRate 2 is above InitialRate 1"},
		{"throttle not an error status", Config{Throttles: []int{429, 200}}, "Config.Admission.Throttles: 200 is not an HTTP error status"},
		{"failure ratio above 1", Config{Breaker: Breaker{FailureRatio: 1.5}}, "Config.Admission.Breaker: FailureRatio 1.5 is not a share"},
		{"negative open time", Config{Breaker: Breaker{OpenTime: -time.Second}}, "Config.Admission.Breaker: MinFailures, FailureWindow, OpenTime, MaxOpenTime and RestartRate may not be negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate() = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestConfigDefaults(t *testing.T) {
	defaults := Config{
		InitialRate: DefaultInitialRate, MinRate: DefaultMinRate, burst: DefaultBurst,
		Throttles:  []int{429},
		RetryRatio: DefaultRetryRatio, RetryWindow: DefaultRetryWindow, MinRetries: DefaultMinRetries,
		MaxWait: DefaultMaxWait, MaxDelay: DefaultMaxDelay,
		Breaker: Breaker{
			FailureRatio: DefaultFailureRatio, MinFailures: DefaultMinFailures, FailureWindow: DefaultFailureWindow,
			OpenTime: DefaultOpenTime, MaxOpenTime: DefaultMaxOpenTime, RestartRate: DefaultInitialRate / 2,
		},
	}
	custom := Config{
		InitialRate: 3, MinRate: 0.1, burst: 2 * time.Second, Throttles: []int{429, 503},
		RetryRatio: 0.5, RetryWindow: time.Minute, MinRetries: 2,
		MaxWait: 300 * time.Millisecond, MaxDelay: time.Second,
		Breaker: Breaker{FailureRatio: 0.9, MinFailures: 20, FailureWindow: time.Minute, OpenTime: 5 * time.Second, MaxOpenTime: time.Minute, RestartRate: 2},
	}
	negative := Config{
		InitialRate: -1, MinRate: -1, burst: -1, RetryWindow: -1, MinRetries: -1, MaxWait: -1, MaxDelay: -1,
		Breaker: Breaker{FailureRatio: -1, MinFailures: -1, FailureWindow: -1, OpenTime: -1, MaxOpenTime: -1, RestartRate: -1},
	}
	budgetOff := defaults
	budgetOff.RetryRatio = -1
	for _, tc := range []struct {
		name string
		in   Config
		want Config
	}{
		{"zero", Config{}, defaults},
		{"custom kept", custom, custom},
		{"negative take the defaults", negative, defaults},
		{"negative RetryRatio kept (budget off)", Config{RetryRatio: -1}, budgetOff},
		{"MinRate not above InitialRate", Config{InitialRate: 0.3}, func() Config {
			c := defaults
			c.InitialRate, c.MinRate, c.Breaker.RestartRate = 0.3, 0.3, 0.15
			return c
		}()},
		{"RestartRate not above InitialRate", Config{InitialRate: 4, Breaker: Breaker{RestartRate: 8}}, func() Config {
			c := defaults
			c.InitialRate, c.Breaker.RestartRate = 4, 4
			return c
		}()},
		{"MaxOpenTime not below OpenTime", Config{Breaker: Breaker{OpenTime: 5 * time.Second}}, func() Config {
			c := defaults
			c.Breaker.OpenTime, c.Breaker.MaxOpenTime = 5*time.Second, 5*time.Second
			return c
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.in.WithDefaults(); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("WithDefaults() = %+v, want %+v", got, tc.want)
			}
			if got := New(tc.in).cfg; !reflect.DeepEqual(got, tc.want) {
				t.Errorf("New().cfg = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestNewIDs(t *testing.T) {
	seen := map[uint64]bool{}
	for range 100 {
		l := New(Config{})
		if l.id == 0 {
			t.Fatal("limiter id 0 (means no limiter in a Ticket)")
		}
		if seen[l.id] {
			t.Fatalf("limiter id %d issued twice", l.id)
		}
		seen[l.id] = true
	}
}

func TestHop(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		wait time.Duration
		want time.Duration
		why  Reason
	}{
		{"no wait", Config{}, 0, 0, ""},
		{"short wait", Config{}, ms(300), 0, ReasonRate},
		{"exactly MaxWait", Config{}, time.Second, 0, ReasonRate},
		{"just over MaxWait", Config{}, time.Second + 1, ms(500) + 1, ReasonRate},
		{"wait minus half MaxWait", Config{}, 3 * time.Second, ms(2500), ReasonRate},
		{"at MaxDelay", Config{}, DefaultMaxDelay + ms(500), DefaultMaxDelay, ReasonRate},
		{"capped at MaxDelay", Config{}, time.Minute, DefaultMaxDelay, ReasonRate},
		{"custom MaxWait", Config{MaxWait: ms(200)}, ms(201), ms(101), ReasonRate},
		{"custom MaxWait, long", Config{MaxWait: ms(200)}, 2 * time.Second, ms(1900), ReasonRate},
		{"custom MaxDelay", Config{MaxDelay: 2 * time.Second}, 10 * time.Second, 2 * time.Second, ReasonRate},
		{"retry budget: capped", Config{}, time.Minute, DefaultMaxDelay, ReasonRetryBudget},
		{"circuit open: not capped", Config{}, time.Minute, time.Minute - ms(500), ReasonCircuitOpen},
		{"circuit open, short", Config{}, ms(900), 0, ReasonCircuitOpen},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := New(tc.cfg).Hop(tc.wait, tc.why); got != tc.want {
				t.Errorf("Hop(%v) = %v, want %v", tc.wait, got, tc.want)
			}
		})
	}
}

// TestInAttempt: a wait for the rate or the retry budget stays inside the
// attempt while the waits add up to MaxWait; an open breaker's short waits
// (each up to MaxWait) stay inside for as long as they leave four fifths
// of the attempt's time, and a long one ends it at once. A wait with no
// turn to come back to (WaitInside: a followed start answer's Retry-After,
// after waits for the rate) follows the breaker's rule.
func TestInAttempt(t *testing.T) {
	const attempt = 10 * time.Second
	for _, tc := range []struct {
		name   string
		cfg    Config
		waited time.Duration
		wait   time.Duration
		why    Reason
		left   time.Duration
		want   bool
	}{
		{"rate, within MaxWait", Config{}, ms(500), ms(500), ReasonRate, attempt, true},
		{"rate, past MaxWait", Config{}, ms(600), ms(500), ReasonRate, attempt, false},
		{"retry budget, past MaxWait", Config{}, ms(600), ms(500), ReasonRetryBudget, attempt, false},
		{"rate, past a fifth of the attempt", Config{}, 0, ms(900), ReasonRate, 4 * time.Second, false},
		{"breaker, past MaxWait in all", Config{}, ms(1500), ms(100), ReasonCircuitOpen, attempt - ms(1500), true},
		{"breaker, another open time", Config{}, ms(700), time.Second, ReasonCircuitOpen, attempt - ms(700), true},
		{"breaker, another open time past a fifth", Config{}, ms(900), time.Second, ReasonCircuitOpen, attempt - ms(900), false},
		{"breaker, up to a fifth of the attempt", Config{}, ms(1500), ms(100), ReasonCircuitOpen, 8 * time.Second, true},
		{"breaker, past a fifth of the attempt", Config{}, ms(1600), ms(100), ReasonCircuitOpen, 8 * time.Second, false},
		{"breaker, a long open time", Config{}, 0, 10 * time.Second, ReasonCircuitOpen, time.Minute, false},
		{"breaker, custom MaxWait", Config{MaxWait: 2 * time.Second}, 0, ms(1900), ReasonCircuitOpen, attempt, true},
		{"breaker, no deadline: MaxWait in all", Config{}, ms(950), ms(100), ReasonCircuitOpen, 0, false},
		{"rate, no deadline", Config{}, 0, time.Second, ReasonRate, 0, true},
		{"inside, after a wait for the rate", Config{}, ms(500), time.Second, "", attempt - ms(600), true},
		{"inside, past MaxWait on its own", Config{}, 0, ms(1100), "", attempt, false},
		{"inside, past a fifth with the rate's wait", Config{}, ms(900), time.Second, "", attempt - ms(1000), false},
		{"inside, no deadline: MaxWait in all", Config{}, ms(500), time.Second, "", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := New(tc.cfg)
			if tc.why == "" {
				if got := l.WaitInside(tc.waited, tc.wait, tc.left); got != tc.want {
					t.Errorf("WaitInside(%v, %v, %v) = %t, want %t", tc.waited, tc.wait, tc.left, got, tc.want)
				}
				return
			}
			d := Decision{Wait: tc.wait, Reason: tc.why}
			if got := l.InAttempt(tc.waited, d, tc.left); got != tc.want {
				t.Errorf("InAttempt(%v, %v %s, %v) = %t, want %t", tc.waited, tc.wait, tc.why, tc.left, got, tc.want)
			}
			if tc.why == ReasonCircuitOpen && l.WaitInside(tc.waited, tc.wait, tc.left) != tc.want {
				t.Errorf("WaitInside(%v, %v, %v) differs from a breaker's wait", tc.waited, tc.wait, tc.left)
			}
		})
	}
}

func TestSlowStartBurst(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   Config
		burst int
		rate  float64
	}{
		{"defaults", Config{}, 10, 10},
		{"rate 4, burst 500ms", Config{InitialRate: 4, burst: ms(500)}, 2, 4},
		{"rate 3, burst 2s", Config{InitialRate: 3, burst: 2 * time.Second}, 6, 3},
		{"at least one", Config{InitialRate: 0.5}, 1, 0.5},
		{"rate 100", Config{InitialRate: 100}, 100, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := New(tc.cfg)
			now := at(0)
			admitN(t, l, origin, now, tc.burst)
			d := l.Admit(origin, now, Ticket{}, false)
			if d.Admitted {
				t.Fatalf("request %d admitted, want only the burst of %d", tc.burst+1, tc.burst)
			}
			want := time.Duration(math.Ceil(float64(time.Second) / tc.rate))
			if d.Wait != want || d.Reason != ReasonRate {
				t.Errorf("wait %v for %v, want %v for %v", d.Wait, d.Reason, want, ReasonRate)
			}
			if d.Ticket.Limiter != l.id || d.Ticket.Seq != int64(tc.burst+1) || !d.Ticket.Due.Equal(now.Add(want)) {
				t.Errorf("ticket %+v, want limiter %d seq %d due %v", d.Ticket, l.id, tc.burst+1, want)
			}
			if d.Rate != tc.rate || d.Throttled {
				t.Errorf("decision rate %v throttled %v, want %v false", d.Rate, d.Throttled, tc.rate)
			}
			if s := l.State(origin, now); s != (State{Rate: tc.rate, Waiting: 1}) {
				t.Errorf("State = %+v, want rate %v, 1 waiting", s, tc.rate)
			}
		})
	}
}

// TestStartShared: N workers that send one origin's requests each start
// at InitialRate ÷ N with a burst of as much (the workers together as one
// worker), at least MinRate; an origin the limiter has already seen keeps
// what it learned; one worker (or none known) changes nothing.
func TestStartShared(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     Config
		workers int
		seen    bool // the origin was admitted before StartShared
		burst   int
		rate    float64
	}{
		{"three workers", Config{InitialRate: 9}, 3, false, 3, 3},
		{"two workers, defaults", Config{}, 2, false, 5, 5},
		{"one worker", Config{InitialRate: 9}, 1, false, 9, 9},
		{"none known", Config{InitialRate: 9}, 0, false, 9, 9},
		{"at least MinRate", Config{InitialRate: 10, MinRate: 2}, 20, false, 2, 2},
		{"at least one request", Config{InitialRate: 10}, 40, false, 1, 0.5},
		{"origin already seen", Config{InitialRate: 9}, 3, true, 9, 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := New(tc.cfg)
			now := at(0)
			if tc.seen {
				l.State(origin, now)
			}
			l.StartShared(origin, now, tc.workers)
			admitN(t, l, origin, now, tc.burst)
			d := l.Admit(origin, now, Ticket{}, false)
			if d.Admitted {
				t.Fatalf("request %d admitted, want only the burst of %d", tc.burst+1, tc.burst)
			}
			if want := time.Duration(math.Ceil(float64(time.Second) / tc.rate)); d.Wait != want || d.Rate != tc.rate {
				t.Errorf("wait %v at rate %v, want %v at %v", d.Wait, d.Rate, want, tc.rate)
			}
			// The slow start grows by one per answer, as one worker's.
			l.Observe(origin, now, now, Observation{})
			if s := l.State(origin, now); s.Rate != tc.rate+1 {
				t.Errorf("rate %v after an answer, want %v", s.Rate, tc.rate+1)
			}
			// Said again once the origin is known, it changes nothing.
			l.StartShared(origin, now, 2*tc.workers+2)
			if s := l.State(origin, now); s.Rate != tc.rate+1 {
				t.Errorf("rate %v after StartShared on a known origin, want %v", s.Rate, tc.rate+1)
			}
		})
	}
}

func TestSlowStartGrowsByOnePerAnswer(t *testing.T) {
	l := New(Config{InitialRate: 2})
	for i := range 50 {
		now := at(ms(100 * i))
		if s := l.State(origin, now); s.Rate != float64(2+i) || s.Throttled {
			t.Fatalf("after %d answers: State %+v, want rate %d, not throttled", i, s, 2+i)
		}
		l.Observe(origin, now.Add(-ms(50)), now, Observation{})
	}
	now := at(5 * time.Second)
	if s := l.State(origin, now); s.Rate != 52 {
		t.Fatalf("rate %v after 50 answers, want 52", s.Rate)
	}
	// The burst follows the rate: a second at 52/s saves up 52 requests.
	admitN(t, l, origin, now, 52)
	d := l.Admit(origin, now, Ticket{}, false)
	if d.Admitted || d.Rate != 52 {
		t.Fatalf("request 53 %+v, want a wait at rate 52", d)
	}
	if want := time.Duration(math.Ceil(float64(time.Second) / 52)); d.Wait != want {
		t.Errorf("wait %v, want %v", d.Wait, want)
	}
}

func TestThrottleCut(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want float64
	}{
		{"defaults", Config{}, 8},
		{"rate 5", Config{InitialRate: 5}, 4},
		{"not below MinRate", Config{InitialRate: 1, MinRate: 0.9}, 0.9},
		{"MinRate below the cut", Config{InitialRate: 1, MinRate: 0.5}, 0.8},
		// Not raised to the default MinRate (0.5) by a throttle.
		{"InitialRate below the default MinRate", Config{InitialRate: 0.3}, 0.3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := New(tc.cfg)
			// A fresh origin has its burst saved up...
			if s := l.State(origin, at(0)); s.Throttled {
				t.Fatal("fresh origin throttled")
			}
			l.Observe(origin, at(ms(900)), at(time.Second), throttle)
			s := l.State(origin, at(time.Second))
			if !near(s.Rate, tc.want, 1e-12) || !s.Throttled {
				t.Fatalf("after a throttle State %+v, want rate %v throttled", s, tc.want)
			}
			// ... which the throttle spent.
			d := l.Admit(origin, at(time.Second), Ticket{}, false)
			if d.Admitted || !d.Throttled || d.Reason != ReasonRate {
				t.Fatalf("first request after the throttle %+v, want a wait (tokens spent)", d)
			}
			if want := time.Duration(math.Ceil(float64(time.Second) / tc.want)); d.Wait != want {
				t.Errorf("wait %v, want %v (one token at the cut rate)", d.Wait, want)
			}
		})
	}
}

func TestThrottleOncePerCut(t *testing.T) {
	l := New(Config{})
	cut := at(time.Second)
	l.Observe(origin, at(ms(900)), cut, throttle)
	if r := l.State(origin, cut).Rate; r != 8 {
		t.Fatalf("rate %v after the first throttle, want 8", r)
	}
	// Throttles of requests sent before the cut: the same overload.
	for i, sent := range []time.Time{at(ms(950)), at(ms(999)), at(0)} {
		l.Observe(origin, sent, cut.Add(ms(100*(i+1))), throttle)
		if r := l.State(origin, cut.Add(ms(100*(i+1)))).Rate; r != 8 {
			t.Fatalf("rate %v after a throttle of a request sent %v before the cut, want 8 (no second cut)", r, cut.Sub(sent))
		}
	}
	// Sent at the cut is not before it: it cuts (measured is 0 here, so
	// from the rate).
	l.Observe(origin, cut, at(ms(1400)), throttle)
	if r := l.State(origin, at(ms(1400))).Rate; !near(r, 6.4, 1e-12) {
		t.Fatalf("rate %v after a throttle of a request sent at the cut, want 6.4", r)
	}
	// Again, sent after the new cut.
	l.Observe(origin, at(ms(1450)), at(ms(1490)), throttle)
	if r := l.State(origin, at(ms(1490))).Rate; !near(r, 6.4*beta, 1e-12) {
		t.Fatalf("rate %v after a throttle sent after the second cut, want %v", r, 6.4*beta)
	}
	// Sent before the latest cut (at 1.49 s) but after the one before.
	l.Observe(origin, at(ms(1420)), at(ms(1495)), throttle)
	if r := l.State(origin, at(ms(1495))).Rate; !near(r, 6.4*beta, 1e-12) {
		t.Fatalf("rate %v: a throttle sent before the latest cut cut again", r)
	}
}

func TestThrottleCutsFromMeasuredRate(t *testing.T) {
	l := New(Config{InitialRate: 20})
	l.Observe(origin, at(0), at(0), throttle) // rate 16
	// 4 answers a second for 3 s: the measured rate settles at 4.
	var now time.Time
	for i := 1; i <= 12; i++ {
		now = at(ms(250 * i))
		l.Observe(origin, now.Add(-ms(100)), now, Observation{})
	}
	b := bucketOf(l, origin)
	if !near(b.measured, 4, 0.1) {
		t.Fatalf("measured %v, want about 4", b.measured)
	}
	before, measured := b.rate, b.measured
	l.Observe(origin, now, now.Add(ms(10)), throttle)
	want := max(min(measured, before)*beta, DefaultMinRate)
	if r := l.State(origin, now.Add(ms(10))).Rate; !near(r, want, 1e-9) {
		t.Fatalf("rate %v after a throttle at rate %v, measured %v; want %v", r, before, measured, want)
	}
	if b.lastMax != min(measured, before) {
		t.Errorf("lastMax %v, want %v", b.lastMax, min(measured, before))
	}
}

func TestCubicRegrowth(t *testing.T) {
	const pace = 5.0 // answers per second
	l := New(Config{InitialRate: 1})
	// Slow start: 4 answers (crossing a measuring interval) bring the rate
	// to 5, under twice the measured rate.
	for i := range 4 {
		l.Observe(origin, at(ms(200*i-100)), at(ms(200*i)), Observation{})
	}
	before := l.State(origin, at(ms(600))).Rate
	if before != 5 {
		t.Fatalf("rate %v before the throttle, want 5", before)
	}
	cut := at(ms(800))
	l.Observe(origin, at(ms(700)), cut, throttle)
	if r := l.State(origin, cut).Rate; r != before*beta {
		t.Fatalf("rate %v after the cut, want %v", r, before*beta)
	}
	b := bucketOf(l, origin)
	var rate float64
	var peak float64
	for i := 1; i <= int(10*pace); i++ {
		now := cut.Add(time.Duration(float64(i) / pace * float64(time.Second)))
		l.Observe(origin, now.Add(-ms(100)), now, Observation{})
		rate = l.State(origin, now).Rate
		if math.IsNaN(rate) || math.IsInf(rate, 0) || rate < DefaultMinRate {
			t.Fatalf("at %v: rate %v", now.Sub(cut), rate)
		}
		if rate > 2*b.measured+1e-9 {
			t.Fatalf("at %v: rate %v above twice the measured %v", now.Sub(cut), rate, b.measured)
		}
		// The measured answer rate is 4 or 6 in each interval at this pace.
		if rate > 2*6 {
			t.Fatalf("at %v: rate %v above twice the highest measured rate", now.Sub(cut), rate)
		}
		peak = max(peak, rate)
		since := now.Sub(cut)
		switch {
		case since <= 2*time.Second:
			// Near the plateau (k = cbrt(5·0.2/0.4) ≈ 1.36 s): about the
			// rate before the cut, not past it by much.
			if rate < before*beta-0.7 || rate > before+0.2 {
				t.Errorf("at %v: rate %v, want near the plateau %v", since, rate, before)
			}
		case since >= 5*time.Second:
			// Past the plateau: limited by twice the measured rate.
			if rate <= before || rate < 2*4 {
				t.Errorf("at %v: rate %v, want past %v and at least 8", since, rate, before)
			}
		}
	}
	if rate <= before {
		t.Fatalf("rate %v after 10 s of answers, want past %v", rate, before)
	}
	if peak > 2*6 {
		t.Fatalf("peak rate %v above twice the measured rate", peak)
	}
}

func TestTickets(t *testing.T) {
	l := New(Config{}) // rate 10, burst 10
	now := at(0)
	admitN(t, l, origin, now, 10)
	var tickets []Ticket
	for i := range 5 {
		d := l.Admit(origin, now, Ticket{}, false)
		if d.Admitted {
			t.Fatalf("request %d admitted", 11+i)
		}
		if want := ms(100 * (i + 1)); d.Wait != want {
			t.Errorf("ticket %d: wait %v, want %v", i, d.Wait, want)
		}
		if i > 0 {
			prev := tickets[i-1]
			if d.Ticket.Seq != prev.Seq+1 || !d.Ticket.Due.After(prev.Due) {
				t.Errorf("ticket %+v does not follow %+v", d.Ticket, prev)
			}
		}
		tickets = append(tickets, d.Ticket)
	}
	if w := l.State(origin, now).Waiting; w != 5 {
		t.Fatalf("Waiting %d, want 5", w)
	}
	// Presented before its wait has passed, a ticket waits on, with the
	// same place.
	d := l.Admit(origin, now.Add(ms(50)), tickets[0], false)
	if d.Admitted || d.Ticket.Seq != tickets[0].Seq || d.Wait != ms(50) || !d.Ticket.Due.Equal(tickets[0].Due) {
		t.Fatalf("ticket early: %+v, want a wait of 50ms with the same place", d)
	}
	// Each is admitted once its wait has passed.
	for i, tk := range tickets {
		now := tk.Due
		d := l.Admit(origin, now, tk, false)
		if !d.Admitted {
			t.Fatalf("ticket %d at its due time %v: %+v", i, now.Sub(base), d)
		}
		if d.Ticket != (Ticket{}) || d.Wait != 0 || d.Reason != "" {
			t.Errorf("admitted decision carries %+v", d)
		}
		if w := l.State(origin, now).Waiting; w != int64(len(tickets)-1-i) {
			t.Errorf("after ticket %d: Waiting %d, want %d", i, w, len(tickets)-1-i)
		}
	}
}

// TestTicketAdmittedAtDue: a ticket that comes back exactly after its wait,
// nothing else happening, is admitted (not told to wait a nanosecond more
// for a token short by a rounding error).
func TestTicketAdmittedAtDue(t *testing.T) {
	for _, rate := range []float64{0.5, 3, 7, 10, 13, 40, 50, 99.9, 1000} {
		l := New(Config{InitialRate: rate})
		l.Observe(origin, at(0), at(0), throttle) // a throttle: the rate is rate·beta, no tokens
		now := at(0)
		waited := 0
		for i := range 500 {
			d := l.Admit(origin, now, Ticket{}, false)
			if !d.Admitted {
				waited++
				now = d.Ticket.Due
				if d := l.Admit(origin, now, d.Ticket, false); !d.Admitted {
					t.Fatalf("rate %v, request %d: not admitted at its due time: %+v", rate, i, d)
				}
			}
			// A fraction of a token is left over for the next request.
			now = now.Add(time.Duration(float64(i%17) / 17 / (rate * beta) * float64(time.Second)))
		}
		if waited < 250 {
			t.Fatalf("rate %v: only %d of 500 requests waited", rate, waited)
		}
	}
}

func TestTicketRateChangeMovesTurn(t *testing.T) {
	l := New(Config{})
	now := at(0)
	admitN(t, l, origin, now, 10)
	var tk Ticket
	for range 4 {
		tk = l.Admit(origin, now, Ticket{}, false).Ticket
	}
	// The fourth waiting ticket is due in 400ms at 10/s; after a cut to 8/s
	// its turn is 500ms away.
	l.Observe(origin, now, now, throttle)
	d := l.Admit(origin, now, tk, false)
	if d.Admitted || d.Wait != ms(500) || d.Rate != 8 {
		t.Fatalf("after the cut: %+v, want a wait of 500ms at 8/s", d)
	}
	if !d.Ticket.Due.Equal(now.Add(ms(500))) {
		t.Errorf("ticket due %v, want the new turn", d.Ticket.Due.Sub(base))
	}
}

func TestForeignTicket(t *testing.T) {
	other := New(Config{})
	for _, tc := range []struct {
		name string
		due  time.Duration // after the ticket is presented at 0
		// spent: the burst is used up before the ticket is presented
		spent    bool
		admitted bool
		wait     time.Duration
	}{
		// Work-conserving: a token there admits it, due or not.
		{"before due, token there", ms(300), false, true, 0},
		{"at due, token there", 0, false, true, 0},
		{"past due, token there", -time.Minute, false, true, 0},
		// No token: it waits for its due time or the next token, the later.
		{"before due, no token", ms(300), true, false, ms(300)},
		{"due before the next token", ms(30), true, false, ms(100)},
		{"at due, no token", 0, true, false, ms(100)},
		{"past due, no token", -time.Minute, true, false, ms(100)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := New(Config{})
			l.id = other.id ^ 2 // another limiter's id, whatever New drew (ids are odd)
			now := at(0)
			if tc.spent {
				admitN(t, l, origin, now, 10)
			}
			tk := Ticket{Limiter: other.id, Seq: 42, Due: now.Add(tc.due)}
			l.State(origin, now)
			served := bucketOf(l, origin).served
			d := l.Admit(origin, now, tk, false)
			if d.Admitted != tc.admitted || d.Wait != tc.wait {
				t.Fatalf("%+v, want admitted %v wait %v", d, tc.admitted, tc.wait)
			}
			if d.Admitted {
				if d.Ticket != (Ticket{}) {
					t.Errorf("admitted decision carries ticket %+v", d.Ticket)
				}
				// Charged here: every waiting turn moves back by one.
				if s := bucketOf(l, origin).served; s != served-1 {
					t.Errorf("served %v after a foreign admission, want one less", s)
				}
				return
			}
			if d.Ticket != tk || d.Reason != ReasonRate {
				t.Errorf("waiting foreign ticket %+v for %v, want %+v kept", d.Ticket, d.Reason, tk)
			}
			// Once the wait has passed it is admitted.
			if d := l.Admit(origin, now.Add(d.Wait), tk, false); !d.Admitted {
				t.Errorf("after the wait: %+v", d)
			}
		})
	}
}

// TestForeignTicketWaitsForDue: with no token there, a foreign ticket is
// told to come back at its due time, not at the next token; a token there
// admits it before then.
func TestForeignTicketWaitsForDue(t *testing.T) {
	l, other := New(Config{}), New(Config{})
	admitN(t, l, origin, at(0), 10) // the burst is spent
	tk := Ticket{Limiter: other.id, Seq: 3, Due: at(time.Second)}
	d := l.Admit(origin, at(0), tk, false)
	if d.Admitted || d.Wait != time.Second || d.Ticket != tk || d.Reason != ReasonRate {
		t.Fatalf("at 0: %+v, want a wait of 1s (its due time) with the ticket kept", d)
	}
	// A new request of this limiter takes the token that is there at 100ms.
	if d := l.Admit(origin, at(ms(100)), Ticket{}, false); !d.Admitted {
		t.Fatalf("own request at 100ms: %+v", d)
	}
	d = l.Admit(origin, at(ms(100)), tk, false)
	if d.Admitted || d.Wait != ms(900) {
		t.Fatalf("at 100ms, no token: %+v, want a wait of 900ms", d)
	}
	// At 200ms a token is there: admitted before its due time.
	if d := l.Admit(origin, at(ms(200)), tk, false); !d.Admitted {
		t.Fatalf("at 200ms, a token there: %+v", d)
	}
}

// TestClockBackwards: a time shortly (up to a second, or MaxWait) before
// the origin's last one counts as the last one: nothing is refilled or
// served twice, and a due time is not in the origin's past; the wait is
// from the caller's time to it. (A time further back is a step of the
// clock: TestClockStep.)
func TestClockBackwards(t *testing.T) {
	l := New(Config{})
	admitN(t, l, origin, at(time.Second), 10)
	d := l.Admit(origin, at(ms(500)), Ticket{}, false)
	if d.Admitted || d.Wait != ms(600) || !d.Ticket.Due.Equal(at(ms(1100))) {
		t.Fatalf("at 0.5s after 1s: %+v, want a wait of 600ms due at 1.1s", d)
	}
	// Going forward from 0.5s again refills nothing until past 1s.
	if d := l.Admit(origin, at(ms(900)), Ticket{}, false); d.Admitted {
		t.Fatalf("at 0.9s: admitted with the tokens spent at 1s")
	}
	if s := l.State(origin, at(0)); s.Waiting != 2 {
		t.Fatalf("Waiting %d, want 2", s.Waiting)
	}
}

// stepCall is what TestClockStep compares of one Admit.
type stepCall struct {
	Admitted  bool
	Reason    Reason
	Wait      time.Duration
	Rate      float64
	Throttled bool
	// DueIn is the ticket's due time after the caller's now (its wait).
	DueIn time.Duration
}

// runTicks drives l along times, one tick each: an answer to the request
// sent at the tick before (every throttleEvery-th a throttle; 0: none),
// the held ticket or a new request, and 3 retries (a retry that must wait
// for its turn is not held). It returns every decision.
func runTicks(l *Limiter, times []time.Time, throttleEvery int) [][]stepCall {
	var held Ticket
	calls := make([][]stepCall, len(times))
	for i, now := range times {
		if i > 0 {
			l.Observe(origin, times[i-1], now, Observation{Throttled: throttleEvery > 0 && i%throttleEvery == 0})
		}
		for j := range 4 {
			var d Decision
			if j == 0 {
				d = l.Admit(origin, now, held, false)
				held = d.Ticket
			} else {
				d = l.Admit(origin, now, Ticket{}, true)
			}
			c := stepCall{d.Admitted, d.Reason, d.Wait, d.Rate, d.Throttled, 0}
			if d.Reason == ReasonRate {
				c.DueIn = d.Ticket.Due.Sub(now)
			}
			calls[i] = append(calls[i], c)
		}
	}
	return calls
}

// TestClockStep: a step of the clock handed to the limiter, back or
// forward, in the middle of a run of requests, retries and answers. Back:
// no time passes at the step, and the origin's time goes on from there (its
// windows are not frozen until the clock has caught up again); the run
// decides as a run whose clock never stepped and lost one tick. Forward: the
// time passes (the windows expire), once.
func TestClockStep(t *testing.T) {
	const (
		tick  = 100 * time.Millisecond
		ticks = 300 // 30 s on the caller's clock
		k     = 100 // the step comes before tick k
	)
	for _, tc := range []struct {
		name          string
		cfg           Config
		throttleEvery int
		step          time.Duration
	}{
		{"retry budget, 1h back", budgetConfig, 0, -time.Hour},
		{"retry budget, 24h forward", budgetConfig, 0, 24 * time.Hour},
		{"retry budget, 2s back", budgetConfig, 0, -2 * time.Second},
		{"rate, throttles and tickets, 1h back", Config{}, 20, -time.Hour},
		{"rate, throttles and tickets, 24h forward", Config{}, 20, 24 * time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The caller's clock steps; the reference's does not.
			var stepped, ref []time.Time
			for i := range ticks {
				c, e := at(time.Duration(i)*tick), at(time.Duration(i)*tick)
				if i >= k {
					c = c.Add(tc.step)
					if tc.step > 0 {
						e = c // forward: the time passes
					} else {
						e = e.Add(-tick) // back: no time passes at the step
					}
				}
				stepped, ref = append(stepped, c), append(ref, e)
			}
			got := runTicks(New(tc.cfg), stepped, tc.throttleEvery)
			want := runTicks(New(tc.cfg), ref, tc.throttleEvery)
			type summary struct {
				admitted, refused int
				longest           time.Duration
			}
			// retries sums up the retries from the step on.
			retries := func(calls [][]stepCall) (s summary) {
				for _, tc := range calls[k:] {
					for _, c := range tc[1:] {
						if c.Admitted {
							s.admitted++
						} else if c.Reason == ReasonRetryBudget {
							s.refused++
						}
						s.longest = max(s.longest, c.Wait)
					}
				}
				return s
			}
			gs, ws := retries(got), retries(want)
		compare:
			for i := range got {
				for j, c := range got[i] {
					if c != want[i][j] {
						t.Errorf("tick %d (%v after the step), call %d: %+v, want %+v as on a clock that never stepped",
							i, time.Duration(i-k)*tick, j, c, want[i][j])
						break compare
					}
				}
			}
			if gs != ws {
				t.Errorf("retries from the step on: %d admitted, %d refused for the budget, longest wait %v; want %d, %d, %v",
					gs.admitted, gs.refused, gs.longest, ws.admitted, ws.refused, ws.longest)
			}
			for i, tc := range got {
				for j, c := range tc {
					if c.DueIn != c.Wait && c.Reason == ReasonRate {
						t.Fatalf("tick %d, call %d: ticket due %v after now, want its wait %v", i, j, c.DueIn, c.Wait)
					}
				}
			}
			if tc.step > 0 {
				// The window has expired: the first retries after the step
				// are admitted as by an empty budget.
				for j, c := range got[k][1:] {
					if c.Reason == ReasonRetryBudget {
						t.Errorf("retry %d at the step refused for the budget: %+v", j+1, c)
					}
				}
			}
		})
	}
}

// TestSuccessAfterFirstThrottle: an answer that is not a throttle, right
// after the first throttle and before the answer rate has been measured,
// grows the rate along the cubic curve from the cut; the bound of twice the
// measured rate waits for a measurement (not 2 × 0, which would drop the rate
// to MinRate).
func TestSuccessAfterFirstThrottle(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     Config
		answers int // answers before the throttle, 10 ms apart
		after   time.Duration
	}{
		{"defaults, at once", Config{}, 0, 0},
		{"defaults, 100ms later", Config{}, 0, ms(100)},
		{"defaults, 390ms later", Config{}, 0, ms(390)},
		{"slow start to 13", Config{}, 3, ms(100)},
		{"rate 1", Config{InitialRate: 1}, 0, ms(200)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := New(tc.cfg)
			// All the answers are in the first measuring interval, [0, 500ms):
			// none is measured yet.
			for i := range tc.answers {
				l.Observe(origin, at(ms(10*i)), at(ms(10*i+5)), Observation{})
			}
			cut := at(ms(100))
			before := l.State(origin, cut).Rate
			l.Observe(origin, cut.Add(-ms(100)), cut, throttle)
			if b := bucketOf(l, origin); b.measured != 0 {
				t.Fatalf("measured %v before the success, want none yet", b.measured)
			}
			l.Observe(origin, cut.Add(tc.after-ms(10)), cut.Add(tc.after), Observation{})
			k := math.Cbrt(before * (1 - beta) / cubeC)
			want := cubeC*math.Pow(tc.after.Seconds()-k, 3) + before
			if r := l.State(origin, cut.Add(tc.after)).Rate; !near(r, want, 1e-9) || r < before*beta || r > before {
				t.Fatalf("rate %v after a throttle at %v and one success %v later, want %v (the cubic curve from %v)", r, before, tc.after, want, before*beta)
			}
		})
	}
}

func TestLongRunMatchesRate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		run  time.Duration
	}{
		{"defaults, 60s", Config{}, time.Minute},
		{"rate 3, burst 2s", Config{InitialRate: 3, burst: 2 * time.Second}, time.Minute},
		{"rate 0.7", Config{InitialRate: 0.7}, 2 * time.Minute},
		{"rate 250", Config{InitialRate: 250}, 20 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg.WithDefaults()
			l := New(tc.cfg)
			var held Ticket
			admitted := 0
			for now := at(0); !now.After(at(tc.run)); now = now.Add(time.Millisecond) {
				for {
					d := l.Admit(origin, now, held, false)
					if !d.Admitted {
						if d.Wait <= 0 || d.Ticket.Seq == 0 {
							t.Fatalf("at %v: %+v", now.Sub(base), d)
						}
						held = d.Ticket
						break
					}
					admitted++
					held = Ticket{}
				}
			}
			burst := math.Floor(max(cfg.InitialRate*cfg.burst.Seconds(), 1))
			want := cfg.InitialRate*tc.run.Seconds() + burst
			if math.Abs(float64(admitted)-want) > 1 {
				t.Fatalf("admitted %d in %v, want %v ± 1", admitted, tc.run, want)
			}
		})
	}
}

// budgetConfig has a rate high enough that only the retry budget refuses.
var budgetConfig = Config{InitialRate: 10_000, MinRetries: 10, RetryRatio: 0.2, RetryWindow: 10 * time.Second}

func TestRetryBudget(t *testing.T) {
	for _, n := range []int{0, 1, 2, 5, 6, 10, 40, 100} {
		t.Run(fmt.Sprint(n, " first requests"), func(t *testing.T) {
			l := New(budgetConfig)
			now := at(0)
			admitN(t, l, origin, now, n)
			// retries+1 ≤ 0.2·(requests+1) + 10, with requests = n + retries:
			// 4·(retries+1) ≤ n + 50.
			allowed := (n + 50) / 4
			for i := range allowed {
				if d := l.Admit(origin, now, Ticket{}, true); !d.Admitted {
					t.Fatalf("retry %d of %d allowed: %+v", i+1, allowed, d)
				}
			}
			d := l.Admit(origin, now, Ticket{}, true)
			if d.Admitted || d.Reason != ReasonRetryBudget {
				t.Fatalf("retry %d: %+v, want refused for the budget", allowed+1, d)
			}
			if d.Ticket != (Ticket{}) {
				t.Errorf("refused retry got ticket %+v", d.Ticket)
			}
			// Every retry is in the slot of now: it leaves the window a
			// whole window later.
			if d.Wait != 10*time.Second {
				t.Errorf("wait %v, want 10s", d.Wait)
			}
			// Still refused just before the window slides past the slot,
			// with the shortest wait, 1ms.
			if d := l.Admit(origin, now.Add(10*time.Second-1), Ticket{}, true); d.Admitted || d.Reason != ReasonRetryBudget || d.Wait != time.Millisecond {
				t.Errorf("1ns before the window slides: %+v, want refused with a wait of 1ms", d)
			}
			if d := l.Admit(origin, now.Add(10*time.Second), Ticket{}, true); !d.Admitted {
				t.Errorf("after the window slid: %+v", d)
			}
		})
	}
}

func TestRetryBudgetNeverRefusesFirstRequests(t *testing.T) {
	l := New(budgetConfig)
	for range 12 {
		l.Admit(origin, at(0), Ticket{}, true)
	}
	if d := l.Admit(origin, at(0), Ticket{}, true); d.Reason != ReasonRetryBudget {
		t.Fatalf("budget not used up: %+v", d)
	}
	for i := range 100 {
		if d := l.Admit(origin, at(0), Ticket{}, false); !d.Admitted {
			t.Fatalf("first request %d refused: %+v", i+1, d)
		}
	}
	// 100 more requests make room for 100·0.2/0.8 = 25 more retries.
	for i := range 25 {
		if d := l.Admit(origin, at(0), Ticket{}, true); !d.Admitted {
			t.Fatalf("retry %d after 100 first requests: %+v", i+1, d)
		}
	}
	if d := l.Admit(origin, at(0), Ticket{}, true); d.Reason != ReasonRetryBudget {
		t.Fatalf("retry 26 after 100 first requests: %+v", d)
	}
}

func TestRetryBudgetWaitOldestSlot(t *testing.T) {
	l := New(budgetConfig)
	// 4 retries at 0.7 s (slot [0.5 s, 1 s)), 8 at 3.2 s: 12 allowed with
	// no first requests.
	for range 4 {
		if d := l.Admit(origin, at(ms(700)), Ticket{}, true); !d.Admitted {
			t.Fatalf("retry at 0.7s: %+v", d)
		}
	}
	for range 8 {
		if d := l.Admit(origin, at(ms(3200)), Ticket{}, true); !d.Admitted {
			t.Fatalf("retry at 3.2s: %+v", d)
		}
	}
	// At 6.1 s the 13th is refused until the slot of 0.7 s leaves the
	// window, at 10.5 s.
	d := l.Admit(origin, at(ms(6100)), Ticket{}, true)
	if d.Admitted || d.Reason != ReasonRetryBudget || d.Wait != ms(4400) {
		t.Fatalf("13th retry: %+v, want refused for the budget for 4.4s", d)
	}
	if d.Wait <= 0 || d.Wait > budgetConfig.RetryWindow {
		t.Fatalf("wait %v outside (0, window]", d.Wait)
	}
	// Refusals are not counted: asking again changes nothing.
	d = l.Admit(origin, at(ms(10_499)), Ticket{}, true)
	if d.Admitted || d.Wait != ms(1) {
		t.Fatalf("at 10.499s: %+v, want a wait of 1ms", d)
	}
	// 4 retries left with the slot: 4 more fit.
	for i := range 4 {
		if d := l.Admit(origin, at(ms(10_500)), Ticket{}, true); !d.Admitted {
			t.Fatalf("retry %d at 10.5s: %+v", i+1, d)
		}
	}
	d = l.Admit(origin, at(ms(10_500)), Ticket{}, true)
	if d.Admitted || d.Wait != ms(2500) {
		t.Fatalf("retry 5 at 10.5s: %+v, want a wait of 2.5s (the slot of 3.2s leaves at 13s)", d)
	}
}

func TestRetryBudgetOff(t *testing.T) {
	cfg := budgetConfig
	cfg.RetryRatio = -1
	l := New(cfg)
	for i := range 1000 {
		if d := l.Admit(origin, at(0), Ticket{}, true); !d.Admitted {
			t.Fatalf("retry %d with the budget off: %+v", i+1, d)
		}
	}
}

// TestTinyRetryWindow: a RetryWindow shorter than its 20 slots (e.g. 10
// meant as seconds) must not divide by a zero slot.
func TestTinyRetryWindow(t *testing.T) {
	for _, w := range []time.Duration{1, 10, budgetSlots - 1, budgetSlots} {
		l := New(Config{RetryWindow: w})
		for i := range 20 {
			now := at(time.Duration(i))
			l.Admit(origin, now, Ticket{}, false)
			d := l.Admit(origin, now, Ticket{}, true)
			// The shortest budget wait is 1ms, even for a shorter window.
			if d.Reason == ReasonRetryBudget && (d.Wait <= 0 || d.Wait > max(w, time.Millisecond)) {
				t.Fatalf("window %v: %+v", w, d)
			}
		}
	}
}

func TestOriginsIndependent(t *testing.T) {
	const a, b = "https://a.example", "https://b.example"
	l := New(budgetConfig)
	now := at(0)
	// Use up a's retry budget, throttle a, spend its tokens.
	for range 12 {
		l.Admit(a, now, Ticket{}, true)
	}
	if d := l.Admit(a, now, Ticket{}, true); d.Reason != ReasonRetryBudget {
		t.Fatalf("a's budget not used up: %+v", d)
	}
	l.Observe(a, now, now, throttle)
	if d := l.Admit(a, now, Ticket{}, false); d.Admitted {
		t.Fatalf("a admitted after a throttle: %+v", d)
	}
	// b is untouched.
	if s := l.State(b, now); s != (State{Rate: budgetConfig.InitialRate}) {
		t.Fatalf("b's State %+v", s)
	}
	for range 12 {
		if d := l.Admit(b, now, Ticket{}, true); !d.Admitted {
			t.Fatalf("b's retry refused: %+v", d)
		}
	}
	// And a throttle of b does not cut a again.
	ra := l.State(a, now).Rate
	l.Observe(b, now, now, throttle)
	if r := l.State(a, now).Rate; r != ra {
		t.Fatalf("a's rate %v moved to %v on b's throttle", ra, r)
	}
	// Slow start on one origin does not raise the other.
	l2 := New(Config{})
	for range 5 {
		l2.Observe(a, now, now, Observation{})
	}
	if ra, rb := l2.State(a, now).Rate, l2.State(b, now).Rate; ra != 15 || rb != 10 {
		t.Fatalf("rates a %v b %v, want 15 and 10", ra, rb)
	}
	// Tickets are per origin: exhausting a's burst (10 saved up at the
	// start) does not make b wait.
	admitN(t, l2, a, now, 10)
	if d := l2.Admit(a, now, Ticket{}, false); d.Admitted {
		t.Fatalf("a admitted past its burst")
	}
	admitN(t, l2, b, now, 10)
}

func TestConcurrent(t *testing.T) {
	cfg := Config{InitialRate: 5, MinRate: 0.5}
	l := New(cfg)
	origins := []string{"https://a.example", "https://b.example", "https://c.example"}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			var held Ticket
			for i := range 2000 {
				o := origins[(g+i)%len(origins)]
				now := at(ms(i))
				switch i % 5 {
				case 0, 1:
					d := l.Admit(o, now, held, i%7 == 0)
					held = d.Ticket
				case 2:
					l.Observe(o, now.Add(-ms(50)), now, Observation{Throttled: (g+i)%11 == 0})
				case 3:
					l.Admit(o, now, Ticket{}, true)
				case 4:
					s := l.State(o, now)
					if s.Rate < cfg.MinRate || math.IsNaN(s.Rate) || math.IsInf(s.Rate, 0) || s.Waiting < 0 {
						t.Errorf("State %+v", s)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	for _, o := range origins {
		s := l.State(o, at(time.Minute))
		if s.Rate < cfg.MinRate || math.IsNaN(s.Rate) || math.IsInf(s.Rate, 0) || s.Waiting < 0 {
			t.Errorf("%s: State %+v", o, s)
		}
	}
}

// clone copies l's state, for what-if checks.
func clone(l *Limiter) *Limiter {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := &Limiter{cfg: l.cfg, id: l.id, origins: map[string]*bucket{}}
	for o, b := range l.origins {
		cb := *b
		c.origins[o] = &cb
	}
	return c
}

// fuzzRetryAfter is the Retry-After of FuzzLimiter's failures that carry one.
const fuzzRetryAfter = 7 * time.Second

// fuzzConfigs are the configurations FuzzLimiter picks from.
var fuzzConfigs = []Config{
	{},
	{InitialRate: 1, MinRate: 0.1, burst: ms(100)},
	{InitialRate: 50, MinRate: 2, burst: 3 * time.Second, MinRetries: 1, RetryRatio: 0.5, RetryWindow: time.Second},
	{InitialRate: 0.3, RetryRatio: -1},
	{InitialRate: 1000, MinRate: 0.01, RetryWindow: time.Minute},
	{Breaker: Breaker{MinFailures: 1, FailureRatio: 0.1, OpenTime: ms(300), MaxOpenTime: 5 * time.Second}},
	{InitialRate: 2, Breaker: Breaker{Off: true}},
}

// FuzzLimiter runs random sequences of Admit, Observe and State, at times
// that mostly go forward but may step back (a little, within Limiter.behind,
// or far) or far forward, and checks the limiter's invariants: no step
// makes a wait longer than the configuration and the queue allow.
func FuzzLimiter(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0, 0, 1, 10, 2, 0, 3, 200, 4, 5, 5, 0})
	f.Add([]byte{2, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 3, 0, 3, 0, 4, 255, 4, 255, 0, 0})
	f.Add([]byte{1, 6, 0, 6, 0, 6, 0, 6, 0, 0, 50, 0, 50, 7, 100, 3, 1})
	f.Add([]byte{3, 3, 0, 3, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 255, 5, 255, 5, 255})
	f.Add([]byte{4, 0, 0, 0, 0, 1, 0, 3, 0, 3, 0, 3, 0, 4, 30, 4, 30, 0, 0})
	// Found by fuzzing: an InitialRate under the default MinRate; a token
	// short by a rounding error at a ticket's due time.
	f.Add([]byte("\x30\x00\x30\x00"))
	f.Add([]byte("900$00\x010\x01"))
	// Steps of the clock: 600 ms back, 1 h back, 2 h forward, 2.5 s back,
	// between requests, retries and answers.
	f.Add([]byte{2, 0, 0, 1, 0, 1, 0, 0x60, 60, 1, 0, 3, 0, 0x51, 6, 1, 0, 2, 0, 0x44, 1, 0x41, 2, 1, 0, 0x61, 250, 1, 0, 6, 0, 7, 0})
	f.Add([]byte{0, 0, 0, 0, 0, 4, 0, 0x50, 6, 0, 0, 0, 0, 6, 0, 3, 1, 0x66, 80, 2, 0})
	// Failures open the breaker; probes, some with Retry-After.
	f.Add([]byte{5, 0, 0, 0, 0, 3, 0x80, 3, 0x81, 0, 0, 0x70, 1, 0, 0, 3, 0xc1, 0, 0, 0x70, 8, 0, 0, 3, 2, 0, 0})
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0x80, 3, 0x81, 3, 0x82, 3, 0x83, 3, 0x84, 0, 0, 0x70, 1, 0, 0, 0, 0, 0x70, 11, 0, 0})
	f.Fuzz(checkLimiter)
}

// checkLimiter is FuzzLimiter's body: data[0] picks the configuration
// (and the workers sharing the second origin), then
// each pair of bytes is an operation and its argument. Bits 4 to 6 of the
// operation pick the step of the clock before it: 0x70 the argument in
// seconds forward, 0x60 ten times it in milliseconds back, 0x50 ten times it
// in minutes back, 0x40 in hours forward; else in milliseconds forward.
func checkLimiter(t *testing.T, data []byte) {
	if len(data) == 0 {
		return
	}
	cfg := fuzzConfigs[int(data[0])%len(fuzzConfigs)].WithDefaults()
	// data[0]'s high bits: the workers that share the second origin
	// (StartShared; under 2: none).
	workers := int(data[0] >> 4)
	data = data[1:]
	l := New(cfg)
	other := New(cfg)
	origins := []string{"https://a.example", "https://b.example"}
	now := base
	held := map[string]Ticket{}
	var sent []time.Time
	l.StartShared(origins[1], now, workers)
	check := func(where string, o string) {
		s := l.State(o, now)
		if math.IsNaN(s.Rate) || math.IsInf(s.Rate, 0) || s.Rate < cfg.MinRate {
			t.Fatalf("%s: rate %v (min %v)", where, s.Rate, cfg.MinRate)
		}
		if s.Waiting < 0 {
			t.Fatalf("%s: Waiting %d", where, s.Waiting)
		}
	}
	checkDecision := func(where, o string, d Decision, retry bool) {
		if math.IsNaN(d.Rate) || math.IsInf(d.Rate, 0) || d.Rate < cfg.MinRate {
			t.Fatalf("%s: decision rate %v", where, d.Rate)
		}
		if d.Admitted {
			if d.Ticket != (Ticket{}) || d.Wait != 0 || d.Reason != "" {
				t.Fatalf("%s: admitted decision %+v", where, d)
			}
			return
		}
		if d.Wait <= 0 {
			t.Fatalf("%s: not admitted with wait %v", where, d.Wait)
		}
		switch d.Reason {
		case ReasonRetryBudget:
			// A caller slightly behind waits that much longer, at most
			// behind; a step back adds nothing.
			if !retry || cfg.RetryRatio < 0 || d.Ticket != (Ticket{}) || d.Wait > cfg.RetryWindow+l.behind() {
				t.Fatalf("%s: budget refusal %+v (retry %v)", where, d, retry)
			}
		case ReasonCircuitOpen:
			// Open for at most the longest open time (or a Retry-After of
			// up to fuzzRetryAfter); the caller's ticket kept.
			if cfg.Breaker.Off || d.Wait > max(cfg.Breaker.MaxOpenTime, fuzzRetryAfter)+l.behind() || d.Circuit == Closed {
				t.Fatalf("%s: breaker refusal %+v", where, d)
			}
		case ReasonRate:
			if d.Ticket.Seq <= 0 || d.Ticket.Limiter == 0 {
				t.Fatalf("%s: rate wait without a ticket: %+v", where, d)
			}
			if d.Ticket.Limiter != l.id {
				break
			}
			if !d.Ticket.Due.Equal(now.Add(d.Wait)) {
				t.Fatalf("%s: ticket due %v, want now + %v", where, d.Ticket.Due.Sub(now), d.Wait)
			}
			// The wait is at most the waiting queue's at the rate (or one
			// token's), plus how far a caller slightly behind is behind.
			s := clone(l).State(o, now)
			if bound := time.Duration(math.Ceil(float64(max(s.Waiting, 1))/s.Rate*float64(time.Second))) + l.behind(); d.Wait > bound {
				t.Fatalf("%s: wait %v for %d waiting at rate %v, want at most %v", where, d.Wait, s.Waiting, s.Rate, bound)
			}
			// Nothing else happening, the ticket is admitted at its
			// due time.
			if d2 := clone(l).Admit(o, d.Ticket.Due, d.Ticket, false); !d2.Admitted {
				t.Fatalf("%s: ticket %+v (wait %v) not admitted at its due time: %+v", where, d.Ticket, d.Wait, d2)
			}
		default:
			t.Fatalf("%s: reason %q", where, d.Reason)
		}
	}
	for i := 0; i+1 < len(data); i += 2 {
		op, arg := data[i], data[i+1]
		o := origins[int(op>>7)]
		var step time.Duration
		switch op & 0x70 {
		case 0x70:
			step = time.Duration(arg) * time.Second
		case 0x60:
			step = -time.Duration(arg) * 10 * time.Millisecond
		case 0x50:
			step = -time.Duration(arg) * 10 * time.Minute
		case 0x40:
			step = time.Duration(arg) * time.Hour
		default:
			step = time.Duration(arg) * time.Millisecond
		}
		now = now.Add(step)
		where := fmt.Sprintf("op %d (%#x) at %v", i/2, op, now.Sub(base))
		switch op & 7 {
		case 0, 1: // a new request (1: a retry)
			retry := op&7 == 1
			d := l.Admit(o, now, Ticket{}, retry)
			checkDecision(where, o, d, retry)
			if d.Admitted {
				sent = append(sent, now)
			} else if d.Reason == ReasonRate {
				held[o] = d.Ticket
			}
		case 2: // the held ticket comes back
			tk := held[o]
			d := l.Admit(o, now, tk, false)
			checkDecision(where, o, d, false)
			if d.Admitted {
				delete(held, o)
				sent = append(sent, now)
			} else if tk.Seq > 0 {
				held[o] = d.Ticket
			}
		case 3, 4: // an answer (4: a throttle) to a request sent earlier
			s := now
			if len(sent) > 0 {
				s = sent[int(arg)%len(sent)]
			}
			// An answer with arg's high bit is a failure, with a
			// Retry-After when its next bit is set too.
			out := Observation{Throttled: op&7 == 4, Failed: op&7 == 3 && arg&0x80 != 0}
			if out.Failed && arg&0x40 != 0 {
				out.RetryAfter = fuzzRetryAfter
			}
			l.Observe(o, s, now, out)
		case 5: // a foreign ticket
			tk := Ticket{Limiter: other.id, Seq: int64(arg) + 1, Due: now.Add(time.Duration(arg%8) * 100 * time.Millisecond)}
			if arg&1 == 0 {
				tk.Due = now.Add(-time.Second)
			}
			checkDecision(where, o, l.Admit(o, now, tk, arg&2 != 0), arg&2 != 0)
		case 6: // the held ticket comes back once its wait has passed
			tk := held[o]
			if tk.Seq == 0 {
				break
			}
			if tk.Due.After(now) {
				now = tk.Due
			}
			d := l.Admit(o, now, tk, false)
			checkDecision(where, o, d, false)
			if d.Admitted {
				delete(held, o)
				sent = append(sent, now)
			} else {
				held[o] = d.Ticket
			}
		case 7:
			check(where, o)
		}
		check(where, o)
	}
}
