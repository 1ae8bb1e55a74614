package bench

import (
	"bytes"
	"encoding/xml"
	"strings"
	"testing"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/testsuite"
)

func TestScaleDefaults(t *testing.T) {
	p := ScaleParams{}.withDefaults()
	if p.Operations != 10000 || p.Workers != 3 || p.RetryAfter != 120 || p.ThroughputRounds != 7 {
		t.Fatalf("defaults: %+v", p)
	}
	if want := 60*time.Second + 300*time.Second; p.Duration != want {
		t.Errorf("Duration for 10000 operations = %s, want %s", p.Duration, want)
	}
	small := ScaleParams{Operations: 301}.withDefaults()
	if small.followedCount() != 151 || small.Duration != 60*time.Second+301*30*time.Millisecond {
		t.Errorf("301 operations: %d followed, Duration %s", small.followedCount(), small.Duration)
	}
	if kept := (ScaleParams{Duration: time.Minute}).withDefaults(); kept.Duration != time.Minute {
		t.Errorf("a given Duration was replaced: %s", kept.Duration)
	}
}

func TestScaleThroughputRatio(t *testing.T) {
	tp := ScaleThroughput{Workers: 3, Workflows: 200, Rounds: []ScaleThroughputRound{
		{Ready: 10 * time.Second, Plain: 9 * time.Second},  // 0.9
		{Ready: 8 * time.Second, Plain: 10 * time.Second},  // 1.25
		{Ready: 10 * time.Second, Plain: 10 * time.Second}, // 1
		{Ready: 0, Plain: time.Second, Failed: 2},          // 0: no ready time
	}}
	if got := tp.Ratio(); got != 0.95 {
		t.Errorf("Ratio = %v, want the median 0.95", got)
	}
	if tp.failed() != 2 {
		t.Errorf("failed = %d", tp.failed())
	}
	ready, plain := tp.perSecond()
	if ready != 20 || plain != 20 {
		t.Errorf("perSecond = %v, %v; want the medians 20, 20", ready, plain)
	}
}

func TestParseProcStat(t *testing.T) {
	// A command name with a space and a parenthesis, as comm may hold.
	line := "4242 (temporal (x) srv) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 7 3 20 0 12 0 100 0 0"
	own, children, ppid, ok := parseProcStat(line)
	if !ok || own != 3*time.Second || children != 100*time.Millisecond || ppid != 1 {
		t.Errorf("parseProcStat = %s, %s, %d, %t; want 3s, 100ms, 1, true", own, children, ppid, ok)
	}
	if _, _, _, ok := parseProcStat("4242 (short) S 1 2"); ok {
		t.Error("a short line was read")
	}
}

func TestSummarise(t *testing.T) {
	var ss []ScaleSample
	for i := range 11 {
		ss = append(ss, ScaleSample{At: time.Duration(i) * time.Second, Server: time.Duration(i) * 500 * time.Millisecond,
			RSS: uint64(100 + i), Heap: uint64(10 * i), Goroutines: i})
	}
	ph := summarise("w", ss, 2*time.Second, 4*time.Second)
	if ph.Samples != 5 || ph.Window != 4*time.Second || ph.Server != 2*time.Second || ph.rate(ph.Server) != 0.5 {
		t.Errorf("summarise = %+v", ph)
	}
	if ph.RSS != 104 || ph.Heap != 40 || ph.Goroutines != 4 {
		t.Errorf("medians = %d, %d, %d; want 104, 40, 4", ph.RSS, ph.Heap, ph.Goroutines)
	}
	if empty := summarise("none", ss, time.Hour, time.Second); empty.Samples != 0 {
		t.Errorf("a window without samples: %+v", empty)
	}
}

func TestRecordsPerKey(t *testing.T) {
	got := recordsPerKey([]testsuite.Record{{IdempotencyKey: "a"}, {IdempotencyKey: "b"}, {IdempotencyKey: "a"}})
	if len(got) != 2 || got["a"] != 2 || got["b"] != 1 {
		t.Errorf("recordsPerKey = %v", got)
	}
}

