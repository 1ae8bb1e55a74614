package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// DefaultClusterRuns is how many consecutive runs each shared-rate figure
// of the cluster section takes when Options.ClusterRuns is not set; the
// worst of them is reported.
const DefaultClusterRuns = 3

// clusterThroughputWorkflows is how many workflows one batch of the
// cluster's throughput runs starts at once.
const clusterThroughputWorkflows = 200

// ClusterShared is the cluster section (issue 33: many workers, one
// client of the API). On temporal-server with PostgreSQL
// (harness/cluster) and the worker binary, as a user runs it:
//   - Contention: the contention experiment (Params) with two and three
//     worker processes and the shared rate on, Runs consecutive runs each
//     on fresh workers and a fresh task queue, then one run each with every
//     worker on its own rate (the comparison);
//   - Outage: the same workflows against an API that answers 503 for
//     defaultOutage, then takes Params' capacity, with three workers and
//     the shared rate on (Runs runs), then off (one run);
//   - Throughput: an API without a limit, clusterThroughputWorkflows
//     workflows at once on three workers and on one, the shared rate on
//     against off in alternating rounds.
//
// Every worker gets --shared-rate=true or --shared-rate=false explicitly.
type ClusterShared struct {
	Params ContentionParams `json:"params"`
	// Runs is how many consecutive runs each shared-rate figure took.
	Runs       int                 `json:"runs"`
	Contention []ClusterRun        `json:"contention,omitempty"`
	Outage     []ClusterOutageRun  `json:"outage,omitempty"`
	Throughput []ClusterThroughput `json:"throughput,omitempty"`
}

// ClusterOutageRun is one outage run on the cluster.
type ClusterOutageRun struct {
	Workers    int  `json:"workers"`
	SharedRate bool `json:"shared_rate"`
	// Repeat numbers the consecutive runs of one setup from 1.
	Repeat int       `json:"repeat"`
	Run    OutageRun `json:"run"`
}

// ClusterThroughput is the uncontended throughput on Workers worker
// processes: the shared rate on against off, one round each way.
type ClusterThroughput struct {
	Workers   int                      `json:"workers"`
	Workflows int                      `json:"workflows"`
	Rounds    []ClusterThroughputRound `json:"rounds"`
}

// ClusterThroughputRound is one batch of Workflows on each set of workers,
// back to back: the time from the first start to the last result.
type ClusterThroughputRound struct {
	On  time.Duration `json:"on_ns"`
	Off time.Duration `json:"off_ns"`
	// OnFirst: the shared-rate batch ran first (rounds alternate).
	OnFirst bool `json:"on_first"`
	// Failed counts the workflows of the round that did not succeed.
	Failed int `json:"failed,omitempty"`
}

// ratio is the round's throughput on ÷ off: time off ÷ time on.
func (r ClusterThroughputRound) ratio() float64 {
	if r.On <= 0 {
		return 0
	}
	return r.Off.Seconds() / r.On.Seconds()
}

// Ratio is the median over the rounds of throughput on ÷ off (0 without a
// round).
func (t ClusterThroughput) Ratio() float64 {
	rs := make([]float64, 0, len(t.Rounds))
	for _, r := range t.Rounds {
		rs = append(rs, r.ratio())
	}
	return median(rs)
}

// runClusterShared starts the cluster and runs the ClusterShared section
// with p (eager start off: the starter has no worker of its own, so
// matching hands every task to any worker), runs consecutive runs per
// shared-rate figure. Logs go to logDir when it is set.
func runClusterShared(ctx context.Context, p ContentionParams, runs int, logDir string, logf func(string, ...any)) (_ *ClusterShared, err error) {
	p.EagerStart = false
	runs = max(runs, 1)
	begin := time.Now()
	bc, stop, err := startBenchCluster(ctx, logDir, logf)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, stop()) }()
	res := &ClusterShared{Params: p, Runs: runs}
	if err := runClusterSharedContention(ctx, bc, res, logDir, logf); err != nil {
		return res, err
	}
	logf("cluster: contention done at %s", time.Since(begin).Round(time.Second))
	if err := runClusterSharedOutage(ctx, bc, res, logDir, logf); err != nil {
		return res, err
	}
	logf("cluster: outage done at %s", time.Since(begin).Round(time.Second))
	for _, n := range []int{3, 1} {
		t, err := runClusterThroughput(ctx, bc, p, n, 2*runs+1, logDir, logf)
		res.Throughput = append(res.Throughput, t)
		if err != nil {
			return res, fmt.Errorf("cluster throughput, %d workers: %w", n, err)
		}
	}
	logf("cluster: done in %s", time.Since(begin).Round(time.Second))
	return res, nil
}

