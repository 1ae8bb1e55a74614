package bench

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// fairOrigin is an origin's figures: requests, successes, the last
// success at last seconds, the first request at first seconds, and
// during requests in A's outage.
func fairOrigin(capacity, requests, successes int, first, last float64, during int) FairnessOrigin {
	s := func(v float64) time.Duration { return time.Duration(v * float64(time.Second)) }
	return FairnessOrigin{Capacity: capacity, Requests: requests, Successes: successes, ToLastSuccess: s(last), DuringOutage: during,
		Log: []LogEntry{{At: s(first), Status: 429}, {At: s(last), Status: 201}}}
}

// fairnessResults is a synthetic fairness section (limits: A 50/6 =
// 8.3 s, B 50/2 = 25 s): today at 1.2 × and 1.04 × the limits; keys at
// 6/s serve A (1.08 ×) but send B 3 requests per success; keys at 2/s
// hold A to B's rate (3 ×); the weighted keys match today within 10 %;
// in the outage, today's B is unaffected and the weighted keys send A
// 5.5 requests a second of it, against today's 1.1.
func fairnessResults() *Results {
	p := defaultFairness
	setups := fairnessContentionSetups(p)
	run := func(s FairnessSetup, outage time.Duration, failed int, a, b FairnessOrigin) FairnessRun {
		return FairnessRun{Setup: s, Outage: outage, Failed: failed, Origins: [2]FairnessOrigin{a, b}}
	}
	f := &FairnessResult{Params: p, ServerArgs: fairnessServerArgs, Runs: []FairnessRun{
		run(setups[0], 0, 0, fairOrigin(6, 60, 50, 0, 10, 0), fairOrigin(2, 55, 50, 0, 26, 0)),
		run(setups[1], 0, 0, fairOrigin(6, 52, 50, 0, 9, 0), fairOrigin(2, 150, 50, 0, 26, 0)),
		run(setups[2], 0, 0, fairOrigin(6, 50, 50, 0, 25, 0), fairOrigin(2, 51, 50, 0, 25.5, 0)),
		run(setups[3], 0, 0, fairOrigin(6, 61, 50, 0, 10.5, 0), fairOrigin(2, 55, 50, 0, 27, 0)),
		run(setups[0], p.Outage, 0, fairOrigin(6, 100, 50, 0.2, 40, 33), fairOrigin(2, 55, 50, 0, 26, 55)),
		run(setups[3], p.Outage, 2, fairOrigin(6, 250, 48, 0.2, 41, 165), fairOrigin(2, 56, 50, 0, 27, 56)),
	}}
	return &Results{Fairness: f}
}

