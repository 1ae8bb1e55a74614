package bench

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/internal/admission"
	"github.com/idemhttp/temporal-idempotent-http/internal/backoff"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// The targets the claims of RESULTS.md are checked against.
const (
	targetRequestsRatio   = 0.45 // full jitter requests ÷ Temporal's backoff, at most
	targetTimeRatio       = 0.20 // full jitter time to last success ÷ Temporal's backoff, at most
	targetOverheadRatio   = 1.10 // Activities.Do ns/op ÷ raw net/http, at most
	targetThroughputRatio = 0.90 // our workflows/s ÷ minimal workflows/s, at least

	targetAdmissionRequests   = 1.30 // adaptive admission: requests per success, at most
	targetAdmissionTime       = 1.15 // adaptive admission: last success ÷ (clients ÷ capacity), at most
	targetAdmissionThroughput = 0.95 // ready workflow with admission ÷ without, workflows/s, at least

	targetSharedRequests = 1.20 // shared rate across workers: requests per success, at most
	targetSharedTime     = 1.15 // shared rate across workers: last success ÷ (clients ÷ capacity), at most
	targetSharedSimTime  = 1.10 // simulation, 1000 workflows, two and eight workers, shared rate: time ÷ limit, at most

	targetOutageRequests = 0.15 // outage: admission's requests during the outage ÷ Temporal's backoff's, at most
	targetOutageRecovery = 1.15 // outage: admission's recovery to the last success ÷ (clients ÷ capacity), at most
)

// OutageSVG is the outage plot's file name, next to RESULTS.md.
const OutageSVG = "outage.svg"

// outageParams is the setup of the outage runs: OutageParams, or SimParams
// for results from before it was recorded (the same setup in those runs).
func (r *Results) outageParams() ContentionParams {
	if r.OutageParams.Clients > 0 {
		return r.OutageParams
	}
	return r.SimParams
}

// outageRun returns the outage run of strategy j with admission adm (and,
// with admission, the circuit breaker on), if any.
func (r *Results) outageRun(j workflows.Jitter, adm bool) (OutageRun, bool) {
	for _, o := range r.Outage {
		if o.Strategy == j && o.Admission == adm && o.Breaker == adm {
			return o, true
		}
	}
	return OutageRun{}, false
}

// outageSim returns the simulation of the outage run of strategy j with
// admission adm (the breaker on), if any.
func (r *Results) outageSim(j workflows.Jitter, adm bool) (OutageSim, bool) {
	for _, s := range r.OutageSim {
		if s.Strategy == j && s.Admission == adm && !s.BreakerOff && !s.Shared {
			return s, true
		}
	}
	return OutageSim{}, false
}

// admissionRun returns the contention run with adaptive admission, if any.
func admissionRun(c *ContentionResult) (ContentionRun, bool) {
	for _, r := range c.Runs {
		if r.Admission {
			return r, true
		}
	}
	return ContentionRun{}, false
}

// limitSeconds is the least time the contention experiment can take: one
// request per workflow at the server's capacity.
func (p ContentionParams) limitSeconds() float64 {
	return float64(p.Clients) / float64(p.Capacity) * p.Window.Seconds()
}

// The bounds of the gap a Retry-After: 1 must leave (claim 3).
var (
	targetGapMin = 1000 * time.Millisecond
	targetGapMax = 1150 * time.Millisecond
)

// brookerPublished are the calls at 100 clients from Brooker's post, for comparison.
var brookerPublished = map[workflows.Jitter]float64{
	backoff.JitterNone: 1846, workflows.JitterFull: 796, workflows.JitterDecorrelated: 998,
}

func met(ok bool) string {
	if ok {
		return "yes"
	}
	return "**MISSED**"
}

