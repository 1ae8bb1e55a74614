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

// runChaos builds what the campaign needs into cluster.DefaultBinDir()
// (the cluster's tools, toxiproxy-server, the worker), starts a cluster and
// runs the campaign p. Logs go to logDir/chaos when logDir is set.
func runChaos(ctx context.Context, p chaos.Plan, logDir string, logf func(string, ...any)) (_ *ChaosResult, err error) {
	if _, err := cluster.EnsurePostgres(ctx, logf); err != nil {
		return nil, err
	}
	binDir, err := cluster.DefaultBinDir()
	if err != nil {
		return nil, err
	}
	bctx, cancel := context.WithTimeout(ctx, cluster.BuildTimeout)
	defer cancel()
	if err := cluster.BuildTools(bctx, binDir, logf); err != nil {
		return nil, fmt.Errorf("building the cluster's tools: %w", err)
	}
	toxiproxyBin, err := chaos.BuildToxiproxy(bctx, binDir, logf)
	if err != nil {
		return nil, fmt.Errorf("building toxiproxy-server: %w", err)
	}
	if err := itest.BuildCommands(bctx, binDir, "./worker"); err != nil {
		return nil, fmt.Errorf("building the worker: %w", err)
	}
	workDir := filepath.Join(logDir, "chaos")
	if logDir == "" {
		if workDir, err = os.MkdirTemp("", "idemhttp-chaos-"); err != nil {
			return nil, err
		}
		defer os.RemoveAll(workDir)
	}
	opts := cluster.Options{BinDir: binDir, Logf: logf, ServerLogLevel: "warn", DynamicConfig: cluster.OnePartitionPerQueue, WorkDir: filepath.Join(workDir, "cluster")}
	for _, d := range []string{workDir, opts.WorkDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
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
	res := &ChaosResult{}
	res.Campaign, err = chaos.Run(ctx, chaos.Config{
		Plan: p, Cluster: c, WorkerBin: filepath.Join(binDir, "worker"), ToxiproxyBin: toxiproxyBin, WorkDir: workDir,
		WorkerArgs:      res.WorkerArgs,
		ScheduleToClose: 30 * time.Minute, Drain: 15 * time.Minute, Logf: logf,
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
