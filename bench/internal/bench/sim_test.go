package bench

import (
	"bytes"
	"encoding/xml"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/internal/backoff"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// These tests are fast, deterministic (seeded, virtual time) and never
// assert wall-clock timing. The dev-server measurements run only from
// cmd/bench.

func TestSimulateIsDeterministic(t *testing.T) {
	cfg := defaultContention.simConfig(30, workflows.JitterFull, 7)
	a, b := simulate(cfg), simulate(cfg)
	if a.Requests != b.Requests || a.Duration != b.Duration {
		t.Fatalf("same seed, different results: %+v and %+v", a, b)
	}
	cfg.Seed = 8
	if c := simulate(cfg); c.Requests == a.Requests && c.Duration == a.Duration {
		t.Errorf("another seed gave the very same run (%d requests, %s): is the seed used?", c.Requests, c.Duration)
	}
}

func TestCapacityModel(t *testing.T) {
	m := &capacityModel{k: 2, window: time.Second}
	var got []bool
	for _, at := range []time.Duration{0, 10 * time.Millisecond, 20 * time.Millisecond, 999 * time.Millisecond, time.Second, 1100 * time.Millisecond, 1200 * time.Millisecond, 3 * time.Second} {
		got = append(got, m.request(at, 0))
	}
	want := []bool{true, true, false, false, true, true, false, true}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("request %d: got %v, want %v (all: %v)", i, got[i], want[i], got)
		}
	}
}

// With every client starting at the same instant and no network delay,
// deterministic backoff is pure lockstep: K of the remaining clients get
// through per round, so the requests are N + (N−K) + … exactly.
func TestNoJitterIsLockstep(t *testing.T) {
	p := defaultContention
	cfg := p.simConfig(20, backoff.JitterNone, 1)
	cfg.NetMean, cfg.NetSD = 0, 0
	r := simulate(cfg)
	want := 0
	for n := 20; n > 0; n -= p.Capacity {
		want += n
	}
	if r.Requests != want {
		t.Errorf("requests = %d, want %d", r.Requests, want)
	}
	// The last round starts after the sum of the ceilings of the earlier ones.
	var wantDur time.Duration
	rounds := (20 + p.Capacity - 1) / p.Capacity
	for a := int32(1); a < int32(rounds); a++ {
		wantDur += p.backoff(backoff.JitterNone).Ceiling(a)
	}
	if r.Duration != wantDur {
		t.Errorf("duration = %s, want %s", r.Duration, wantDur)
	}
}

// Every client succeeds once, and full jitter does less work and finishes
// sooner than Temporal's deterministic backoff, in both models.
func TestFullJitterBeatsNoJitter(t *testing.T) {
	const n, runs = 50, 20
	models := map[string]func(workflows.Jitter) simConfig{
		"capacity": func(j workflows.Jitter) simConfig { return defaultContention.simConfig(n, j, 1) },
		"brooker":  func(j workflows.Jitter) simConfig { return brookerConfig(n, j, 1) },
	}
	for name, cfg := range models {
		t.Run(name, func(t *testing.T) {
			none := simulateMean(cfg(backoff.JitterNone), runs)
			for _, j := range []workflows.Jitter{workflows.JitterFull, workflows.JitterEqual, workflows.JitterDecorrelated} {
				s := simulateMean(cfg(j), runs)
				if s.Requests < n {
					t.Errorf("%s: %.0f requests for %d clients: every client needs one success", j, s.Requests, n)
				}
				if s.Requests >= none.Requests || s.Duration >= none.Duration {
					t.Errorf("%s: %.0f requests in %s, not less than no jitter's %.0f in %s", j, s.Requests, s.Duration, none.Requests, none.Duration)
				}
			}
			full := simulateMean(cfg(workflows.JitterFull), runs)
			if r := full.Requests / none.Requests; r > 0.75 {
				t.Errorf("full jitter does %.2f of no jitter's work, want clearly less", r)
			}
			if r := full.Duration.Seconds() / none.Duration.Seconds(); r > 0.5 {
				t.Errorf("full jitter takes %.2f of no jitter's time, want clearly less", r)
			}
		})
	}
}