func secs(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

// gap formats a retry gap: milliseconds below a second, else seconds to the millisecond.
func gap(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.3f s", d.Seconds())
}

// WriteMarkdown writes the results as RESULTS.md: the claims (ratios
// against baselines measured in the same run) first, then every raw number.
// plot is the SVG's file name, relative to the markdown file.
func WriteMarkdown(w io.Writer, r *Results, command, plot string) error {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("# Benchmark results\n\n")
	if r.Command != "" {
		command = r.Command
	}
	p("Written by `%s` on %s; the run took %s. Every claim is a ratio against a baseline measured in the same run on the same machine.\n\n",
		command, r.Started.UTC().Format("2006-01-02 15:04 MST"), r.Total.Round(time.Second))
	m := r.Machine
	cli := ""
	if m.CLI != "" {
		cli = ", " + strings.ReplaceAll(m.CLI, "\n", ", ")
	}
	p("Machine: %s, %d CPUs, %.0f GiB RAM, %s, %s%s. Load average (1, 5, 15 min) %s before and %s after the run: the CPUs were shared with other work, so absolute numbers are noisy; the ratios pair each measurement with its baseline to cancel most of it.\n\n",
		m.CPU, m.CPUs, m.MemGiB, m.Kernel, m.Go, cli, m.LoadBefore, m.LoadAfter)

	p("## Claims\n\n| # | Claim | Measured | Target | Met |\n|---|---|---|---|---|\n")
	if c := r.Contention; c != nil && len(c.Runs) >= 2 {
		base, full := c.Runs[0], c.Runs[1]
		rq := float64(full.Requests) / float64(base.Requests)
		rt := full.ToLastSuccess.Seconds() / base.ToLastSuccess.Seconds()
		p("| 1a | Contention: full jitter's requests ÷ Temporal's own backoff's | %.2f (%d ÷ %d) | ≤ %.2f | %s |\n", rq, full.Requests, base.Requests, targetRequestsRatio, met(rq <= targetRequestsRatio))
		p("| 1b | Contention: full jitter's time to the last success ÷ Temporal's own backoff's | %.2f (%.1f s ÷ %.1f s) | ≤ %.2f | %s |\n", rt, full.ToLastSuccess.Seconds(), base.ToLastSuccess.Seconds(), targetTimeRatio, met(rt <= targetTimeRatio))
	}
	if c := r.Contention; c != nil {
		if a, ok := admissionRun(c); ok {
			perSuccess := float64(a.Requests) / float64(max(a.Successes, 1))
			lim := c.Params.limitSeconds()
			tr := a.ToLastSuccess.Seconds() / lim
			p("| 5a | Contention, adaptive admission (dev server, one worker): requests per success | %.2f (%d ÷ %d) | ≤ %.2f | %s |\n", perSuccess, a.Requests, a.Successes, targetAdmissionRequests, met(perSuccess <= targetAdmissionRequests && a.Failed == 0))
			p("| 5b | Contention, adaptive admission (dev server, one worker): time to the last success ÷ (%d workflows ÷ %d per %s) | %.2f (%.1f s ÷ %.1f s) | ≤ %.2f | %s |\n", c.Params.Clients, c.Params.Capacity, c.Params.Window, tr, a.ToLastSuccess.Seconds(), lim, targetAdmissionTime, met(tr <= targetAdmissionTime && a.Failed == 0))
		}
	}
	if cl := r.Cluster; cl != nil {
		lim := cl.Params.limitSeconds()
		for _, run := range cl.Runs {
			if !run.Admission {
				continue
			}
			a := run.Run
			perSuccess := float64(a.Requests) / float64(max(a.Successes, 1))
			tr := a.ToLastSuccess.Seconds() / lim
			ids, what, reqTarget, timeTarget := [2]string{"5c", "5d"}, "adaptive admission", targetAdmissionRequests, targetAdmissionTime
			switch {
			case run.SharedRate && run.workers() == 2:
				ids, what, reqTarget, timeTarget = [2]string{"8a", "8b"}, "one shared rate (`--shared-rate`)", targetSharedRequests, targetSharedTime
			case run.SharedRate:
				ids, what, reqTarget, timeTarget = [2]string{"8c", "8d"}, "one shared rate (`--shared-rate`)", targetSharedRequests, targetSharedTime
			case run.workers() != 2:
				continue // a comparison, in section 1e
			}
			workers := map[int]string{2: "two", 3: "three"}[run.workers()]
			p("| %s | Contention, %s (PostgreSQL cluster, %s worker processes): requests per success | %.2f (%d ÷ %d) | ≤ %.2f | %s |\n", ids[0], what, workers, perSuccess, a.Requests, a.Successes, reqTarget, met(perSuccess <= reqTarget && a.Failed == 0))
			p("| %s | Contention, %s (PostgreSQL cluster, %s worker processes): time to the last success ÷ (%d workflows ÷ %d per %s) | %.2f (%.1f s ÷ %.1f s) | ≤ %.2f | %s |\n", ids[1], what, workers, cl.Params.Clients, cl.Params.Capacity, cl.Params.Window, tr, a.ToLastSuccess.Seconds(), lim, timeTarget, met(tr <= timeTarget && a.Failed == 0))
		}
	}
	if cs := r.ClusterShared; cs != nil {
		writeClusterSharedClaims(&b, cs)
	}
	for _, s := range r.SimAdmission {
		if id, ok := map[int]string{2: "8e", 8: "8f"}[s.Workers]; ok && s.Shared && s.Clients == 1000 {
			sp := r.SimParams
			tr := s.Duration.Seconds() / (float64(s.Clients) / float64(sp.Capacity) * sp.Window.Seconds())
			p("| %s | Simulation, 1000 workflows, %d workers, one shared rate (the governor's Decider): time to the last success ÷ (1000 ÷ %d per %s) (mean of %d runs) | %.2f (%.2f requests per success) | ≤ %.2f | %s |\n",
				id, s.Workers, sp.Capacity, sp.Window, s.Runs, tr, s.Requests/float64(s.Clients), targetSharedSimTime, met(tr <= targetSharedSimTime))
		}
	}
	if t := r.Throughput; t != nil && t.AdmissionRatio > 0 {
		p("| 6 | Uncontended throughput: ready workflow with adaptive admission ÷ without, workflows/s (median of %d rounds) | %.2f (medians %.1f/s and %.1f/s) | ≥ %.2f | %s |\n",
			len(t.AdmissionRatios), t.AdmissionRatio, t.AdmissionPerSecond, t.OursPerSecond, targetAdmissionThroughput, met(t.AdmissionRatio >= targetAdmissionThroughput))
	}
	if a, ok := r.outageRun(workflows.JitterFull, true); ok {
		if base, ok := r.outageRun(backoff.JitterNone, false); ok {
			rq := float64(a.DuringOutage) / float64(max(base.DuringOutage, 1))
			p("| 7a | Outage: requests during the outage, adaptive admission with the circuit breaker ÷ Temporal's own backoff's | %.2f (%d ÷ %d) | ≤ %.2f | %s |\n",
				rq, a.DuringOutage, base.DuringOutage, targetOutageRequests, met(base.DuringOutage > 0 && rq <= targetOutageRequests))
		}
		if op := r.outageParams(); op.Capacity > 0 {
			lim := op.limitSeconds()
			tr := a.RecoveryToLast.Seconds() / lim
			p("| 7b | Outage: recovery to the last success ÷ (%d workflows ÷ %d per %g s), adaptive admission with the circuit breaker | %.2f (%.1f s ÷ %.1f s; %d failed) | ≤ %.2f, no workflow failed | %s |\n",
				op.Clients, op.Capacity, op.Window.Seconds(), tr, a.RecoveryToLast.Seconds(), lim, a.Failed, targetOutageRecovery, met(tr <= targetOutageRecovery && a.Failed == 0))
		}
	}
	if o := r.Overhead; o != nil {
		p("| 2 | One attempt: `Activities.Do` ns/op ÷ the same raw `net/http` POST + body read in an activity (median of %d rounds) | %.2f (%.1f µs ÷ %.1f µs); CPU time %.2f | ≤ %.2f | %s |\n",
			o.Rounds, o.Do.Ratio, o.Do.MedianNs/1e3, o.Baseline.MedianNs/1e3, o.Do.CPURatio, targetOverheadRatio, met(o.Do.Ratio <= targetOverheadRatio))
	}
	if pr := r.Peers; pr != nil && pr.Overhead != nil {
		po := pr.Overhead
		best, bestRatio := po.BestPeer()
		p("| 2b | One attempt: `Activities.Do` ns/op ÷ raw `net/http` in an activity, against the best peer's (go-retryablehttp, failsafe-go) in the same rounds (median of %d rounds; min–max over rounds) | Do %s; best peer %s %.3f (go-retryablehttp %s, failsafe-go %s); CPU time: Do %.3f, go-retryablehttp %.3f, failsafe-go %.3f | ≤ the best peer's | %s |\n",
			po.Rounds, ratioSpread(po.Do), best, bestRatio, ratioSpread(po.RetryableHTTP), ratioSpread(po.Failsafe), po.Do.CPURatio, po.RetryableHTTP.CPURatio, po.Failsafe.CPURatio, met(po.Do.Ratio <= bestRatio))
	}
	if pr := r.Peers; pr != nil && pr.Credentials != nil {
		c := pr.Credentials
		p("| 2c | One attempt: `Activities.Do` with OAuth 2.0 client credentials (token cached, %d s lifetime) ÷ with a static bearer header, same server, same rounds (median of %d rounds; min–max over rounds) | %s (%.1f µs ÷ %.1f µs); CPU time %.3f; %d token requests | ≤ %.2f | %s |\n",
			credTokenLife, c.Rounds, ratioSpread(c.OAuth2), c.OAuth2.MedianNs/1e3, c.Static.MedianNs/1e3, c.OAuth2.CPURatio, c.TokenRequests, targetOAuth2Ratio, met(c.OAuth2.Ratio <= targetOAuth2Ratio))
	}
	if len(r.Gaps) > 0 {
		g := r.Gaps[0]
		ok := g.Min >= targetGapMin && g.Max <= targetGapMax
		floor := ""
		if r.Floor != nil {
			floor = fmt.Sprintf("; `time.Sleep(1s)` floor %s–%s", gap(r.Floor.Min), gap(r.Floor.Max))
		}
		p("| 3 | Gap between a 503 with `Retry-After: 1` and the retry, through Temporal (%d runs) | %s–%s, median %s%s | within [%s, %s] | %s |\n",
			len(g.Gaps), gap(g.Min), gap(g.Max), gap(g.P50), floor, secs(targetGapMin), secs(targetGapMax), met(ok))
	}
	if t := r.Throughput; t != nil {
		cpu := ""
		if t.CPURatio > 0 {
			cpu = fmt.Sprintf("; per CPU-second %.2f", t.CPURatio)
		}
		p("| 4 | Throughput: ready workflow ÷ minimal workflow, workflows/s with one worker (median of %d rounds) | %.2f (medians %.1f/s and %.1f/s)%s | ≥ %.2f | %s |\n",
			len(t.Ratios), t.Ratio, t.OursPerSecond, t.MinimalPerSec, cpu, targetThroughputRatio, met(t.Ratio >= targetThroughputRatio))
	}
	if lr := r.LongRunning; lr != nil {
		writeLongRunningClaims(&b, lr)
	}
	if wh := r.Webhooks; wh != nil {
		writeWebhooksClaims(&b, wh)
	}
	if a := r.Actions; a != nil {
		writeActionsClaims(&b, a)
	}
	if pr := r.Partial; pr != nil {
		writePartialClaims(&b, pr)
	}
	if f := r.Fairness; f != nil {
		writeFairnessClaims(&b, f)
	}
	if sc := r.Scale; sc != nil {
		writeScaleClaims(&b, sc)
	}
	if r.Chaos != nil && r.Chaos.Campaign != nil {
		writeChaosClaim(&b, r.Chaos.Campaign)
	}
	if r.Unkeyed != nil {
		writeUnkeyedClaim(&b, r.Unkeyed)
	}
	p("\n")

	if c := r.Contention; c != nil && len(c.Runs) > 0 {
		cp := c.Params
		p("## 1. Contention (after Brooker, \"Exponential Backoff And Jitter\", 2015)\n\n")
		p("%d workflows (`workflows.HTTPCallWorkflow`) are started at once (concurrent `ExecuteWorkflow` calls with eager workflow start) on the dev server, one worker. Each needs one success from a reference server (`testsuite.Options{Capacity: %d, CapacityWindow: %s}`) that accepts %d requests per %s window and answers every other one 429 without Retry-After (the reference server's default for Capacity, as a rate-limited API answers; before this round it answered 503, which the retry policy alone treats the same). Retry policy: base (InitialInterval) %s, coefficient %g, cap (MaximumInterval) %s, MaximumAttempts %d, ScheduleToClose 30 min. Requests are counted by the server; the time runs from its first request to its last success. The worker has 8 pollers per task type and the workflows use eager start, so that \"at once\" holds: in calibration runs on this machine, with the SDK's default 2 pollers (against the dev server's 4 partitions per task queue) 5–10 %% of the first attempts waited 2–5 s in matching, with or without eager start, and with 8 pollers but no eager start the first attempts still spread over 1.5–2.7 s — a herd spread over seconds, which jitters the baseline for free.\n\n",
			cp.Clients, cp.Capacity, cp.Window, cp.Capacity, cp.Window, cp.Base, cp.Coefficient, cp.Cap, cp.MaximumAttempts)
		p("![Requests per second: Temporal's own backoff against full jitter](%s)\n\n", plot)
		p("| Strategy | Requests | ÷ baseline | Last success | ÷ baseline | Max attempt | Failed | First attempts spread over | Simulated requests | Simulated time |\n|---|---|---|---|---|---|---|---|---|---|\n")
		base := c.Runs[0]
		for i, run := range c.Runs {
			var sim SimSummary
			if i < len(c.Sim) {
				sim = c.Sim[i]
			}
			p("| %s | %d | %.2f | %.1f s | %.2f | %d | %d | %s | %.0f | %.1f s |\n", runName(run.Strategy, run.Admission), run.Requests,
				float64(run.Requests)/float64(base.Requests), run.ToLastSuccess.Seconds(), run.ToLastSuccess.Seconds()/base.ToLastSuccess.Seconds(),
				run.MaxAttempts, run.Failed, secs(run.FirstSpread), sim.Requests, sim.Duration.Seconds())
		}
		p("\nThe simulated columns are the in-process model of the same setup with what the dev server adds (mean of 100 seeded runs; first requests spread over %s like the dev server's herd, no retry sooner than %s, 1 ms network delay).\n\n", temporalHerdSpread, temporalMinDelay)
		rounds := (cp.Clients + cp.Capacity - 1) / cp.Capacity
		p("Why this setup: with deterministic backoff every round is a herd of all remaining workflows, of which %d get through, so Temporal's own backoff needs %d rounds, most of them a full cap (%s) apart, and about %d requests (%d + %d + … + %d). Spreading the retries over the cap lets the server use its capacity in most windows instead of one window per cap. The window (%s) is wider than the herd of first attempts Temporal leaves (column \"first attempts spread over\"), so a herd really contends; the cap is %.0f windows so that spreading can pay off while the no-jitter run stays short; the base is %s because Temporal moves timers shorter than 1 s to about 1 s (section 3), which would bunch short jittered delays again. MaximumAttempts %d is never reached (column \"max attempt\"); every workflow succeeds (column \"failed\").\n\n",
			cp.Capacity, rounds, cp.Cap, rounds*(cp.Clients+cp.Clients-(rounds-1)*cp.Capacity)/2, cp.Clients, cp.Clients-cp.Capacity, cp.Clients-(rounds-1)*cp.Capacity,
			cp.Window, float64(cp.Cap)/float64(cp.Window), cp.Base, cp.MaximumAttempts)
	}

	if len(r.SimBrooker) > 0 || len(r.SimCapacity) > 0 {
		p("## 1b. Simulation (no Temporal)\n\n")
		p("A discrete-event simulation in virtual time (`simulate` in `bench/internal/bench`), deterministic per seed, with the strategies' delays from `backoff.Backoff.Delay` in `internal/backoff` (Temporal's own backoff = `Backoff.Ceiling`).\n\n")
		if len(r.SimBrooker) > 0 {
			p("**Brooker's model** (his simulator: optimistic concurrency on one row, a read and a write per attempt, network delay |N(10 ms, 2 ms)|, base 5 ms, cap 2 s; his backoff(n) = min(cap, base × 2^n) is our Ceiling with InitialInterval 10 ms). Mean of 100 runs (20 at 1000 clients).\n\n")
			writeSimTable(&b, r.SimBrooker, true)
		}
		if len(r.SimCapacity) > 0 {
			sp := r.SimParams
			p("\n**Capacity model** of section 1 (the reference server's: %d requests per %s window, the rest 429; base %s, coefficient %g, cap %s), Brooker-style: every client starts at the same instant, 1 ms ± 0.5 ms network delay, delays exactly as computed (no Temporal). Mean of 100 runs (20 at 1000 clients). With 10 clients there is hardly any contention (two rounds), so jitter only adds waiting; the more clients, the more it saves.\n\n",
				sp.Capacity, sp.Window, sp.Base, sp.Coefficient, sp.Cap)
			writeSimTable(&b, r.SimCapacity, false)
		}
		p("\n")
	}

	if c := r.Contention; c != nil {
		if _, ok := admissionRun(c); ok {
			p("**Adaptive admission** (last row): a fresh worker on its own task queue with `activities.Config.Admission` at its defaults (on): every attempt asks the worker's limiter for the origin before it sends; the limiter starts at 10 requests/s, gains one per answer that is not a throttle, cuts to 0.8 of the rate on a 429 (`Admission.Throttles`' default) and grows back along CUBIC's curve, serving waiting attempts in order; a throttled attempt is retried as soon as the limiter admits it. Its requests per success and its time to the last success against the limit (%d workflows ÷ %d per %s = %.1f s) are claims 5a and 5b. The other rows run without admission (the retry policy alone).\n\n",
				c.Params.Clients, c.Params.Capacity, c.Params.Window, c.Params.limitSeconds())
		}
	}
	if len(r.SimAdmission) > 0 {
		sp := r.SimParams
		p("## 1c. Adaptive admission in the simulation\n\n")
		p("The capacity model of section 1 with what the dev server adds (first requests spread over %s, no Temporal wait below %s), the limiter modelled by the same code that runs in the activity (`internal/admission`, one limiter per worker; with two workers each attempt runs on a worker drawn at random, as Temporal's matching hands a retry to any poller). Mean of 100 seeded runs (20 at 1000 clients). The shared rate runs the governor's own decision code (`governor.Decider`, `simShared`): every worker reports each second, and at once on the first throttle or failure; a report reaches the governor 50 ms later and a limit it writes is in force 1 s later; matching then dispatches the attempts evenly at the limit in force (one partition, as local pacing smooths its bursts) and the workers' limiters only gate them. The limit is clients ÷ %d per %s.\n\n", temporalHerdSpread, temporalMinDelay, sp.Capacity, sp.Window)
		p("| Clients | Strategy | Requests per success | Time | ÷ limit |\n|---|---|---|---|---|\n")
		for _, s := range r.SimAdmission {
			name := strategyName(s.Strategy)
			if s.Admission {
				name = fmt.Sprintf("adaptive admission, %d worker(s)", s.Workers)
			}
			if s.Shared {
				name = fmt.Sprintf("one shared rate (governor), %d workers", s.Workers)
			}
			lim := float64(s.Clients) / float64(sp.Capacity) * sp.Window.Seconds()
			p("| %d | %s | %.2f | %s | %.2f |\n", s.Clients, name, s.Requests/float64(s.Clients), fmtDur(s.Duration), s.Duration.Seconds()/lim)
		}
		p("\n")
	}
	if len(r.Outage) > 0 {
		writeOutage(&b, r)
	}
	if cl := r.Cluster; cl != nil && len(cl.Runs) > 0 {
		cp := cl.Params
		p("## 1e. Across workers: the PostgreSQL-backed cluster\n\n")
		p("The contention setup (%d workflows, %d requests per %s) on temporal-server with PostgreSQL (`harness/cluster`) and two or three worker processes (the `worker` binary) polling one task queue, started without eager start so matching hands every task to any worker. Without a shared rate each worker has its own limiter and shares nothing with the others: each learns the API's capacity from its own answers (as the AWS SDKs' adaptive mode does), and the sum must stay near the capacity. With `--shared-rate` the requests run on the origin's own task queue (`Request.OriginQueue`) and one governor workflow sets that queue's rate limit on the server from every worker's reports (`internal/governor`: a throttle cuts it to 0.9 × the rate the API accepted, at most every 5 s; a raise of 20 %% after 30 s without one); while it is in force the server paces every worker's attempts and the workers' own limiters only apply the breaker and the retry budget (claims 8a-8d). Fresh workers and task queue per run; full jitter. The limit is %.1f s.\n\n",
			cp.Clients, cp.Capacity, cp.Window, cp.limitSeconds())
		p("| Run | Requests | Requests per success | Last success | ÷ limit | Failed | First attempts spread over |\n|---|---|---|---|---|---|---|\n")
		for _, run := range cl.Runs {
			a := run.Run
			p("| %s | %d | %.2f | %.1f s | %.2f | %d | %s |\n", run.Label, a.Requests, float64(a.Requests)/float64(max(a.Successes, 1)),
				a.ToLastSuccess.Seconds(), a.ToLastSuccess.Seconds()/cp.limitSeconds(), a.Failed, secs(a.FirstSpread))
		}
		p("\nThe last row is the alternative: no admission, but a fixed limit that Temporal itself enforces across all workers of the task queue (`worker.Options.TaskQueueActivitiesPerSecond`, the worker's `--task-queue-activities-per-second`), set to the API's capacity, which this experiment knows. It needs that capacity known in advance and fixed (a per-origin task queue for each API, and a new setting whenever the provider changes its limit); the limiter learns the capacity from the answers and follows it when it changes, at the price of the two workers each probing it. The library chooses the limiter, and the worker offers the fixed limit beside it for APIs with a published, fixed rate.\n\n")
	}

	if r.Chaos != nil && r.Chaos.Campaign != nil {
		writeChaos(&b, r)
	}
	if r.Unkeyed != nil && len(r.Unkeyed.Runs) > 0 {
		writeUnkeyed(&b, r)
	}
	if cs := r.ClusterShared; cs != nil {
		writeClusterShared(&b, cs)
	}
	if f := r.Fairness; f != nil && len(f.Runs) > 0 {
		writeFairness(&b, f)
	}

	if o := r.Overhead; o != nil {
		p("## 2. Per-attempt overhead\n\n")
		p("`cd bench && go test -run '^$' -bench . -benchmem ./internal/bench` runs the same loops. Both sides POST the same 30-byte JSON body to the same in-process `httptest` server (201 with a 60-byte JSON body), each with its own client on an identical Transport (keep-alive). `Activities.Do` needs an activity context, so the benchmark runs its attempts inside one activity execution of the SDK's `TestActivityEnvironment` (real `activity.GetInfo`, logger and metrics handler; the logger formats JSON into io.Discard, as a production JSON logger would): that is Do's whole per-attempt work — validate, ask the limiter (adaptive admission on, at an initial rate so high that no attempt waits: its bookkeeping is measured, not its slow start), build the request, send, read and cap the body, classify, build the result, log, count. The baseline is the raw POST run the same way, with the same activity context, as a hand-written activity would send it; the raw POST with `context.Background()` shows the context costs nothing. The last row runs one `ExecuteActivity` per attempt: the test environment's own cost dominates it, which is why it is not the measurement (a worker's per-task cost is in the throughput section).\n\n")
		p("| Benchmark | median ns/op | min ns/op | ÷ baseline | median CPU ns/op | CPU ÷ baseline | B/op | allocs/op |\n|---|---|---|---|---|---|---|---|\n")
		for _, s := range []BenchStat{o.Baseline, o.Raw, o.Do, o.DoWarn, o.DoPerExecution} {
			b.WriteString(benchRow(s, o.Baseline))
		}
		p("\n%d rounds of %d iterations per benchmark, in rotating order; a ratio is the median over rounds of benchmark ÷ baseline in the same round. Per round, Do ÷ baseline: %s; CPU time: %s. CPU time is the process's user + system time (the in-process server's share included), which other load on the machine barely moves. Do costs %.1f µs more than the raw POST per attempt (%.1f µs of CPU), with %d more allocations (%d bytes); with Info logs off, %.1f µs more.\n\n",
			o.Rounds, o.Iterations, fmtRatios(o.Do.Ratios), fmtRatios(o.Do.CPURatios),
			(o.Do.MedianNs-o.Baseline.MedianNs)/1e3, (o.Do.MedianCPUNs-o.Baseline.MedianCPUNs)/1e3,
			o.Do.AllocsPerOp-o.Baseline.AllocsPerOp, o.Do.BytesPerOp-o.Baseline.BytesPerOp, (o.DoWarn.MedianNs-o.Baseline.MedianNs)/1e3)
	}

	if len(r.Gaps) > 0 {
		p("## 3. Retry spacing on the dev server\n\n")
		p("One workflow at a time; the reference server answers the first request as shown and the second 201; the gap is between the two requests as the server logged them. The floor is a plain Go loop against the same server: POST, 503, `time.Sleep(1 * time.Second)`, POST.\n\n")
		p("| Case | Asked for | Default dev server: min / median / max | With `history.timerProcessorMaxTimeShift=10ms`: min / median / max |\n|---|---|---|---|\n")
		for i, g := range r.Gaps {
			shift := "—"
			if i < len(r.GapsShift) {
				s := r.GapsShift[i]
				shift = fmt.Sprintf("%s / %s / %s (%d runs)", gap(s.Min), gap(s.P50), gap(s.Max), len(s.Gaps))
			}
			p("| %s | %s | %s / %s / %s (%d runs) | %s |\n", g.Name, gap(g.Want), gap(g.Min), gap(g.P50), gap(g.Max), len(g.Gaps), shift)
		}
		if f := r.Floor; f != nil {
			p("| %s | %s | %s / %s / %s (%d runs) | — |\n", f.Name, gap(f.Want), gap(f.Min), gap(f.P50), gap(f.Max), len(f.Gaps))
		}
		p("\nTemporal's history service gives every new timer a fire time no earlier than about `history.timerProcessorMaxTimeShift` (default 1 s) after its timer queue was last read (`service/history/shard/task_key_generator.go`, `taskMinScheduledTime`), so any retry delay below 1 s — a NextRetryDelay, or Temporal's own interval — becomes a gap of up to about 1 s. Delays of 1 s and more are kept. The second column group shows the same cases on a dev server started with `--dynamic-config-value history.timerProcessorMaxTimeShift=\"10ms\"`.\n\n")
	}

	if t := r.Throughput; t != nil {
		p("## 4. Throughput\n\n")
		p("Workflows completed per second with one worker (the SDK's default options but 8 pollers per task type), %d workflows per round, at most %d in flight, after a warm-up; rounds alternate between the two kinds. \"Ready workflow\" is `workflows.HTTPCallWorkflow` (key derivation, validation, the activity's classification and result); \"minimal\" is a workflow whose activity does the same POST with plain net/http (no key, no classification, the same timeouts and attempts). Both call the same server (201 with a small JSON body).\n\n",
			t.WorkflowsPerRun, t.Concurrency)
		p("| Round | Kind | Workflows | Elapsed | Workflows/s | CPU ms per workflow (dev server + worker) |\n|---|---|---|---|---|---|\n")
		kinds := 2
		if len(t.AdmissionRatios) > 0 {
			kinds = 3
		}
		for i, rd := range t.Rounds {
			name := "ready workflow"
			switch rd.Kind {
			case "minimal":
				name = "minimal"
			case "admission":
				name = "ready workflow, adaptive admission on"
			}
			cpu := "—"
			if rd.CPU > 0 {
				cpu = fmt.Sprintf("%.2f", rd.CPU.Seconds()*1e3/float64(rd.Workflows))
			}
			p("| %d | %s | %d | %s | %.1f | %s |\n", i/kinds+1, name, rd.Workflows, secs(rd.Elapsed), rd.PerSecond, cpu)
		}
		if len(t.AdmissionRatios) > 0 {
			p("\nPer round, with adaptive admission ÷ without (a worker of its own, same options): %s (median %.2f). An origin that has never throttled starts at 10 requests/s and gains one per second per success, so a worker that has just started is held back for its first second or two, once per origin: the warm-up batches, on workers that had just started, show that cost", fmtRatios(t.AdmissionRatios), t.AdmissionRatio)
			for _, w := range t.Warmups {
				p("; %s %d workflows in %s (%.1f/s)", w.Kind, w.Workflows, secs(w.Elapsed), w.PerSecond)
			}
			p(".\n")
		}
		p("\nPer round, ready ÷ minimal workflows/s: %s (median %.2f).", fmtRatios(t.Ratios), t.Ratio)
		if t.CPURatio > 0 {
			p(" Workflows per CPU-second (the dev server's CPU time from /proc plus this process's), ready ÷ minimal: %s (median %.2f); CPU time moves less than wall time with the other load on the machine (it still rises when the CPUs are contended, as the extra scheduling and cache misses cost CPU too).", fmtRatios(t.CPURatios), t.CPURatio)
		}
		p("\n\n")
	}

	if pr := r.Peers; pr != nil {
		writePeers(&b, r, pr)
	}
	if lr := r.LongRunning; lr != nil {
		writeLongRunning(&b, lr)
	}
	if wh := r.Webhooks; wh != nil {
		writeWebhooks(&b, wh)
	}
	if a := r.Actions; a != nil && len(a.Scenarios) > 0 {
		writeActions(&b, a)
	}
	if pr := r.Partial; pr != nil && (len(pr.Rounds) > 0 || pr.Throttled != nil) {
		writePartial(&b, pr)
	}
	if sc := r.Scale; sc != nil && (sc.Throughput != nil || sc.Waiting != nil) {
		writeScale(&b, sc)
	}

	p("## Run\n\nSection wall times:")
	for _, s := range Sections {
		if v, ok := r.Sections[s]; ok {
			p(" %s %.0f s;", s, v)
		}
	}
	p(" total %s (building the Temporal CLI, when needed, not included). Raw data: `results.json` next to this file.\n", r.Total.Round(time.Second))
	_, err := io.WriteString(w, b.String())
	return err
}

func writeSimTable(b *strings.Builder, rows []SimSummary, brooker bool) {
	if brooker {
		b.WriteString("| Clients | Strategy | Calls | ÷ no jitter | Time | ÷ no jitter | Brooker's published calls |\n|---|---|---|---|---|---|---|\n")
	} else {
		b.WriteString("| Clients | Strategy | Requests | ÷ no jitter | Time | ÷ no jitter |\n|---|---|---|---|---|---|\n")
	}
	var base SimSummary
	for _, s := range rows {
		if s.Strategy == backoff.JitterNone {
			base = s
		}
		fmt.Fprintf(b, "| %d | %s | %.0f | %.2f | %s | %.3f |", s.Clients, strategyName(s.Strategy), s.Requests, s.Requests/base.Requests,
			fmtDur(s.Duration), s.Duration.Seconds()/base.Duration.Seconds())
		if brooker {
			if v, ok := brookerPublished[s.Strategy]; ok && s.Clients == 100 {
				fmt.Fprintf(b, " %.0f |", v)
			} else {
				b.WriteString(" |")
			}
		}
		b.WriteString("\n")
	}
}

func fmtDur(d time.Duration) string {
	if d < 10*time.Second {
		return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}

func fmtRatios(xs []float64) string {
	var rs []string
	for _, x := range xs {
		rs = append(rs, fmt.Sprintf("%.3f", x))
	}
	return strings.Join(rs, ", ")
}

// benchRow is one row of an overhead table: s against baseline.
func benchRow(s, baseline BenchStat) string {
	ratio, cpuRatio := "1", "1"
	switch {
	case len(s.Ratios) > 0:
		ratio, cpuRatio = fmt.Sprintf("%.3f", s.Ratio), fmt.Sprintf("%.3f", s.CPURatio)
	case s.Name != baseline.Name:
		ratio = fmt.Sprintf("%.3f", s.MedianNs/baseline.MedianNs)
		cpuRatio = fmt.Sprintf("%.3f", s.MedianCPUNs/baseline.MedianCPUNs)
	}
	return fmt.Sprintf("| %s | %.0f | %.0f | %s | %.0f | %s | %d | %d |\n", s.Name, s.MedianNs, s.MinNs, ratio, s.MedianCPUNs, cpuRatio, s.BytesPerOp, s.AllocsPerOp)
}

// writePeers writes the peers section: what a user would write instead.
func writePeers(b *strings.Builder, r *Results, pr *PeersResult) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("## 5. Peers: what users would pick instead\n\n")
	p("A plain Temporal activity that POSTs through an HTTP retry library, which retries in a loop inside the one activity attempt; the workflow calls it once with MaximumAttempts 1 (the library retries, not Temporal) and start-to-close = schedule-to-close %s, and the activity sends the workflow's Idempotency-Key on every retry. "+
		"**go-retryablehttp** v0.7.8: `retryablehttp.NewClient()` with its default policy (`DefaultRetryPolicy`, `DefaultBackoff`: 1 s doubling to 30 s, no jitter, Retry-After honoured on 429 and 503), `RetryMax` %d, its logger formatting into io.Discard. "+
		"**failsafe-go** v0.9.8: `failsafehttp.NewRetryPolicyBuilder()` (errors, 429 and 5xx but 501; Retry-After honoured on 429 and 503) `.WithBackoff(1s, 30s).WithMaxAttempts(%d)` in `failsafehttp.NewRoundTripper`. Each has its own client on the same Transport as the library's (see section 2).\n\n",
		peerTimeout, peerMaxRetries, peerMaxRetries+1)
	if po := pr.Overhead; po != nil {
		p("**One successful attempt.** The loops of section 2, measured in their own rounds: the same server and body, each loop inside one activity execution of the test environment; the peers run the peer activity's code (build the request, set the headers, send through the library's client, read and close the body, check the status).\n\n")
		p("| Benchmark | median ns/op | min ns/op | ÷ baseline | median CPU ns/op | CPU ÷ baseline | B/op | allocs/op |\n|---|---|---|---|---|---|---|---|\n")
		for _, s := range []BenchStat{po.Baseline, po.Do, po.RetryableHTTP, po.Failsafe} {
			b.WriteString(benchRow(s, po.Baseline))
		}
		p("\n%d rounds of %d iterations per benchmark, in rotating order; a ratio is the median over rounds of benchmark ÷ baseline in the same round. Per round, ÷ baseline: Activities.Do %s; go-retryablehttp %s; failsafe-go %s. Claim 2b compares Do's ratio with the best peer's; to measure it alone, on a quiet machine: `cd bench && GOWORK=off go run ./cmd/bench -only attempt -overhead-count 9 -out results/attempt` (about a minute, no dev server).\n\n",
			po.Rounds, po.Iterations, fmtRatios(po.Do.Ratios), fmtRatios(po.RetryableHTTP.Ratios), fmtRatios(po.Failsafe.Ratios))
		if ap := po.Profile; ap != nil {
			writeAttemptProfile(b, ap)
		}
	}
	if c := pr.Credentials; c != nil {
		p("**Credentials.** One successful attempt of `Activities.Do` whose origin has `Credential.OAuth2` (client credentials against an in-process token endpoint issuing tokens of %d s, so every attempt but the first applies the cached token) against one whose origin has `Credential.Header` `Authorization: Bearer …` (the baseline), on the same server with the same request, each loop inside one activity execution, in rounds of their own.\n\n", credTokenLife)
		p("| Benchmark | median ns/op | min ns/op | ÷ baseline | median CPU ns/op | CPU ÷ baseline | B/op | allocs/op |\n|---|---|---|---|---|---|---|---|\n")
		for _, s := range []BenchStat{c.Static, c.OAuth2} {
			b.WriteString(benchRow(s, c.Static))
		}
		p("\n%d rounds of %d iterations per benchmark, in rotating order. Per round, OAuth 2.0 ÷ static bearer: %s. The token endpoint received %d token requests in the whole run (warm-ups included). Claim 2c.\n\n",
			c.Rounds, c.Iterations, fmtRatios(c.OAuth2.Ratios), c.TokenRequests)
	}
	if len(pr.Contention) > 0 {
		cp := pr.Params
		lim := cp.limitSeconds()
		p("**Contention.** The experiment of section 1 (%d workflows started at once, a server that accepts %d requests per %s and answers the rest 429 without Retry-After), each workflow running the peer activity once. The limit is %d workflows ÷ %d per %s = %.1f s. \"Max requests per key\" is the most requests the server got with one key (one activity's attempts).",
			cp.Clients, cp.Capacity, cp.Window, cp.Clients, cp.Capacity, cp.Window, lim)
		if r.Contention != nil && len(r.Contention.Runs) > 0 {
			p(" The last rows are this library's runs of section 1 in the same bench run, for comparison (its max is the attempt number of a success).")
		}
		p("\n\n| Client | Requests | Requests per success | Last success | ÷ limit | Max requests per key | Failed | First attempts spread over |\n|---|---|---|---|---|---|---|---|\n")
		row := func(name string, run ContentionRun) {
			p("| %s | %d | %.2f | %.1f s | %.2f | %d | %d | %s |\n", name, run.Requests, float64(run.Requests)/float64(max(run.Successes, 1)),
				run.ToLastSuccess.Seconds(), run.ToLastSuccess.Seconds()/lim, run.MaxAttempts, run.Failed, secs(run.FirstSpread))
		}
		for _, run := range pr.Contention {
			row(peerName(run.Peer), run)
		}
		if r.Contention != nil {
			for _, run := range r.Contention.Runs {
				row("idemhttp, "+runName(run.Strategy, run.Admission), run)
			}
		}
		p("\nBoth peers back off exponentially without jitter (1 s, 2 s, 4 s, … up to 30 s), so, as with Temporal's own backoff in section 1, every retry round is a herd of the workflows still waiting, and from the sixth retry on the rounds are the cap (30 s) apart.\n\n")
	}
}

// writeOutage writes the outage section: the dev-server runs beside their
// simulation, and the simulation of adaptive admission without its breaker.
func writeOutage(b *strings.Builder, r *Results) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	cp := r.outageParams()
	outage := r.Outage[0].Outage
	bc := admission.Config{}.WithDefaults().Breaker
	p("## 1d. Outage and recovery\n\n")
	p("The contention setup (%d workflows, one success each, dev server, one worker) against an API that answers 503 without Retry-After to every request for %.0f s from its first request, then recovers to %d requests per %s (429 beyond). Requests are counted at the API; the recovery time runs from the recovery to the last success.\n\n",
		cp.Clients, outage.Seconds(), cp.Capacity, cp.Window)
	if _, ok := r.outageRun(workflows.JitterFull, true); !ok {
		p("These results are from before adaptive admission's circuit breaker: the outage's 503s were failures, not throttles (`Admission.Throttles` holds 429 only), and only the retry budget held the retries back while the API was down.\n\n")
	} else {
		p("With adaptive admission the outage's 503s are failures, not throttles (`Admission.Throttles` holds 429 only), and they open the origin's circuit breaker (`Admission.Breaker` at its defaults): once at least %d requests within %s have failed and they are at least %.0f %% of the answers, the worker sends the API nothing but one probe at a time, %s after the breaker opened and then every %s while the probes fail. Every other attempt, first attempts included, sends nothing: it waits inside the attempt for the probe's answer, or goes back to Temporal as not admitted with a NextRetryDelay to the next probe, and such an attempt is not counted against the workflow's attempts. The first probe answered after the recovery closes the breaker; the origin starts again from a slow start at %g requests/s (one more per answer) and the limiter learns the rate from the 429s. Claim 7a is its requests during the outage against Temporal's own backoff's, claim 7b its recovery against the limit (%d workflows ÷ %d per %s = %.1f s).\n\n",
			bc.MinFailures, bc.FailureWindow, bc.FailureRatio*100, bc.OpenTime, bc.MaxOpenTime, bc.RestartRate,
			cp.Clients, cp.Capacity, cp.Window, cp.limitSeconds())
	}
	p("![Requests per second over the outage](%s)\n\n", OutageSVG)
	p("| Strategy | Requests during the outage | ÷ Temporal's backoff | Requests after | Recovery to the last success | ÷ Temporal's backoff | Failed | Simulated requests during the outage | Simulated recovery |\n|---|---|---|---|---|---|---|---|---|\n")
	base, _ := r.outageRun(backoff.JitterNone, false)
	for _, o := range r.Outage {
		simReq, simRec := "—", "—"
		if s, ok := r.outageSim(o.Strategy, o.Admission); ok {
			simReq, simRec = fmt.Sprintf("%.0f", s.DuringOutage), fmt.Sprintf("%.1f s", s.RecoveryToLast.Seconds())
		}
		p("| %s | %d | %.2f | %d | %.1f s | %.2f | %d | %s | %s |\n", o.name(), o.DuringOutage, float64(o.DuringOutage)/float64(max(base.DuringOutage, 1)),
			o.After, o.RecoveryToLast.Seconds(), o.RecoveryToLast.Seconds()/max(base.RecoveryToLast.Seconds(), 1e-9), o.Failed, simReq, simRec)
	}
	runs := 0
	for _, s := range r.OutageSim {
		runs = max(runs, s.Runs)
		if s.BreakerOff {
			p("| %s, breaker off (simulated only) | — | — | — | — | — | — | %.0f | %.1f s |\n", runName(s.Strategy, s.Admission), s.DuringOutage, s.RecoveryToLast.Seconds())
		}
		if s.Shared {
			p("| one shared rate and the cluster's breaker (governor), %d workers (simulated only) | — | — | — | — | — | — | %.0f | %.1f s |\n", s.Workers, s.DuringOutage, s.RecoveryToLast.Seconds())
		}
	}
	if len(r.OutageSim) > 0 {
		p("\nThe simulated columns are the in-process model of the same setup (`simulate` with the outage: every request before %.0f s fails; first requests spread over %s, no retry sooner than %s; with admission the limiter and its breaker are the code the activity runs, a failure's retry waits the backoff and a throttle's is paced by the limiter), mean of %d seeded runs; its times run from the first start. The last row, simulated only, is adaptive admission with its breaker off (`Admission.Breaker.Off`): then nothing but the retry budget (%.0f %% of the requests plus %d per %s) holds the retries back while the API is down, and its floor alone lets %.0f retries through in %.0f s.\n",
			outage.Seconds(), temporalHerdSpread, temporalMinDelay, runs, admission.DefaultRetryRatio*100, admission.DefaultMinRetries, admission.DefaultRetryWindow,
			float64(admission.DefaultMinRetries)*outage.Seconds()/admission.DefaultRetryWindow.Seconds(), outage.Seconds())
	}
	p("\n")
}

