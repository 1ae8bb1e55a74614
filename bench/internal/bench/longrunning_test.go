package bench

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/internal/poll"
	"github.com/idemhttp/temporal-idempotent-http/testsuite"
)

func TestRatioStats(t *testing.T) {
	if got := ratioStats(nil); got != (RatioStats{}) {
		t.Fatalf("empty: %+v", got)
	}
	var xs []float64
	for i := 100; i >= 1; i-- {
		xs = append(xs, 1+float64(i)/1000) // 1.001 … 1.100, unsorted
	}
	got := ratioStats(xs)
	want := RatioStats{N: 100, Min: 1.001, P50: 1.050, P95: 1.095, Max: 1.100}
	if got.N != want.N || !near(got.Min, want.Min) || !near(got.P50, want.P50) || !near(got.P95, want.P95) || !near(got.Max, want.Max) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if xs[0] != 1.1 {
		t.Fatal("ratioStats sorted its input")
	}
	if !got.within(1.15) || got.within(1.09) {
		t.Fatalf("within: %+v", got)
	}
	if (RatioStats{N: 3, Min: 0.99, Max: 1.01}).within(1.15) {
		t.Fatal("a gap shorter than asked is not within")
	}
	if (RatioStats{}).within(1.15) {
		t.Fatal("no gaps is not within")
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestMedianMax(t *testing.T) {
	if md, mx := medianMax([]int{5, 1, 4, 2}); md != 2 || mx != 5 {
		t.Fatalf("medianMax: %d %d", md, mx)
	}
	if md, mx := medianMax(nil); md != 0 || mx != 0 {
		t.Fatalf("medianMax(nil): %d %d", md, mx)
	}
}

func TestCountAndDurStats(t *testing.T) {
	if c := countStats([]int{11, 10, 12, 11}); c != (CountStats{Mean: 11, Min: 10, Max: 12}) {
		t.Fatalf("countStats: %+v", c)
	}
	d := durStats([]time.Duration{3 * time.Millisecond, time.Millisecond, 2 * time.Millisecond})
	if d != (DurStats{N: 3, P50: 2 * time.Millisecond, P95: 3 * time.Millisecond, Max: 3 * time.Millisecond}) {
		t.Fatalf("durStats: %+v", d)
	}
}

// TestPollSeries: gaps pair the k-th GET with attempt k's asked delay;
// polls, mismatches, failures, lateness and early gaps are counted.
func TestPollSeries(t *testing.T) {
	s := time.Second
	base := time.Unix(1000, 0)
	snap := ClockSnapshot{
		Accepted: map[string]time.Duration{"m1": 0, "m2": 0},
		Polls: map[string][]time.Duration{
			"m1": {400 * time.Millisecond, 2450 * time.Millisecond, 4500 * time.Millisecond}, // gaps 2.05, 2.05
			"m2": {500 * time.Millisecond, 2600 * time.Millisecond, 2650 * time.Millisecond}, // gaps 2.1, 0.05 (early)
		},
	}
	rec := func(at, asked time.Duration) attemptRec {
		return attemptRec{Asked: asked, Started: base.Add(at), Began: base.Add(at + 5*time.Millisecond), Ended: base.Add(at + 10*time.Millisecond)}
	}
	attempts := map[string][]attemptRec{
		"m1": {rec(0, 2*s), rec(2*s+60*time.Millisecond, 2*s), rec(4*s+120*time.Millisecond, 0)},
		"m2": {rec(0, 2*s), rec(2*s+100*time.Millisecond, 2*s), rec(2*s+150*time.Millisecond, 0)},
	}
	got := pollSeries("t", 2, 4*s, snap, attempts, map[string]int32{"m1": 3, "m2": 2, "m3": -1}, true)
	if got.Operations != 3 || got.Failed != 1 || got.PollsMismatch != 1 {
		t.Fatalf("operations %d failed %d mismatch %d, want 3 1 1", got.Operations, got.Failed, got.PollsMismatch)
	}
	if got.Polls != (CountStats{Mean: 2, Min: 0, Max: 3}) {
		t.Fatalf("polls %+v", got.Polls)
	}
	if got.Ratios.N != 4 || !near(got.Ratios.Min, 0.025) || !near(got.Ratios.Max, 1.05) {
		t.Fatalf("ratios %+v", got.Ratios)
	}
	if len(got.Gaps) != 4 || got.Gaps[0].Poll != 1 || got.Gaps[3].Poll != 2 {
		t.Fatalf("gaps %+v", got.Gaps)
	}
	if len(got.Early) != 1 || got.Early[0].Monitor != "m2" || got.Early[0].Gap.Poll != 2 {
		t.Fatalf("early %+v", got.Early)
	}
	// Late: next start − earlier return − asked = 50, 50, 90 and −1960 ms.
	if got.Late.N != 4 || got.Late.Max != 90*time.Millisecond || got.Delivery.P50 != 5*time.Millisecond {
		t.Fatalf("late %+v delivery %+v", got.Late, got.Delivery)
	}
	// m1 ended at 4 s and was seen at 4.5 s; m2 (synthetic) at 2.65 s.
	if got.Seen.N != 2 || got.Seen.Max != 500*time.Millisecond {
		t.Fatalf("seen %+v", got.Seen)
	}
	if got.FirstPollMedian != 400*time.Millisecond || got.FirstPoll != 500*time.Millisecond {
		t.Fatalf("first poll %s / %s", got.FirstPollMedian, got.FirstPoll)
	}
	if got.idealPolls() != 2 || (PollSeries{Duration: 4 * s}).idealPolls() != 0 {
		t.Fatal("idealPolls")
	}
	// Without a recorded delay a gap is unmatched, not a ratio.
	got = pollSeries("t", 2, 4*s, snap, nil, map[string]int32{"m1": 3}, false)
	if got.Unmatched != 2 || got.Ratios.N != 0 || got.Gaps != nil {
		t.Fatalf("unmatched %d ratios %+v gaps %v", got.Unmatched, got.Ratios, got.Gaps)
	}
}

func TestBackoffRows(t *testing.T) {
	s := time.Second
	gaps := []PollGap{
		{Poll: 2, Asked: 1500 * time.Millisecond, Gap: 1510 * time.Millisecond},
		{Poll: 1, Asked: s, Gap: 1020 * time.Millisecond},
		{Poll: 2, Asked: 1900 * time.Millisecond, Gap: 1930 * time.Millisecond},
		{Poll: 3, Asked: 1500 * time.Millisecond, Gap: 1520 * time.Millisecond}, // below 2 s: outside
		{Poll: 8, Asked: 45 * s, Gap: 45 * s},
	}
	rows := backoffRows(gaps, poll.Backoff(0, 0))
	if len(rows) != 4 {
		t.Fatalf("%d rows", len(rows))
	}
	want := []BackoffRow{
		{Poll: 1, Ceiling: s, Lo: s, Hi: s, N: 1, AskedMin: s, AskedMax: s, GapMin: 1020 * time.Millisecond, GapMax: 1020 * time.Millisecond},
		{Poll: 2, Ceiling: 2 * s, Lo: s, Hi: 2 * s, N: 2, AskedMin: 1500 * time.Millisecond, AskedMax: 1900 * time.Millisecond, GapMin: 1510 * time.Millisecond, GapMax: 1930 * time.Millisecond},
		{Poll: 3, Ceiling: 4 * s, Lo: 2 * s, Hi: 4 * s, N: 1, AskedMin: 1500 * time.Millisecond, AskedMax: 1500 * time.Millisecond, GapMin: 1520 * time.Millisecond, GapMax: 1520 * time.Millisecond, Outside: 1},
		// 2^7 s passes the 1 min cap.
		{Poll: 8, Ceiling: time.Minute, Lo: 30 * s, Hi: time.Minute, N: 1, AskedMin: 45 * s, AskedMax: 45 * s, GapMin: 45 * s, GapMax: 45 * s},
	}
	for i := range want {
		if rows[i] != want[i] {
			t.Errorf("row %d: got %+v, want %+v", i, rows[i], want[i])
		}
	}
}

func TestClassifyGoroutines(t *testing.T) {
	profile := `goroutine profile: total 1010
1000 @ 0x1 0x2
#	0x1	runtime.gopark+0x1	/go/src/runtime/proc.go:1
#	0x2	go.temporal.io/sdk/internal.(*coroutineState).yield+0x2	/mod/internal_workflow.go:1

3 @ 0x3
#	0x3	net/http.(*persistConn).readLoop+0x3	/go/src/net/http/transport.go:1

2 @ 0x4
#	0x4	net/http.(*conn).serve+0x4	/go/src/net/http/server.go:1

1 @ 0x5
#	0x5	github.com/idemhttp/temporal-idempotent-http/activities.(*Activities).pollActivity+0x5	/x/poll.go:1

4 @ 0x6
#	0x6	google.golang.org/grpc.(*addrConn).resetTransport+0x6	/mod/grpc.go:1
`
	got := classifyGoroutines(profile)
	want := map[string]int{kindWorkflow: 1000, kindHTTP: 5, kindPoll: 1, kindOther: 4}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: got %d, want %d", k, got[k], v)
		}
	}
	if k := goroutineKinds(); k[kindOther] == 0 {
		t.Fatalf("this process's own goroutines: %v", k)
	}
}

