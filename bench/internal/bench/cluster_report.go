package bench

import (
	"fmt"
	"io"
	"strings"
)

// The cluster section's plots, next to RESULTS.md.
const (
	ClusterContentionSVG = "cluster-contention.svg"
	ClusterOutageSVG     = "cluster-outage.svg"
)

// The targets of the cluster section (issue 33) besides targetSharedRequests
// and targetSharedTime.
const (
	targetClusterOutageRequests = 1.20 // outage, shared rate: requests during the outage per second of it, at most
	targetClusterOutageRecovery = 1.15 // outage, shared rate: recovery to the last success ÷ (clients ÷ capacity), at most
	targetClusterThroughput     = 0.95 // uncontended: workflows/s with the shared rate on ÷ off, at least
)

// contention returns the contention runs on workers workers with the
// shared rate on or off, in their order.
func (cs *ClusterShared) contention(workers int, shared bool) []ClusterRun {
	var out []ClusterRun
	for _, r := range cs.Contention {
		if r.workers() == workers && r.SharedRate == shared {
			out = append(out, r)
		}
	}
	return out
}

// outage returns the outage runs with the shared rate on or off.
func (cs *ClusterShared) outage(shared bool) []ClusterOutageRun {
	var out []ClusterOutageRun
	for _, r := range cs.Outage {
		if r.SharedRate == shared {
			out = append(out, r)
		}
	}
	return out
}

// worstOf returns the index of the largest of f over n items and every
// value, formatted "a, b, c".
func worstOf(n int, f func(int) float64) (worst int, all string) {
	vals := make([]string, n)
	for i := range n {
		vals[i] = fmt.Sprintf("%.2f", f(i))
		if f(i) > f(worst) {
			worst = i
		}
	}
	return worst, strings.Join(vals, ", ")
}

// worstOfRuns says which of n runs a claim reports: the worst of them, or
// the only one (a check with -cluster-runs 1, not the claim's three).
func worstOfRuns(n int) string {
	if n == 1 {
		return "one run (a check: the claim takes the worst of three)"
	}
	return fmt.Sprintf("worst of %d runs", n)
}

// numberWord spells n out up to ten.
func numberWord(n int) string {
	if n >= 0 && n <= 10 {
		return [...]string{"zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"}[n]
	}
	return fmt.Sprint(n)
}

// perSuccess is a contention run's requests per success.
func perSuccess(r ContentionRun) float64 {
	return float64(r.Requests) / float64(max(r.Successes, 1))
}

// writeClusterSharedClaims writes the claims rows of cs: 8a-8d (contention,
// the shared rate on two and three workers), 8g-8h (outage, three
// workers), 8i-8j (uncontended throughput, on ÷ off), each from the worst
// of its runs.
func writeClusterSharedClaims(w io.Writer, cs *ClusterShared) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	lim := cs.Params.limitSeconds()
	for _, c := range []struct {
		ids     [2]string
		workers int
	}{{[2]string{"8a", "8b"}, 2}, {[2]string{"8c", "8d"}, 3}} {
		runs := cs.contention(c.workers, true)
		if len(runs) == 0 {
			continue
		}
		failed := 0
		for _, r := range runs {
			failed += r.Run.Failed
		}
		wq, allq := worstOf(len(runs), func(i int) float64 { return perSuccess(runs[i].Run) })
		wt, allt := worstOf(len(runs), func(i int) float64 { return runs[i].Run.ToLastSuccess.Seconds() / lim })
		q, t := runs[wq].Run, runs[wt].Run
		p("| %s | Contention, shared rate on (PostgreSQL cluster, %s worker processes): requests per success, %s | %.2f (%d ÷ %d; runs: %s) | ≤ %.2f | %s |\n",
			c.ids[0], numberWord(c.workers), worstOfRuns(len(runs)), perSuccess(q), q.Requests, q.Successes, allq, targetSharedRequests, met(perSuccess(q) <= targetSharedRequests && failed == 0))
		p("| %s | Contention, shared rate on (PostgreSQL cluster, %s worker processes): time to the last success ÷ (%d workflows ÷ %d per %s), %s | %.2f (%.1f s ÷ %.1f s; runs: %s; %d failed) | ≤ %.2f | %s |\n",
			c.ids[1], numberWord(c.workers), cs.Params.Clients, cs.Params.Capacity, cs.Params.Window, worstOfRuns(len(runs)), t.ToLastSuccess.Seconds()/lim, t.ToLastSuccess.Seconds(), lim, allt, failed, targetSharedTime,
			met(t.ToLastSuccess.Seconds()/lim <= targetSharedTime && failed == 0))
	}
	if runs := cs.outage(true); len(runs) > 0 {
		failed := 0
		for _, r := range runs {
			failed += r.Run.Failed
		}
		perSec := func(i int) float64 { return float64(runs[i].Run.DuringOutage) / runs[i].Run.Outage.Seconds() }
		wq, allq := worstOf(len(runs), perSec)
		wt, allt := worstOf(len(runs), func(i int) float64 { return runs[i].Run.RecoveryToLast.Seconds() / lim })
		q, t := runs[wq].Run, runs[wt].Run
		p("| 8g | Outage (%.0f s of 503, then %d per %s), three worker processes, shared rate on: requests during the outage per second of it, %s | %.2f (%d in %.0f s; runs: %s) | ≤ %.2f | %s |\n",
			q.Outage.Seconds(), cs.Params.Capacity, cs.Params.Window, worstOfRuns(len(runs)), perSec(wq), q.DuringOutage, q.Outage.Seconds(), allq, targetClusterOutageRequests, met(perSec(wq) <= targetClusterOutageRequests))
		p("| 8h | Outage, three worker processes, shared rate on: recovery to the last success ÷ (%d workflows ÷ %d per %s), %s | %.2f (%.1f s ÷ %.1f s; runs: %s; %d failed) | ≤ %.2f, no workflow failed | %s |\n",
			cs.Params.Clients, cs.Params.Capacity, cs.Params.Window, worstOfRuns(len(runs)), t.RecoveryToLast.Seconds()/lim, t.RecoveryToLast.Seconds(), lim, allt, failed, targetClusterOutageRecovery,
			met(t.RecoveryToLast.Seconds()/lim <= targetClusterOutageRecovery && failed == 0))
	}
	for _, t := range cs.Throughput {
		if len(t.Rounds) == 0 {
			continue
		}
		id, what := "8i", fmt.Sprintf("%s worker processes", numberWord(t.Workers))
		if t.Workers == 1 {
			id, what = "8j", "one worker process alone"
		}
		ratios := make([]string, len(t.Rounds))
		var on, off []float64
		failed := 0
		for i, r := range t.Rounds {
			ratios[i] = fmt.Sprintf("%.2f", r.ratio())
			on, off = append(on, r.On.Seconds()), append(off, r.Off.Seconds())
			failed += r.Failed
		}
		p("| %s | Uncontended throughput, %s: workflows/s with the shared rate on ÷ off (%d workflows at once, an API without a limit; median of %d rounds) | %.2f (rounds: %s; median times %.1f s on, %.1f s off; %d failed) | ≥ %.2f | %s |\n",
			id, what, t.Workflows, len(t.Rounds), t.Ratio(), strings.Join(ratios, ", "), median(on), median(off), failed, targetClusterThroughput, met(t.Ratio() >= targetClusterThroughput && failed == 0))
	}
}