// writeAttemptProfile writes where one attempt of Activities.Do spends
// its CPU time.
func writeAttemptProfile(b *strings.Builder, ap *AttemptProfile) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("**Where Do's time goes.** A CPU profile of the Activities.Do loop, %d attempts in one activity execution after the rounds: %.1f µs of CPU per attempt were sampled under `%s`, %.1f µs of them in `%s` (the exchange a raw POST makes too). The rest, %.1f µs, is Do's own work, with the building of the request and the read of the body that a raw POST does too; its heaviest functions below, each with its callees (pprof's cum), so the rows overlap. The garbage collector's background work is not under the attempt and not counted.",
		ap.Iterations, ap.AttemptNs/1e3, attemptRoot, ap.ClientNs/1e3, clientDo, (ap.AttemptNs-ap.ClientNs)/1e3)
	if ap.File != "" {
		p(" The profile is `%s` next to this file: `go tool pprof -top -cum -show_from='requestActivity' %s`.", ap.File, ap.File)
	}
	p("\n\n| Function | CPU µs per attempt | share of the attempt |\n|---|---|---|\n")
	for _, e := range ap.Top {
		p("| `%s` | %.2f | %.0f %% |\n", e.Func, e.Ns/1e3, 100*e.Share)
	}
	p("\n")
}
