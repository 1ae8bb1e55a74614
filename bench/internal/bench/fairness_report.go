package bench

import (
	"cmp"
	"fmt"
	"io"
	"strings"
)

// The fairness section's plots, next to RESULTS.md.
const (
	FairnessSVG       = "fairness.svg"
	FairnessOutageSVG = "fairness-outage.svg"
)

// fairnessTolerance is how far above today's figure (a task queue per
// origin with the shared rate) a fairness-key setup's may be and still
// serve the origins as well: 10 %.
const fairnessTolerance = 1.10

// originNames are the origins' names in the report, A then B.
var originNames = [2]string{"A", "B"}

// fairnessGoal is one claims row of the fairness section.
type fairnessGoal struct {
	ID, Claim, Measured, Target string
	OK                          bool
}

// runs returns the contention runs (outage false) or the outage runs.
func (f *FairnessResult) runs(outage bool) []FairnessRun {
	var out []FairnessRun
	for _, r := range f.Runs {
		if (r.Outage > 0) == outage {
			out = append(out, r)
		}
	}
	return out
}

// HasContention reports whether f holds a contention run.
func (f *FairnessResult) HasContention() bool { return len(f.runs(false)) > 0 }

// HasOutage reports whether f holds an outage run.
func (f *FairnessResult) HasOutage() bool { return len(f.runs(true)) > 0 }

// today returns the first run of today's setup among runs.
func today(runs []FairnessRun) (FairnessRun, bool) {
	for _, r := range runs {
		if !r.Setup.Keys {
			return r, true
		}
	}
	return FairnessRun{}, false
}

// timeRatio is origin i's time to its last success ÷ its limit.
func (f *FairnessResult) timeRatio(r FairnessRun, i int) float64 {
	return r.Origins[i].ToLastSuccess.Seconds() / f.Params.limit(i)
}

// outageRate is origin A's requests per second of its outage.
func outageRate(r FairnessRun) float64 {
	return float64(r.Origins[0].DuringOutage) / r.Outage.Seconds()
}

// recoveryRatio is origin A's time from its recovery to its last success
// ÷ its limit; the outage begins at A's first request.
func (f *FairnessResult) recoveryRatio(r FairnessRun) float64 {
	a := r.Origins[0]
	if len(a.Log) == 0 {
		return 0
	}
	return (a.ToLastSuccess - a.Log[0].At - r.Outage).Seconds() / f.Params.limit(0)
}