// writeClusterShared writes the cluster section of cs (section 1e).
func writeClusterShared(w io.Writer, cs *ClusterShared) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	cp := cs.Params
	lim := cp.limitSeconds()
	p("## 1e. Across workers: the PostgreSQL-backed cluster\n\n")
	p("temporal-server 1.29.1 on PostgreSQL (`harness/cluster`, one partition per activity task queue) and two or three worker processes (the `worker` binary, as a user runs it) polling one task queue; the workflows are started without eager start, so matching hands every task to any worker. Every worker is started with `--shared-rate=true` or `--shared-rate=false`, whatever the default: with it on, the requests run on the origin's own task queue and one governor sets that queue's rate limit on the server from every worker's reports (`internal/governor`), so the workers act as one client of the API; with it off, each worker has its own limiter and breaker and learns the API's capacity from its own answers alone. Full jitter; fresh workers and a fresh task queue for every run; with the shared rate on, the workflows start %s after every worker polls, once each has read the others (each worker then starts its own limiter at its share of InitialRate until the governor's first limit). Each shared-rate figure is taken from %d consecutive runs and the claims report the worst (claims 8a-8d, 8g-8h; the throughput claims 8i-8j are the median of their rounds); the runs with each worker on its own rate are the comparison, one run each. The limit is %d workflows ÷ %d per %s = %.1f s.\n\n",
		pollersKnown, cs.Runs, cp.Clients, cp.Capacity, cp.Window, lim)
	if len(cs.Contention) > 0 {
		p("**Contention** (%d workflows, each needing one success from an API that takes %d requests per %s and answers the rest 429).\n\n", cp.Clients, cp.Capacity, cp.Window)
		p("![Requests per second on the cluster: two and three workers, shared rate on (the worst run) and each worker its own rate](%s)\n\n", ClusterContentionSVG)
		p("| Workers | Run | Requests | Requests per success | Last success | ÷ limit | Failed | First attempts spread over |\n|---|---|---|---|---|---|---|---|\n")
		for _, r := range cs.Contention {
			a := r.Run
			p("| %s | %d | %d | %.2f | %.1f s | %.2f | %d | %s |\n", r.Label, max(r.Repeat, 1), a.Requests, perSuccess(a), a.ToLastSuccess.Seconds(), a.ToLastSuccess.Seconds()/lim, a.Failed, secs(a.FirstSpread))
		}
		p("\n")
	}
	if len(cs.Outage) > 0 {
		p("**Outage**: the same workflows against an API that answers 503 without Retry-After to every request for %.0f s from its first one, then takes %d per %s; three workers. One probe a second for the whole cluster is %.0f requests during the outage; each worker's own breaker sends about one a second each.\n\n",
			cs.Outage[0].Run.Outage.Seconds(), cp.Capacity, cp.Window, cs.Outage[0].Run.Outage.Seconds())
		p("![Requests per second on the cluster across the outage, three workers together: shared rate on (the worst run) and each worker its own rate](%s)\n\n", ClusterOutageSVG)
		p("| Workers | Run | Requests during the outage | Per second of it | Requests after | Recovery to the last success | ÷ limit | Failed |\n|---|---|---|---|---|---|---|---|\n")
		for _, r := range cs.Outage {
			o := r.Run
			p("| %s | %d | %d | %.2f | %d | %.1f s | %.2f | %d |\n", clusterStep{workers: r.Workers, shared: r.SharedRate}.label(), r.Repeat, o.DuringOutage,
				float64(o.DuringOutage)/o.Outage.Seconds(), o.After, o.RecoveryToLast.Seconds(), o.RecoveryToLast.Seconds()/lim, o.Failed)
		}
		p("\n")
	}
	if len(cs.Throughput) > 0 {
		p("**Uncontended throughput**: an API that answers 201 to everything; two sets of worker processes of the same size poll task queues of their own at the same time, one with the shared rate on and one with it off; after a warm-up batch on each, every round starts a batch of workflows at once on one set and waits for them, then on the other, the order alternating. The time runs from the first start to the last result.\n\n")
		p("| Workers | Round | Workflows | Time, shared rate on | Time, off | Throughput on ÷ off | Failed |\n|---|---|---|---|---|---|---|\n")
		for _, t := range cs.Throughput {
			for i, r := range t.Rounds {
				p("| %d | %d | %d | %.1f s | %.1f s | %.2f | %d |\n", t.Workers, i+1, t.Workflows, r.On.Seconds(), r.Off.Seconds(), r.ratio(), r.Failed)
			}
		}
		p("\n")
	}
}

