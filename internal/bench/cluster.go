package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/internal/cluster"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// ClusterContention is the contention experiment on the cluster with two
// workers (issue 11, "across workers"): temporal-server on PostgreSQL
// (internal/cluster), one reference server, and two workers polling one
// task queue, each with its own client connection and its own
// activities.Activities, hence its own admission limiter. The run is
// repeated with full jitter, admission off and then on, on a fresh task
// queue with fresh workers each time.
//
// The two workers are two SDK workers in this process, not two worker
// processes. For admission that is the same thing: the limiter belongs to
// one Activities instance and the two share no state (each learns the
// target's capacity from its own answers alone). What they do share is
// this process: its CPU, its scheduler, and the one HTTP server they call;
// the workflows are started through the first worker's client, without
// eager start, so matching hands every task to whichever worker polls.
type ClusterContention struct {
	Params ContentionParams `json:"params"`
	Runs   []ClusterRun     `json:"runs"`
}

// ClusterRun is one run of ClusterContention.
type ClusterRun struct {
	Label string `json:"label"`
	// Admission: both workers' adaptive admission was on.
	Admission bool          `json:"admission"`
	Run       ContentionRun `json:"run"`
}

// clusterWorkers is the number of workers of every ClusterContention run.
const clusterWorkers = 2

// runClusterContention builds the cluster's binaries if needed (into
// cluster.DefaultBinDir()), starts the cluster and a target, and runs the
// contention experiment p with full jitter, admission off and then on, on
// two fresh workers each time. The cluster's work directory (its config
// and temporal-server.log) and the workers' logs go to logDir when it is
// set; without one, the work directory is temporary and worker logs are
// dropped.
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
	opts := cluster.Options{BinDir: binDir, Logf: logf, ServerLogLevel: "warn"}
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
	for _, rc := range []struct {
		label     string
		admission bool
	}{
		{"full jitter, admission off", false},
		{"full jitter, admission on", true},
	} {
		tag := "cluster-" + map[bool]string{false: "off", true: "on"}[rc.admission]
		run, err := runClusterOnce(ctx, c, target, p, rc.admission, tag, logDir, logf)
		if err != nil {
			return res, fmt.Errorf("cluster contention, %s: %w", rc.label, err)
		}
		logf("cluster contention %-28s %4d requests, %d successes, last success at %6.1f s, %d failed, first attempts spread over %s",
			rc.label, run.Requests, run.Successes, run.ToLastSuccess.Seconds(), run.Failed, run.FirstSpread.Round(time.Millisecond))
		res.Runs = append(res.Runs, ClusterRun{Label: rc.label, Admission: rc.admission, Run: run})
	}
	logf("cluster contention done in %s", time.Since(begin).Round(time.Second))
	return res, nil
}

// runClusterOnce starts clusterWorkers fresh workers on the task queue
// "bench-"+tag, each with its own client and its own Activities (admission
// on or off), runs the contention experiment with full jitter through the
// first worker's client, and stops the workers and closes the clients.
func runClusterOnce(ctx context.Context, c *cluster.Cluster, target *targetServer, p ContentionParams, admission bool, tag, logDir string, logf func(string, ...any)) (_ ContentionRun, err error) {
	tq := "bench-" + tag
	var clients []client.Client
	var workers []worker.Worker
	var files []*os.File
	defer func() {
		for _, w := range workers {
			w.Stop()
		}
		for _, cl := range clients {
			cl.Close()
		}
		for _, f := range files {
			err = errors.Join(err, f.Close())
		}
	}()
	for i := range clusterWorkers {
		name := fmt.Sprintf("%s-worker-%c", tag, 'a'+i)
		var out io.Writer = io.Discard
		if logDir != "" {
			f, err := os.Create(filepath.Join(logDir, name+".log"))
			if err != nil {
				return ContentionRun{}, err
			}
			files = append(files, f)
			out = f
		}
		logger := sdklog.NewStructuredLogger(slog.New(slog.NewJSONHandler(out, &slog.HandlerOptions{Level: slog.LevelInfo})))
		cl, err := client.Dial(client.Options{
			HostPort: c.FrontendHostPort(), Namespace: c.Namespace(), Logger: logger,
			// Distinct identities: the default (pid@host) is the same for both.
			Identity: fmt.Sprintf("%d@%s", os.Getpid(), name),
		})
		if err != nil {
			return ContentionRun{}, fmt.Errorf("connecting %s: %w", name, err)
		}
		clients = append(clients, cl)
		cfg := activities.Config{
			AllowedOrigins: []string{target.URL},
			HTTPClient:     &http.Client{Transport: newTransport()},
		}
		if !admission {
			cfg.Admission = activities.Admission{Off: true}
		}
		acts, err := activities.New(cfg)
		if err != nil {
			return ContentionRun{}, err
		}
		w := worker.New(cl, tq, workerOptions)
		acts.Register(w)
		workflows.Register(w)
		if err := w.Start(); err != nil {
			return ContentionRun{}, fmt.Errorf("starting %s: %w", name, err)
		}
		workers = append(workers, w)
	}
	logf("cluster contention: %d workers on %s (admission %v), %d workflows", clusterWorkers, tq, admission, p.Clients)
	h := &harness{Client: clients[0], TaskQueue: tq, Target: target}
	run, err := runContention(ctx, h, p, activities.JitterFull, tag)
	run.Admission = admission
	return run, err
}
