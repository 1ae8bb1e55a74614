package bench

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"
)

// partialRun is a run of n successes for requests requests, failures of
// them failed, from the first start to the last success in makespan.
func partialRun(n, requests, failures int, makespan time.Duration, held map[string]float64) PartialRun {
	r := PartialRun{ContentionRun: ContentionRun{Requests: requests, Successes: n, FirstRequest: 100 * time.Millisecond, ToLastSuccess: makespan - 100*time.Millisecond}, Failures: failures, Held: held}
	r.Attempts = float64(requests) + r.HeldTotal()
	for i := range requests {
		status := 201
		if i < failures {
			status = 503
		}
		r.Log = append(r.Log, LogEntry{At: time.Duration(i) * makespan / time.Duration(requests), Status: status})
	}
	return r
}

// partialResults is a synthetic partial section: three rounds of 200,
// 1.45 requests per success over the three (the second's 1.48 with 6
// replays), the second's throughput 0.62 of its clean run's (missed),
// the third's worker breaker open; and the run at capacity.
func partialResults() *Results {
	clean := partialRun(200, 200, 0, 10*time.Second, map[string]float64{"rate": 40})
	first := partialRun(200, 286, 86, 14*time.Second, map[string]float64{"rate": 30})
	first.Waits, first.WaitSeconds = 10, 2.5
	pr := &PartialResult{Params: PartialParams{Clients: 200, FailureRate: 0.3, FailureStatus: 503, MaximumAttempts: 20, Rounds: 3}, ThrottledParams: defaultContention,
		Rounds: []PartialRound{
			{Clean: clean, Failing: first},
			{Clean: clean, Failing: partialRun(200, 296, 90, 16*time.Second, nil)},
			{Clean: clean, Failing: partialRun(200, 290, 90, 15*time.Second, map[string]float64{"circuit_open": 12, "rate": 5})},
		}}
	t := partialRun(100, 111, 0, 18*time.Second, map[string]float64{"rate": 300})
	pr.Throttled = &t
	return &Results{Partial: pr}
}

// TestPartialReport: the claims say what the figures give: the requests
// per success over the three runs within 1.5 (the replays counted), the
// worst round's throughput ratio under 0.9 ÷ 1.43, a breaker open in one
// run of three, and the run at capacity as a comparison.
func TestPartialReport(t *testing.T) {
	r := partialResults()
	var md bytes.Buffer
	if err := WriteMarkdown(&md, r, "bench", "contention.svg"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| 12a | Partial failure: an API with ample capacity failing 30 % of requests at random (503), 200 workflows at once",
		"| 1.45 (872 ÷ 600; runs 1.43, 1.48, 1.45; requests neither a 503 nor a success: 6; the floor 1 ÷ 0.7 = 1.43) | ≤ 1.50 | yes |",
		"| 12b | … throughput (successes per second from the first start to the last success) ÷ the same API without failures, in the same round, worst of 3 rounds",
		"| 0.62 (round 2: 12.5/s ÷ 20.0/s; rounds 0.71, 0.62, 0.67) | ≥ 0.63 (0.9 ÷ 1.43) | **MISSED** |",
		"| 12c | … the admission does not take the errors for overload",
		"| opened in 1 of 3 runs; attempts admission ended unsent, in all: 47 (circuit_open 12, rate 35), of 919 attempts for 872 requests; waits inside attempts: 10 (2.5 s in all) | never opens | **MISSED** |",
		"| 12d | … and the reverse, an API at capacity answering 429 (the contention setup: 100 workflows, 6 accepted per 1s)",
		"| 1.11 (111 ÷ 100); 1.07 (17.9 s ÷ 16.7 s); 0 failed; breaker: worker: no; governor: no | as today (5a, 5b) | — |",
		"## 12. Partial failure",
		"| round 1, no failures | 0 | 200 | 0 | 200 | 1.00 | 10.0 s | 20.0 | 240 | 40 (rate 40) | 0 (0.0 s) | worker: no; governor: no |",
		"| round 1, 30 % 503 | 0 | 286 | 86 | 200 | 1.43 | 14.0 s | 14.3 | 316 | 30 (rate 30) | 10 (2.5 s) | worker: no; governor: no |",
		"| round 3, 30 % 503 | 0 | 290 | 90 | 200 | 1.45 | 15.0 s | 13.3 | 307 | 17 (circuit_open 12, rate 5) | 0 (0.0 s) | worker: **yes** (12 attempts held for it; seen open in a scrape: false); governor: no |",
		"| 429 at capacity (6 per 1s) | 0 | 111 | 0 | 100 | 1.11 | 18.0 s | 5.6 | 411 | 300 (rate 300) |",
	} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("RESULTS.md lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("RESULTS.md:\n%s", md.String())
	}

	// A failed workflow misses the claims whatever the figures.
	r.Partial.Rounds[0].Failing.Failed = 1
	for _, c := range r.Partial.claims() {
		if (c.ID == "12a" || c.ID == "12b") && c.OK {
			t.Errorf("claim %s met with a workflow failed", c.ID)
		}
	}

	var svg bytes.Buffer
	if err := WritePartialSVG(&svg, r); err != nil {
		t.Fatal(err)
	}
	// The panels are round 2's, the worst by throughput, and the 429 run.
	for _, want := range []string{"<svg", "round 2: no failures", "round 2: 30 % answered 503 at random", "no breaker opened", "100 workflows, 6 accepted per 1s, 429 beyond", "</svg>"} {
		if !strings.Contains(svg.String(), want) {
			t.Errorf("partial.svg lacks %q", want)
		}
	}
	if err := WritePartialSVG(io.Discard, &Results{}); err == nil {
		t.Error("WritePartialSVG drew results without a partial section")
	}
}

