package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/idemhttp/temporal-idempotent-http/internal/testing/cluster"
	"github.com/idemhttp/temporal-idempotent-http/internal/testing/itest"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// ClusterContention is the contention experiment on the cluster with two
// workers (issue 11, "across workers"): temporal-server on PostgreSQL
// (internal/testing/cluster), one reference server, and two worker processes (the
// worker binary, as a user runs it) polling one task queue, each with its
// own admission limiter. The two share no state: each learns the target's
// capacity from its own answers alone, as AWS SDK clients do. The run is
// repeated with full jitter, admission off, admission on, and admission off
// with TaskQueueActivitiesPerSecond set to the capacity (the alternative:
// a fixed limit that the server enforces across workers), on a fresh task
// queue with fresh workers each time. The workflows are started without
// eager start, so matching hands every task to whichever worker polls.
type ClusterContention struct {
	Params ContentionParams `json:"params"`
	Runs   []ClusterRun     `json:"runs"`
}

// ClusterRun is one run of ClusterContention.
type ClusterRun struct {
	Label string `json:"label"`
	// Admission: the workers' adaptive admission was on.
	Admission bool `json:"admission"`
	// QueueRate: the workers set TaskQueueActivitiesPerSecond to the
	// target's capacity.
	QueueRate bool `json:"queue_rate,omitempty"`
	// SharedRate: the workers ran with --shared-rate and the requests
	// with OriginQueue: one learned rate, kept by the server.
	SharedRate bool `json:"shared_rate,omitempty"`
	// Workers is the number of worker processes (2 when not set: runs
	// from before it was recorded).
	Workers int           `json:"workers,omitempty"`
	Run     ContentionRun `json:"run"`
}

// workers returns the run's number of worker processes.
func (r ClusterRun) workers() int { return max(r.Workers, 2) }

// runClusterContention builds the cluster's binaries and the worker if
// needed (into cluster.DefaultBinDir()), starts the cluster and a target,
// and runs the contention experiment p in the three ways ClusterContention
// lists, on two fresh worker processes each time. The cluster's work
// directory (its config and temporal-server.log) and the workers' logs go
// to logDir when it is set; without one, the work directory is temporary
// and worker logs are dropped.
func runClusterContention(ctx context.Context, p ContentionParams, logDir string, logf func(string, ...any)) (_ *ClusterContention, err error) {
	// Eager start hands a workflow's first task to a worker in the starting
	// client's process, so with it every first attempt would run on the
	// first worker and the herd would not be shared between the two: start
	// through matching instead.
	p.EagerStart = false

	begin := time.Now()
	if _, err := cluster.EnsurePostgres(ctx, logf); err != nil {
		return nil, err
	}
	binDir, err := cluster.DefaultBinDir()
	if err != nil {
		return nil, err
	}
	bctx, cancel := context.WithTimeout(ctx, cluster.BuildTimeout)
	err = cluster.BuildTools(bctx, binDir, logf)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("building the cluster's tools: %w", err)
	}
	bctx, cancel = context.WithTimeout(ctx, cluster.BuildTimeout)
	err = itest.BuildCommands(bctx, binDir, "./worker")
	cancel()
	if err != nil {
		return nil, fmt.Errorf("building the worker: %w", err)
	}
	workerBin := filepath.Join(binDir, "worker")
	// One partition per activity queue: the shared rate's queue limit is
	// then spread evenly, as the README asks operators to set it.
	opts := cluster.Options{BinDir: binDir, Logf: logf, ServerLogLevel: "warn", DynamicConfig: cluster.OnePartitionPerActivityQueue}
	if logDir != "" {
		opts.WorkDir = filepath.Join(logDir, "cluster")
		if err := os.MkdirAll(opts.WorkDir, 0o755); err != nil {
			return nil, err
		}
	}
	sctx, cancel := context.WithTimeout(ctx, cluster.StartTimeout)
	c, err := cluster.Start(sctx, opts)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("starting the cluster: %w", err)
	}
	defer func() {
		if serr := c.Stop(); serr != nil {
			err = errors.Join(err, fmt.Errorf("stopping the cluster: %w", serr))
		}
	}()
	logf("cluster up in %s (frontend %s, namespace %s)", time.Since(begin).Round(time.Second), c.FrontendHostPort(), c.Namespace())

	target, err := startTarget()
	if err != nil {
		return nil, err
	}
	defer target.Close()

	res := &ClusterContention{Params: p}
	rate := fmt.Sprint(float64(p.Capacity) / p.Window.Seconds())
	for _, rc := range []struct {
		label, tag string
		admission  bool
		args       []string
		workers    int
		shared     bool
	}{
		// Each worker its own rate: the shared rate is the worker's default.
		{"full jitter, admission off", "off", false, []string{"--admission=false", "--shared-rate=false"}, 2, false},
		{"full jitter, admission on", "on", true, []string{"--shared-rate=false"}, 2, false},
		{"full jitter, admission on, three workers", "on-3", true, []string{"--shared-rate=false"}, 3, false},
		// One learned rate for all workers, kept by the server.
		{"full jitter, admission on, shared rate", "shared", true, []string{"--shared-rate"}, 2, true},
		{"full jitter, admission on, shared rate, three workers", "shared-3", true, []string{"--shared-rate"}, 3, true},
		// The alternative: a fixed limit that the server enforces across
		// all workers of the task queue, set to the capacity (known here).
		{"full jitter, admission off, TaskQueueActivitiesPerSecond " + rate, "queue-rate", false, []string{"--admission=false", "--task-queue-activities-per-second", rate}, 2, false},
	} {
		run, err := runClusterOnce(ctx, c, workerBin, target, p, rc.args, rc.workers, rc.shared, "cluster-"+rc.tag, logDir, logf)
		if err != nil {
			return res, fmt.Errorf("cluster contention, %s: %w", rc.label, err)
		}
		run.Admission = rc.admission
		logf("cluster contention %-28s %4d requests, %d successes, last success at %6.1f s, %d failed, first attempts spread over %s",
			rc.label, run.Requests, run.Successes, run.ToLastSuccess.Seconds(), run.Failed, run.FirstSpread.Round(time.Millisecond))
		res.Runs = append(res.Runs, ClusterRun{Label: rc.label, Admission: rc.admission, QueueRate: len(rc.args) > 1 && !rc.shared,
			SharedRate: rc.shared, Workers: rc.workers, Run: run})
	}
	logf("cluster contention done in %s", time.Since(begin).Round(time.Second))
	return res, nil
}

