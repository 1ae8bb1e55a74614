package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/harness/chaos"
	"github.com/idemhttp/temporal-idempotent-http/harness/cluster"
	"github.com/idemhttp/temporal-idempotent-http/harness/itest"
)

// ChaosSVG is the chaos plot's file name, next to RESULTS.md.
const ChaosSVG = "chaos.svg"

// defaultChaos is the full campaign of the chaos section: 1000 operations
// (make test runs 200 with the same code, integration/cluster).
var defaultChaos = chaos.Plan{Seed: 33, Operations: 1000}

// ChaosResult is the chaos section: the campaign of package
// harness/chaos at full size on the PostgreSQL-backed cluster,
// three worker processes with their default flags (the shared rate on).
type ChaosResult struct {
	// WorkerArgs are the workers' flags beyond the task queue and origin.
	WorkerArgs []string      `json:"worker_args"`
	Campaign   *chaos.Result `json:"campaign"`
}

// chaosEnv is what a campaign runs with: a started cluster, the worker
// and toxiproxy-server binaries and a work directory for its logs.
type chaosEnv struct {
	Cluster                 *cluster.Cluster
	WorkerBin, ToxiproxyBin string
	WorkDir                 string
}

// withChaosCluster builds what a campaign needs into
// cluster.DefaultBinDir() (the cluster's tools, toxiproxy-server, the
// worker), starts a cluster and calls run with it; then it stops the
// cluster. The logs go to logDir/name when logDir is set, else to a
// temporary directory removed after.
func withChaosCluster(ctx context.Context, name, logDir string, logf func(string, ...any), run func(chaosEnv) error) (err error) {
	if _, err := cluster.EnsurePostgres(ctx, logf); err != nil {
		return err
	}
	binDir, err := cluster.DefaultBinDir()
	if err != nil {
		return err
	}
	bctx, cancel := context.WithTimeout(ctx, cluster.BuildTimeout)
	defer cancel()
	if err := cluster.BuildTools(bctx, binDir, logf); err != nil {
		return fmt.Errorf("building the cluster's tools: %w", err)
	}
	toxiproxyBin, err := chaos.BuildToxiproxy(bctx, binDir, logf)
	if err != nil {
		return fmt.Errorf("building toxiproxy-server: %w", err)
	}
	if err := itest.BuildCommands(bctx, binDir, "./worker"); err != nil {
		return fmt.Errorf("building the worker: %w", err)
	}
	workDir := filepath.Join(logDir, name)
	if logDir == "" {
		if workDir, err = os.MkdirTemp("", "idemhttp-"+name+"-"); err != nil {
			return err
		}
		defer os.RemoveAll(workDir)
	}
	opts := cluster.Options{BinDir: binDir, Logf: logf, ServerLogLevel: "warn", DynamicConfig: cluster.OnePartitionPerQueue, WorkDir: filepath.Join(workDir, "cluster")}
	for _, d := range []string{workDir, opts.WorkDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	sctx, cancel := context.WithTimeout(ctx, cluster.StartTimeout)
	c, err := cluster.Start(sctx, opts)
	cancel()
	if err != nil {
		return fmt.Errorf("starting the cluster: %w", err)
	}
	defer func() {
		if serr := c.Stop(); serr != nil {
			err = errors.Join(err, fmt.Errorf("stopping the cluster: %w", serr))
		}
	}()
	return run(chaosEnv{Cluster: c, WorkerBin: filepath.Join(binDir, "worker"), ToxiproxyBin: toxiproxyBin, WorkDir: workDir})
}

// runChaos runs the campaign p on a cluster of its own (withChaosCluster).
// Logs go to logDir/chaos when logDir is set.
func runChaos(ctx context.Context, p chaos.Plan, logDir string, logf func(string, ...any)) (*ChaosResult, error) {
	res := &ChaosResult{}
	err := withChaosCluster(ctx, "chaos", logDir, logf, func(env chaosEnv) error {
		var err error
		res.Campaign, err = chaos.Run(ctx, chaos.Config{
			Plan: p, Cluster: env.Cluster, WorkerBin: env.WorkerBin, ToxiproxyBin: env.ToxiproxyBin, WorkDir: env.WorkDir,
			WorkerArgs:      res.WorkerArgs,
			ScheduleToClose: 30 * time.Minute, Drain: 15 * time.Minute, Logf: logf,
		})
		return err
	})
	if err != nil {
		return res, err
	}
	v := res.Campaign.Verdict
	logf("chaos: %d operations, %d succeeded, %d failed, %d lost, %d duplicated, %d records; %d requests at the API (%.2f per success); last end at %.1f s",
		v.Operations, v.Succeeded, len(v.Failed), len(v.Lost), len(v.Duplicated), v.Records, res.Campaign.Requests, res.Campaign.RequestsPerSuccess, res.Campaign.Duration.Seconds())
	for _, f := range v.Findings {
		logf("chaos finding: %s", f)
	}
	return res, nil
}
