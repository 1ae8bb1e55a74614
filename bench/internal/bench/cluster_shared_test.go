package bench

import (
	"bytes"
	"errors"
	"fmt"
	"html"
	"slices"
	"strings"
	"testing"
	"time"
)

// clusterRun is a synthetic contention run on the cluster: requests for
// 100 successes, the last one at last seconds, failed workflows failed.
func clusterRun(workers int, shared bool, repeat, requests int, last float64, failed int) ClusterRun {
	return ClusterRun{
		Label: clusterStep{workers: workers, shared: shared}.label(), Admission: true, SharedRate: shared, Workers: workers, Repeat: repeat,
		Run: ContentionRun{Requests: requests, Successes: 100 - failed, Failed: failed, ToLastSuccess: time.Duration(last * float64(time.Second)),
			Log: []LogEntry{{0, 201}, {time.Duration(last * float64(time.Second)), 201}}},
	}
}

// clusterOutage is a synthetic outage run on the cluster.
func clusterOutage(shared bool, repeat, during int, recovery float64, failed int) ClusterOutageRun {
	return ClusterOutageRun{Workers: 3, SharedRate: shared, Repeat: repeat, Run: OutageRun{
		Admission: true, Breaker: true, Outage: defaultOutage, DuringOutage: during, After: 110, Successes: 100 - failed, Failed: failed,
		RecoveryToLast: time.Duration(recovery * float64(time.Second)),
		Log:            []LogEntry{{0, 503}, {defaultOutage + time.Second, 201}},
	}}
}

// clusterTput is a synthetic throughput result: one round per pair of
// times (on, off) in seconds.
func clusterTput(workers int, times ...[2]float64) ClusterThroughput {
	t := ClusterThroughput{Workers: workers, Workflows: clusterThroughputWorkflows}
	for i, p := range times {
		t.Rounds = append(t.Rounds, ClusterThroughputRound{On: time.Duration(p[0] * float64(time.Second)), Off: time.Duration(p[1] * float64(time.Second)), OnFirst: i%2 == 0})
	}
	return t
}

// clusterResults is a ClusterShared section whose worst runs are the given
// ones: the other runs of each figure are better.
func clusterResults(worst2, worst3 ClusterRun, worstOutage ClusterOutageRun, tput3, tput1 ClusterThroughput) *Results {
	cs := &ClusterShared{Params: defaultContention, Runs: 3}
	cs.Contention = []ClusterRun{
		clusterRun(2, true, 1, 105, 17.5, 0), worst2, clusterRun(2, true, 3, 104, 17.2, 0),
		clusterRun(3, true, 1, 106, 17.8, 0), clusterRun(3, true, 2, 103, 17.1, 0), worst3,
		clusterRun(2, false, 1, 121, 23.5, 0), clusterRun(3, false, 1, 160, 26.5, 0),
	}
	cs.Outage = []ClusterOutageRun{clusterOutage(true, 1, 61, 17, 0), worstOutage, clusterOutage(true, 3, 62, 17.2, 0), clusterOutage(false, 1, 190, 18, 0)}
	cs.Throughput = []ClusterThroughput{tput3, tput1}
	return &Results{ClusterShared: cs}
}