// clusterStep is one setup of the cluster's contention or outage runs.
type clusterStep struct {
	workers int
	shared  bool
	runs    int
}

// clusterContentionSteps are the contention runs: the shared rate on two
// and three workers, runs times each, then each worker its own rate.
func clusterContentionSteps(runs int) []clusterStep {
	return []clusterStep{{2, true, runs}, {3, true, runs}, {2, false, 1}, {3, false, 1}}
}

// clusterOutageSteps are the outage runs: three workers with the shared
// rate, runs times, then without it once.
func clusterOutageSteps(runs int) []clusterStep {
	return []clusterStep{{3, true, runs}, {3, false, 1}}
}

// label names a run of s.
func (s clusterStep) label() string {
	if s.shared {
		return fmt.Sprintf("%d workers, shared rate on", s.workers)
	}
	return fmt.Sprintf("%d workers, each its own rate", s.workers)
}

// tag names a run of s on the cluster (its task queue, workflows, logs).
func (s clusterStep) tag(kind string, repeat int) string {
	mode := "own"
	if s.shared {
		mode = "shared"
	}
	return fmt.Sprintf("%s-%s-%dw-%d-%d", kind, mode, s.workers, repeat, time.Now().Unix()%100000)
}

// runClusterSharedContention runs clusterContentionSteps into res.
func runClusterSharedContention(ctx context.Context, bc *benchCluster, res *ClusterShared, logDir string, logf func(string, ...any)) error {
	for _, s := range clusterContentionSteps(res.Runs) {
		for i := 1; i <= s.runs; i++ {
			w := clusterWorkers{Tag: s.tag("cl", i), Workers: s.workers, Shared: s.shared}
			run, err := runClusterOnce(ctx, bc, res.Params, w, logDir, logf)
			if err != nil {
				return fmt.Errorf("cluster contention, %s, run %d: %w", s.label(), i, err)
			}
			run.Admission = true
			logf("cluster contention %s, run %d: %d requests, %d successes, last success at %.1f s (%.2f × the limit), %d failed",
				s.label(), i, run.Requests, run.Successes, run.ToLastSuccess.Seconds(), run.ToLastSuccess.Seconds()/res.Params.limitSeconds(), run.Failed)
			res.Contention = append(res.Contention, ClusterRun{Label: s.label(), Admission: true, SharedRate: s.shared, Workers: s.workers, Repeat: i, Run: run})
		}
	}
	return nil
}

// runClusterSharedOutage runs clusterOutageSteps into res.
func runClusterSharedOutage(ctx context.Context, bc *benchCluster, res *ClusterShared, logDir string, logf func(string, ...any)) error {
	for _, s := range clusterOutageSteps(res.Runs) {
		for i := 1; i <= s.runs; i++ {
			run, err := runClusterOutageOnce(ctx, bc, res.Params, clusterWorkers{Tag: s.tag("out", i), Workers: s.workers, Shared: s.shared}, logDir, logf)
			if err != nil {
				return fmt.Errorf("cluster outage, %s, run %d: %w", s.label(), i, err)
			}
			logf("cluster outage %s, run %d: %d requests during the %s outage (%.2f a second), %d after, last success %.1f s after the recovery, %d failed",
				s.label(), i, run.DuringOutage, run.Outage, float64(run.DuringOutage)/run.Outage.Seconds(), run.After, run.RecoveryToLast.Seconds(), run.Failed)
			res.Outage = append(res.Outage, ClusterOutageRun{Workers: s.workers, SharedRate: s.shared, Repeat: i, Run: run})
		}
	}
	return nil
}

