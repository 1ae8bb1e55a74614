package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/harness/chaos"
)

// UnkeyedSection is the section of the chaos campaign against APIs
// without keys (-only unkeyed).
const UnkeyedSection = "unkeyed"

// UnkeyedPlan sizes the unkeyed section.
type UnkeyedPlan struct {
	Seed uint64 `json:"seed"`
	// Operations is the size of each way's campaign against the API
	// without keys: plain retries, lookup and at most once.
	Operations int `json:"operations"`
	// KeyPlaceOperations is the size of each campaign against the API
	// with keys, its key in the body and in the query (0: none).
	KeyPlaceOperations int `json:"key_place_operations"`
}

// defaultUnkeyed is the unkeyed section of make bench: 1000 operations
// each way (make test runs 200 with the same code, for lookup and at most
// once: TestChaosUnkeyed in integration/cluster), and 200 for each key
// place.
var defaultUnkeyed = UnkeyedPlan{Seed: 33, Operations: 1000, KeyPlaceOperations: 200}

// UnkeyedResult is the unkeyed section: the chaos campaign of
// harness/chaos with answers cut after the API's work, against the
// reference server without keys (testsuite.PlainDialect), three ways; and
// against the reference server with keys, the key in a body member and in
// a query parameter.
type UnkeyedResult struct {
	Plan UnkeyedPlan  `json:"plan"`
	Runs []UnkeyedRun `json:"runs"`
}

// UnkeyedRun is one campaign of the unkeyed section.
type UnkeyedRun struct {
	Campaign *chaos.Result `json:"campaign"`
	// Took is the campaign's wall time: its workers' start, the
	// schedule, the wait for the operations and the check.
	Took time.Duration `json:"took_ns"`
	// Problems is Campaign.Problems(): where it fell short of its way's
	// promise (none when met).
	Problems []string `json:"problems,omitempty"`
}

// unkeyedCampaign is one campaign of the section: a way and where the
// key goes.
type unkeyedCampaign struct {
	way   chaos.Way
	keyIn string
	ops   int
}

// campaigns lists the section's campaigns in the order they run.
func (p UnkeyedPlan) campaigns() []unkeyedCampaign {
	var cs []unkeyedCampaign
	for _, w := range []chaos.Way{chaos.WayPlain, chaos.WayLookup, chaos.WayAtMostOnce} {
		cs = append(cs, unkeyedCampaign{way: w, keyIn: chaos.KeyInBody, ops: p.Operations})
	}
	if p.KeyPlaceOperations > 0 {
		for _, k := range []string{chaos.KeyInBody, chaos.KeyInQuery} {
			cs = append(cs, unkeyedCampaign{way: chaos.WayKeyed, keyIn: k, ops: p.KeyPlaceOperations})
		}
	}
	return cs
}

// runUnkeyed runs the section's campaigns one after the other on one
// cluster (withChaosCluster), each with workers, proxy and API of its
// own. Logs go to logDir/unkeyed/WAY-PLACE when logDir is set.
func runUnkeyed(ctx context.Context, p UnkeyedPlan, logDir string, logf func(string, ...any)) (*UnkeyedResult, error) {
	res := &UnkeyedResult{Plan: p}
	err := withChaosCluster(ctx, UnkeyedSection, logDir, logf, func(env chaosEnv) error {
		for _, uc := range p.campaigns() {
			place, _, _ := strings.Cut(uc.keyIn, ":")
			workDir := filepath.Join(env.WorkDir, fmt.Sprintf("%s-%s", uc.way, place))
			if err := os.MkdirAll(workDir, 0o755); err != nil {
				return err
			}
			start := time.Now()
			c, err := chaos.Run(ctx, chaos.Config{
				Way: uc.way, KeyIn: uc.keyIn,
				Plan:    chaos.Plan{Seed: p.Seed, Operations: uc.ops, AnswerCuts: true},
				Cluster: env.Cluster, WorkerBin: env.WorkerBin, ToxiproxyBin: env.ToxiproxyBin, WorkDir: workDir,
				ScheduleToClose: 30 * time.Minute, Drain: 15 * time.Minute, Logf: logf,
			})
			if err != nil {
				return fmt.Errorf("unkeyed, %s with the key in %s: %w", uc.way, uc.keyIn, err)
			}
			run := UnkeyedRun{Campaign: c, Took: time.Since(start), Problems: c.Problems()}
			res.Runs = append(res.Runs, run)
			v := c.Verdict
			logf("unkeyed %s (key in %s): %d operations, %d succeeded, %d failed, %d lost, %d duplicated, %d records; %.2f requests per success; last end at %.1f s; took %s",
				uc.way, uc.keyIn, v.Operations, v.Succeeded, len(v.Failed), len(v.Lost), len(v.Duplicated), v.Records, c.RequestsPerSuccess, c.Duration.Seconds(), run.Took.Round(time.Second))
			if o := c.Operator; o != nil {
				logf("unkeyed %s: operator %d listed, %d completed, %d unpaused; workers %d pauses, %d waited, %d unlisted; server started %d paused attempts, %d sent nothing",
					uc.way, o.Listed, o.Completed, o.Unpaused, o.Pauses, o.Waited, len(o.Unlisted), o.StartedPaused, o.NotSent)
			}
			for _, pr := range run.Problems {
				logf("unkeyed %s: %s", uc.way, pr)
			}
		}
		return nil
	})
	return res, err
}