func TestClusterSharedClaims(t *testing.T) {
	// The limit is 100 workflows ÷ 6 per 1 s = 16.7 s; 1.15 × it is 19.2 s.
	good2, good3 := clusterRun(2, true, 2, 110, 18, 0), clusterRun(3, true, 3, 112, 18.5, 0)
	goodOut := clusterOutage(true, 2, 65, 18, 0)
	goodT3, goodT1 := clusterTput(3, [2]float64{10, 10}, [2]float64{10, 9.8}, [2]float64{10, 10.2}), clusterTput(1, [2]float64{12, 12})
	for _, c := range []struct {
		name     string
		res      *Results
		want     map[string]string // claim id → met cell
		measured map[string]string // claim id → part of the measured cell
	}{
		{name: "all met", res: clusterResults(good2, good3, goodOut, goodT3, goodT1),
			want: map[string]string{"8a": "yes", "8b": "yes", "8c": "yes", "8d": "yes", "8g": "yes", "8h": "yes", "8i": "yes", "8j": "yes"},
			measured: map[string]string{
				"8a": "1.10 (110 ÷ 100; runs: 1.05, 1.10, 1.04)", "8b": "1.08 (18.0 s ÷ 16.7 s; runs: 1.05, 1.08, 1.03; 0 failed)",
				"8c": "1.12 (112 ÷ 100; runs: 1.06, 1.03, 1.12)", "8d": "1.11 (18.5 s ÷ 16.7 s; runs: 1.07, 1.03, 1.11; 0 failed)",
				"8g": "1.08 (65 in 60 s; runs: 1.02, 1.08, 1.03)", "8h": "1.08 (18.0 s ÷ 16.7 s; runs: 1.02, 1.08, 1.03; 0 failed)",
				"8i": "1.00 (rounds: 1.00, 0.98, 1.02;", "8j": "1.00 (rounds: 1.00;",
			}},
		{name: "one slow run of three misses the time", res: clusterResults(clusterRun(2, true, 2, 110, 20, 0), good3, goodOut, goodT3, goodT1),
			want:     map[string]string{"8a": "yes", "8b": "**MISSED**", "8c": "yes", "8d": "yes"},
			measured: map[string]string{"8b": "1.20 (20.0 s ÷ 16.7 s; runs: 1.05, 1.20, 1.03; 0 failed)"}},
		{name: "too many requests with three workers", res: clusterResults(good2, clusterRun(3, true, 3, 125, 18, 0), goodOut, goodT3, goodT1),
			want: map[string]string{"8c": "**MISSED**", "8d": "yes"}},
		{name: "a failed workflow misses both", res: clusterResults(good2, clusterRun(3, true, 3, 105, 17, 1), goodOut, goodT3, goodT1),
			want: map[string]string{"8c": "**MISSED**", "8d": "**MISSED**"}, measured: map[string]string{"8d": "1 failed"}},
		{name: "a probe per worker during the outage", res: clusterResults(good2, good3, clusterOutage(true, 2, 180, 18, 0), goodT3, goodT1),
			want: map[string]string{"8g": "**MISSED**", "8h": "yes"}, measured: map[string]string{"8g": "3.00 (180 in 60 s"}},
		{name: "slow recovery", res: clusterResults(good2, good3, clusterOutage(true, 2, 60, 25, 0), goodT3, goodT1),
			want: map[string]string{"8g": "yes", "8h": "**MISSED**"}},
		{name: "shared rate slows the cluster", res: clusterResults(good2, good3, goodOut, clusterTput(3, [2]float64{11, 10}, [2]float64{11, 10}), goodT1),
			want: map[string]string{"8i": "**MISSED**", "8j": "yes"}, measured: map[string]string{"8i": "0.91"}},
		{name: "shared rate slows one worker", res: clusterResults(good2, good3, goodOut, goodT3, clusterTput(1, [2]float64{13, 12})),
			want: map[string]string{"8i": "yes", "8j": "**MISSED**"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := WriteMarkdown(&buf, c.res, "go run ./cmd/bench", "contention.svg"); err != nil {
				t.Fatal(err)
			}
			md := buf.String()
			for id, want := range c.want {
				row := claimRow(md, id)
				if row == "" {
					t.Fatalf("no claim %s in:\n%s", id, md)
				}
				if got := lastCell(row); got != want {
					t.Errorf("claim %s met = %q, want %q: %s", id, got, want, row)
				}
			}
			for id, want := range c.measured {
				if row := claimRow(md, id); !strings.Contains(row, want) {
					t.Errorf("claim %s does not say %q: %s", id, want, row)
				}
			}
			for _, want := range []string{ClusterContentionSVG, ClusterOutageSVG, "each its own rate"} {
				if !strings.Contains(md, want) {
					t.Errorf("the section does not show %q", want)
				}
			}
		})
	}
}