// Brooker's model reproduces his published shape at 100 clients: full
// jitter cuts the calls by about half against exponential backoff without
// jitter and finishes many times sooner.
func TestBrookerShape(t *testing.T) {
	none := simulateMean(brookerConfig(100, backoff.JitterNone, 1), 10)
	full := simulateMean(brookerConfig(100, workflows.JitterFull, 1), 10)
	if r := full.Requests / none.Requests; r < 0.3 || r > 0.6 {
		t.Errorf("full/none calls = %.2f (%.0f/%.0f), Brooker reports 796/1846 = 0.43", r, full.Requests, none.Requests)
	}
	if r := none.Duration.Seconds() / full.Duration.Seconds(); r < 5 {
		t.Errorf("none/full time = %.1f, Brooker reports about 13", r)
	}
}

func TestTemporalSimConfigAddsHerdAndFloor(t *testing.T) {
	c := defaultContention.temporalSimConfig(10, workflows.JitterFull, 1)
	if c.StartSpread != temporalHerdSpread || c.MinRetryDelay != temporalMinDelay {
		t.Fatalf("got spread %s, floor %s", c.StartSpread, c.MinRetryDelay)
	}
	c.Trace = true
	r := simulate(c)
	if len(r.Times) != r.Requests || len(r.OK) != r.Requests {
		t.Fatalf("trace has %d times, %d outcomes for %d requests", len(r.Times), len(r.OK), r.Requests)
	}
	ok := 0
	for _, v := range r.OK {
		if v {
			ok++
		}
	}
	if ok != 10 {
		t.Errorf("%d successes, want one per client (10)", ok)
	}
}

func TestContentionSVG(t *testing.T) {
	log := []LogEntry{{0, 201}, {10 * time.Millisecond, 503}, {1500 * time.Millisecond, 201}, {4 * time.Second, 503}}
	var buf bytes.Buffer
	if err := writeContentionSVG(&buf, "t <&>", []plotSeries{{Title: "a", Log: log}, {Title: "b", Log: log[:2]}}, time.Second, 6); err != nil {
		t.Fatal(err)
	}
	wellFormed(t, &buf)

	// WriteContentionSVG plots the first two contention runs of a result.
	r := &Results{Contention: &ContentionResult{Params: defaultContention, Runs: []ContentionRun{
		{Strategy: backoff.JitterNone, Log: log}, {Strategy: workflows.JitterFull, Log: log[:2]},
	}}}
	buf.Reset()
	if err := WriteContentionSVG(&buf, r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), strategyName(workflows.JitterFull)) {
		t.Errorf("the plot lacks the full-jitter panel")
	}
	wellFormed(t, &buf)
	r.Contention.Runs = r.Contention.Runs[:1]
	if err := WriteContentionSVG(io.Discard, r); err == nil {
		t.Errorf("a plot from one contention run: want an error")
	}
}

func wellFormed(t *testing.T, r io.Reader) {
	t.Helper()
	d := xml.NewDecoder(r)
	for {
		_, err := d.Token()
		if err != nil {
			if err != io.EOF {
				t.Fatalf("not well-formed XML: %v", err)
			}
			break
		}
	}
}