// runClusterOnce starts workers fresh worker processes on the task queue
// "bench-"+tag (admission on or off), runs the contention experiment with
// full jitter through a client of its own (each request on its origin's
// queue when originQueue), and stops the workers.
func runClusterOnce(ctx context.Context, c *cluster.Cluster, workerBin string, target *targetServer, p ContentionParams, args []string, workers int, originQueue bool, tag, logDir string, logf func(string, ...any)) (_ ContentionRun, err error) {
	tq := "bench-" + tag
	cl, err := client.Dial(client.Options{HostPort: c.FrontendHostPort(), Namespace: c.Namespace(), Logger: itest.QuietLogger()})
	if err != nil {
		return ContentionRun{}, fmt.Errorf("connecting to the cluster: %w", err)
	}
	defer cl.Close()
	var procs []*itest.Process
	defer func() {
		for _, pr := range procs {
			if serr := pr.Stop(20 * time.Second); serr != nil {
				err = errors.Join(err, serr)
			}
		}
	}()
	for i := range workers {
		name := fmt.Sprintf("%s-worker-%c", tag, 'a'+i)
		spec := itest.Spec{
			Name: name, Path: workerBin, Dir: c.WorkDir(),
			Args: append([]string{"--task-queue", tq, "--allow-origin", target.URL, "--identity", name, "--log-level", "warn"}, args...),
			Env:  append(c.ClientEnv(), "API_TOKEN=", "METRICS_ADDR=", "CONVENTIONS=", "ADMISSION="),
		}
		if logDir != "" {
			spec.LogPath = filepath.Join(logDir, name+".log")
		}
		pr, err := itest.Start(spec)
		if err != nil {
			return ContentionRun{}, err
		}
		procs = append(procs, pr)
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		err = itest.WaitForPollers(wctx, cl, tq, name)
		cancel()
		if err != nil {
			return ContentionRun{}, fmt.Errorf("%s: %w; its output:\n%s", name, err, pr.Tail(4<<10))
		}
		if originQueue {
			oq, _ := workflows.OriginTaskQueue(tq, target.URL)
			wctx, cancel := context.WithTimeout(ctx, time.Minute)
			err = itest.WaitForActivityPollers(wctx, cl, oq, name)
			cancel()
			if err != nil {
				return ContentionRun{}, fmt.Errorf("%s: %w; its output:\n%s", name, err, pr.Tail(4<<10))
			}
		}
	}
	logf("cluster contention: %d worker processes on %s (%q), %d workflows", workers, tq, args, p.Clients)
	h := &harness{Client: cl, TaskQueue: tq, Target: target, OriginQueue: originQueue}
	return runContention(ctx, h, p, workflows.JitterFull, tag)
}