// scaleFixture is a scale result as a run of 10 operations writes it.
func scaleFixture() *Results {
	w := &ScaleWaiting{Operations: 10, Followed: 5, Webhooks: 5, Duration: time.Minute, RetryAfter: 120,
		FirstStart: 20 * time.Second, LastStarted: 21 * time.Second, AllAccepted: 23 * time.Second,
		DeliverBegin: 60 * time.Second, DeliverEnd: 61 * time.Second, AllClosed: 150 * time.Second,
		Idle:      ScalePhase{Name: "idle", Window: 20 * time.Second, Samples: 20, RSS: 300 << 20, Heap: 30 << 20, Goroutines: 300, Server: 2 * time.Second},
		Waiting:   ScalePhase{Name: "waiting", From: 28 * time.Second, Window: 30 * time.Second, Samples: 30, RSS: 300<<20 + 10*2048, Heap: 30<<20 + 10*1024, Goroutines: 320, Server: 6 * time.Second, Polls: 3},
		Delivered: 5, Statuses: map[string]int{"completed": 10}, Completed: 10, KeysOnce: 10, Records: 10,
		Samples: []ScaleSample{{At: 0}, {At: time.Second, Started: 3, Server: time.Second}, {At: 2 * time.Second, Started: 10, Completed: 4, Server: 1500 * time.Millisecond}},
	}
	return &Results{Scale: &ScaleResult{Params: ScaleParams{Operations: 10}.withDefaults(), Waiting: w,
		Throughput: &ScaleThroughput{Workers: 3, Workflows: 200, Rounds: []ScaleThroughputRound{{Ready: 10 * time.Second, Plain: 8 * time.Second, ReadyFirst: true}}}}}
}

func TestScaleReport(t *testing.T) {
	r := scaleFixture()
	var b strings.Builder
	writeScaleClaims(&b, r.Scale)
	writeScale(&b, r.Scale)
	out := b.String()
	for _, want := range []string{
		"| 14a | 10 operations waiting at once", "| 10 of 10 completed (completed 10); API: 10 keys done once, 0 more than once, 10 records", "| all 10, each once | yes |",
		"| 14b |", "RSS 2.0 KiB, Go heap 1.0 KiB, +2.00 goroutines",
		"| 14c |", "0.200 CPU (idle 0.100): 600.00 ms per operation per minute of waiting over idle",
		"| 14d |", "ExecuteWorkflow calls 1.00 s, all accepted at the API 3.00 s after the first",
		"| 14e |", "| 0.80 (rounds: 0.80;", "| ≥ 0.90 | **MISSED** |",
		"Every workflow had closed 130.00 s after the first start.",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
	// One key done twice, one operation not completed: 14a missed.
	w := r.Scale.Waiting
	w.KeysOnce, w.KeysMore, w.Completed, w.Statuses = 9, 1, 9, map[string]int{"completed": 9, "failed": 1}
	b.Reset()
	writeScaleClaims(&b, r.Scale)
	if !strings.Contains(b.String(), "| all 10, each once | **MISSED** |") {
		t.Errorf("a key done twice was not a miss:\n%s", b.String())
	}
	// No window while all waited: said, and missed.
	w.Waiting, w.WindowNote = ScalePhase{}, "only 5 of 10 operations were accepted"
	b.Reset()
	writeScaleClaims(&b, r.Scale)
	if !strings.Contains(b.String(), "not measured: only 5 of 10 operations were accepted | (measurement) | **MISSED** |") {
		t.Errorf("a missing window was not said:\n%s", b.String())
	}
}

func TestScalePlots(t *testing.T) {
	r := scaleFixture()
	for name, draw := range map[string]func(*bytes.Buffer, *Results) error{
		ScaleSVG:           func(b *bytes.Buffer, r *Results) error { return WriteScaleSVG(b, r) },
		ScaleThroughputSVG: func(b *bytes.Buffer, r *Results) error { return WriteScaleThroughputSVG(b, r) },
	} {
		var b bytes.Buffer
		if err := draw(&b, r); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := xml.Unmarshal(b.Bytes(), new(struct{})); err != nil {
			t.Errorf("%s is not XML: %v", name, err)
		}
		if !strings.Contains(b.String(), "<polyline") {
			t.Errorf("%s draws no line", name)
		}
	}
	if err := WriteScaleSVG(new(bytes.Buffer), &Results{}); err == nil {
		t.Error("a plot without samples was drawn")
	}
}

// FuzzParseProcStat: any line, a command name with spaces and parentheses
// included, is read without a panic; a line without the closing
// parenthesis, or with too few fields after it, is not ok; and the
// fields after the last ')' are the ones read, whatever the name holds.
func FuzzParseProcStat(f *testing.F) {
	f.Add("4242 (worker) S 1 4242 4242 0 -1 4194560 100 0 0 0 200 100 7 3 20 0 12 0", "a b) (c")
	f.Add("1 (x) R", ")")
	f.Fuzz(func(t *testing.T, line, name string) {
		if _, _, _, ok := parseProcStat(line); ok && !strings.Contains(line, ")") {
			t.Errorf("parseProcStat(%q) ok without a ')'", line)
		}
		withName := "4242 (" + name + ") S 7 4242 4242 0 -1 4194560 100 0 0 0 200 100 7 3 20 0"
		own, children, ppid, ok := parseProcStat(withName)
		if !ok || own != 3*time.Second || children != 100*time.Millisecond || ppid != 7 {
			t.Errorf("parseProcStat(%q) = %s, %s, %d, %t; want 3s, 100ms, 7, true", withName, own, children, ppid, ok)
		}
	})
}