func TestClusterSharedClaimsWithoutRuns(t *testing.T) {
	// A section that did not get to a figure has no row for it; a check
	// with one run says so.
	for _, c := range []struct {
		name   string
		cs     *ClusterShared
		absent []string
		says   map[string]string
	}{
		{name: "contention only, one run", cs: &ClusterShared{Params: defaultContention, Runs: 1, Contention: []ClusterRun{clusterRun(2, true, 1, 110, 18, 0)}},
			absent: []string{"8c", "8d", "8g", "8h", "8i", "8j"},
			says:   map[string]string{"8a": "two worker processes): requests per success, one run (a check: the claim takes the worst of three) | 1.10 (110 ÷ 100; runs: 1.10)"}},
		{name: "throughput only", cs: &ClusterShared{Params: defaultContention, Runs: 3, Throughput: []ClusterThroughput{clusterTput(3, [2]float64{10, 10})}},
			absent: []string{"8a", "8b", "8c", "8d", "8g", "8h", "8j"},
			says:   map[string]string{"8i": "Uncontended throughput, three worker processes"}},
		{name: "no comparison rows claim anything", cs: &ClusterShared{Params: defaultContention, Runs: 1, Contention: []ClusterRun{clusterRun(2, false, 1, 110, 18, 0)}, Outage: []ClusterOutageRun{clusterOutage(false, 1, 190, 18, 0)}},
			absent: []string{"8a", "8b", "8g", "8h"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := WriteMarkdown(&buf, &Results{ClusterShared: c.cs}, "go run ./cmd/bench", "contention.svg"); err != nil {
				t.Fatal(err)
			}
			for _, id := range c.absent {
				if row := claimRow(buf.String(), id); row != "" {
					t.Errorf("claim %s written: %s", id, row)
				}
			}
			for id, want := range c.says {
				if row := claimRow(buf.String(), id); !strings.Contains(row, want) {
					t.Errorf("claim %s does not say %q: %s", id, want, row)
				}
			}
		})
	}
}

func TestClusterThroughputRatio(t *testing.T) {
	for _, c := range []struct {
		name string
		t    ClusterThroughput
		want float64
	}{
		{"none", clusterTput(3), 0},
		{"one round, on slower", clusterTput(3, [2]float64{12.5, 10}), 0.8},
		{"median of three", clusterTput(3, [2]float64{10, 5}, [2]float64{10, 10}, [2]float64{10, 20}), 1},
		{"median of two", clusterTput(1, [2]float64{10, 9}, [2]float64{10, 11}), 1},
		{"a zero time on counts as 0", clusterTput(1, [2]float64{0, 9}), 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.t.Ratio(); got < c.want-1e-9 || got > c.want+1e-9 {
				t.Errorf("Ratio() = %v, want %v", got, c.want)
			}
		})
	}
}

func TestClusterSteps(t *testing.T) {
	for _, runs := range []int{1, 3} {
		count := map[clusterStep]int{}
		for _, s := range clusterContentionSteps(runs) {
			count[clusterStep{workers: s.workers, shared: s.shared}] += s.runs
		}
		for _, want := range []struct {
			s clusterStep
			n int
		}{{clusterStep{workers: 2, shared: true}, runs}, {clusterStep{workers: 3, shared: true}, runs}, {clusterStep{workers: 2}, 1}, {clusterStep{workers: 3}, 1}} {
			if count[want.s] != want.n {
				t.Errorf("runs %d: %s runs %d times, want %d", runs, want.s.label(), count[want.s], want.n)
			}
		}
		out := map[bool]int{}
		for _, s := range clusterOutageSteps(runs) {
			if s.workers != 3 {
				t.Errorf("outage on %d workers, want 3", s.workers)
			}
			out[s.shared] += s.runs
		}
		if out[true] != runs || out[false] != 1 {
			t.Errorf("runs %d: outage runs shared %d, own %d; want %d and 1", runs, out[true], out[false], runs)
		}
	}
}

func TestClusterSVGs(t *testing.T) {
	worst2 := clusterRun(2, true, 2, 110, 19, 0)
	res := clusterResults(worst2, clusterRun(3, true, 3, 112, 18.5, 0), clusterOutage(true, 2, 70, 18, 0), clusterTput(3), clusterTput(1))
	for _, c := range []struct {
		name  string
		write func(*bytes.Buffer, *Results) error
		want  []string
	}{
		{"contention", func(b *bytes.Buffer, r *Results) error { return WriteClusterContentionSVG(b, r) },
			[]string{"2 workers, shared rate on (worst of 3 runs: run 2)", "3 workers, shared rate on (worst of 3 runs: run 3)", "2 workers, each its own rate", "3 workers, each its own rate", "110 requests"}},
		{"outage", func(b *bytes.Buffer, r *Results) error { return WriteClusterOutageSVG(b, r) },
			[]string{"3 workers, shared rate on (worst of 3 runs: run 2)", "3 workers, each its own rate", "70 requests during the outage", "recovery"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := c.write(&buf, res); err != nil {
				t.Fatal(err)
			}
			svg := html.UnescapeString(buf.String())
			for _, w := range c.want {
				if !strings.Contains(svg, w) {
					t.Errorf("the plot does not show %q", w)
				}
			}
			if err := c.write(&buf, &Results{}); err == nil {
				t.Error("a plot of no cluster runs did not fail")
			}
		})
	}
}