func TestWriteMarkdown(t *testing.T) {
	brooker, capacity := []SimSummary{}, []SimSummary{}
	for _, j := range strategies {
		brooker = append(brooker, simulateMean(brookerConfig(10, j, 1), 2))
		capacity = append(capacity, simulateMean(defaultContention.simConfig(10, j, 1), 2))
	}
	r := &Results{
		SimBrooker: brooker, SimCapacity: capacity,
		Contention: &ContentionResult{Params: defaultContention, Runs: []ContentionRun{
			{Strategy: backoff.JitterNone, Requests: 800, Successes: 100, ToLastSuccess: 150 * time.Second},
			{Strategy: workflows.JitterFull, Requests: 300, Successes: 100, ToLastSuccess: 20 * time.Second},
		}},
		Throughput: &ThroughputResult{OursPerSecond: 90, MinimalPerSec: 100, Ratio: 0.9, Rounds: []ThroughputRound{{Kind: "ours"}, {Kind: "minimal"}}},
	}
	var buf bytes.Buffer
	if err := WriteMarkdown(&buf, r, "go run ./cmd/bench", "contention.svg"); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"| 1a |", "0.38 (300 ÷ 800)", "| 1b |", "0.13", "| 4 |", "![", "contention.svg", "Brooker"} {
		if !strings.Contains(out, want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
}

// TestSharedSimulationTargets: the 1000-workflow simulation on two and on
// eight workers, the governor's own decision code setting one rate for
// all, finishes within 1.1 × the limit for at most 1.2 requests per
// success (the targets), every seed; and during an outage on
// three workers, once the cluster's breaker is in force (settle), it lets
// one request a second through, fewer in all than each worker's own
// breaker. (The outage's first seconds, before the governor hears of
// it, bring the whole to about 1.25 a second: the target of 1.2 is
// missed, as on the cluster.)
func TestSharedSimulationTargets(t *testing.T) {
	p := defaultContention
	for _, workers := range []int{2, 8} {
		for seed := uint64(1); seed <= 5; seed++ {
			const n = 1000
			r := simulate(p.sharedSimConfig(n, workers, seed))
			lim := float64(n) / float64(p.Capacity) * p.Window.Seconds()
			if tr, rps := r.Duration.Seconds()/lim, float64(r.Requests)/n; tr > 1.1 || rps > 1.2 {
				t.Errorf("%d workers, seed %d: %.3f × the limit, %.3f requests per success; want ≤ 1.1 and ≤ 1.2", workers, seed, tr, rps)
			}
		}
	}
	outage := defaultOutage
	const settle = 3 * time.Second
	for seed := uint64(1); seed <= 5; seed++ {
		c := p.sharedOutageSimConfig(sharedOutageWorkers, outage, seed)
		c.Trace = true
		r := simulate(c)
		late := 0
		for _, at := range r.Times {
			if at >= settle && at < outage {
				late++
			}
		}
		if max := int((outage-settle)/time.Second) + 1; late > max {
			t.Errorf("seed %d: %d requests from %s into the %s outage to its end on %d workers, want ≤ %d (one a second)", seed, late, settle, outage, sharedOutageWorkers, max)
		}
	}
	s := simulateOutage(p.sharedOutageSimConfig(sharedOutageWorkers, outage, 1), 5)
	// Without the governor each worker's own breaker probes: more.
	c := p.admissionSimConfig(p.Clients, sharedOutageWorkers, 1)
	c.Outage = outage
	own := simulateOutage(c, 5)
	if own.DuringOutage <= s.DuringOutage {
		t.Errorf("each worker's own breaker let %.0f through, the cluster's %.0f: want fewer with the cluster's", own.DuringOutage, s.DuringOutage)
	}
	t.Logf("outage: %.0f requests in %s, %.2f a second (each worker's own breaker: %.0f), %.0f after, the last success %.1f s after the recovery", s.DuringOutage, outage, s.DuringOutage/outage.Seconds(), own.DuringOutage, s.After, s.RecoveryToLast.Seconds())
}

// TestSharedSimulationOneWorker: one worker alone with the shared rate on
// recovers from an outage as fast as on its own breaker (it sends the
// governor nothing, so its own limiter decides); through the governor it
// took 1.27 × the capacity's time against 1.18 × (50 workflows, 30 s).
// Its price is in hops: each attempt its breaker holds back past what the
// attempt may wait (admission.Limiter.InAttempt) goes back to Temporal (an
// action), about 15 per workflow over the 30 s, against 0.8 through the
// governor.
func TestSharedSimulationOneWorker(t *testing.T) {
	p := defaultContention
	p.Clients = 50
	const outage = 30 * time.Second
	lim := float64(p.Clients) / float64(p.Capacity) * p.Window.Seconds()
	shared := simulateOutage(p.sharedOutageSimConfig(1, outage, 1), 10)
	c := p.admissionSimConfig(p.Clients, 1, 1)
	c.Outage = outage
	own := simulateOutage(c, 10)
	s, o := shared.RecoveryToLast.Seconds()/lim, own.RecoveryToLast.Seconds()/lim
	t.Logf("one worker, %s outage: shared rate %.2f × the capacity's time, %.1f hops per workflow; its own %.2f ×, %.1f hops", outage, s, shared.Hops, o, own.Hops)
	if s > 1.05*o {
		t.Errorf("one worker on the shared rate recovered in %.2f × the capacity's time, on its own breaker %.2f ×: want within 5 %%", s, o)
	}
	if own.Hops <= 0 {
		t.Errorf("no hop in a %s outage: the breaker held nothing back past MaxWait", outage)
	}
}
