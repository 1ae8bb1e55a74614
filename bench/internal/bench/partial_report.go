package bench

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

// The partial section's targets (issue 42, item 3).
const (
	// targetPartialPerSuccess: requests per success at 30 % random
	// failures, at most (the floor is 1 ÷ 0.7 = 1.43).
	targetPartialPerSuccess = 1.5
	// targetPartialThroughput: throughput with failures ÷ without, at
	// least this × 1 ÷ floor (0.9 ÷ 1.43 = 0.63 at 30 %).
	targetPartialThroughput = 0.9
)

// partialClaim is one row of the section's claims.
type partialClaim struct {
	ID, Claim, Measured, Target string
	OK                          bool
	// Comparison: no target, a figure beside the others.
	Comparison bool
}

// failingTotals sums the failing runs' requests, failures and
// successes.
func (pr *PartialResult) failingTotals() (requests, failures, successes int) {
	for _, r := range pr.Rounds {
		requests += r.Failing.Requests
		failures += r.Failing.Failures
		successes += r.Failing.Successes
	}
	return requests, failures, successes
}

// throughputRatio is a round's throughput with failures ÷ without.
func (r PartialRound) throughputRatio() float64 {
	if r.Clean.Throughput() <= 0 {
		return 0
	}
	return r.Failing.Throughput() / r.Clean.Throughput()
}

// worstThroughput is the rounds' smallest throughput ratio and its round
// (from 1); 0, 0 without rounds.
func (pr *PartialResult) worstThroughput() (float64, int) {
	worst, at := 0.0, 0
	for i, r := range pr.Rounds {
		if v := r.throughputRatio(); at == 0 || v < worst {
			worst, at = v, i+1
		}
	}
	return worst, at
}

// allDone: every run of the rounds made one record per workflow, none
// failed.
func (pr *PartialResult) allDone() bool {
	for _, r := range pr.Rounds {
		for _, run := range []PartialRun{r.Clean, r.Failing} {
			if run.Failed > 0 || run.Successes != pr.Params.Clients {
				return false
			}
		}
	}
	return len(pr.Rounds) > 0
}

// spread formats the figures of each round: "a, b, c".
func (pr *PartialResult) spread(f func(PartialRound) float64) string {
	var s []string
	for _, r := range pr.Rounds {
		s = append(s, fmt.Sprintf("%.2f", f(r)))
	}
	return strings.Join(s, ", ")
}

// heldCell formats the attempts admission held, by reason.
func heldCell(held map[string]float64) string {
	if len(held) == 0 {
		return "0"
	}
	var parts []string
	total := 0.0
	for _, k := range slices.Sorted(maps.Keys(held)) {
		parts = append(parts, fmt.Sprintf("%s %g", k, held[k]))
		total += held[k]
	}
	return fmt.Sprintf("%g (%s)", total, strings.Join(parts, ", "))
}

// breakerCell says whether a run's breakers opened.
func breakerCell(r PartialRun) string {
	worker := "no"
	if r.BreakerSeenOpen || r.Held[reasonCircuitOpen] > 0 {
		worker = fmt.Sprintf("**yes** (%g attempts held for it; seen open in a scrape: %v)", r.Held[reasonCircuitOpen], r.BreakerSeenOpen)
	}
	gov := "no"
	if r.GovernorOpened > 0 {
		gov = fmt.Sprintf("**yes**, %d time(s)", r.GovernorOpened)
	}
	return fmt.Sprintf("worker: %s; governor: %s", worker, gov)
}

