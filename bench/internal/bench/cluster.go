package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/idemhttp/temporal-idempotent-http/harness/cluster"
	"github.com/idemhttp/temporal-idempotent-http/harness/itest"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// ClusterContention is the cluster section of results from before issue
// 33 (kept to render them; the section now writes ClusterShared): the
// contention experiment on the cluster with two workers (issue 11, "across
// workers"): temporal-server on PostgreSQL
// (harness/cluster), one reference server, and two worker processes (the
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
	Workers int `json:"workers,omitempty"`
	// Repeat numbers the consecutive runs of one setup from 1 (0 in
	// results from before they were repeated).
	Repeat int           `json:"repeat,omitempty"`
	Run    ContentionRun `json:"run"`
}

// workers returns the run's number of worker processes.
func (r ClusterRun) workers() int { return max(r.Workers, 2) }

// benchCluster is what the cluster section runs on: temporal-server on
// PostgreSQL, the worker binary, and a target whose handler each
// experiment sets.
type benchCluster struct {
	c         *cluster.Cluster
	workerBin string
	target    *targetServer
}

// startBenchCluster builds the cluster's binaries and the worker if needed
// (into cluster.DefaultBinDir()), starts the cluster (one partition per
// activity queue) and a target. The cluster's work directory (its config
// and temporal-server.log) goes to logDir when it is set; without one, it
// is temporary. Call stop when done.
func startBenchCluster(ctx context.Context, logDir string, logf func(string, ...any)) (_ *benchCluster, stop func() error, err error) {
	begin := time.Now()
	if _, err := cluster.EnsurePostgres(ctx, logf); err != nil {
		return nil, nil, err
	}
	binDir, err := cluster.DefaultBinDir()
	if err != nil {
		return nil, nil, err
	}
	bctx, cancel := context.WithTimeout(ctx, cluster.BuildTimeout)
	err = cluster.BuildTools(bctx, binDir, logf)
	cancel()
	if err != nil {
		return nil, nil, fmt.Errorf("building the cluster's tools: %w", err)
	}
	bctx, cancel = context.WithTimeout(ctx, cluster.BuildTimeout)
	err = itest.BuildCommands(bctx, binDir, "./worker")
	cancel()
	if err != nil {
		return nil, nil, fmt.Errorf("building the worker: %w", err)
	}
	// One partition per activity queue: the shared rate's queue limit is
	// then spread evenly, as the README asks operators to set it.
	opts := cluster.Options{BinDir: binDir, Logf: logf, ServerLogLevel: "warn", DynamicConfig: cluster.OnePartitionPerQueue}
	if logDir != "" {
		opts.WorkDir = filepath.Join(logDir, "cluster")
		if err := os.MkdirAll(opts.WorkDir, 0o755); err != nil {
			return nil, nil, err
		}
	}
	sctx, cancel := context.WithTimeout(ctx, cluster.StartTimeout)
	c, err := cluster.Start(sctx, opts)
	cancel()
	if err != nil {
		return nil, nil, fmt.Errorf("starting the cluster: %w", err)
	}
	logf("cluster up in %s (frontend %s, namespace %s)", time.Since(begin).Round(time.Second), c.FrontendHostPort(), c.Namespace())
	target, err := startTarget()
	if err != nil {
		return nil, nil, errors.Join(err, c.Stop())
	}
	stop = func() error {
		err := target.Close()
		if serr := c.Stop(); serr != nil {
			err = errors.Join(err, fmt.Errorf("stopping the cluster: %w", serr))
		}
		return err
	}
	return &benchCluster{c: c, workerBin: filepath.Join(binDir, "worker"), target: target}, stop, nil
}

// sharedRateArg is the worker's flag for the shared rate on or off, given
// explicitly: the worker's default changed with issue 33 (off before it,
// on after), and each run must say which it measures.
func sharedRateArg(on bool) string { return fmt.Sprintf("--shared-rate=%t", on) }

// clusterWorkers is a set of worker processes of one run on the cluster.
type clusterWorkers struct {
	// Tag names the task queue ("bench-"+Tag) and the workers' identities
	// and log files.
	Tag string
	// Workers is the number of worker processes.
	Workers int
	// Shared runs them with --shared-rate=true and the requests on their
	// origin's queue (Request.OriginQueue), else with --shared-rate=false.
	Shared bool
	// Args are more worker arguments.
	Args []string
	// PerWorker, if set, returns more arguments for worker i (from 0):
	// what must differ between processes, such as a listening address.
	PerWorker func(i int) []string
	// Bin is the program run as the worker (default the worker binary),
	// and Env more of its environment: the scale section runs the bench
	// command as a worker that registers its baseline beside the package.
	Bin string
	Env []string
}

// pollersKnown is how long after every worker polls the herd waits with
// the shared rate on: a worker's reporter reads the pollers of its origin
// queue every second (package host), so that by then each knows the
// others, as workers that were running before the traffic came do. A
// herd within a second of a cold start of every worker meets workers
// that each start at InitialRate, as before they counted each other.
const pollersKnown = 1500 * time.Millisecond

