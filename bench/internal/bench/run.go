package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"go.temporal.io/sdk/worker"

	"github.com/idemhttp/temporal-idempotent-http/harness/itest"
	"github.com/idemhttp/temporal-idempotent-http/internal/backoff"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// Sections of a full run, in the order Run runs them.
var Sections = []string{"sim", "overhead", "retryafter", "throughput", "contention", "outage", PartialSection, "peers", "longrunning", "webhooks", ActionsSection, FairnessSection, "cluster", ScaleSection, "chaos", UnkeyedSection}

// AttemptSection runs only when asked for (-only attempt): the per-attempt
// rows of the peers section (raw net/http in an activity, Activities.Do,
// go-retryablehttp, failsafe-go) in interleaved rounds, then Activities.Do
// with OAuth 2.0 against a static bearer in rounds of their own, without
// the dev server, for claims 2b and 2c on a quiet machine in a few minutes.
const AttemptSection = "attempt"

// NeedsDevServer reports whether section runs on the Temporal dev server
// (and so needs the Temporal CLI).
func NeedsDevServer(section string) bool {
	switch section {
	case "retryafter", "throughput", "contention", "outage", PartialSection, "peers", "longrunning", "webhooks", ActionsSection, FairnessSection:
		return true
	}
	return false
}

// sharesHarness reports whether section runs on the one dev server and
// worker of the dev-server sections; the actions section starts a dev
// server of its own (its metrics on a known port), and the fairness
// section one with fairness on and one partition per task queue, after
// that one stops.
func sharesHarness(section string) bool {
	return NeedsDevServer(section) && section != ActionsSection && section != FairnessSection
}

// Options configures Run.
type Options struct {
	// CLI is the Temporal CLI (see EnsureCLI).
	CLI string
	// LogDir receives the dev server and worker logs.
	LogDir string
	// Only, if not empty, restricts the run to these Sections.
	Only []string
	// OverheadCount is how many rounds of the raw/activity benchmarks to
	// take (default 9) and OverheadIters the iterations of each (default 30000).
	OverheadCount int
	OverheadIters int
	// Gaps is how many retries each spacing case measures (default 10).
	Gaps int
	// ClusterRuns is how many consecutive runs each shared-rate figure of
	// the cluster section takes, the worst reported (default
	// DefaultClusterRuns).
	ClusterRuns int
	// UnkeyedOperations is the size of each way's campaign of the
	// unkeyed section (default 1000; the key places' campaigns take a
	// fifth of it).
	UnkeyedOperations int
	// Actions sizes the actions section (zero fields: defaultActions').
	Actions ActionsParams
	// Partial sizes the partial section (zero fields: defaultPartial's).
	Partial PartialParams
	// Scale sizes the scale section (zero fields: defaultScale's).
	Scale ScaleParams
	// ProfileDir, if set, receives the attempt section's CPU profile of
	// Activities.Do (AttemptProfileFile), summarized in RESULTS.md.
	ProfileDir string
	// Logf reports progress.
	Logf func(string, ...any)
}

// workerOptions are the options of the one worker of every dev-server
// section: the SDK's defaults but 8 pollers per task type instead of 2. With
// 2 pollers and the dev server's 4 partitions per task queue, 5–10 % of a
// burst of tasks waited 2–5 s in matching on the bench machine, which
// spreads any herd over seconds; 8 pollers remove that tail.
var workerOptions = worker.Options{MaxConcurrentWorkflowTaskPollers: 8, MaxConcurrentActivityTaskPollers: 8}

// timerShiftArgs are the dev-server arguments of the "precise timers" run:
// the history service moves every timer due sooner than
// history.timerProcessorMaxTimeShift (1 s by default) to about that long
// from when its queue was last read; 10 ms makes short retries honest.
var timerShiftArgs = []string{"--dynamic-config-value", `history.timerProcessorMaxTimeShift="10ms"`}