// worstTitle is the title of the worst run (0-based index i) of a figure
// taken from runs runs.
func worstTitle(label string, i, runs int) string {
	if runs <= 1 {
		return label
	}
	return fmt.Sprintf("%s (worst of %d runs: run %d)", label, runs, i+1)
}

// WriteClusterContentionSVG draws the cluster section's contention runs:
// the requests per capacity window of the worst run (by time to the last
// success) with the shared rate on two and on three workers, and of each
// worker on its own rate, one panel each. It fails if r has none.
func WriteClusterContentionSVG(w io.Writer, r *Results) error {
	cs := r.ClusterShared
	if cs == nil || len(cs.Contention) == 0 {
		return fmt.Errorf("no cluster contention plot: the results hold no cluster contention run")
	}
	var series []plotSeries
	for _, s := range clusterContentionSteps(1) {
		runs := cs.contention(s.workers, s.shared)
		if len(runs) == 0 {
			continue
		}
		i, _ := worstOf(len(runs), func(i int) float64 { return runs[i].Run.ToLastSuccess.Seconds() })
		a := runs[i].Run
		series = append(series, plotSeries{
			Title: worstTitle(runs[i].Label, i, len(runs)), Log: a.Log,
			Note: fmt.Sprintf("%d requests (%.2f per success), last success at %.1f s", a.Requests, perSuccess(a), a.ToLastSuccess.Seconds()),
		})
	}
	p := cs.Params
	return writeContentionSVG(w, fmt.Sprintf("%d workflows, %d requests per %s accepted, worker processes together (PostgreSQL cluster)", p.Clients, p.Capacity, p.Window),
		series, p.Window, p.Capacity)
}

// WriteClusterOutageSVG draws the cluster section's outage runs: the
// requests per second, the workers together, of the worst run (by requests
// during the outage) with the shared rate on and of the run with it off,
// the recovery marked. It fails if r has no cluster outage run.
func WriteClusterOutageSVG(w io.Writer, r *Results) error {
	cs := r.ClusterShared
	if cs == nil || len(cs.Outage) == 0 {
		return fmt.Errorf("no cluster outage plot: the results hold no cluster outage run")
	}
	var series []plotSeries
	for _, shared := range []bool{true, false} {
		runs := cs.outage(shared)
		if len(runs) == 0 {
			continue
		}
		i, _ := worstOf(len(runs), func(i int) float64 { return float64(runs[i].Run.DuringOutage) })
		o := runs[i].Run
		series = append(series, plotSeries{
			Title: worstTitle(clusterStep{workers: runs[i].Workers, shared: shared}.label(), i, len(runs)), Log: o.Log,
			Note: fmt.Sprintf("%d requests during the outage, %d after; last success %.1f s after the recovery", o.DuringOutage, o.After, o.RecoveryToLast.Seconds()),
		})
	}
	p, outage := cs.Params, cs.Outage[0].Run.Outage
	return writeRequestsSVG(w, requestsPlot{
		Title:  fmt.Sprintf("%d workflows, API down (503) for %.0f s, then %d requests per %s accepted; worker processes together (PostgreSQL cluster)", p.Clients, outage.Seconds(), p.Capacity, p.Window),
		Bucket: p.Window, Capacity: p.Capacity,
		Failures: "503 (down) or 429 (over capacity)",
		Mark:     outage, MarkLabel: "recovery",
	}, series)
}
