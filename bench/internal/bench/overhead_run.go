package bench

import (
	"fmt"
	"runtime"
	"syscall"
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
	// Baseline is the raw POST inside an activity (rawInActivity), Raw the
	// same with context.Background(), Do and DoWarn Activities.Do with the
	// logger at Info and at Warn, DoPerExecution one ExecuteActivity per op.
	Baseline, Raw, Do, DoWarn, DoPerExecution BenchStat
	Rounds, Iterations                        int
}

// runOverhead runs the rawInActivity, raw, doInActivity and
// doInActivityWarn loops rounds times, iters iterations each, back to back
// in a rotating order (so drifting machine load hits all of them), and
// doPerExecution three times. Each ratio compares a loop with the baseline
// of its own round.
func runOverhead(rounds, iters int, logf func(string, ...any)) (*OverheadResult, error) {
	o, err := newOverhead()
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
	benches := []benchLoop{{&res.Baseline, o.rawInActivity}, {&res.Raw, o.raw}, {&res.Do, o.doInActivity}, {&res.DoWarn, o.doInActivityWarn}}
	if err := runRounds(benches, rounds, iters, logf); err != nil {
		return res, err
	}
	for range 3 {
		if _, _, err := runLoop(&res.DoPerExecution, o.doPerExecution, iters, logf); err != nil {
			return res, err
		}
	}
	for _, s := range []*BenchStat{&res.Baseline, &res.Raw, &res.Do, &res.DoWarn, &res.DoPerExecution} {
		s.summarize()
	}
	return res, nil
}

// benchLoop is one benchmark of a set: the loop and where its numbers go.
type benchLoop struct {
	s *BenchStat
	f func(stopwatch, int) error
}

// runLoop measures f once, iters iterations, and appends its ns/op and CPU
// ns/op to s.
func runLoop(s *BenchStat, f func(stopwatch, int) error, iters int, logf func(string, ...any)) (ns, cpu float64, err error) {
	m, cpuTotal, err := measure(f, iters)
	if err != nil {
		return 0, 0, fmt.Errorf("benchmark %q: %w", s.Name, err)
	}
	cpu = float64(cpuTotal) / float64(iters)
	ns = float64(m.elapsed.Nanoseconds()) / float64(iters)
	s.NsPerOp = append(s.NsPerOp, ns)
	s.CPUNsPerOp = append(s.CPUNsPerOp, cpu)
	s.AllocsPerOp, s.BytesPerOp = int64(m.allocs)/int64(iters), int64(m.allocBytes)/int64(iters)
	logf("overhead %-42s %7.0f ns/op %7.0f CPU ns/op %6d B/op %4d allocs/op", s.Name, ns, cpu, s.BytesPerOp, s.AllocsPerOp)
	return ns, cpu, nil
}

// runRounds warms every loop of benches up once (and forgets that run),
// then runs them rounds times, iters iterations each, back to back in a
// rotating order (so drifting machine load hits all of them). benches[0] is
// the baseline: every other loop gets, per round, its ns/op and CPU ns/op ÷
// the baseline's in the same round.
func runRounds(benches []benchLoop, rounds, iters int, logf func(string, ...any)) error {
	// Warm the connection pools and caches, then forget the warm-up.
	for _, b := range benches {
		if _, _, err := runLoop(b.s, b.f, iters, logf); err != nil {
			return err
		}
		b.s.NsPerOp, b.s.CPUNsPerOp = nil, nil
	}
	for r := range rounds {
		ns := make([]float64, len(benches))
		cpu := make([]float64, len(benches))
		for k := range benches {
			i := (k + r) % len(benches)
			var err error
			if ns[i], cpu[i], err = runLoop(benches[i].s, benches[i].f, iters, logf); err != nil {
				return err
			}
		}
		for i, b := range benches[1:] {
			b.s.Ratios = append(b.s.Ratios, ns[i+1]/ns[0])
			b.s.CPURatios = append(b.s.CPURatios, cpu[i+1]/cpu[0])
		}
	}
	return nil
}

// summarize sets the medians and the minimum from the per-run numbers.
func (s *BenchStat) summarize() {
	s.MedianNs, s.MinNs, s.MedianCPUNs = median(s.NsPerOp), minOf(s.NsPerOp), median(s.CPUNsPerOp)
	s.Ratio, s.CPURatio = median(s.Ratios), median(s.CPURatios)
}

// meter is the bench command's stopwatch. Like testing.B it times the wall
// clock and counts heap allocations between ResetTimer and StopTimer.
type meter struct {
	on                 bool
	start              time.Time
	mallocs0, bytes0   uint64
	elapsed            time.Duration
	allocs, allocBytes uint64
}

// ResetTimer zeroes the elapsed time and allocations and starts timing.
func (m *meter) ResetTimer() {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m.mallocs0, m.bytes0 = ms.Mallocs, ms.TotalAlloc
	m.elapsed, m.allocs, m.allocBytes = 0, 0, 0
	m.on, m.start = true, time.Now()
}

// StopTimer stops timing; the time and allocations so far are kept.
func (m *meter) StopTimer() {
	if !m.on {
		return
	}
	m.elapsed += time.Since(m.start)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m.allocs += ms.Mallocs - m.mallocs0
	m.allocBytes += ms.TotalAlloc - m.bytes0
	m.on = false
}

// measure runs f once with n = 1 to warm it up, then with n = iters on a
// fresh meter after a garbage collection, as testing.Benchmark does with
// -benchtime=<iters>x. It returns that meter and the process's CPU time
// (user + system, set-up included) during the measured run.
func measure(f func(stopwatch, int) error, iters int) (*meter, time.Duration, error) {
	if err := f(&meter{}, 1); err != nil {
		return nil, 0, err
	}
	runtime.GC()
	m := &meter{}
	cpu0 := cpuTime()
	err := f(m, iters)
	cpu := cpuTime() - cpu0
	m.StopTimer()
	if err != nil {
		return nil, 0, err
	}
	if m.elapsed <= 0 {
		return nil, 0, fmt.Errorf("the loop timed nothing")
	}
	return m, cpu, nil
}

// cpuTime is the process's user plus system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
