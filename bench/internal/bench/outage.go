package bench

import (
	"context"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/harness/itest"
	"github.com/idemhttp/temporal-idempotent-http/internal/backoff"
	"github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// defaultOutage is how long the API of the outage experiment answers 503
// to everything before it recovers.
const defaultOutage = 60 * time.Second

// OutageRun is one strategy's run of the outage experiment: the contention
// setup (Clients workflows, one success each) against an API that answers
// 503 without Retry-After to every request for Outage from its first
// request, then accepts Capacity per Window like the contention server.
type OutageRun struct {
	Strategy  workflows.Jitter `json:"strategy"`
	Admission bool             `json:"admission,omitempty"`
	// Breaker: the admission worker's circuit breaker was on (false in
	// results from before the breaker).
	Breaker bool          `json:"breaker,omitempty"`
	Outage  time.Duration `json:"outage_ns"`
	// DuringOutage counts the requests the API got while it was down; After
	// the ones after it recovered.
	DuringOutage int `json:"during_outage"`
	After        int `json:"after"`
	Successes    int `json:"successes"`
	Failed       int `json:"failed"`
	// RecoveryToLast is from the recovery to the last success.
	RecoveryToLast time.Duration `json:"recovery_to_last_ns"`
	Log            []LogEntry    `json:"log"`
}

// name is the run's label: runName, and whether the circuit breaker was on.
func (o OutageRun) name() string {
	if o.Breaker {
		return runName(o.Strategy, o.Admission) + ", breaker on"
	}
	return runName(o.Strategy, o.Admission)
}

// runOutage runs the outage experiment on h for strategy j.
func runOutage(ctx context.Context, h *harness, p ContentionParams, j workflows.Jitter, outage time.Duration, tag string) (OutageRun, error) {
	srv := testsuite.NewServer(testsuite.Options{Capacity: p.Capacity, CapacityWindow: p.Window})
	oh := &itest.Outage{Next: srv, Duration: outage}
	h.Target.Set(oh)
	defer h.Target.Set(okHandler())
	run := OutageRun{Strategy: j, Outage: outage}
	var cr ContentionRun
	if err := startAndWait(ctx, h, p, readyLoad(h, p, j), "outage-"+tag, &cr); err != nil {
		return run, err
	}
	run.Failed = cr.Failed
	for _, e := range oh.Log() {
		run.Log = append(run.Log, LogEntry{At: e.At, Status: e.Status})
	}
	for _, l := range run.Log {
		if l.At < outage {
			run.DuringOutage++
			continue
		}
		run.After++
		if l.Status >= 200 && l.Status <= 299 {
			run.Successes++
			run.RecoveryToLast = max(run.RecoveryToLast, l.At-outage)
		}
	}
	return run, nil
}

// OutageSim is the in-process simulation of one outage run's setup
// (temporalSimConfig with Outage, and admissionSimConfig for adaptive
// admission): the mean of Runs seeded runs. Its times run from the start
// of the simulation, when the outage begins.
type OutageSim struct {
	Strategy  workflows.Jitter `json:"strategy"`
	Admission bool             `json:"admission,omitempty"`
	// BreakerOff: adaptive admission with its circuit breaker off, a row
	// of the simulation only.
	BreakerOff bool `json:"breaker_off,omitempty"`
	// Shared: one shared rate and the cluster's breaker (the governor's
	// Decider) on Workers workers, a row of the simulation only.
	Shared  bool `json:"shared,omitempty"`
	Workers int  `json:"workers,omitempty"`
	Runs    int  `json:"runs"`
	// DuringOutage is the mean of the requests during the outage, After of
	// the ones after it.
	DuringOutage float64 `json:"during_outage"`
	After        float64 `json:"after"`
	// RecoveryToLast is the mean time from the recovery to the last success.
	RecoveryToLast time.Duration `json:"recovery_to_last_ns"`
	// Hops is the mean of the attempts admission ended to wait (each an
	// activity attempt: a Temporal action) per workflow.
	Hops float64 `json:"hops_per_workflow,omitempty"`
}

// outageSimConfig is the simulation of the outage experiment with p for
// strategy j: with adaptive admission (adm) at its defaults but for
// breakerOff, else the retry policy alone.
func (p ContentionParams) outageSimConfig(j workflows.Jitter, adm, breakerOff bool, outage time.Duration, seed uint64) simConfig {
	c := p.temporalSimConfig(p.Clients, j, seed)
	if adm {
		c = p.admissionSimConfig(p.Clients, 1, seed)
		c.Backoff = p.backoff(j)
		c.Admission.Config.Breaker.Off = breakerOff
	}
	c.Outage = outage
	return c
}

// sharedOutageWorkers is the number of workers of the shared outage
// simulation (the cluster setup).
const sharedOutageWorkers = 3

// sharedOutageSimConfig is the outage simulation with one shared rate and
// the cluster's breaker (the governor's Decider) on workers workers, full
// jitter.
func (p ContentionParams) sharedOutageSimConfig(workers int, outage time.Duration, seed uint64) simConfig {
	c := p.sharedSimConfig(p.Clients, workers, seed)
	c.Backoff = p.backoff(workflows.JitterFull)
	c.Outage = outage
	return c
}

// simulateOutage runs cfg (with Outage set) runs times with seeds
// cfg.Seed, cfg.Seed+1, … and returns the means.
func simulateOutage(cfg simConfig, runs int) OutageSim {
	s := OutageSim{Strategy: workflows.Jitter(cfg.Backoff.Jitter), Admission: cfg.Admission != nil, Runs: runs}
	if a := cfg.Admission; a != nil {
		s.BreakerOff = a.Config.Breaker.Off
		if a.Shared != nil {
			s.Shared, s.Workers = true, a.Workers
		}
	}
	var during, after, rec, hops float64
	for i := range runs {
		c := cfg
		c.Seed = cfg.Seed + uint64(i)
		r := simulate(c)
		hops += float64(r.Hops) / float64(max(cfg.Clients, 1))
		during += float64(r.DuringOutage)
		after += float64(r.Requests - r.DuringOutage)
		rec += float64(max(r.Duration-cfg.Outage, 0))
	}
	s.DuringOutage = during / float64(runs)
	s.After = after / float64(runs)
	s.RecoveryToLast = time.Duration(rec / float64(runs))
	s.Hops = hops / float64(runs)
	return s
}

// outageSimRuns are the simulated rows of the outage section: the three
// strategies of the dev-server runs, in their order, then adaptive
// admission with its breaker off (simulated only); runOutageSimulations
// adds the shared rate on sharedOutageWorkers workers.
var outageSimRuns = []struct {
	j               workflows.Jitter
	adm, breakerOff bool
}{
	{backoff.JitterNone, false, false},
	{workflows.JitterFull, false, false},
	{workflows.JitterFull, true, false},
	{workflows.JitterFull, true, true},
}

// runOutageSimulations simulates the outage experiment with p for each of
// outageSimRuns: the mean of runs seeded runs each.
func runOutageSimulations(p ContentionParams, outage time.Duration, runs int) []OutageSim {
	var out []OutageSim
	for _, c := range outageSimRuns {
		out = append(out, simulateOutage(p.outageSimConfig(c.j, c.adm, c.breakerOff, outage, 1), runs))
	}
	return append(out, simulateOutage(p.sharedOutageSimConfig(sharedOutageWorkers, outage, 1), runs))
}