// TestFairnessReport: the claims say what the figures give: today's
// against the cluster's targets, each fairness-key setup against today's
// (met only within 10 % for both origins), and the outage likewise; the
// section's table has a row per run and origin.
func TestFairnessReport(t *testing.T) {
	r := fairnessResults()
	goals := r.Fairness.goals()
	want := []struct {
		id, claim, measured string
		ok                  bool
	}{
		{"13a", "a task queue per origin, shared rate: time to each origin's last success", "A 1.20 (10.0 s ÷ 8.3 s); B 1.04 (26.0 s ÷ 25.0 s)", false},
		{"13b", "requests per success", "A 1.20 (60 ÷ 50); B 1.10 (55 ÷ 50)", true},
		{"13c", "fairness keys, 6/s per key: time", "A 1.08 (today 1.20); B 1.04 (today 1.04)", true},
		{"13d", "fairness keys, 6/s per key: requests per success", "A 1.04 (today 1.20); B 3.00 (today 1.10)", false},
		{"13e", "fairness keys, 2/s per key: time", "A 3.00 (today 1.20)", false},
		{"13f", "fairness keys, 2/s per key: requests", "A 1.00 (today 1.20); B 1.02 (today 1.10)", true},
		{"13g", "fairness keys, 2/s × weights 3:1: time", "A 1.26 (today 1.20); B 1.08 (today 1.04)", true},
		{"13h", "fairness keys, 2/s × weights 3:1: requests", "A 1.22 (today 1.20); B 1.10 (today 1.10)", true},
		{"13i", "Origin A down (503) for 30 s, then 6/s; a task queue per origin", "B 1.04; A 1.10 a second (33 in 30 s), recovery 1.18", false},
		{"13j", "Origin A down, one task queue, fairness keys, 2/s × weights 3:1", "B 1.08 (today 1.04); A 5.50 a second (today 1.10), recovery 1.30 (today 1.18); 2 failed", false},
	}
	if len(goals) != len(want) {
		t.Fatalf("%d claims, want %d: %+v", len(goals), len(want), goals)
	}
	for i, w := range want {
		g := goals[i]
		if g.ID != w.id || g.OK != w.ok {
			t.Errorf("claim %d: %s ok=%t, want %s ok=%t (%s | %s)", i, g.ID, g.OK, w.id, w.ok, g.Claim, g.Measured)
		}
		if !strings.Contains(g.Measured, w.measured) {
			t.Errorf("claim %s measured %q, want it to hold %q", g.ID, g.Measured, w.measured)
		}
		words := strings.SplitN(w.claim, ": ", 2)
		if !strings.Contains(g.Claim, words[0]) {
			t.Errorf("claim %s is %q, want it to name %q", g.ID, g.Claim, words[0])
		}
	}

	var md bytes.Buffer
	if err := WriteMarkdown(&md, r, "go run ./cmd/bench -only fairness", "contention.svg"); err != nil {
		t.Fatal(err)
	}
	out := md.String()
	for _, s := range []string{
		"| 13a |", "| 13j |", "**MISSED**",
		"## 13. Temporal's fairness keys",
		"matching.enableFairness=true",
		"| fairness keys, 2/s × weights 3:1 | 30 s | A (6/s) | 250 | 5.21 | 41.0 s | 4.92 | 165 | 2 | — |",
		"| a task queue per origin, shared rate | no | B (2/s) | 55 | 1.10 | 26.0 s | 1.04 | — | 0 | — |",
		"](fairness.svg)", "](fairness-outage.svg)",
	} {
		if !strings.Contains(out, s) {
			t.Errorf("RESULTS.md lacks %q", s)
		}
	}
	for _, draw := range []func(*bytes.Buffer) error{
		func(b *bytes.Buffer) error { return WriteFairnessSVG(b, r) },
		func(b *bytes.Buffer) error { return WriteFairnessOutageSVG(b, r) },
	} {
		var svg bytes.Buffer
		if err := draw(&svg); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(svg.String(), "origin B") || !strings.Contains(svg.String(), "capacity of the panel") {
			t.Errorf("plot lacks its panels or capacity legend: %.300s", svg.String())
		}
	}
	if err := WriteFairnessSVG(&bytes.Buffer{}, &Results{}); err == nil {
		t.Error("a plot without runs: no error")
	}
}

// TestFairnessOrigins: the logs become figures from the first request to
// either origin, and requests in the outage are counted from A's first.
func TestFairnessOrigins(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	logs := [2][]stamped{
		{{at(1), 503}, {at(20), 503}, {at(31.5), 201}, {at(32), 201}},
		{{at(0), 429}, {at(2), 201}, {at(35), 201}},
	}
	got := fairnessOrigins(logs, [2]int{6, 2}, 30*time.Second)
	a, b := got[0], got[1]
	if a.Requests != 4 || a.Successes != 2 || a.ToLastSuccess != 32*time.Second || a.DuringOutage != 2 || a.Log[0].At != time.Second {
		t.Errorf("A: %+v", a)
	}
	if b.Requests != 3 || b.Successes != 2 || b.ToLastSuccess != 35*time.Second || b.DuringOutage != 2 {
		t.Errorf("B: %+v", b)
	}
}
