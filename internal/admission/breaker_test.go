package admission

import (
	"math/rand/v2"
	"testing"
	"time"
)

// failure is the observation of a 503 (or of no answer).
var failure = Observation{Failed: true}

// answer is one observation at a time offset, for a request sent just before.
type answer struct {
	at time.Duration
	o  Observation
}

func TestBreakerOpens(t *testing.T) {
	fails := func(n int, every time.Duration) []answer {
		var as []answer
		for i := range n {
			as = append(as, answer{time.Duration(i) * every, failure})
		}
		return as
	}
	mixed := func(failures, successes int) []answer {
		var as []answer
		for i := range successes {
			as = append(as, answer{ms(10 * i), Observation{}})
		}
		for i := range failures {
			as = append(as, answer{ms(10 * (successes + i)), failure})
		}
		return as
	}
	for _, tc := range []struct {
		name    string
		cfg     Breaker
		answers []answer
		open    bool
	}{
		{"five failures open it", Breaker{}, fails(5, ms(10)), true},
		{"four do not", Breaker{}, fails(4, ms(10)), false},
		{"seven of nine is half by TripMargin", Breaker{}, mixed(7, 2), true},
		{"five of nine is not", Breaker{}, mixed(5, 4), false},
		{"five of eleven is under half", Breaker{}, mixed(5, 6), false},
		{"a quarter fails: closed", Breaker{}, mixed(10, 30), false},
		{"failures spread past the window", Breaker{}, fails(5, 3*time.Second), false},
		{"failures within the window", Breaker{}, fails(5, 2*time.Second), true},
		{"throttles are not failures", Breaker{}, func() []answer {
			var as []answer
			for i := range 20 {
				as = append(as, answer{ms(10 * i), throttle})
			}
			return as
		}(), false},
		{"a throttle marked failed is a throttle", Breaker{}, func() []answer {
			var as []answer
			for i := range 20 {
				as = append(as, answer{ms(10 * i), Observation{Throttled: true, Failed: true}})
			}
			return as
		}(), false},
		{"MinFailures 20", Breaker{MinFailures: 20}, fails(19, ms(10)), false},
		{"FailureRatio 0.9", Breaker{FailureRatio: 0.9}, mixed(8, 2), false},
		{"off", Breaker{Off: true}, fails(50, ms(10)), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := New(Config{Breaker: tc.cfg})
			for _, a := range tc.answers {
				l.Observe(origin, at(a.at-ms(5)), at(a.at), a.o)
			}
			last := tc.answers[len(tc.answers)-1].at
			d := l.Admit(origin, at(last+ms(1)), Ticket{}, false)
			if (d.Reason == ReasonCircuitOpen) != tc.open {
				t.Fatalf("a first request after the answers: %+v, want the circuit open: %v", d, tc.open)
			}
			if tc.open {
				if d.Reason != ReasonCircuitOpen || d.Circuit != Open || d.Wait != DefaultOpenTime-ms(1) {
					t.Errorf("decision %+v, want circuit open for %v", d, DefaultOpenTime-ms(1))
				}
				if s := l.State(origin, at(last+ms(1))); s.Circuit != Open {
					t.Errorf("State().Circuit = %v, want open", s.Circuit)
				}
			}
		})
	}
}

// openAt returns a limiter whose breaker for origin opened at at(0).
func openAt(t *testing.T, cfg Config) *Limiter {
	t.Helper()
	l := New(cfg)
	for i := range 5 {
		l.Observe(origin, at(ms(-100+i)), at(ms(-4+i)), failure)
	}
	if d := l.Admit(origin, at(0), Ticket{}, false); d.Admitted || d.Reason != ReasonCircuitOpen {
		t.Fatalf("breaker not open after five failures: %+v", d)
	}
	return l
}