// runClusterOutageOnce runs the outage experiment (defaultOutage of 503,
// then p's capacity) with full jitter on w's fresh workers and stops them.
func runClusterOutageOnce(ctx context.Context, bc *benchCluster, p ContentionParams, w clusterWorkers, logDir string, logf func(string, ...any)) (_ OutageRun, err error) {
	h, stop, err := startClusterWorkers(ctx, bc, w, logDir, logf)
	if err != nil {
		return OutageRun{}, err
	}
	defer func() { err = errors.Join(err, stop()) }()
	logf("cluster outage: %d worker processes on %s (shared rate %t), %d workflows", w.Workers, h.TaskQueue, w.Shared, p.Clients)
	run, err := runOutage(ctx, h, p, workflows.JitterFull, defaultOutage, w.Tag)
	run.Admission, run.Breaker = true, true
	return run, err
}

// runClusterThroughput measures the uncontended throughput on workers
// worker processes: one set with the shared rate on and one with it off,
// each on its own task queue at the same time, an API that takes
// everything; after a warm-up batch on each, rounds batches of
// clusterThroughputWorkflows on each set, back to back, the order
// alternating.
func runClusterThroughput(ctx context.Context, bc *benchCluster, p ContentionParams, workers, rounds int, logDir string, logf func(string, ...any)) (_ ClusterThroughput, err error) {
	res := ClusterThroughput{Workers: workers, Workflows: clusterThroughputWorkflows}
	bc.target.Set(okHandler())
	stamp := time.Now().Unix() % 100000
	sets := map[bool]*harness{}
	for _, on := range []bool{true, false} {
		h, stop, err := startClusterWorkers(ctx, bc, clusterWorkers{Tag: fmt.Sprintf("tput-%t-%dw-%d", on, workers, stamp), Workers: workers, Shared: on}, logDir, logf)
		if err != nil {
			return res, err
		}
		defer func() { err = errors.Join(err, stop()) }()
		sets[on] = h
	}
	tp := p
	tp.Clients = clusterThroughputWorkflows
	batch := func(on bool, name string, n int) (ContentionRun, error) {
		q := tp
		q.Clients = n
		var run ContentionRun
		h := sets[on]
		err := startAndWait(ctx, h, q, readyLoad(h, q, workflows.JitterFull), fmt.Sprintf("%s-%d", name, stamp), &run)
		return run, err
	}
	err = pairedRounds(rounds, tp.Clients, fmt.Sprintf("tput-%%t-%dw", workers), batch, func(i int, pr pairedRound) {
		rd := ClusterThroughputRound{On: pr.a, Off: pr.b, OnFirst: pr.aFirst, Failed: pr.failed}
		logf("cluster throughput, %d workers, round %d: %d workflows in %.1f s with the shared rate on, %.1f s off (on ÷ off %.2f as throughput), %d failed",
			workers, i+1, tp.Clients, rd.On.Seconds(), rd.Off.Seconds(), rd.ratio(), rd.Failed)
		res.Rounds = append(res.Rounds, rd)
	})
	return res, err
}

// pairedRound is one round of pairedRounds: each side's batch time, from
// its first start to its last result, which ran first, and the failures
// of both.
type pairedRound struct {
	a, b   time.Duration
	aFirst bool
	failed int
}

// pairedRounds compares two ways of running the same workflows, a (true)
// and b (false), by throughput: a warm-up batch of 20 on each, then rounds
// of a batch of n on each, back to back, the order alternating so that
// neither always runs on the machine the other left. batch runs n
// workflows one way under a name made from tag (a format with a %t for
// the side) and the round; each round goes to done.
func pairedRounds(rounds, n int, tag string, batch func(a bool, name string, n int) (ContentionRun, error), done func(i int, r pairedRound)) error {
	for _, a := range []bool{true, false} {
		if _, err := batch(a, "warm-"+fmt.Sprintf(tag, a), 20); err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
	}
	for i := range rounds {
		r := pairedRound{aFirst: i%2 == 0}
		for _, a := range []bool{r.aFirst, !r.aFirst} {
			run, err := batch(a, fmt.Sprintf("%s-%d", fmt.Sprintf(tag, a), i), n)
			if err != nil {
				return err
			}
			r.failed += run.Failed
			if a {
				r.a = run.Wall
			} else {
				r.b = run.Wall
			}
		}
		done(i, r)
	}
	return nil
}