// TestParseWorkerMetrics reads the attempts, the held attempts by reason
// and the breaker's gauge of a host worker's /metrics.
func TestParseWorkerMetrics(t *testing.T) {
	text := `# HELP idempotent_http_attempts_total x
# TYPE idempotent_http_attempts_total counter
idempotent_http_attempts_total{error_type="none",origin="http://a",outcome="success"} 200
idempotent_http_attempts_total{error_type="ServerError",origin="http://a",outcome="retryable"} 88
idempotent_http_attempts_total{error_type="NotAdmitted",origin="http://a",outcome="retryable"} 7
# HELP idempotent_http_admission_delays_total x
# TYPE idempotent_http_admission_delays_total counter
idempotent_http_admission_delays_total{origin="http://a",reason="rate"} 5
idempotent_http_admission_delays_total{origin="http://a",reason="circuit_open"} 2
# HELP idempotent_http_admission_wait_seconds x
# TYPE idempotent_http_admission_wait_seconds histogram
idempotent_http_admission_wait_seconds_bucket{origin="http://a",le="1"} 3
idempotent_http_admission_wait_seconds_bucket{origin="http://a",le="+Inf"} 3
idempotent_http_admission_wait_seconds_sum{origin="http://a"} 1.5
idempotent_http_admission_wait_seconds_count{origin="http://a"} 3
# HELP idempotent_http_circuit_open x
# TYPE idempotent_http_circuit_open gauge
idempotent_http_circuit_open{origin="http://a"} 0
`
	m, err := parseWorkerMetrics([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	if m.Attempts != 295 || m.Held["rate"] != 5 || m.Held["circuit_open"] != 2 || m.Waits != 3 || m.WaitSeconds != 1.5 || m.CircuitOpen {
		t.Errorf("parseWorkerMetrics = %+v; want 295 attempts, held rate 5 and circuit_open 2, 3 waits of 1.5 s, the circuit closed", m)
	}
	m, err = parseWorkerMetrics([]byte(strings.Replace(text, `{origin="http://a"} 0`, `{origin="http://a"} 1`, 1)))
	if err != nil || !m.CircuitOpen {
		t.Errorf("parseWorkerMetrics with the gauge at 1: %+v, %v; want the circuit open", m, err)
	}
}

// TestPartialParamsDefaults: zero fields take the section's defaults.
func TestPartialParamsDefaults(t *testing.T) {
	if got := (PartialParams{}).withDefaults(); got != defaultPartial {
		t.Errorf("withDefaults = %+v; want %+v", got, defaultPartial)
	}
	if got := (PartialParams{Clients: 20}).withDefaults(); got.Clients != 20 || got.Rounds != defaultPartial.Rounds {
		t.Errorf("withDefaults kept %+v", got)
	}
}