func TestBreakerProbes(t *testing.T) {
	type step struct {
		at     time.Duration
		admit  bool        // Admit a first request (else Observe the probe's observation)
		o      Observation // the probe's observation
		want   Reason      // Admit: "" for admitted
		probe  bool        // Admit: admitted as the probe
		wait   time.Duration
		sentAt time.Duration // Observe: when the request answered was sent (default: the last probe)
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"refused until the open time, then one probe", []step{
			{at: ms(400), admit: true, want: ReasonCircuitOpen, wait: ms(600)},
			{at: ms(999), admit: true, want: ReasonCircuitOpen, wait: ms(1)},
			{at: ms(1000), admit: true, probe: true},
			{at: ms(1001), admit: true, want: ReasonCircuitOpen, wait: probeWait},
			{at: ms(1500), admit: true, want: ReasonCircuitOpen, wait: probeWait},
		}},
		{"a failed probe doubles the open time, up to MaxOpenTime (3 s here)", []step{
			{at: ms(1000), admit: true, probe: true},
			{at: ms(1100), o: failure},
			{at: ms(1200), admit: true, want: ReasonCircuitOpen, wait: ms(1900)},
			{at: ms(3100), admit: true, probe: true},
			{at: ms(3150), o: failure},
			{at: ms(3200), admit: true, want: ReasonCircuitOpen, wait: ms(2950)},
			{at: ms(6150), admit: true, probe: true},
			{at: ms(6200), o: failure},
			{at: ms(6300), admit: true, want: ReasonCircuitOpen, wait: ms(2900)},
		}},
		{"Retry-After on the failure sets the open time", []step{
			{at: ms(1000), admit: true, probe: true},
			{at: ms(1100), o: Observation{Failed: true, RetryAfter: 7 * time.Second}},
			{at: ms(8000), admit: true, want: ReasonCircuitOpen, wait: ms(100)},
			{at: ms(8100), admit: true, probe: true},
		}},
		{"an answered probe closes it: the slow start again", []step{
			{at: ms(1000), admit: true, probe: true},
			{at: ms(1050), o: Observation{}},
			{at: ms(1060), admit: true},
			{at: ms(1060), admit: true},
		}},
		{"a throttled probe closes it too: the API answers (and the rate is cut)", []step{
			{at: ms(1000), admit: true, probe: true},
			{at: ms(1050), o: throttle},
			{at: ms(1060), admit: true, want: ReasonRate, wait: ms(240)},
		}},
		{"a lost probe makes way for another", []step{
			{at: ms(1000), admit: true, probe: true},
			{at: ms(1000) + probeTimeout - ms(1), admit: true, want: ReasonCircuitOpen, wait: probeWait},
			{at: ms(1000) + probeTimeout, admit: true, probe: true},
		}},
		{"an answer to a request sent before it opened decides nothing", []step{
			{at: ms(500), o: Observation{}, sentAt: ms(-50)},
			{at: ms(600), admit: true, want: ReasonCircuitOpen, wait: ms(400)},
			{at: ms(1000), admit: true, probe: true},
			{at: ms(1010), o: Observation{}, sentAt: ms(-40)},
			{at: ms(1020), admit: true, want: ReasonCircuitOpen, wait: probeWait},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := openAt(t, Config{Breaker: Breaker{MaxOpenTime: 3 * time.Second}})
			probeSent := time.Duration(-1)
			for i, s := range tc.steps {
				if !s.admit {
					sent := probeSent
					if s.sentAt != 0 {
						sent = s.sentAt
					}
					l.Observe(origin, at(sent), at(s.at), s.o)
					continue
				}
				d := l.Admit(origin, at(s.at), Ticket{}, false)
				if d.Admitted != (s.want == "") || d.Reason != s.want || d.Probe != s.probe || d.Wait != s.wait || (d.Reason == ReasonCircuitOpen || d.Probe) != (d.Circuit != Closed) {
					t.Fatalf("step %d at %v: %+v, want reason %q probe %v wait %v", i, s.at, d, s.want, s.probe, s.wait)
				}
				if d.Probe {
					probeSent = s.at
				}
			}
		})
	}
}

