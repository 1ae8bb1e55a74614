package bench

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// writeLongRunningClaims writes the claims-table rows of the longrunning
// section (9a–9f).
func writeLongRunningClaims(b *strings.Builder, lr *LongRunningResult) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	ratios := func(r RatioStats) string {
		return fmt.Sprintf("p50 %.3f, p95 %.3f, max %.3f (min %.3f; %d gaps)", r.P50, r.P95, r.Max, r.Min, r.N)
	}
	if s := lr.RetryAfter; s.Ratios.N > 0 {
		p("| 9a | Long-running operation, monitor answers `Retry-After: %d`: gap between two polls ÷ %d s, at the server (%d operations of %s followed at once; %d failed) | %s | every gap within [1.00, %.2f] × | %s |\n",
			s.RetryAfter, s.RetryAfter, s.Operations, durS(s.Duration), s.Failed, ratios(s.Ratios), targetPollGap, met(s.Ratios.within(targetPollGap) && s.Failed == 0))
	}
	if s := lr.Backoff; s.Ratios.N > 0 {
		outside := 0
		for _, r := range lr.BackoffRows {
			outside += r.Outside
		}
		p("| 9b | … monitor without Retry-After: gap ÷ the delay the poll drew (1 s doubling to 1 min, equal jitter, at least 1 s); draws outside their documented range | %s; %d outside | every gap within [1.00, %.2f] ×, none outside | %s |\n",
			ratios(s.Ratios), outside, targetPollGap, met(s.Ratios.within(targetPollGap) && outside == 0 && s.Failed == 0))
	}
	if s := lr.RetryAfter; s.Operations > 0 {
		p("| 9c | … polls per operation, `Retry-After: %d`, %s operations | mean %.1f (%d–%d); first poll %s after the acceptance (it waits for the 202's Retry-After), end seen %s after it (medians) | (comparison) ideal %.0f = duration ÷ Retry-After | — |\n",
			s.RetryAfter, durS(s.Duration), s.Polls.Mean, s.Polls.Min, s.Polls.Max, gap(s.FirstPollMedian), gap(s.Seen.P50), s.idealPolls())
	}
	w := lr.Waiting
	if w == nil || w.Follow.Samples == 0 {
		return
	}
	if w.Sleep.Samples > 0 {
		g := w.heldPerOp(w.Sleep)
		p("| 9d | %d operations waiting at once on one worker: goroutines ÷ operation beyond the same worker holding %d workflows that wait on a timer, the HTTP client's pooled connections aside | %+.3f (%d − %d); with the pool %+.3f (%d − %d; its connections' goroutines %d − %d); poll activities running: median %d, max %d; over the idle worker %+.2f per operation, the SDK's cached workflows | ≤ %.2f | %s |\n",
			w.Operations, w.Operations, g, w.Follow.NoPool, w.Sleep.NoPool, w.goroutinesPerOp(w.Sleep), w.Follow.Goroutines, w.Sleep.Goroutines,
			w.Follow.Kinds[kindHTTP], w.Sleep.Kinds[kindHTTP], w.Follow.Kinds[kindPoll], w.Follow.KindsMax[kindPoll], w.goroutinesPerOp(w.Idle),
			targetWaitGoroutines, met(g <= targetWaitGoroutines && w.Series.Failed == 0))
	}
	cpu, dev := w.cpuPerOpMinute()
	perPoll, devPoll := w.cpuPerPoll()
	p("| 9e | … per waiting operation (Retry-After %d s): worker process CPU, live heap, RSS over the idle worker | %.1f ms CPU per minute (%.2f ms per poll; dev server %.1f ms per minute, %.2f ms per poll); heap %.1f KiB (%.1f KiB beyond a timer-waiting workflow); RSS %.1f KiB | (measurement) | — |\n",
		w.RetryAfter, cpu*1e3, float64(perPoll)/1e6, dev*1e3, float64(devPoll)/1e6, w.heapPerOp(w.Idle)/1024, w.heapPerOp(w.Sleep)/1024, w.rssPerOp()/1024)
	s := w.Series
	p("| 9f | … their polls: gap ÷ %d s, polls per operation (ideal %.0f), the end seen after | p50 %.2f, p95 %.2f, max %.2f; polls %.1f (%d–%d); end seen after p50 %s, max %s; %d polls/s in the window (asked: %.0f/s) | (measurement) | — |\n",
		w.RetryAfter, s.idealPolls(), s.Ratios.P50, s.Ratios.P95, s.Ratios.Max, s.Polls.Mean, s.Polls.Min, s.Polls.Max, gap(s.Seen.P50), gap(s.Seen.Max),
		int(float64(w.Follow.Polls)/w.Follow.Window.Seconds()+0.5), float64(w.Operations)/float64(w.RetryAfter))
}