// Results is everything a run measured; results.json is its JSON encoding.
type Results struct {
	Started time.Time `json:"started"`
	// Command is the command that ran the measurements.
	Command  string             `json:"command,omitempty"`
	Machine  Machine            `json:"machine"`
	Sections map[string]float64 `json:"section_seconds"`
	Total    time.Duration      `json:"total_ns"`

	// SimParams is the contention setup the capacity-model simulation used.
	SimParams   ContentionParams `json:"sim_params"`
	SimBrooker  []SimSummary     `json:"sim_brooker,omitempty"`
	SimCapacity []SimSummary     `json:"sim_capacity,omitempty"`
	// SimAdmission compares adaptive admission with the retry policy alone
	// in the capacity model with what the dev server adds.
	SimAdmission []SimSummary      `json:"sim_admission,omitempty"`
	Overhead     *OverheadResult   `json:"overhead,omitempty"`
	Gaps         []GapStats        `json:"gaps,omitempty"`
	GapsShift    []GapStats        `json:"gaps_timer_shift_10ms,omitempty"`
	Floor        *GapStats         `json:"sleep_floor,omitempty"`
	Throughput   *ThroughputResult `json:"throughput,omitempty"`
	Contention   *ContentionResult `json:"contention,omitempty"`
	// Outage holds the outage runs: Temporal's own backoff, full jitter,
	// and adaptive admission.
	Outage []OutageRun `json:"outage,omitempty"`
	// OutageParams is the setup of the outage runs (zero in results from
	// before it was recorded: SimParams then).
	OutageParams ContentionParams `json:"outage_params,omitzero"`
	// OutageSim is the simulation of the outage runs (runOutageSimulations):
	// one row per run, in their order, then adaptive admission with its
	// circuit breaker off.
	OutageSim []OutageSim `json:"outage_sim,omitempty"`
	// Partial is partial failure: an API with ample capacity failing a
	// share of its requests at random against the same API without
	// failures, and the contention setup, on a worker wired by package
	// host.
	Partial *PartialResult `json:"partial,omitempty"`
	// Peers is what a user would write instead: plain activities with
	// go-retryablehttp and failsafe-go (peers.go).
	Peers *PeersResult `json:"peers,omitempty"`
	// Cluster is the contention experiment on the PostgreSQL-backed
	// cluster with two worker processes, admission off and on.
	Cluster *ClusterContention `json:"cluster,omitempty"`
	// ClusterShared is the cluster section since issue 33: contention,
	// outage and throughput with the shared rate on and off on two and
	// three worker processes (ClusterShared).
	ClusterShared *ClusterShared `json:"cluster_shared,omitempty"`
	// LongRunning is the following of long-running operations: the pace
	// of the polls, and many operations waiting at once on one worker.
	LongRunning *LongRunningResult `json:"longrunning,omitempty"`
	// Webhooks is the webhook receiver: verified events per second on one
	// core, latency to the workflow, and Update against Signal.
	Webhooks *WebhooksResult `json:"webhooks,omitempty"`
	// Chaos is the chaos campaign at full size on the cluster.
	Chaos *ChaosResult `json:"chaos,omitempty"`
	// Unkeyed is the chaos campaign against APIs without keys, three
	// ways, and with keys in the body and the query.
	Unkeyed *UnkeyedResult `json:"unkeyed,omitempty"`
	// Actions is Temporal actions per call against a plain activity, and
	// the shared rate's own, idle and under load.
	Actions *ActionsResult `json:"actions,omitempty"`
	// Scale is many operations waiting at once on the PostgreSQL cluster
	// with three workers, and their calls per second against a plain
	// activity (issue 42, item 6).
	Scale *ScaleResult `json:"scale,omitempty"`
	// Fairness is Temporal's fairness keys on one task queue against a
	// task queue per origin with the shared rate (issue 42, item 5).
	Fairness *FairnessResult `json:"fairness,omitempty"`
}