func TestWaitingPerOperation(t *testing.T) {
	w := WaitingResult{
		Operations: 1000,
		Idle:       ResourcePhase{Window: 10 * time.Second, Goroutines: 120, HeapBytes: 4 << 20, RSSBytes: 40 << 20, CPU: 100 * time.Millisecond, DevCPU: time.Second},
		Follow:     ResourcePhase{Window: 30 * time.Second, Goroutines: 1135, HeapBytes: 24 << 20, RSSBytes: 100 << 20, CPU: 6300 * time.Millisecond, DevCPU: 18 * time.Second, Polls: 6000},
		Sleep:      ResourcePhase{Window: 30 * time.Second, Goroutines: 1130, HeapBytes: 20 << 20},
	}
	if g := w.goroutinesPerOp(w.Idle); !near(g, 1.015) {
		t.Errorf("goroutines over idle %v", g)
	}
	if g := w.goroutinesPerOp(w.Sleep); !near(g, 0.005) {
		t.Errorf("goroutines over sleeping %v", g)
	}
	w.Follow.NoPool, w.Sleep.NoPool = 1100, 1104
	if g := w.heldPerOp(w.Sleep); !near(g, -0.004) {
		t.Errorf("goroutines over sleeping, pool aside %v", g)
	}
	if h := w.heapPerOp(w.Idle); !near(h, 20*1024*1024/1000.0) {
		t.Errorf("heap %v", h)
	}
	if h := w.heapPerOp(w.Sleep); !near(h, 4*1024*1024/1000.0) {
		t.Errorf("heap beyond sleeping %v", h)
	}
	if r := w.rssPerOp(); !near(r, 60*1024*1024/1000.0) {
		t.Errorf("rss %v", r)
	}
	// (0.21 − 0.01) CPU × 60 s ÷ 1000 = 12 ms per operation per minute;
	// dev server (0.6 − 0.1) × 60 ÷ 1000 = 30 ms.
	cpu, dev := w.cpuPerOpMinute()
	if !near(cpu, 0.012) || !near(dev, 0.030) {
		t.Errorf("cpu per op per minute %v, dev %v", cpu, dev)
	}
	// (6.3 − 0.3) s ÷ 6000 polls = 1 ms; dev (18 − 3) ÷ 6000 = 2.5 ms.
	perPoll, devPoll := w.cpuPerPoll()
	if perPoll != time.Millisecond || devPoll != 2500*time.Microsecond {
		t.Errorf("cpu per poll %s, dev %s", perPoll, devPoll)
	}
}

