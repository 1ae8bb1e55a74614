package bench

import "testing"

// The per-attempt overhead benchmarks:
// cd bench && go test -run '^$' -bench . -benchmem ./internal/bench
// (the bench command times the same loops with its own meter).

func benchOverhead(b *testing.B, f func(*overhead, stopwatch, int) error) {
	o, err := newOverhead()
	if err != nil {
		b.Fatal(err)
	}
	defer o.Close()
	b.ReportAllocs()
	if err := f(o, b, b.N); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkRawHTTP is the baseline: a plain net/http POST and body read.
func BenchmarkRawHTTP(b *testing.B) { benchOverhead(b, (*overhead).raw) }

// BenchmarkRawHTTPInActivity is the same POST with an activity's context.
func BenchmarkRawHTTPInActivity(b *testing.B) { benchOverhead(b, (*overhead).rawInActivity) }

// BenchmarkActivityDo is one attempt of Activities.Do with a real activity context.
func BenchmarkActivityDo(b *testing.B) { benchOverhead(b, (*overhead).doInActivity) }

// BenchmarkActivityDoWarnLogger is BenchmarkActivityDo with Info logs off.
func BenchmarkActivityDoWarnLogger(b *testing.B) { benchOverhead(b, (*overhead).doInActivityWarn) }

// BenchmarkActivityDoPerExecution adds TestActivityEnvironment.ExecuteActivity per attempt.
func BenchmarkActivityDoPerExecution(b *testing.B) { benchOverhead(b, (*overhead).doPerExecution) }

// TestRunOverheadSmall runs the bench command's overhead section in
// miniature on its own meter: every loop must run, time something and
// yield a ratio per round. It asserts no timing.
func TestRunOverheadSmall(t *testing.T) {
	res, err := runOverhead(2, 20, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []BenchStat{res.Baseline, res.Raw, res.Do, res.DoWarn, res.DoPerExecution} {
		if s.MedianNs <= 0 || s.MedianCPUNs < 0 || s.AllocsPerOp <= 0 {
			t.Errorf("%s: median %.0f ns/op, %.0f CPU ns/op, %d allocs/op", s.Name, s.MedianNs, s.MedianCPUNs, s.AllocsPerOp)
		}
	}
	for _, s := range []BenchStat{res.Raw, res.Do, res.DoWarn} {
		if len(s.Ratios) != 2 || s.Ratio <= 0 {
			t.Errorf("%s: ratios %v, median %v; want one per round", s.Name, s.Ratios, s.Ratio)
		}
	}
	if len(res.Baseline.NsPerOp) != 2 || len(res.DoPerExecution.NsPerOp) != 3 {
		t.Errorf("baseline ran %d rounds (want 2), per-execution %d times (want 3)", len(res.Baseline.NsPerOp), len(res.DoPerExecution.NsPerOp))
	}
}
