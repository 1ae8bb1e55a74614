package cluster_test

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/harness/chaos"
	"github.com/idemhttp/temporal-idempotent-http/harness/itest"
)

// unkeyedOperations is the size of each way's campaign in make test;
// make bench (section unkeyed) runs 1000.
var unkeyedOperations = flag.Int("chaos.unkeyed.ops", 200, "operations of each way of TestChaosUnkeyed")

// unkeyedWays are the ways TestChaosUnkeyed runs (-chaos.unkeyed.ways,
// comma-separated): plain, lookup or at-most-once against the API without
// keys, or keyed:body and keyed:query, the API with keys reading the key
// there.
var unkeyedWays = flag.String("chaos.unkeyed.ways", "lookup,at-most-once", "ways of TestChaosUnkeyed, of plain, lookup, at-most-once, keyed:body, keyed:query")

// unkeyedWorkDir, if set, keeps each way's logs (workers, toxiproxy) in
// a directory of its own under it, to read after a failure.
var unkeyedWorkDir = flag.String("chaos.unkeyed.workdir", "", "directory to keep TestChaosUnkeyed's logs in (default: removed)")

// TestChaosUnkeyed is the chaos campaign against an API that ignores
// idempotency keys (testsuite.PlainDialect, a lookup on client_reference),
// each operation's key in its body (KeyIn body:client_reference): the
// toxics all lose answers after the API's work (reset_peer, timeout and
// limit_data, downstream), a worker SIGKILLed every 20 s, temporal-server
// SIGKILLed once and the API down for 30 s once, on one cluster for every
// way. With a lookup (Reconcile.Lookup) and at most once
// (Reconcile.AtMostOnce, a person's decisions taken by the campaign's
// operator with the Temporal CLI) no operation may be done twice or lost;
// with plain retries (-chaos.unkeyed.ways plain) the duplicates are the
// baseline, and there must be some. The API with keys, reading the key
// from the body or the query (keyed:body, keyed:query; make bench runs
// them), must make one record per key: every attempt carried the same key
// where it reads it. The make test form (lookup and at most once, 200
// operations each) takes about 3.5 minutes on two cores.
func TestChaosUnkeyed(t *testing.T) {
	ways := strings.Split(*unkeyedWays, ",")
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(5+5*len(ways))*time.Minute)
	defer cancel()
	binDir, toxiproxyBin, c := startChaos(ctx, t)
	for _, w := range ways {
		name, place, _ := strings.Cut(strings.TrimSpace(w), ":")
		way, keyIn := chaos.Way(name), ""
		if place != "" {
			keyIn = place + ":" + chaos.ClientReference
		}
		t.Run(strings.TrimSpace(w), func(t *testing.T) {
			start := time.Now()
			workDir := t.TempDir()
			if *unkeyedWorkDir != "" {
				workDir = filepath.Join(*unkeyedWorkDir, strings.ReplaceAll(w, ":", "-"))
				if err := os.MkdirAll(workDir, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			res, err := chaos.Run(ctx, chaos.Config{
				Way: way, KeyIn: keyIn,
				// As TestChaosCampaign: the starts last 80 s, so the
				// server and workers die with operations in flight.
				Plan:    chaos.Plan{Seed: *chaosSeed, Operations: *unkeyedOperations, StartRate: 2.5, AnswerCuts: true},
				Cluster: c, WorkerBin: filepath.Join(binDir, "worker"), ToxiproxyBin: toxiproxyBin, WorkDir: workDir,
				ScheduleToClose: 10 * time.Minute, Drain: 5 * time.Minute,
				Logf: t.Logf,
			})
			if err != nil {
				t.Logf("worker logs in %s:\n%s", workDir, itest.FileTail(filepath.Join(workDir, "worker-0.log"), 4<<10))
				t.Fatalf("seed %d: %v", *chaosSeed, err)
			}
			logUnkeyed(t, res, time.Since(start))
			problems := res.Problems()
			for _, p := range problems {
				t.Errorf("seed %d, %s: %s", *chaosSeed, way, p)
			}
			if len(problems) > 0 {
				for _, f := range res.Verdict.Findings[:min(len(res.Verdict.Findings), 20)] {
					t.Logf("finding: %s", f)
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
			// The faults bit: answers were lost after the work (the API's
			// lookups or the operator's decisions show it).
			if res.Stats.Lookups == 0 && (way == chaos.WayLookup || way == chaos.WayAtMostOnce) {
				t.Errorf("no lookup at the API: the faults made no unknown outcome")
			}
			if way == chaos.WayKeyed && res.Stats.Replays == 0 {
				t.Errorf("no stored response sent again: the faults lost no answer after the work")
			}
		})
	}
}

// logUnkeyed logs a way's figures.
func logUnkeyed(t *testing.T, res *chaos.Result, took time.Duration) {
	t.Helper()
	v := res.Verdict
	t.Logf("seed %d, %s: %d operations, %d succeeded, %d failed, %d lost, %d duplicated, %d records; %d requests from the workers, %.2f per success (%d lookups); last end at %.1f s; the campaign took %s",
		*chaosSeed, res.Way, v.Operations, v.Succeeded, len(v.Failed), len(v.Lost), len(v.Duplicated), v.Records, res.Requests, res.RequestsPerSuccess, res.Stats.Lookups, res.Duration.Seconds(), took.Round(time.Second))
	if o := res.Operator; o != nil {
		t.Logf("operator: %d lists (%d failed), %d workflows listed, %d decisions (%d completed, %d unpaused), %d not paused when described, %d lookups, %d CLI calls, %d errors %q; workers: %d pauses, %d workflows waited, %d unlisted; longest wait %s; the server started %d attempts of paused activities, %d sent nothing",
			o.Lists, o.ListErrors, o.Listed, o.Decisions, o.Completed, o.Unpaused, o.NotPaused, o.Lookups, o.CLICalls, o.ErrorCount, o.Errors, o.Pauses, o.Waited, len(o.Unlisted), o.MaxWait.Round(100*time.Millisecond), o.StartedPaused, o.NotSent)
	}
	t.Logf("API stats: %+v", res.Stats)
}