// goals returns the section's claims: today's figures against the
// cluster section's targets, then each fairness-key setup's against
// today's (at most fairnessTolerance × it, no workflow failed), for
// contention and then for the outage.
func (f *FairnessResult) goals() []fairnessGoal {
	var out []fairnessGoal
	add := func(g fairnessGoal) {
		g.ID = fmt.Sprintf("13%c", 'a'+len(out))
		out = append(out, g)
	}
	both := func(get func(i int) float64, detail func(i int) string) string {
		return fmt.Sprintf("A %.2f%s; B %.2f%s", get(0), detail(0), get(1), detail(1))
	}
	failed := func(r FairnessRun) string {
		if r.Failed == 0 {
			return ""
		}
		return fmt.Sprintf("; %d failed", r.Failed)
	}
	p := f.Params
	limits := fmt.Sprintf("A %d workflows at %d/s, B %d at %d/s", p.Workflows, p.Capacity[0], p.Workflows, p.Capacity[1])
	contention := f.runs(false)
	base, ok := today(contention)
	if ok {
		tr := func(i int) float64 { return f.timeRatio(base, i) }
		ps := func(i int) float64 { return base.Origins[i].perSuccess() }
		add(fairnessGoal{
			Claim: fmt.Sprintf("Two origins (%s), %s: time to each origin's last success ÷ its limit", limits, base.Setup.label()),
			Measured: both(tr, func(i int) string {
				return fmt.Sprintf(" (%.1f s ÷ %.1f s)", base.Origins[i].ToLastSuccess.Seconds(), p.limit(i))
			}) + failed(base),
			Target: fmt.Sprintf("≤ %.2f each", targetSharedTime), OK: tr(0) <= targetSharedTime && tr(1) <= targetSharedTime && base.Failed == 0,
		})
		add(fairnessGoal{
			Claim: fmt.Sprintf("Two origins, %s: requests per success", base.Setup.label()),
			Measured: both(ps, func(i int) string {
				return fmt.Sprintf(" (%d ÷ %d)", base.Origins[i].Requests, base.Origins[i].Successes)
			}),
			Target: fmt.Sprintf("≤ %.2f each", targetSharedRequests), OK: ps(0) <= targetSharedRequests && ps(1) <= targetSharedRequests,
		})
		for _, r := range contention {
			if !r.Setup.Keys {
				continue
			}
			tr := func(i int) float64 { return f.timeRatio(r, i) }
			ps := func(i int) float64 { return r.Origins[i].perSuccess() }
			add(fairnessGoal{
				Claim:    fmt.Sprintf("One task queue, %s: time to each origin's last success ÷ its limit, against a task queue per origin", r.Setup.label()),
				Measured: both(tr, func(i int) string { return fmt.Sprintf(" (today %.2f)", f.timeRatio(base, i)) }) + failed(r),
				Target:   fmt.Sprintf("≤ %.2f × today's each", fairnessTolerance),
				OK:       tr(0) <= fairnessTolerance*f.timeRatio(base, 0) && tr(1) <= fairnessTolerance*f.timeRatio(base, 1) && r.Failed == 0,
			})
			add(fairnessGoal{
				Claim:    fmt.Sprintf("One task queue, %s: requests per success, against a task queue per origin", r.Setup.label()),
				Measured: both(ps, func(i int) string { return fmt.Sprintf(" (today %.2f)", base.Origins[i].perSuccess()) }),
				Target:   fmt.Sprintf("≤ %.2f × today's each", fairnessTolerance),
				OK:       ps(0) <= fairnessTolerance*base.Origins[0].perSuccess() && ps(1) <= fairnessTolerance*base.Origins[1].perSuccess(),
			})
		}
	}
	outage := f.runs(true)
	base, ok = today(outage)
	if !ok {
		return out
	}
	add(fairnessGoal{
		Claim: fmt.Sprintf("Origin A down (503) for %.0f s, then %d/s; %s: B's time to its last success ÷ its limit (%.1f s), A's requests per second of the outage, A's recovery to its last success ÷ its limit (%.1f s)",
			base.Outage.Seconds(), p.Capacity[0], base.Setup.label(), p.limit(1), p.limit(0)),
		Measured: fmt.Sprintf("B %.2f; A %.2f a second (%d in %.0f s), recovery %.2f%s", f.timeRatio(base, 1), outageRate(base), base.Origins[0].DuringOutage, base.Outage.Seconds(), f.recoveryRatio(base), failed(base)),
		Target:   fmt.Sprintf("B ≤ %.2f; A ≤ %.2f a second, recovery ≤ %.2f", targetSharedTime, targetClusterOutageRequests, targetClusterOutageRecovery),
		OK: f.timeRatio(base, 1) <= targetSharedTime && outageRate(base) <= targetClusterOutageRequests &&
			f.recoveryRatio(base) <= targetClusterOutageRecovery && base.Failed == 0,
	})
	for _, r := range outage {
		if !r.Setup.Keys {
			continue
		}
		add(fairnessGoal{
			Claim:    fmt.Sprintf("Origin A down, one task queue, %s: the same figures against a task queue per origin", r.Setup.label()),
			Measured: fmt.Sprintf("B %.2f (today %.2f); A %.2f a second (today %.2f), recovery %.2f (today %.2f)%s", f.timeRatio(r, 1), f.timeRatio(base, 1), outageRate(r), outageRate(base), f.recoveryRatio(r), f.recoveryRatio(base), failed(r)),
			Target:   fmt.Sprintf("≤ %.2f × today's each", fairnessTolerance),
			OK: f.timeRatio(r, 1) <= fairnessTolerance*f.timeRatio(base, 1) && outageRate(r) <= fairnessTolerance*outageRate(base) &&
				f.recoveryRatio(r) <= fairnessTolerance*f.recoveryRatio(base) && r.Failed == 0,
		})
	}
	return out
}

// writeFairnessClaims writes the claims rows of f.
func writeFairnessClaims(w io.Writer, f *FairnessResult) {
	for _, g := range f.goals() {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", g.ID, g.Claim, g.Measured, g.Target, met(g.OK))
	}
}

