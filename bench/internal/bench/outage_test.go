package bench

import (
	"bytes"
	"html"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/internal/backoff"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// outageResults is a synthetic outage section: Temporal's backoff sent
// base requests during the outage, adaptive admission (with the breaker)
// adm, recovering in recovery with failed workflows failed.
func outageResults(base, adm int, recovery time.Duration, failed int) *Results {
	log := []LogEntry{{0, 503}, {30 * time.Second, 503}, {61 * time.Second, 201}, {62 * time.Second, 429}}
	return &Results{
		OutageParams: defaultContention,
		Outage: []OutageRun{
			{Strategy: backoff.JitterNone, Outage: defaultOutage, DuringOutage: base, After: 884, Successes: 100, RecoveryToLast: 160 * time.Second, Log: log},
			{Strategy: workflows.JitterFull, Outage: defaultOutage, DuringOutage: 1320, After: 216, Successes: 100, RecoveryToLast: 22 * time.Second, Log: log[:3]},
			{Strategy: workflows.JitterFull, Admission: true, Breaker: true, Outage: defaultOutage, DuringOutage: adm, After: 120, Successes: 100 - failed, Failed: failed, RecoveryToLast: recovery, Log: log[2:]},
		},
		OutageSim: []OutageSim{
			{Strategy: backoff.JitterNone, Runs: 100, DuringOutage: 700, RecoveryToLast: 162 * time.Second},
			{Strategy: workflows.JitterFull, Runs: 100, DuringOutage: 1326, RecoveryToLast: 23 * time.Second},
			{Strategy: workflows.JitterFull, Admission: true, Runs: 100, DuringOutage: 35.2, RecoveryToLast: 19900 * time.Millisecond},
			{Strategy: workflows.JitterFull, Admission: true, BreakerOff: true, Runs: 100, DuringOutage: 609, RecoveryToLast: 18900 * time.Millisecond},
		},
	}
}

// claimRow returns the claims-table row of claim id, or "".
func claimRow(md, id string) string {
	for line := range strings.SplitSeq(md, "\n") {
		if strings.HasPrefix(line, "| "+id+" |") {
			return line
		}
	}
	return ""
}

// lastCell is the last cell of a markdown table row.
func lastCell(row string) string {
	cells := strings.Split(strings.Trim(row, "| "), "|")
	return strings.TrimSpace(cells[len(cells)-1])
}

func TestOutageClaims(t *testing.T) {
	// The limit is 100 workflows ÷ 6 per 1 s = 16.7 s; 1.15 × it is 19.2 s.
	for _, c := range []struct {
		name       string
		base, adm  int
		recovery   time.Duration
		failed     int
		want7a     string
		want7b     string
		measured7a string
		measured7b string
	}{
		{name: "both met", base: 700, adm: 35, recovery: 18 * time.Second,
			want7a: "yes", want7b: "yes", measured7a: "0.05 (35 ÷ 700)", measured7b: "1.08 (18.0 s ÷ 16.7 s; 0 failed)"},
		{name: "at the targets", base: 700, adm: 105, recovery: 19 * time.Second,
			want7a: "yes", want7b: "yes", measured7a: "0.15 (105 ÷ 700)", measured7b: "1.14"},
		{name: "too many requests", base: 700, adm: 200, recovery: 18 * time.Second,
			want7a: "**MISSED**", want7b: "yes", measured7a: "0.29 (200 ÷ 700)"},
		{name: "slow recovery", base: 700, adm: 35, recovery: 25 * time.Second,
			want7a: "yes", want7b: "**MISSED**", measured7b: "1.50 (25.0 s ÷ 16.7 s; 0 failed)"},
		{name: "a workflow failed", base: 700, adm: 35, recovery: 18 * time.Second, failed: 1,
			want7a: "yes", want7b: "**MISSED**", measured7b: "1 failed"},
		{name: "no baseline requests", base: 0, adm: 35, recovery: 18 * time.Second,
			want7a: "**MISSED**", want7b: "yes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := WriteMarkdown(&buf, outageResults(c.base, c.adm, c.recovery, c.failed), "go run ./cmd/bench", "contention.svg"); err != nil {
				t.Fatal(err)
			}
			md := buf.String()
			for _, k := range []struct{ id, want, measured string }{{"7a", c.want7a, c.measured7a}, {"7b", c.want7b, c.measured7b}} {
				row := claimRow(md, k.id)
				if row == "" {
					t.Fatalf("no claim %s in:\n%s", k.id, md)
				}
				if got := lastCell(row); got != k.want {
					t.Errorf("claim %s met = %q, want %q: %s", k.id, got, k.want, row)
				}
				if !strings.Contains(row, k.measured) {
					t.Errorf("claim %s lacks %q: %s", k.id, k.measured, row)
				}
			}
			for _, want := range []string{
				"| 7a | Outage: requests during the outage, adaptive admission with the circuit breaker ÷ Temporal's own backoff's |",
				"| 7b | Outage: recovery to the last success ÷ (100 workflows ÷ 6 per 1 s), adaptive admission with the circuit breaker |",
				"≤ 0.15", "≤ 1.15",
			} {
				if !strings.Contains(md, want) {
					t.Errorf("markdown lacks %q", want)
				}
			}
		})
	}
}