func TestBreakerClosesToSlowStart(t *testing.T) {
	l := New(Config{})
	// The origin learned a rate from throttles, then failed.
	l.Observe(origin, at(ms(-200)), at(ms(-190)), throttle)
	if s := l.State(origin, at(ms(-190))); !s.Throttled {
		t.Fatalf("not throttled: %+v", s)
	}
	for i := range 5 {
		l.Observe(origin, at(ms(-100+i)), at(ms(-4+i)), failure)
	}
	if d := l.Admit(origin, at(time.Second), Ticket{}, false); !d.Probe {
		t.Fatalf("no probe at 1 s: %+v", d)
	}
	l.Observe(origin, at(time.Second), at(ms(1010)), Observation{})
	// The probe's answer is the slow start's first, from RestartRate.
	restart := DefaultInitialRate / 2
	s := l.State(origin, at(ms(1010)))
	if s.Circuit != Closed || s.Throttled || s.Rate != restart+1 {
		t.Fatalf("after the probe: %+v, want closed, not throttled, rate %v", s, restart+1)
	}
	// It grows by one per answer.
	l.Observe(origin, at(ms(1020)), at(ms(1030)), Observation{})
	if s := l.State(origin, at(ms(1030))); s.Rate != restart+2 {
		t.Errorf("rate after one more answer %v, want %v", s.Rate, restart+2)
	}
	// A failure does not grow it.
	l.Observe(origin, at(ms(1040)), at(ms(1050)), failure)
	if s := l.State(origin, at(ms(1050))); s.Rate != restart+2 {
		t.Errorf("rate after a failure %v, want %v", s.Rate, restart+2)
	}
}

func TestBreakerKeepsTicket(t *testing.T) {
	l := openAt(t, Config{})
	tk := Ticket{Limiter: 42, Seq: 3, Due: at(ms(100))}
	d := l.Admit(origin, at(ms(200)), tk, true)
	if d.Admitted || d.Ticket != tk {
		t.Fatalf("%+v, want refused with the ticket kept", d)
	}
}

// TestBreakerOutage runs a herd of first requests against an origin that
// fails everything for a minute, each request asking again when told to,
// and counts what reaches the origin: the first burst, then a probe every
// MaxOpenTime or sooner.
func TestBreakerOutage(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Breaker
		max  int
	}{
		{"defaults", Breaker{}, 10 + 60/1 + 1},
		{"open 1 s doubling to 4 s", Breaker{MaxOpenTime: 4 * time.Second}, 10 + 3 + 60/4 + 1},
		{"open 5 s", Breaker{OpenTime: 5 * time.Second, MaxOpenTime: 5 * time.Second}, 10 + 60/5 + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := New(Config{Breaker: tc.cfg})
			const clients = 100
			next := make([]time.Duration, clients)
			tickets := make([]Ticket, clients)
			sent := 0
			for now := time.Duration(0); now < time.Minute; now += ms(10) {
				for c := range clients {
					if next[c] > now {
						continue
					}
					d := l.Admit(origin, at(now), tickets[c], false)
					if !d.Admitted {
						tickets[c], next[c] = d.Ticket, now+max(d.Wait, ms(10))
						continue
					}
					sent++
					l.Observe(origin, at(now), at(now+ms(5)), failure)
					next[c] = now + time.Second
				}
			}
			if sent > tc.max {
				t.Errorf("%d requests in a minute of failures, want at most %d", sent, tc.max)
			}
			if sent < 60/int(max(tc.cfg.MaxOpenTime, DefaultMaxOpenTime)/time.Second) {
				t.Errorf("%d requests: fewer than a probe per open time", sent)
			}
		})
	}
}

// TestGate: a request whose rate is kept elsewhere takes no turn and no
// token, but the breaker and the retry budget still decide.
func TestGate(t *testing.T) {
	l := New(Config{InitialRate: 1, MinRetries: 2, RetryRatio: 0.01})
	for i := range 50 {
		if d := l.Gate(origin, at(ms(i)), false); !d.Admitted {
			t.Fatalf("first request %d refused at 1/s: %+v", i, d)
		}
	}
	if d := l.Admit(origin, at(ms(50)), Ticket{}, false); !d.Admitted {
		t.Errorf("Gate spent the rate's token: %+v", d)
	}
	for i := range 3 {
		d := l.Gate(origin, at(ms(60+i)), true)
		if want := i < 2; d.Admitted != want || (!want && d.Reason != ReasonRetryBudget) {
			t.Errorf("retry %d: %+v, want admitted %v (budget: 2 + 1 %% of the requests)", i, d, want)
		}
	}
	for i := range 5 {
		l.Observe(origin, at(ms(100+i)), at(ms(110+i)), failure)
	}
	if d := l.Gate(origin, at(ms(200)), false); d.Admitted || d.Reason != ReasonCircuitOpen {
		t.Errorf("breaker open: %+v", d)
	}
	if d := l.Gate(origin, at(ms(1200)), false); !d.Admitted || !d.Probe {
		t.Errorf("after the open time: %+v, want the probe", d)
	}
}