// writeFairness writes the fairness section of f.
func writeFairness(w io.Writer, f *FairnessResult) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	fp := f.Params
	p("## 13. Temporal's fairness keys against a task queue per origin\n\n")
	p("Two origins behind one API process: A takes %d requests per %s, B %d, each answering 429 over it. %d workflows per origin (%d in all) are started at once, each needing one success (retry policy: base %s, coefficient %g, cap %s, full jitter); the limit of an origin is its workflows at its capacity: A %.1f s, B %.1f s. A dev server of the section's own (Server 1.29.1) runs with `%s`: fairness on (1.29.1 enforces a per-key rate limit only with it) and one partition per task queue (the per-key limit is split across read partitions). Fresh task queues and workers for every run.\n\n",
		fp.Capacity[0], fp.Window, fp.Capacity[1], fp.Workflows, 2*fp.Workflows, fp.Base, fp.Coefficient, fp.Cap, fp.limit(0), fp.limit(1), strings.Join(f.ServerArgs, " "))
	p("- **A task queue per origin, shared rate** (today): a worker wired by package host on its defaults (`host.Load` with both origins allowed, `Host.Start`, `Host.WorkerOptions`, `Host.Register`), the ready workflow with `OriginQueue`: each origin's requests on its own task queue, whose rate limit its governor learns from the worker's reports and sets with `UpdateTaskQueueConfig`.\n")
	p("- **One task queue, fairness keys**: the ready workflow's call (`workflows.Call`) with `ActivityOptions.Priority{FairnessKey: origin, FairnessWeight: w}` fixed when the activity is scheduled, on one HTTP task queue whose per-key default rate limit is set with `UpdateTaskQueueConfig` (`update_fairness_key_rate_limit_default`) before the workflows start; matching limits each key to that rate × its weight (`service/matching/ratelimit_manager.go`; per-key overrides are not read in 1.29.1). The activity's adaptive admission is off: matching's limit is the only pacing. The default at A's capacity, at B's, and at B's with weights in the ratio of the capacities (known in advance here: the best case, since weights are fixed before any answer is seen).\n\n")
	p("![Requests per second of each origin, contention runs](%s)\n\n", FairnessSVG)
	if len(f.runs(true)) > 0 {
		p("The outage runs take A down (503 to everything) for %.0f s from its first request, then it takes %d per %s; B is untouched. Does A's outage hold back B on one queue?\n\n", f.runs(true)[0].Outage.Seconds(), fp.Capacity[0], fp.Window)
		p("![Requests per second of each origin across A's outage](%s)\n\n", FairnessOutageSVG)
	}
	p("| Setup | A down | Origin | Requests | Per success | Last success | ÷ limit | During A's outage | Failed (run) | Load after the run |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range f.Runs {
		down := "no"
		if r.Outage > 0 {
			down = fmt.Sprintf("%.0f s", r.Outage.Seconds())
		}
		for i, o := range r.Origins {
			during := "—"
			if r.Outage > 0 {
				during = fmt.Sprint(o.DuringOutage)
			}
			p("| %s | %s | %s (%d/s) | %d | %.2f | %.1f s | %.2f | %s | %d | %s |\n", r.Setup.label(), down, originNames[i], o.Capacity, o.Requests, o.perSuccess(),
				o.ToLastSuccess.Seconds(), f.timeRatio(r, i), during, r.Failed, cmp.Or(r.Load, "—"))
		}
	}
	p("\n")
}

// fairnessSeries are the panels of runs: each run's origin A, then B.
func (f *FairnessResult) fairnessSeries(runs []FairnessRun) []plotSeries {
	var series []plotSeries
	for _, r := range runs {
		for i, o := range r.Origins {
			series = append(series, plotSeries{
				Title: fmt.Sprintf("%s: origin %s", r.Setup.label(), originNames[i]), Log: o.Log, Capacity: o.Capacity,
				Note: fmt.Sprintf("%d requests (%.2f per success), last success at %.1f s (%.2f × limit)", o.Requests, o.perSuccess(), o.ToLastSuccess.Seconds(), f.timeRatio(r, i)),
			})
		}
	}
	return series
}

// WriteFairnessSVG draws the fairness section's contention runs: each
// origin's requests per second, one panel per run and origin. It fails
// if r has none.
func WriteFairnessSVG(w io.Writer, r *Results) error {
	f := r.Fairness
	if f == nil || len(f.runs(false)) == 0 {
		return fmt.Errorf("no fairness plot: the results hold no fairness contention run")
	}
	p := f.Params
	return writeRequestsSVG(w, requestsPlot{
		Title:  fmt.Sprintf("%d workflows per origin, A %d and B %d per %s accepted: a queue per origin vs fairness keys", p.Workflows, p.Capacity[0], p.Capacity[1], p.Window),
		Bucket: p.Window, XLabel: "seconds since the run's first request",
	}, f.fairnessSeries(f.runs(false)))
}

// WriteFairnessOutageSVG draws the fairness section's outage runs, A's
// recovery marked. It fails if r has none.
func WriteFairnessOutageSVG(w io.Writer, r *Results) error {
	f := r.Fairness
	if f == nil || len(f.runs(true)) == 0 {
		return fmt.Errorf("no fairness outage plot: the results hold no fairness outage run")
	}
	runs := f.runs(true)
	p := f.Params
	mark := runs[0].Outage
	if a := runs[0].Origins[0].Log; len(a) > 0 {
		mark += a[0].At
	}
	return writeRequestsSVG(w, requestsPlot{
		Title:  fmt.Sprintf("Origin A down (503) for %.0f s, then %d per %s; B %d per %s throughout", runs[0].Outage.Seconds(), p.Capacity[0], p.Window, p.Capacity[1], p.Window),
		Bucket: p.Window, XLabel: "seconds since the run's first request",
		Failures: "503 (down) or 429 (over capacity)", Mark: mark, MarkLabel: "A recovers",
	}, f.fairnessSeries(runs))
}