func TestOutageSection(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteMarkdown(&buf, outageResults(700, 35, 18*time.Second, 0), "go run ./cmd/bench", "contention.svg"); err != nil {
		t.Fatal(err)
	}
	md := buf.String()
	for _, want := range []string{
		"## 1d. Outage and recovery",
		"![Requests per second over the outage](outage.svg)",
		"| Simulated requests during the outage | Simulated recovery |",
		"| adaptive admission, breaker on | 35 | 0.05 | 120 | 18.0 s | 0.11 | 0 | 35 | 19.9 s |",
		"| adaptive admission, breaker off (simulated only) | — | — | — | — | — | — | 609 | 18.9 s |",
		"one probe at a time",
		"not counted against the workflow's attempts",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
	if strings.Contains(md, "bounds the retries while the API is down") {
		t.Errorf("the section still says the retry budget bounds the retries during the outage")
	}

	// Results from before the breaker: its admission run is not the
	// claims' run, and the table does not call it "breaker on".
	r := outageResults(700, 875, 21*time.Second, 0)
	r.Outage[2].Breaker, r.OutageSim, r.OutageParams = false, nil, ContentionParams{}
	r.SimParams = defaultContention
	buf.Reset()
	if err := WriteMarkdown(&buf, r, "go run ./cmd/bench", "contention.svg"); err != nil {
		t.Fatal(err)
	}
	md = buf.String()
	if claimRow(md, "7a") != "" || claimRow(md, "7b") != "" {
		t.Errorf("claims 7a/7b from an admission run without the breaker")
	}
	if !strings.Contains(md, "| adaptive admission | 875 |") || strings.Contains(md, "breaker on") {
		t.Errorf("the run without the breaker is mislabelled")
	}
	if !strings.Contains(md, "(100 workflows, one success each") || !strings.Contains(md, "recovers to 6 requests per 1s") {
		t.Errorf("old results: the setup does not come from SimParams")
	}
	if !strings.Contains(md, "from before adaptive admission's circuit breaker") {
		t.Errorf("old results: the section describes a breaker the run did not have")
	}
}

func TestOutageSVG(t *testing.T) {
	r := outageResults(700, 35, 18*time.Second, 0)
	var buf bytes.Buffer
	if err := WriteOutageSVG(&buf, r); err != nil {
		t.Fatal(err)
	}
	svg := buf.String()
	for _, want := range []string{html.EscapeString(strategyName(backoff.JitterNone)), strategyName(workflows.JitterFull), "adaptive admission, breaker on", "recovery", "35 requests during the outage"} {
		if !strings.Contains(svg, want) {
			t.Errorf("the plot lacks %q", want)
		}
	}
	wellFormed(t, &buf)
	if err := WriteOutageSVG(io.Discard, &Results{}); err == nil {
		t.Errorf("a plot without outage runs: want an error")
	}
}

// The circuit breaker is what keeps adaptive admission quiet while the API
// is down: with it, the simulated requests during the outage are at most
// claim 7a's target times Temporal's backoff's; without it, they are not.
func TestOutageSimBreaker(t *testing.T) {
	const runs = 10
	p := defaultContention
	none := simulateOutage(p.outageSimConfig(backoff.JitterNone, false, false, defaultOutage, 1), runs)
	on := simulateOutage(p.outageSimConfig(workflows.JitterFull, true, false, defaultOutage, 1), runs)
	off := simulateOutage(p.outageSimConfig(workflows.JitterFull, true, true, defaultOutage, 1), runs)
	if !on.Admission || on.BreakerOff || !off.BreakerOff {
		t.Fatalf("configurations: on %+v, off %+v", on, off)
	}
	if none.DuringOutage == 0 {
		t.Fatalf("Temporal's backoff sent nothing during the outage")
	}
	if r := on.DuringOutage / none.DuringOutage; r > targetOutageRequests {
		t.Errorf("with the breaker: %.1f requests during the outage, %.2f × Temporal's backoff's %.1f, want ≤ %.2f", on.DuringOutage, r, none.DuringOutage, targetOutageRequests)
	}
	if r := off.DuringOutage / none.DuringOutage; r <= targetOutageRequests {
		t.Errorf("without the breaker: %.1f requests during the outage, %.2f × Temporal's backoff's %.1f: the breaker is not what the claim measures", off.DuringOutage, r, none.DuringOutage)
	}
	for _, s := range []OutageSim{none, on, off} {
		if s.After < float64(p.Clients) || s.RecoveryToLast <= 0 {
			t.Errorf("%+v: every workflow needs a success after the recovery", s)
		}
	}
}

// simulate's count of the requests during the outage agrees with its trace.
func TestSimulateCountsDuringOutage(t *testing.T) {
	c := defaultContention.outageSimConfig(workflows.JitterFull, true, false, defaultOutage, 3)
	c.Trace = true
	r := simulate(c)
	n := 0
	for i, at := range r.Times {
		if at < defaultOutage {
			n++
			if r.OK[i] {
				t.Fatalf("a success at %s, during the outage", at)
			}
		}
	}
	if n != r.DuringOutage || n == 0 {
		t.Errorf("DuringOutage = %d, the trace has %d", r.DuringOutage, n)
	}
}
