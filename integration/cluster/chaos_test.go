package cluster_test

import (
	"context"
	"flag"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/harness/chaos"
	"github.com/idemhttp/temporal-idempotent-http/harness/cluster"
	"github.com/idemhttp/temporal-idempotent-http/harness/itest"
)

// startChaos builds what a campaign runs (the worker binary, in a
// directory of the test's, and Toxiproxy) and starts the cluster with one
// partition per queue: the set-up of every chaos test here.
func startChaos(ctx context.Context, t *testing.T) (binDir, toxiproxyBin string, c *cluster.Cluster) {
	t.Helper()
	binDir = t.TempDir()
	if err := itest.BuildCommands(ctx, binDir, "./worker"); err != nil {
		t.Fatal(err)
	}
	toolsDir, err := cluster.DefaultBinDir()
	if err != nil {
		t.Fatal(err)
	}
	if toxiproxyBin, err = chaos.BuildToxiproxy(ctx, toolsDir, t.Logf); err != nil {
		t.Fatal(err)
	}
	return binDir, toxiproxyBin, cluster.StartForTest(t, cluster.Options{DynamicConfig: cluster.OnePartitionPerQueue, ServerLogLevel: "warn"})
}

// chaosSeed seeds the campaign's schedule; a failure names it, and
// -chaos.seed runs that schedule again.
var chaosSeed = flag.Uint64("chaos.seed", 33, "seed of TestChaosCampaign's schedule")

// chaosOperations is the size of the campaign in make test; make bench
// (section chaos) runs 1000.
const chaosOperations = 200

// TestChaosCampaign is the chaos campaign's smaller form (package
// harness/chaos): 200 operations on the cluster with three
// worker processes (their defaults: the shared rate on, each request
// routed to its origin's queue by the worker),
// the API behind Toxiproxy with toxics coming and going, a worker
// SIGKILLed every 20 s, temporal-server SIGKILLed once and the API down
// for 30 s once. Every operation must end exactly once with its full
// answer: one record per key, none duplicated, lost or failed.
func TestChaosCampaign(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	binDir, toxiproxyBin, c := startChaos(ctx, t)
	workDir := t.TempDir()
	res, err := chaos.Run(ctx, chaos.Config{
		// 2.5 starts a second: the starts last 80 s, so the server dies
		// and workers die while operations are in flight.
		Plan:    chaos.Plan{Seed: *chaosSeed, Operations: chaosOperations, StartRate: 2.5},
		Cluster: c, WorkerBin: filepath.Join(binDir, "worker"), ToxiproxyBin: toxiproxyBin, WorkDir: workDir,
		ScheduleToClose: 10 * time.Minute, Drain: 5 * time.Minute,
		Logf: t.Logf,
	})
	if err != nil {
		t.Logf("worker logs in %s:\n%s", workDir, itest.FileTail(filepath.Join(workDir, "worker-0.log"), 4<<10))
		t.Fatalf("seed %d: %v", *chaosSeed, err)
	}
	v := res.Verdict
	t.Logf("seed %d: %d operations, %d succeeded, %d failed, %d lost, %d duplicated, %d records; %d requests at the API, %.2f per success; last end at %.1f s",
		*chaosSeed, v.Operations, v.Succeeded, len(v.Failed), len(v.Lost), len(v.Duplicated), v.Records, res.Requests, res.RequestsPerSuccess, res.Duration.Seconds())
	t.Logf("API stats: %+v", res.Stats)
	if !v.OK() {
		for _, f := range v.Findings {
			t.Errorf("seed %d: %s", *chaosSeed, f)
		}
		for id, h := range res.Histories {
			t.Logf("history of %s:\n%s", id, strings.Join(h, "\n"))
		}
		for _, e := range res.Events {
			t.Logf("%6.1fs %s", e.At.Seconds(), e.What)
		}
	}
	for _, e := range res.Events {
		if strings.HasPrefix(e.What, "FINDING") {
			t.Errorf("seed %d at %.1f s: %s", *chaosSeed, e.At.Seconds(), e.What)
		}
	}
	// The faults bit: retries reached the API (killed workers' and lost
	// completions' attempts come back with their key), and answers were
	// lost after the work was done (the API sent stored responses again).
	if res.Requests <= v.Operations || res.Stats.Replays == 0 {
		t.Errorf("%d requests at the API for %d operations, %d stored responses sent again: the faults did not reach it", res.Requests, v.Operations, res.Stats.Replays)
	}
}