// TestBreakerTrips: the one trip rule the per-process breaker and the
// cluster's (package governor) share.
func TestBreakerTrips(t *testing.T) {
	cases := []struct {
		name              string
		b                 Breaker
		answers, failures int
		want              bool
	}{
		{"defaults: 5 of 10 is not half by the margin", Breaker{}, 10, 5, false},
		{"defaults: 4 failures are too few", Breaker{}, 4, 4, false},
		{"defaults: 5 of 11 is under half", Breaker{}, 11, 5, false},
		{"defaults: 5 of 5, no error to allow for", Breaker{}, 5, 5, true},
		{"defaults: 5 of 6 is half by the margin", Breaker{}, 6, 5, true},
		{"defaults: 5 of 7 is not, by the margin", Breaker{}, 7, 5, false},
		{"defaults: 8 of 10 is", Breaker{}, 10, 8, true},
		{"defaults: 60 of 100 is", Breaker{}, 100, 60, true},
		{"defaults: 59 of 100 is not", Breaker{}, 100, 59, false},
		{"a ratio of 1: every answer failed", Breaker{FailureRatio: 1, MinFailures: 2}, 2, 2, true},
		{"a ratio of 1: one answered", Breaker{FailureRatio: 1, MinFailures: 2}, 3, 2, false},
		{"off never trips", Breaker{Off: true}, 100, 100, false},
		{"nothing answered", Breaker{}, 0, 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.b.Trips(c.answers, c.failures); got != c.want {
				t.Errorf("Trips(%d, %d) = %v, want %v", c.answers, c.failures, got, c.want)
			}
		})
	}
}

// TestBreakerTripsOnErrorsAtRandom: an API that fails 30 % of its
// requests at random, its first 100 answers into an empty window, in
// 20,000 runs of a seeded source: the trip rule with TripMargin opens the
// breaker in few of them; the ratio alone (margin 0) in about one of five.
// An API that fails every request trips at MinFailures with either.
func TestBreakerTripsOnErrorsAtRandom(t *testing.T) {
	const runs, answers = 20000, 100
	tripped := func(margin, failRate float64, rng *rand.Rand) (share float64, at int) {
		var n, sum int
		for range runs {
			failures := 0
			for i := 1; i <= answers; i++ {
				if rng.Float64() >= failRate {
					continue
				}
				failures++
				if (Breaker{}).TripsBy(i, failures, margin) {
					n, sum = n+1, sum+i
					break
				}
			}
		}
		if n == 0 {
			return 0, 0
		}
		return float64(n) / runs, sum / n
	}
	for _, c := range []struct {
		name     string
		margin   float64
		failRate float64
		min, max float64
	}{
		{"30 % at random, the margin", TripMargin, 0.3, 0, 0.02},
		{"30 % at random, the ratio alone", 0, 0.3, 0.15, 0.25},
		{"every request fails, the margin", TripMargin, 1, 1, 1},
		{"every request fails, the ratio alone", 0, 1, 1, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			share, at := tripped(c.margin, c.failRate, rand.New(rand.NewPCG(1, 2)))
			if share < c.min || share > c.max {
				t.Errorf("tripped in %.4f of the runs, want %.2f to %.2f", share, c.min, c.max)
			}
			if c.failRate == 1 && at != DefaultMinFailures {
				t.Errorf("an API that fails every request tripped after %d answers, want %d (MinFailures)", at, DefaultMinFailures)
			}
		})
	}
}

// TestBreakerOpensAfterAnswering: an origin that answered 10 requests a
// second for 10 s, then fails every one: with the answers of before still
// in the window, the ratio alone (margin 0) opened it 4.9 s into the
// failures; by TripMargin 5.9 s: the margin's price.
func TestBreakerOpensAfterAnswering(t *testing.T) {
	l := New(Config{})
	for i := range 100 {
		when := ms(100 * i)
		l.Observe(origin, at(when-ms(5)), at(when), Observation{})
	}
	for i := range 100 {
		when := 10*time.Second + ms(100*i)
		l.Observe(origin, at(when-ms(5)), at(when), failure)
		if d := l.Admit(origin, at(when+ms(1)), Ticket{}, false); d.Reason == ReasonCircuitOpen {
			if got := when - 10*time.Second; got < 5*time.Second || got > 6*time.Second {
				t.Errorf("opened %v into the failures, want 5 s to 6 s", got)
			}
			return
		}
	}
	t.Fatal("10 s of failures did not open the breaker")
}