// writeLongRunning writes the longrunning section.
func writeLongRunning(b *strings.Builder, lr *LongRunningResult) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	lp := lr.Params
	p("## 9. Long-running operations\n\n")
	p("Calls with `workflows.Request.Follow` against the reference server with `testsuite.Options.Async` (style `location`: 202 with `Location: /operations/{id}`, the monitor answers 202 while running, then 200 with the record), on the dev server of the other sections (default configuration: `history.timerProcessorMaxTimeShift` at 1 s, as claim 3's runs; every poll delay is at least `MinPollInterval`, 1 s, which that granularity does not move) with a worker of its own (8 pollers per task type, adaptive admission off as the other dev-server workers). Each reference server runs in a process of its own (the bench command started again), so the worker's process holds nothing but the worker and its Temporal client. The server timestamps every start request and every GET of a monitor; the worker's poll activity is wrapped to record each attempt's NextRetryDelay (the delay it asked for), its `activity.Info.StartedTime` and when it ran.\n\n")
	p("**Pace of the polls.** Two series of %d operations each, started at once (eager start), the second series 3 s after the first so that their start bursts do not overlap: operations of %s whose monitor answers `Retry-After: %d`, and operations of %s whose monitor sends none, so that the poll backoff paces them. A gap is the time between two GETs of one monitor at the server, divided by the delay the earlier attempt asked for. \"Late\" is how much later than asked the server started the next attempt (its StartedTime − the earlier attempt's return − the delay: reporting the failure, Temporal's retry timer and matching); \"delivery\" the time from that start to the activity function.\n\n",
		lp.Operations, durS(lp.Duration), lp.RetryAfter, durS(lp.BackoffDuration))
	p("| Series | Operations | Failed | Polls per operation: mean (min–max) | Ideal | First poll after the acceptance: median / max | Gap ÷ asked: p50 / p95 / max (min) | Late: p50 / p95 / max | Delivery: p50 / p95 | End seen after: p50 / max |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, s := range []PollSeries{lr.RetryAfter, lr.Backoff} {
		ideal := "—"
		if s.idealPolls() > 0 {
			ideal = fmt.Sprintf("%.0f", s.idealPolls())
		}
		p("| %s, %s operations | %d | %d | %.1f (%d–%d) | %s | %s / %s | %.3f / %.3f / %.3f (%.3f) | %s / %s / %s | %s / %s | %s / %s |\n",
			s.Name, durS(s.Duration), s.Operations, s.Failed, s.Polls.Mean, s.Polls.Min, s.Polls.Max, ideal, gap(s.FirstPollMedian), gap(s.FirstPoll),
			s.Ratios.P50, s.Ratios.P95, s.Ratios.Max, s.Ratios.Min, gap(s.Late.P50), gap(s.Late.P95), gap(s.Late.Max), gap(s.Delivery.P50), gap(s.Delivery.P95), gap(s.Seen.P50), gap(s.Seen.Max))
	}
	p("\nThe first poll waits for the 202's `Retry-After` (a workflow timer; at least 1 s): it went %s after the acceptance (median) in the `Retry-After: %d` series, whose ideal is %s ÷ %d s polls.\n\n", gap(lr.RetryAfter.FirstPollMedian), lp.RetryAfter, durS(lp.Duration), lp.RetryAfter)
	if len(lr.BackoffRows) > 0 {
		p("Without Retry-After, the wait after poll n is drawn with equal jitter under min(1 s × 2^(n−1), 1 min), at least 1 s (`poll.Backoff`); the series' operations end before the cap is reached:\n\n")
		p("| After poll | Ceiling | Documented range | Drawn: min – max | Gap at the server: min – max | Operations | Draws outside the range |\n|---|---|---|---|---|---|---|\n")
		for _, r := range lr.BackoffRows {
			p("| %d | %s | %s – %s | %s – %s | %s – %s | %d | %d |\n", r.Poll, gap(r.Ceiling), gap(r.Lo), gap(r.Hi), gap(r.AskedMin), gap(r.AskedMax), gap(r.GapMin), gap(r.GapMax), r.N, r.Outside)
		}
		p("\n")
	}
	w := lr.Waiting
	if w == nil || w.Follow.Samples == 0 {
		return
	}
	p("**Many operations waiting at once.** %d operations of %s at `Retry-After: %d` are started at once (eager start, %d `ExecuteWorkflow` calls in flight) on the same worker; the ExecuteWorkflow calls took %s and the last operation was accepted %s after the first call. 3 s later (the start burst's idle connections closed: they would otherwise sit in the pool for 90 s), the worker's process is sampled once a second for up to %s while every operation waits, never past the first one's end. Baselines, the same worker: idle, before; and holding %d workflows that wait on a timer (`workflow.Sleep(%s)`, started the same way), after. Goroutines are the median of the samples, each classified from a goroutine profile (\"HTTP connections\": the HTTP client's pooled connections, two goroutines each, at most 64 idle per host whatever the number of operations); the heap is the live heap after a GC at the window's end; the resident set is the median; CPU is the process's user + system time over the window (the dev server's from /proc beside it).\n\n",
		w.Operations, durS(w.Duration), w.RetryAfter, startConcurrency, secs(w.Started), secs(w.Accepted), durS(lp.Window), w.Operations, lp.SleepDuration)
	p("| Phase | Workflows | Window | Goroutines: median (max) | Of which (medians) | Live heap | RSS | Worker CPU | Dev server CPU | Polls |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, ph := range []ResourcePhase{w.Idle, w.Follow, w.Sleep} {
		if ph.Samples == 0 {
			continue
		}
		name := map[string]string{"idle": "idle", "following": "operations waiting on polls", "timer": "workflows waiting on a timer"}[ph.Name]
		p("| %s | %d | %s | %d (%d) | %s | %.1f MiB | %.1f MiB | %s (%.3f CPU) | %s (%.3f CPU) | %d |\n", name, ph.Workflows, secs(ph.Window), ph.Goroutines, ph.GoroutinesMax,
			kinds(ph.Kinds), mib(ph.HeapBytes), mib(ph.RSSBytes), secs(ph.CPU), ph.cpuRate(), secs(ph.DevCPU), ph.devCPURate(), ph.Polls)
	}
	cpu, dev := w.cpuPerOpMinute()
	perPoll, devPoll := w.cpuPerPoll()
	s := w.Series
	p("\nPer waiting operation, over the idle worker: %+.3f goroutines (%+.3f beyond a workflow waiting on a timer, %+.3f without the pooled connections), %.1f KiB of live heap (%.1f KiB beyond a timer-waiting workflow), %.1f KiB of RSS; worker CPU %.1f ms per minute of waiting, %.2f ms per poll (dev server %.1f ms per minute, %.2f ms per poll). The SDK keeps every cached workflow's coroutine as a goroutine (\"workflow coroutines\"), whatever it waits on; a poll holds one only while its GET runs (\"poll activity\").\n\n",
		w.goroutinesPerOp(w.Idle), w.goroutinesPerOp(w.Sleep), w.heldPerOp(w.Sleep), w.heapPerOp(w.Idle)/1024, w.heapPerOp(w.Sleep)/1024, w.rssPerOp()/1024, cpu*1e3, float64(perPoll)/1e6, dev*1e3, float64(devPoll)/1e6)
	p("Their polls: %.1f per operation (%d–%d; ideal %.0f), gap ÷ %d s p50 %.2f, p95 %.2f, max %.2f (min %.3f; %d gaps), the next attempt started late by p50 %s, p95 %s, delivered to the activity in p50 %s, p95 %s; %d operations failed, %d reported a poll count other than the server's. %d polls/s in the window against the %.0f/s the monitors asked for.",
		s.Polls.Mean, s.Polls.Min, s.Polls.Max, s.idealPolls(), w.RetryAfter, s.Ratios.P50, s.Ratios.P95, s.Ratios.Max, s.Ratios.Min, s.Ratios.N, gap(s.Late.P50), gap(s.Late.P95), gap(s.Delivery.P50), gap(s.Delivery.P95), s.Failed, s.PollsMismatch,
		int(float64(w.Follow.Polls)/w.Follow.Window.Seconds()+0.5), float64(w.Operations)/float64(w.RetryAfter))
	if s.EarlyCount > 0 {
		p(" %d gaps were shorter than asked: the worker had returned the attempt with its NextRetryDelay of %d s (recorded), and the server started the next attempt at once", s.EarlyCount, w.RetryAfter)
		if len(s.Early) > 0 {
			e := s.Early[0]
			p(" (e.g. poll %d of %s: %s after the earlier attempt returned)", e.Gap.Poll+1, e.Monitor, gap(e.After.Started.Sub(e.Before.Ended)))
		}
		p(", which is the server's doing, seen only under this load")
		p(".")
	}
	p("\n\n")
}

// durS formats d in seconds, "75 s".
func durS(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + " s" }

// kinds formats goroutine kinds, largest first.
func kinds(k map[string]int) string {
	if len(k) == 0 {
		return "—"
	}
	names := make([]string, 0, len(k))
	for n := range k {
		names = append(names, n)
	}
	slices.SortFunc(names, func(a, b string) int {
		if k[a] != k[b] {
			return k[b] - k[a]
		}
		return strings.Compare(a, b)
	})
	var parts []string
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%s %d", n, k[n]))
	}
	return strings.Join(parts, ", ")
}