// ContentionResult is the contention section: the dev-server runs and the
// simulation of the same setup.
type ContentionResult struct {
	Params ContentionParams `json:"params"`
	Runs   []ContentionRun  `json:"runs"`
	Sim    []SimSummary     `json:"sim"`
}

// Run runs the selected sections and returns what they measured.
func Run(ctx context.Context, o Options) (*Results, error) {
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	contention := defaultContention
	if o.OverheadCount <= 0 {
		o.OverheadCount = 9
	}
	if o.OverheadIters <= 0 {
		o.OverheadIters = 30000
	}
	if o.Gaps <= 0 {
		o.Gaps = 10
	}
	if o.ClusterRuns <= 0 {
		o.ClusterRuns = DefaultClusterRuns
	}
	want := map[string]bool{}
	for _, s := range o.Only {
		want[s] = true
	}
	on := func(s string) bool { return len(want) == 0 || want[s] }
	r := &Results{Started: time.Now(), Machine: readMachine(o.CLI), Sections: map[string]float64{}}
	begin := time.Now()
	section := func(name string, f func() error) error {
		if !on(name) || ctx.Err() != nil {
			return ctx.Err()
		}
		o.Logf("== %s", name)
		start := time.Now()
		err := f()
		r.Sections[name] = time.Since(start).Seconds()
		o.Logf("== %s done in %s", name, time.Since(start).Round(100*time.Millisecond))
		return err
	}
	if err := section("sim", func() error {
		r.SimParams = contention
		r.SimBrooker, r.SimCapacity = runSimulations(contention)
		r.SimAdmission = runAdmissionSimulations(contention)
		return nil
	}); err != nil {
		return r, err
	}
	if err := section("overhead", func() error {
		res, err := runOverhead(o.OverheadCount, o.OverheadIters, o.Logf)
		r.Overhead = res
		return err
	}); err != nil {
		return r, err
	}
	if want[AttemptSection] {
		if err := section(AttemptSection, func() error {
			res, err := runPeerOverhead(o.OverheadCount, o.OverheadIters, o.Logf)
			r.Peers = &PeersResult{Params: contention, Overhead: res}
			if err != nil {
				return err
			}
			o.Logf("%s", res.Summary())
			// Where Do's time goes: a profile of its loop, after the rounds.
			// (Not under go test -cpuprofile, whose profile is running.)
			if res.Profile, err = profileAttempt(4*o.OverheadIters, o.ProfileDir); err != nil {
				o.Logf("no profile of Activities.Do: %v", err)
			} else {
				o.Logf("profile of Activities.Do: %.1f µs of CPU per attempt sampled under %s", res.Profile.AttemptNs/1e3, attemptRoot)
			}
			cred, err := runCredentialOverhead(o.OverheadCount, o.OverheadIters, o.Logf)
			r.Peers.Credentials = cred
			if err == nil {
				o.Logf("%s", cred.Summary())
			}
			return err
		}); err != nil {
			return r, err
		}
	}
	var h *harness
	needDev := false
	for _, s := range Sections {
		needDev = needDev || (on(s) && sharesHarness(s))
	}
	if needDev {
		var err error
		o.Logf("starting the dev server (%s) and one worker", o.CLI)
		if h, err = startHarness(ctx, harnessOptions{CLI: o.CLI, Name: "bench", LogDir: o.LogDir, Worker: workerOptions}); err != nil {
			return r, err
		}
		defer h.Stop()
	}
	if err := section("retryafter", func() error {
		for _, c := range retryAfterCases() {
			g, err := runGap(ctx, h, c, o.Gaps, "default")
			if err != nil {
				return err
			}
			o.Logf("gap %-45s p50 %s max %s", c.Name, g.P50.Round(time.Millisecond), g.Max.Round(time.Millisecond))
			r.Gaps = append(r.Gaps, g)
		}
		fl, err := runSleepFloor(ctx, h.Target, time.Second, o.Gaps)
		if err != nil {
			return err
		}
		r.Floor = &fl
		o.Logf("gap %-45s p50 %s max %s", fl.Name, fl.P50.Round(time.Millisecond), fl.Max.Round(time.Millisecond))
		hs, err := startHarness(ctx, harnessOptions{CLI: o.CLI, Name: "timershift", LogDir: o.LogDir, Worker: workerOptions, ServerArgs: timerShiftArgs})
		if err != nil {
			return err
		}
		defer hs.Stop()
		for _, c := range retryAfterCases() {
			g, err := runGap(ctx, hs, c, max(o.Gaps/2, 3), "shift")
			if err != nil {
				return err
			}
			o.Logf("gap (timer shift 10 ms) %-45s p50 %s max %s", c.Name, g.P50.Round(time.Millisecond), g.Max.Round(time.Millisecond))
			r.GapsShift = append(r.GapsShift, g)
		}
		return hs.Stop()
	}); err != nil {
		return r, err
	}
	if err := section("throughput", func() error {
		res, err := runThroughput(ctx, h, throughputOptions{Logf: o.Logf})
		r.Throughput = &res
		return err
	}); err != nil {
		return r, err
	}
	if err := section("contention", func() error {
		cr := &ContentionResult{Params: contention}
		r.Contention = cr
		tag := fmt.Sprint(time.Now().Unix())
		for _, j := range strategies {
			run, err := runContention(ctx, h, contention, j, tag)
			if err != nil {
				return fmt.Errorf("contention, %s: %w", j, err)
			}
			o.Logf("contention %-28s %4d requests, last success at %6.1f s, %d failed, first attempts spread over %s",
				strategyName(j), run.Requests, run.ToLastSuccess.Seconds(), run.Failed, run.FirstSpread.Round(time.Millisecond))
			cr.Runs = append(cr.Runs, run)
		}
		run, err := withAdmission(h, "contention-"+tag, func(ha *harness) (ContentionRun, error) {
			return runContention(ctx, ha, contention, workflows.JitterFull, tag+"-admission")
		})
		if err != nil {
			return fmt.Errorf("contention, adaptive admission: %w", err)
		}
		run.Admission = true
		o.Logf("contention %-28s %4d requests, last success at %6.1f s, %d failed, first attempts spread over %s",
			runName(run.Strategy, true), run.Requests, run.ToLastSuccess.Seconds(), run.Failed, run.FirstSpread.Round(time.Millisecond))
		cr.Runs = append(cr.Runs, run)
		for _, j := range strategies {
			cr.Sim = append(cr.Sim, simulateMean(contention.temporalSimConfig(contention.Clients, j, 1), 100))
		}
		cr.Sim = append(cr.Sim, simulateMean(contention.admissionSimConfig(contention.Clients, 1, 1), 100))
		return nil
	}); err != nil {
		return r, err
	}
	if err := section("outage", func() error {
		r.OutageParams = contention
		r.OutageSim = runOutageSimulations(contention, defaultOutage, 100)
		tag := fmt.Sprint(time.Now().Unix())
		for _, c := range []struct {
			j   workflows.Jitter
			adm bool
		}{{backoff.JitterNone, false}, {workflows.JitterFull, false}, {workflows.JitterFull, true}} {
			do := func(hh *harness) (OutageRun, error) {
				return runOutage(ctx, hh, contention, c.j, defaultOutage, fmt.Sprintf("%s-%s-%v", tag, c.j, c.adm))
			}
			var run OutageRun
			var err error
			if c.adm {
				run, err = withAdmission(h, "outage-"+tag, do)
			} else {
				run, err = do(h)
			}
			if err != nil {
				return fmt.Errorf("outage, %s: %w", runName(c.j, c.adm), err)
			}
			run.Admission, run.Breaker = c.adm, c.adm
			o.Logf("outage %-28s %4d requests during the %s outage, %4d after, last success %.1f s after the recovery, %d failed",
				run.name(), run.DuringOutage, defaultOutage, run.After, run.RecoveryToLast.Seconds(), run.Failed)
			r.Outage = append(r.Outage, run)
		}
		return nil
	}); err != nil {
		return r, err
	}
	if err := section(PartialSection, func() error {
		res, err := runPartial(ctx, h, o.Partial.withDefaults(), o.LogDir, o.Logf)
		r.Partial = res
		return err
	}); err != nil {
		return r, err
	}
	if err := section("peers", func() error {
		pr := &PeersResult{Params: contention}
		r.Peers = pr
		res, err := runPeerOverhead(o.OverheadCount, o.OverheadIters, o.Logf)
		pr.Overhead = res
		if err != nil {
			return fmt.Errorf("peers, overhead: %w", err)
		}
		o.Logf("peers %s", res.Summary())
		tag := fmt.Sprint(time.Now().Unix())
		for _, p := range peers {
			run, err := runContentionLoad(ctx, h, contention, peerLoad(h, p.Activity), tag)
			run.Peer = p.Activity
			if err != nil {
				return fmt.Errorf("peers, contention, %s: %w", p.Name, err)
			}
			o.Logf("contention %-28s %4d requests, last success at %6.1f s, %d failed, first attempts spread over %s",
				p.Name, run.Requests, run.ToLastSuccess.Seconds(), run.Failed, run.FirstSpread.Round(time.Millisecond))
			pr.Contention = append(pr.Contention, run)
		}
		return nil
	}); err != nil {
		return r, err
	}
	if err := section("longrunning", func() error {
		res, err := runLongRunning(ctx, h, defaultLongRunning, o.LogDir, o.Logf)
		r.LongRunning = res
		return err
	}); err != nil {
		return r, err
	}
	if err := section("webhooks", func() error {
		res, err := runWebhooks(ctx, h, defaultWebhooks, o.LogDir, o.Logf)
		r.Webhooks = res
		return err
	}); err != nil {
		return r, err
	}
	if h != nil {
		if err := h.Stop(); err != nil {
			o.Logf("stopping the harness: %v", err)
		}
	}
	// The actions and fairness sections and the cluster run after the dev server has
	// stopped, so that they do not share the CPUs with it.
	if err := section(ActionsSection, func() error {
		res, err := runActions(ctx, o.CLI, o.LogDir, o.Actions.withDefaults(), o.Logf)
		r.Actions = res
		return err
	}); err != nil {
		return r, err
	}
	if err := section(FairnessSection, func() error {
		res, err := runFairness(ctx, o.CLI, o.LogDir, defaultFairness, o.Logf)
		r.Fairness = res
		return err
	}); err != nil {
		return r, err
	}
	if err := section("cluster", func() error {
		res, err := runClusterShared(ctx, contention, o.ClusterRuns, o.LogDir, o.Logf)
		r.ClusterShared = res
		return err
	}); err != nil {
		return r, err
	}
	if err := section(ScaleSection, func() error {
		res, err := runScale(ctx, o.Scale.withDefaults(), o.LogDir, o.Logf)
		r.Scale = res
		return err
	}); err != nil {
		return r, err
	}
	if err := section("chaos", func() error {
		res, err := runChaos(ctx, defaultChaos, o.LogDir, o.Logf)
		r.Chaos = res
		return err
	}); err != nil {
		return r, err
	}
	if err := section(UnkeyedSection, func() error {
		p := defaultUnkeyed
		if o.UnkeyedOperations > 0 {
			p.Operations, p.KeyPlaceOperations = o.UnkeyedOperations, max(o.UnkeyedOperations/5, 1)
		}
		res, err := runUnkeyed(ctx, p, o.LogDir, o.Logf)
		r.Unkeyed = res
		return err
	}); err != nil {
		return r, err
	}
	r.Total = time.Since(begin)
	r.Machine.LoadAfter = loadAvg()
	return r, nil
}