// claims are the section's rows of the claims table.
func (pr *PartialResult) claims() []partialClaim {
	var cs []partialClaim
	p := pr.Params
	pct := p.FailureRate * 100
	done := pr.allDone()
	if requests, failures, successes := pr.failingTotals(); successes > 0 {
		ps := float64(requests) / float64(successes)
		cs = append(cs, partialClaim{ID: "12a",
			Claim: fmt.Sprintf("Partial failure: an API with ample capacity failing %.0f %% of requests at random (%d), %d workflows at once on a worker wired by package host (its defaults): requests per success, over %d runs", pct, p.FailureStatus, p.Clients, len(pr.Rounds)),
			Measured: fmt.Sprintf("%.2f (%d ÷ %d; runs %s; requests neither a %d nor a success: %d; the floor 1 ÷ %.1f = %.2f)", ps, requests, successes,
				pr.spread(func(r PartialRound) float64 { return r.Failing.PerSuccess() }), p.FailureStatus, requests-failures-successes, 1-p.FailureRate, p.floor()),
			Target: fmt.Sprintf("≤ %.2f", targetPartialPerSuccess), OK: done && ps <= targetPartialPerSuccess})
	}
	if tr, at := pr.worstThroughput(); at > 0 {
		r := pr.Rounds[at-1]
		target := targetPartialThroughput / p.floor()
		cs = append(cs, partialClaim{ID: "12b",
			Claim: fmt.Sprintf("… throughput (successes per second from the first start to the last success) ÷ the same API without failures, in the same round, worst of %d rounds", len(pr.Rounds)),
			Measured: fmt.Sprintf("%.2f (round %d: %.1f/s ÷ %.1f/s; rounds %s)", tr, at, r.Failing.Throughput(), r.Clean.Throughput(),
				pr.spread(PartialRound.throughputRatio)),
			Target: fmt.Sprintf("≥ %.2f (%.1f ÷ %.2f)", target, targetPartialThroughput, p.floor()), OK: done && tr >= target})
	}
	if len(pr.Rounds) > 0 {
		opened, attempts, requests, waits, waitSeconds := 0, 0.0, 0, 0.0, 0.0
		for _, r := range pr.Rounds {
			if r.Failing.BreakerOpened() {
				opened++
			}
			attempts += r.Failing.Attempts
			requests += r.Failing.Requests
			waits += r.Failing.Waits
			waitSeconds += r.Failing.WaitSeconds
		}
		var heldAll = map[string]float64{}
		for _, r := range pr.Rounds {
			for k, v := range r.Failing.Held {
				heldAll[k] += v
			}
		}
		cs = append(cs, partialClaim{ID: "12c",
			Claim: "… the admission does not take the errors for overload: neither the worker's circuit breaker nor the governor's (the cluster's) opens",
			Measured: fmt.Sprintf("opened in %d of %d runs; attempts admission ended unsent, in all: %s, of %g attempts for %d requests; waits inside attempts: %g (%.1f s in all)",
				opened, len(pr.Rounds), heldCell(heldAll), attempts, requests, waits, waitSeconds),
			Target: "never opens", OK: opened == 0})
	}
	if t := pr.Throttled; t != nil {
		tp := pr.ThrottledParams
		cs = append(cs, partialClaim{ID: "12d", Comparison: true,
			Claim: fmt.Sprintf("… and the reverse, an API at capacity answering 429 (the contention setup: %d workflows, %d accepted per %s) on the same kind of worker: requests per success; time to the last success ÷ (%d ÷ %d per %s)", tp.Clients, tp.Capacity, tp.Window, tp.Clients, tp.Capacity, tp.Window),
			Measured: fmt.Sprintf("%.2f (%d ÷ %d); %.2f (%.1f s ÷ %.1f s); %d failed; breaker: %s", t.PerSuccess(), t.Requests, t.Successes,
				t.ToLastSuccess.Seconds()/tp.limitSeconds(), t.ToLastSuccess.Seconds(), tp.limitSeconds(), t.Failed, breakerCell(*t)),
			Target: "as today (5a, 5b)"})
	}
	return cs
}