// TestClaimIDsUnique: every row of the claims table has an ID of its own
// (the simulation's eight workers and the cluster's outage both wrote 8f).
func TestClaimIDsUnique(t *testing.T) {
	res := clusterResults(clusterRun(2, true, 2, 110, 18, 0), clusterRun(3, true, 3, 112, 18.5, 0), clusterOutage(true, 2, 65, 18, 0),
		clusterTput(3, [2]float64{10, 10}), clusterTput(1, [2]float64{12, 12}))
	res.SimParams = defaultContention
	for _, w := range []int{2, 8} {
		res.SimAdmission = append(res.SimAdmission, SimSummary{Clients: 1000, Admission: true, Workers: w, Shared: true, Runs: 20, Requests: 1050, Duration: 170 * time.Second})
	}
	var buf bytes.Buffer
	if err := WriteMarkdown(&buf, res, "go run ./cmd/bench", "contention.svg"); err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for line := range strings.SplitSeq(buf.String(), "\n") {
		cells := strings.Split(strings.Trim(line, "| "), "|")
		id := strings.TrimSpace(cells[0])
		if !strings.HasPrefix(line, "| 8") || len(id) > 3 {
			continue
		}
		if prev, ok := seen[id]; ok {
			t.Errorf("claim %s twice:\n%s\n%s", id, prev, line)
		}
		seen[id] = line
	}
	if len(seen) < 10 {
		t.Errorf("claims 8a-8j: found %d: %v", len(seen), seen)
	}
}

// TestPairedRounds: a warm-up batch of 20 on each side, then n on each
// per round, the side that runs first alternating; each round's times and
// failures are the batches'; an error stops the rounds.
func TestPairedRounds(t *testing.T) {
	tests := []struct {
		name    string
		failAt  int // the batch call (from 1) that fails; 0: none
		rounds  int
		wantErr bool
	}{
		{"three rounds", 0, 3, false},
		{"a round's batch fails", 4, 3, true},
		{"the warm-up fails", 1, 3, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var calls []string
			batch := func(a bool, name string, n int) (ContentionRun, error) {
				calls = append(calls, fmt.Sprintf("%s/%d", name, n))
				if len(calls) == tc.failAt {
					return ContentionRun{}, errors.New("down")
				}
				wall := 2 * time.Second
				if a {
					wall = time.Second
				}
				return ContentionRun{Wall: wall, Failed: 1}, nil
			}
			var got []pairedRound
			err := pairedRounds(tc.rounds, 7, "x-%t", batch, func(i int, r pairedRound) { got = append(got, r) })
			if (err != nil) != tc.wantErr {
				t.Fatalf("pairedRounds = %v, want an error: %t", err, tc.wantErr)
			}
			if tc.wantErr {
				if len(calls) != tc.failAt {
					t.Errorf("%d batches ran after the failing one: %v", len(calls)-tc.failAt, calls)
				}
				return
			}
			want := []string{"warm-x-true/20", "warm-x-false/20", "x-true-0/7", "x-false-0/7", "x-false-1/7", "x-true-1/7", "x-true-2/7", "x-false-2/7"}
			if !slices.Equal(calls, want) {
				t.Errorf("batches %v, want %v", calls, want)
			}
			for i, r := range got {
				if r.a != time.Second || r.b != 2*time.Second || r.failed != 2 || r.aFirst != (i%2 == 0) {
					t.Errorf("round %d = %+v, want a 1s, b 2s, 2 failed, a first %t", i, r, i%2 == 0)
				}
			}
		})
	}
}