// TestOpClock: the wrapper times a real reference server's acceptance and
// its monitor's GETs, and answers its snapshot.
func TestOpClock(t *testing.T) {
	c := newOpClock()
	srv := httptest.NewServer(c.wrap(testsuite.NewServer(testsuite.Options{Async: &testsuite.Async{Duration: time.Hour, RetryAfter: 2}})))
	defer srv.Close()
	post := func() string {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/charges", strings.NewReader(`{"amount":1}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(activities.IdempotencyKeyHeader, "k1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("start: %d", resp.StatusCode)
		}
		return resp.Header.Get("Location")
	}
	loc := post()
	for range 2 {
		resp, err := http.Get(loc)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("poll: %d", resp.StatusCode)
		}
	}
	if again := post(); again != loc {
		t.Fatalf("replay names %s, want %s", again, loc)
	}
	resp, err := http.Get(srv.URL + "/bench/clock")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var snap ClockSnapshot
	if err := json.Unmarshal(b, &snap); err != nil {
		t.Fatal(err, string(b))
	}
	if len(snap.Accepted) != 1 || len(snap.Polls[loc]) != 2 {
		t.Fatalf("snapshot %+v", snap)
	}
	if at, polls := snap.Accepted[loc], snap.Polls[loc]; at > polls[0] || polls[0] > polls[1] {
		t.Fatalf("times out of order: accepted %s, polls %v", at, polls)
	}
}

