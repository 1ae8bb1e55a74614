package bench

import (
	"flag"
	"fmt"
	"syscall"
	"testing"
	"time"
)

// BenchStat is one benchmark's result over several runs.
type BenchStat struct {
	Name     string    `json:"name"`
	NsPerOp  []float64 `json:"ns_per_op"`
	MedianNs float64   `json:"median_ns_per_op"`
	MinNs    float64   `json:"min_ns_per_op"`
	// CPUNsPerOp is the process's CPU time (user + system, the in-process
	// server included) per op: unlike wall time it barely moves when other
	// processes take the CPUs.
	CPUNsPerOp  []float64 `json:"cpu_ns_per_op"`
	MedianCPUNs float64   `json:"median_cpu_ns_per_op"`
	AllocsPerOp int64     `json:"allocs_per_op"`
	BytesPerOp  int64     `json:"bytes_per_op"`
	// Ratios are this benchmark's ns/op ÷ the baseline's in the same round
	// and CPURatios the same for CPU time; Ratio and CPURatio their medians.
	Ratios    []float64 `json:"ratios,omitempty"`
	Ratio     float64   `json:"ratio,omitempty"`
	CPURatios []float64 `json:"cpu_ratios,omitempty"`
	CPURatio  float64   `json:"cpu_ratio,omitempty"`
}

// OverheadResult is the per-attempt overhead section.
type OverheadResult struct {
	// Baseline is the raw POST inside an activity (RawInActivity), Raw the
	// same with context.Background(), Do and DoWarn Activities.Do with the
	// logger at Info and at Warn, DoPerExecution one ExecuteActivity per op.
	Baseline, Raw, Do, DoWarn, DoPerExecution BenchStat
	Rounds, Iterations                        int
}

// RunOverhead runs the RawInActivity, Raw, DoInActivity and
// DoInActivityWarn benchmarks rounds times, iters iterations each, back to
// back in a rotating order (so drifting machine load hits all of them), and
// DoPerExecution three times. Each ratio compares a benchmark with the
// baseline of its own round.
func RunOverhead(rounds, iters int, logf func(string, ...any)) (*OverheadResult, error) {
	testing.Init()
	if err := flag.Set("test.benchtime", fmt.Sprintf("%dx", iters)); err != nil {
		return nil, err
	}
	o, err := NewOverhead()
	if err != nil {
		return nil, err
	}
	defer o.Close()
	res := &OverheadResult{
		Baseline:       BenchStat{Name: "raw net/http in an activity (baseline)"},
		Raw:            BenchStat{Name: "raw net/http, context.Background()"},
		Do:             BenchStat{Name: "Activities.Do"},
		DoWarn:         BenchStat{Name: "Activities.Do, Info logs off"},
		DoPerExecution: BenchStat{Name: "Activities.Do via one ExecuteActivity each"},
		Rounds:         rounds, Iterations: iters,
	}
	run := func(s *BenchStat, f func(*testing.B)) (ns, cpu float64, err error) {
		cpu0 := cpuTime()
		br := testing.Benchmark(f)
		if br.N == 0 {
			return 0, 0, fmt.Errorf("benchmark %q failed", s.Name)
		}
		// A fixed-count benchtime runs N=1 once, then N: the CPU time covers N+1 ops.
		cpu = float64(cpuTime()-cpu0) / float64(br.N+1)
		ns = float64(br.T.Nanoseconds()) / float64(br.N)
		s.NsPerOp = append(s.NsPerOp, ns)
		s.CPUNsPerOp = append(s.CPUNsPerOp, cpu)
		s.AllocsPerOp, s.BytesPerOp = br.AllocsPerOp(), br.AllocedBytesPerOp()
		logf("overhead %-42s %7.0f ns/op %7.0f CPU ns/op %6d B/op %4d allocs/op", s.Name, ns, cpu, s.BytesPerOp, s.AllocsPerOp)
		return ns, cpu, nil
	}
	type bench struct {
		s *BenchStat
		f func(*testing.B)
	}
	benches := []bench{{&res.Baseline, o.RawInActivity}, {&res.Raw, o.Raw}, {&res.Do, o.DoInActivity}, {&res.DoWarn, o.DoInActivityWarn}}
	// Warm the connection pools and caches, then forget the warm-up.
	for _, b := range benches {
		if _, _, err := run(b.s, b.f); err != nil {
			return nil, err
		}
		b.s.NsPerOp, b.s.CPUNsPerOp = nil, nil
	}
	for r := range rounds {
		ns := make([]float64, len(benches))
		cpu := make([]float64, len(benches))
		for k := range benches {
			i := (k + r) % len(benches)
			if ns[i], cpu[i], err = run(benches[i].s, benches[i].f); err != nil {
				return res, err
			}
		}
		for i, b := range benches[1:] {
			b.s.Ratios = append(b.s.Ratios, ns[i+1]/ns[0])
			b.s.CPURatios = append(b.s.CPURatios, cpu[i+1]/cpu[0])
		}
	}
	for range 3 {
		if _, _, err := run(&res.DoPerExecution, o.DoPerExecution); err != nil {
			return res, err
		}
	}
	for _, s := range []*BenchStat{&res.Baseline, &res.Raw, &res.Do, &res.DoWarn, &res.DoPerExecution} {
		s.MedianNs, s.MinNs, s.MedianCPUNs = median(s.NsPerOp), minOf(s.NsPerOp), median(s.CPUNsPerOp)
		s.Ratio, s.CPURatio = median(s.Ratios), median(s.CPURatios)
	}
	return res, nil
}

// cpuTime is the process's user plus system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
