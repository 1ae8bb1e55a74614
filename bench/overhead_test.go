package bench

import "testing"

// The per-attempt overhead benchmarks: go test -run '^$' -bench . -benchmem ./bench
// (the bench command runs the same functions through testing.Benchmark).

func benchOverhead(b *testing.B, f func(*Overhead, *testing.B)) {
	o, err := NewOverhead()
	if err != nil {
		b.Fatal(err)
	}
	defer o.Close()
	f(o, b)
}

// BenchmarkRawHTTP is the baseline: a plain net/http POST and body read.
func BenchmarkRawHTTP(b *testing.B) { benchOverhead(b, (*Overhead).Raw) }

// BenchmarkRawHTTPInActivity is the same POST with an activity's context.
func BenchmarkRawHTTPInActivity(b *testing.B) { benchOverhead(b, (*Overhead).RawInActivity) }

// BenchmarkActivityDo is one attempt of Activities.Do with a real activity context.
func BenchmarkActivityDo(b *testing.B) { benchOverhead(b, (*Overhead).DoInActivity) }

// BenchmarkActivityDoWarnLogger is BenchmarkActivityDo with Info logs off.
func BenchmarkActivityDoWarnLogger(b *testing.B) { benchOverhead(b, (*Overhead).DoInActivityWarn) }

// BenchmarkActivityDoPerExecution adds TestActivityEnvironment.ExecuteActivity per attempt.
func BenchmarkActivityDoPerExecution(b *testing.B) { benchOverhead(b, (*Overhead).DoPerExecution) }