// writePartialClaims writes the section's rows of the claims table.
func writePartialClaims(b *strings.Builder, pr *PartialResult) {
	for _, c := range pr.claims() {
		m := met(c.OK)
		if c.Comparison {
			m = "—"
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s |\n", c.ID, c.Claim, c.Measured, c.Target, m)
	}
}

// writePartial writes the partial section of RESULTS.md.
func writePartial(b *strings.Builder, pr *PartialResult) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	pp := pr.Params
	p("## 12. Partial failure\n\n")
	p("An API with ample capacity (no limit) that answers %.0f %% of requests %d at random, before it looks at the key (`testsuite.Options.FailureRate`), against the same API without failures. Each run starts %d ready workflows (`workflows.HTTPCallWorkflow`) at once, on the defaults of the ready workflow (full jitter from 200 ms doubling to 10 s) but for the attempt budget, raised to %d (the default 5 fails 0.3^5 = 0.24 %% of calls, about one a run at this size, and the claims are per success). Each run has a fresh worker wired as package host wires one on its defaults (`host.Load`, `Host.ClientOptions`, `Host.Start`, `Host.WorkerOptions`, `Host.Register`: adaptive admission, its circuit breaker and the shared rate on), with its own task queue, governor and breaker, and its metrics served (`--metrics-addr`), scraped every 200 ms. A round is the run without failures and the run with them, the failing one first in every other round (a drift of the machine's other load then weighs on both alike); %d rounds; each run's governor is terminated after it. Throughput is successes per second from the first start call to the last success at the API; its ratio is taken within each round and the claim takes the worst round, as the machine's other work moves it. The requests per success are taken over every run together: their spread from run to run is the API's own draw (for N successes at 30 %%, a standard deviation of √(0.3 N) ÷ (0.7 N) per success, 0.039 at 400), which the worst of three would only add to; the requests that were neither a failure nor a success (replays, duplicates) are what the worker wasted.\n\n",
		pp.FailureRate*100, pp.FailureStatus, pp.Clients, pp.MaximumAttempts, len(pr.Rounds))
	p("The admission must not take the errors for overload: a 503 is a failure to the breaker (a 429 would cut the rate), and the breaker opens when, within 10 s, at least 5 requests failed and they are at least half the answers by two standard errors of that share (`admission.TripMargin`). At %.0f %% the share of failures is below half, but a window that holds few answers can pass half by chance (5 of the first 10 answers), which the ratio alone took for an outage; the margin asks 8 of 10. Held attempts are those admission ended without sending (`idempotent_http_admission_delays_total`, by reason); attempts are the activity's (`idempotent_http_attempts_total`), so attempts − requests ≈ held; a wait for admission short enough to fit in the attempt (at most 1 s) is spent inside it (`idempotent_http_admission_wait_seconds`) and sends the request after. The worker's breaker opened if an attempt was held for `circuit_open` or a scrape saw `idempotent_http_circuit_open` at 1; the governor's if its state (query `state`) counts an opening.\n\n", pp.FailureRate*100)
	if pr.Throttled != nil {
		tp := pr.ThrottledParams
		p("The reverse: the contention setup (section 1: %d workflows, an API that accepts %d per %s and answers the rest 429; full jitter from %s doubling to %s) on a fresh worker of the same kind, started by the bench's client (no eager start): a comparison with the contention section's adaptive-admission run (5a, 5b), no target of its own.\n\n",
			tp.Clients, tp.Capacity, tp.Window, tp.Base, tp.Cap)
	}
	p("![Requests per second: without failures, with %.0f %% failures, and at capacity](%s)\n\n", pp.FailureRate*100, PartialSVG)
	p("| Run | Workflows failed | Requests | 5xx answers | Successes | Requests per success | First start to last success | Successes/s | Attempts | Held by admission | Waits inside attempts | Breaker opened |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	row := func(name string, r PartialRun) {
		p("| %s | %d | %d | %d | %d | %.2f | %s | %.1f | %g | %s | %g (%.1f s) | %s |\n", name, r.Failed, r.Requests, r.Failures, r.Successes, r.PerSuccess(),
			secs1(r.Makespan()), r.Throughput(), r.Attempts, heldCell(r.Held), r.Waits, r.WaitSeconds, breakerCell(r))
	}
	for i, r := range pr.Rounds {
		row(fmt.Sprintf("round %d, no failures", i+1), r.Clean)
		row(fmt.Sprintf("round %d, %.0f %% %d", i+1, pp.FailureRate*100, pp.FailureStatus), r.Failing)
	}
	if t := pr.Throttled; t != nil {
		row(fmt.Sprintf("429 at capacity (%d per %s)", pr.ThrottledParams.Capacity, pr.ThrottledParams.Window), *t)
	}
	p("\n")
}

// WritePartialSVG draws the partial section: the requests per second of
// the worst round's two runs (by throughput ratio) and of the run at
// capacity, one panel each.
func WritePartialSVG(w io.Writer, r *Results) error {
	pr := r.Partial
	if pr == nil || len(pr.Rounds) == 0 {
		return fmt.Errorf("no partial plot: the results hold no partial round")
	}
	_, at := pr.worstThroughput()
	rd := pr.Rounds[at-1]
	pp := pr.Params
	note := func(r PartialRun) string {
		return fmt.Sprintf("%d requests, %.2f per success; %.1f successes/s; %s", r.Requests, r.PerSuccess(), r.Throughput(), plainBreaker(r))
	}
	series := []plotSeries{
		{Title: fmt.Sprintf("round %d: no failures", at), Log: rd.Clean.Log, Note: note(rd.Clean)},
		{Title: fmt.Sprintf("round %d: %.0f %% answered %d at random", at, pp.FailureRate*100, pp.FailureStatus), Log: rd.Failing.Log, Note: note(rd.Failing)},
	}
	title := fmt.Sprintf("%d workflows at once, ample capacity: no failures vs %.0f %% random %d", pp.Clients, pp.FailureRate*100, pp.FailureStatus)
	if t := pr.Throttled; t != nil {
		tp := pr.ThrottledParams
		series = append(series, plotSeries{Title: fmt.Sprintf("%d workflows, %d accepted per %s, 429 beyond", tp.Clients, tp.Capacity, tp.Window), Log: t.Log,
			Note: fmt.Sprintf("%d requests, %.2f per success; last success at %.1f s", t.Requests, t.PerSuccess(), t.ToLastSuccess.Seconds())})
		title += "; and at capacity (429)"
	}
	return writeRequestsSVG(w, requestsPlot{Title: title, Bucket: time.Second, Failures: fmt.Sprintf("%d (random) or 429 (over capacity)", pp.FailureStatus)}, series)
}

// plainBreaker says in words whether a run's breakers opened.
func plainBreaker(r PartialRun) string {
	if r.BreakerOpened() {
		return "a breaker opened"
	}
	return "no breaker opened"
}