// withAdmission runs f on a fresh worker with adaptive admission on, on its
// own task queue named after name, and stops the worker after.
func withAdmission[T any](h *harness, name string, f func(*harness) (T, error)) (T, error) {
	ha, stop, err := h.admissionWorker(h.TaskQueue + "-admission-" + name)
	if err != nil {
		var zero T
		return zero, err
	}
	defer stop()
	return f(ha)
}

// simClients are the client counts of the simulation curves.
var simClients = []int{10, 100, 1000}

// runSimulations runs Brooker's OCC model with his parameters and the
// capacity model of p, at each of simClients, for every strategy: the mean
// of 100 seeded runs (20 at 1000 clients).
func runSimulations(p ContentionParams) (brooker, capacity []SimSummary) {
	for _, n := range simClients {
		runs := 100
		if n >= 1000 {
			runs = 20
		}
		for _, j := range strategies {
			brooker = append(brooker, simulateMean(brookerConfig(n, j, 1), runs))
			capacity = append(capacity, simulateMean(p.simConfig(n, j, 1), runs))
		}
	}
	return brooker, capacity
}

// runAdmissionSimulations runs the capacity model of p with what the dev
// server adds (temporalSimConfig), at each of simClients: Temporal's own
// backoff, full jitter, adaptive admission on one and on two workers
// (each attempt on a worker drawn at random, as matching dispatches), and
// one shared rate (simShared, the governor's Decider) on two, three and
// eight workers. Mean
// of 100 seeded runs (20 at 1000 clients).
func runAdmissionSimulations(p ContentionParams) []SimSummary {
	var out []SimSummary
	for _, n := range simClients {
		runs := 100
		if n >= 1000 {
			runs = 20
		}
		out = append(out,
			simulateMean(p.temporalSimConfig(n, backoff.JitterNone, 1), runs),
			simulateMean(p.temporalSimConfig(n, workflows.JitterFull, 1), runs),
			simulateMean(p.admissionSimConfig(n, 1, 1), runs),
			simulateMean(p.admissionSimConfig(n, 2, 1), runs),
			simulateMean(p.sharedSimConfig(n, 2, 1), runs),
			simulateMean(p.sharedSimConfig(n, 3, 1), runs),
			simulateMean(p.sharedSimConfig(n, 8, 1), runs))
	}
	return out
}