// longRunningResults is a synthetic longrunning section.
func longRunningResults(maxRatio float64, followGoroutines int) *Results {
	s := time.Second
	ra := PollSeries{Name: "Retry-After: 2", RetryAfter: 2, Duration: 20 * s, Operations: 20, Polls: CountStats{Mean: 11, Min: 11, Max: 11},
		FirstPollMedian: 400 * time.Millisecond, FirstPoll: 600 * time.Millisecond, Ratios: RatioStats{N: 200, Min: 1.003, P50: 1.01, P95: 1.03, Max: maxRatio}}
	bo := PollSeries{Name: "no Retry-After (poll backoff)", Duration: 15 * s, Operations: 20, Polls: CountStats{Mean: 6, Min: 6, Max: 6},
		Ratios: RatioStats{N: 100, Min: 1.001, P50: 1.004, P95: 1.04, Max: 1.07}}
	return &Results{LongRunning: &LongRunningResult{
		Params: defaultLongRunning, RetryAfter: ra, Backoff: bo,
		BackoffRows: backoffRows([]PollGap{{Poll: 1, Asked: s, Gap: 1010 * time.Millisecond}}, poll.Backoff(0, 0)),
		Waiting: &WaitingResult{Operations: 1000, Duration: 60 * s, RetryAfter: 5, Started: 14 * s, Accepted: 20 * s,
			Idle: ResourcePhase{Name: "idle", Samples: 10, Window: 10 * s, Goroutines: 120, Kinds: map[string]int{kindOther: 100, kindHTTP: 20}},
			Follow: ResourcePhase{Name: "following", Workflows: 1000, Samples: 30, Window: 30 * s, Goroutines: followGoroutines + 70, NoPool: followGoroutines, Polls: 6000,
				Kinds: map[string]int{kindWorkflow: 1000, kindHTTP: 70, kindPoll: 1}, KindsMax: map[string]int{kindPoll: 3}},
			Sleep:  ResourcePhase{Name: "timer", Workflows: 1000, Samples: 30, Window: 30 * s, Goroutines: 1151, NoPool: 1125, Kinds: map[string]int{kindHTTP: 26}},
			Series: PollSeries{RetryAfter: 5, Duration: 60 * s, Operations: 1000, Polls: CountStats{Mean: 12.5, Min: 12, Max: 13}}},
	}}
}

func TestLongRunningClaims(t *testing.T) {
	for _, c := range []struct {
		name       string
		maxRatio   float64
		goroutines int
		want9a     string
		want9d     string
	}{
		// 1130 − 1125 without the pool (70 against 26 connection goroutines).
		{"met", 1.04, 1130, "yes", "yes"},
		{"gap missed", 1.2, 1130, "**MISSED**", "yes"},
		{"a goroutine per operation", 1.04, 2130, "yes", "**MISSED**"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := WriteMarkdown(&b, longRunningResults(c.maxRatio, c.goroutines), "cmd", "contention.svg"); err != nil {
				t.Fatal(err)
			}
			md := b.String()
			if got := lastCell(claimRow(md, "9a")); got != c.want9a {
				t.Errorf("9a: %q, want %q", got, c.want9a)
			}
			if got := lastCell(claimRow(md, "9d")); got != c.want9d {
				t.Errorf("9d: %q, want %q (%s)", got, c.want9d, claimRow(md, "9d"))
			}
			for _, id := range []string{"9b", "9c", "9e", "9f"} {
				if claimRow(md, id) == "" {
					t.Errorf("no claim %s", id)
				}
			}
			if !strings.Contains(md, "## 9. Long-running operations") || !strings.Contains(md, "workflows waiting on a timer") {
				t.Error("no longrunning section")
			}
		})
	}
}