// startClusterWorkers starts w's fresh worker processes on bc's cluster,
// waits until each polls its task queue (and, shared, the origin's queue),
// and returns a harness whose client starts workflows there. stop stops the
// workers and closes the client. The workers' logs go to logDir when it is
// set.
func startClusterWorkers(ctx context.Context, bc *benchCluster, w clusterWorkers, logDir string, logf func(string, ...any)) (_ *harness, stop func() error, err error) {
	tq := "bench-" + w.Tag
	cl, err := client.Dial(client.Options{HostPort: bc.c.FrontendHostPort(), Namespace: bc.c.Namespace(), Logger: itest.QuietLogger()})
	if err != nil {
		return nil, nil, fmt.Errorf("connecting to the cluster: %w", err)
	}
	var procs []*itest.Process
	stop = func() error {
		// All at once: a worker may take up to its 20 s grace.
		begin := time.Now()
		errs := make([]error, len(procs))
		var wg sync.WaitGroup
		for i, pr := range procs {
			wg.Go(func() { errs[i] = pr.Stop(20 * time.Second) })
		}
		wg.Wait()
		cl.Close()
		logf("cluster: %d workers of %s stopped in %s", len(procs), tq, time.Since(begin).Round(100*time.Millisecond))
		return errors.Join(errs...)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, stop())
		}
	}()
	args := append([]string{"--task-queue", tq, "--allow-origin", bc.target.URL, "--log-level", "warn", sharedRateArg(w.Shared)}, w.Args...)
	bin := cmp.Or(w.Bin, bc.workerBin)
	for i := range w.Workers {
		name := fmt.Sprintf("%s-worker-%c", w.Tag, 'a'+i)
		spec := itest.Spec{
			Name: name, Path: bin, Dir: bc.c.WorkDir(),
			Args: append([]string{"--identity", name}, args...),
			Env:  append(append(bc.c.ClientEnv(), "API_TOKEN=", "METRICS_ADDR=", "CONVENTIONS=", "ADMISSION=", "SHARED_RATE="), w.Env...),
		}
		if w.PerWorker != nil {
			spec.Args = append(spec.Args, w.PerWorker(i)...)
		}
		if logDir != "" {
			spec.LogPath = filepath.Join(logDir, name+".log")
		}
		pr, err := itest.Start(spec)
		if err != nil {
			return nil, nil, err
		}
		procs = append(procs, pr)
	}
	// Each worker must poll the activity queue the requests run on before
	// the herd, so that it gets its share: the origin's queue with the
	// shared rate; without it, the base queue (before issue 33) or the
	// origin's queue (the worker routes requests there since). Only
	// activity pollers are waited for: DescribeTaskQueue lists the pollers
	// of a queue's root partition, and a workflow task queue has four, so
	// a worker whose workflow pollers sat on the others was listed only a
	// minute later, when their long poll ended; activity queues have one
	// here (cluster.OnePartitionPerQueue). A worker starts all its
	// pollers together.
	oq, _ := workflows.OriginTaskQueue(tq, bc.target.URL)
	queues := []string{oq}
	if !w.Shared {
		queues = append(queues, tq)
	}
	begin := time.Now()
	for _, pr := range procs {
		wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		err = waitForActivityPoller(wctx, cl, pr.Name, queues...)
		cancel()
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w; its output:\n%s", pr.Name, err, pr.Tail(4<<10))
		}
	}
	logf("cluster: %d workers polling %s in %s", len(procs), tq, time.Since(begin).Round(100*time.Millisecond))
	if w.Shared {
		// Workers that run before the traffic comes know each other: each
		// reads its origin queue's pollers every second, and starts its
		// own rate at its share of one worker's (SharedRate.Workers).
		time.Sleep(pollersKnown)
	}
	return &harness{Client: cl, TaskQueue: tq, Target: bc.target, OriginQueue: w.Shared, procs: procs}, stop, nil
}

// runClusterOnce runs the contention experiment p with full jitter on w's
// fresh workers and stops them.
func runClusterOnce(ctx context.Context, bc *benchCluster, p ContentionParams, w clusterWorkers, logDir string, logf func(string, ...any)) (_ ContentionRun, err error) {
	h, stop, err := startClusterWorkers(ctx, bc, w, logDir, logf)
	if err != nil {
		return ContentionRun{}, err
	}
	defer func() { err = errors.Join(err, stop()) }()
	logf("cluster contention: %d worker processes on %s (shared rate %t, %q), %d workflows", w.Workers, h.TaskQueue, w.Shared, w.Args, p.Clients)
	return runContention(ctx, h, p, workflows.JitterFull, w.Tag)
}

// waitForActivityPoller waits until the worker identity polls one of
// queues for activity tasks.
func waitForActivityPoller(ctx context.Context, cl client.Client, identity string, queues ...string) error {
	err := itest.Eventually(ctx, 100*time.Millisecond, func() error {
		for _, q := range queues {
			resp, err := cl.DescribeTaskQueue(ctx, q, enumspb.TASK_QUEUE_TYPE_ACTIVITY)
			if err != nil {
				return err
			}
			for _, p := range resp.GetPollers() {
				if p.GetIdentity() == identity {
					return nil
				}
			}
		}
		return fmt.Errorf("%s polls none of the activity task queues %q", identity, queues)
	})
	if err != nil {
		return fmt.Errorf("waiting for the worker's activity pollers: %w", err)
	}
	return nil
}