func minOf(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	return s[0]
}

// maxOf is the largest of xs, 0 for none.
func maxOf(xs []float64) float64 {
	m := 0.0
	for i, x := range xs {
		if i == 0 || x > m {
			m = x
		}
	}
	return m
}

// Machine describes where a run ran.
type Machine struct {
	CPU        string  `json:"cpu"`
	CPUs       int     `json:"cpus"`
	MemGiB     float64 `json:"mem_gib"`
	Kernel     string  `json:"kernel"`
	Go         string  `json:"go"`
	CLI        string  `json:"temporal_cli"`
	LoadBefore string  `json:"load_before"`
	LoadAfter  string  `json:"load_after"`
}

// readMachine reads the CPU, memory, kernel, Go and CLI versions and the load average.
func readMachine(cli string) Machine {
	m := Machine{CPUs: runtime.NumCPU(), Go: runtime.Version(), LoadBefore: loadAvg()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb float64
		for _, line := range strings.Split(string(b), "\n") {
			if _, err := fmt.Sscanf(line, "MemTotal: %f kB", &kb); err == nil {
				m.MemGiB = kb / (1 << 20)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = "Linux " + strings.TrimSpace(string(b))
	}
	if cli != "" {
		if out, err := exec.Command(cli, "--version").Output(); err == nil {
			m.CLI = strings.TrimSpace(string(out))
		}
		// A CLI built from source says "0.0.0-DEV": name the pinned module too.
		if root, err := itest.RepoRoot(); err == nil {
			if b, err := os.ReadFile(filepath.Join(root, "tools", "go.mod")); err == nil {
				for _, line := range strings.Split(string(b), "\n") {
					if f := strings.Fields(line); len(f) >= 2 && f[0] == "github.com/temporalio/cli" {
						m.CLI += " built from github.com/temporalio/cli " + f[1]
					}
				}
			}
		}
	}
	return m
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}
