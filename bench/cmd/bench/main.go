// Command bench runs the performance measurements of internal/bench and writes
// RESULTS.md (claims as ratios against baselines measured in the same run,
// then every raw number), results.json, contention.svg and outage.svg to -out:
//
//  1. contention after Brooker's "Exponential Backoff And Jitter": 100
//     workflows against a capacity-limited reference server on a Temporal dev
//     server, for Temporal's own backoff and the three jitter strategies,
//     plus an in-process simulation at 10, 100 and 1000 clients; and the
//     same workflows against an API that is down for 60 s, then recovers
//     (the outage section, outage.svg);
//
//  2. the per-attempt overhead of Activities.Do against raw net/http;
//
//  3. the spacing of retries after Retry-After: 1 (and shorter delays)
//     against a time.Sleep loop;
//
//  4. workflows per second of the ready workflow against a minimal one;
//
//  5. what a user would write instead ("peers"): plain activities retrying
//     with go-retryablehttp and with failsafe-go, their per-attempt overhead
//     beside Activities.Do's and their run of the contention experiment;
//
//  6. long-running operations ("longrunning"): the gap between a status
//     monitor's Retry-After (or the poll backoff) and the next poll, polls
//     per operation, and 1000 operations waiting at once on one worker
//     (goroutines, heap, RSS and CPU against the worker idle and holding as
//     many workflows waiting on a timer); its reference servers are this
//     command started again (bench.ServeReferenceChild);
//
//  7. webhooks ("webhooks"): the receiver's verified events per second on
//     one core per scheme (Temporal stubbed out) against a bare body read
//     and HMAC-SHA256 alone; its latency to workflows awaiting a webhook on
//     the dev server, sequential and 8 at once; and Update against Signal
//     (and SignalWithStart) to a running workflow: latency, throughput and
//     history events per delivery and per duplicate;
//
//  8. Temporal actions per call ("actions"): the server's own action
//     counter (a dev server of its own, --metrics-port) and a Temporal
//     Cloud estimate from the histories, for the ready workflow on a
//     worker wired by package host against a plain activity (a first try,
//     retries, a followed 202, a webhook wait, a lookup-reconciled retry),
//     and the shared rate's own actions idle and under load; writes
//     actions.svg (about 4.5 minutes:
//     go run ./cmd/bench -only actions -out results/actions);
//
//  9. partial failure ("partial"): 400 workflows at once against an API
//     with ample capacity that answers 30 % of requests 503 at random,
//     against the same API without failures (three rounds, the worst
//     reported), on a worker wired by package host on its defaults:
//     requests per success, throughput, attempts held by admission and
//     whether a circuit breaker opened; then the contention setup (429 at
//     capacity) on the same kind of worker; writes partial.svg (about 3.5
//     minutes: cd bench && GOWORK=off go run ./cmd/bench -only partial -out results/partial).
//
//  10. Temporal's fairness keys ("fairness", issue 42 item 5): two origins
//     of different capacities (6/s and 2/s), 50 workflows each at once,
//     on a dev server of its own with matching.enableFairness and one
//     partition per task queue: a task queue per origin with the shared
//     rate (today) against one task queue with a fairness key per origin
//     and one default per-key rate (at either capacity, and weighted in
//     their ratio); then origin A down for 30 s, both ways; writes
//     fairness.svg and fairness-outage.svg (about 4 minutes:
//     GOWORK=off go run ./cmd/bench -only fairness -out results/fairness);
//
//  11. scale ("scale", issue 42 item 6): on the PostgreSQL-backed cluster
//     with three worker processes (this command started again as a worker:
//     the worker binary's wiring by package host, webhook receiver and
//     metrics on, and the plain baseline registered beside the package),
//     the uncontended calls per second of the ready workflow against a
//     plain activity doing the same POST (7 interleaved rounds of 200,
//     median); then -scale-ops operations (default 10000) started at once,
//     half following a 202 (Retry-After 120 s), half awaiting a signed
//     webhook: the workers' RSS, heap and goroutines per waiting operation
//     over the idle workers, temporal-server's and PostgreSQL's CPU, the
//     time to start them all and to complete after their operations end,
//     every workflow's status and the API's records per key; writes
//     scale.svg and scale-throughput.svg (about 20 minutes at 10000 on 2
//     CPUs, about 6 at 300: cd bench && GOWORK=off go run ./cmd/bench
//     -only scale -out results/scale).
//
//     cd bench && go run ./cmd/bench -out results
//
// Claims 2b and 2c alone (one attempt of Activities.Do against
// go-retryablehttp and failsafe-go, each ÷ the raw POST in the same
// interleaved rounds; then Do with OAuth 2.0 ÷ Do with a static bearer in
// rounds of their own; a few minutes, no dev server). It also writes
// do.cpu.pprof, a CPU profile of Do's loop, and the heaviest functions of
// Do's own work into RESULTS.md; read the whole profile with
// go tool pprof -top -cum -show_from=requestActivity results/attempt/do.cpu.pprof:
//
//	cd bench && GOWORK=off go run ./cmd/bench -only attempt -overhead-count 9 -out results/attempt
//
// The cluster section (-only cluster; PostgreSQL-backed temporal-server and
// worker processes) writes cluster-contention.svg and cluster-outage.svg
// too; -cluster-runs 1 takes one run per figure instead of three, for a
// quick check: 6 minutes on 2 shared CPUs, against about 14 at three
// (the outage runs take 1.5 minutes each).
//
// The unkeyed section (-only unkeyed; the chaos campaign against APIs
// without keys: plain retries, a lookup, at most once with an operator
// using the Temporal CLI; then keys in the body and the query) writes
// its table into RESULTS.md; -unkeyed-ops sets each way's size (1000:
// about 16.5 minutes on 2 shared CPUs, 4.5 per way and 1.3 per key
// place).
//
//	cd bench && GOWORK=off go run ./cmd/bench -only unkeyed -out results/unkeyed
//
// It runs in the bench module (bench/go.mod), whose go-retryablehttp and
// failsafe-go the library does not need. It uses <repo>/bin/temporal
// (building it from tools/go.mod when missing) or -cli.
// The whole run takes about 6–8 minutes on 2 CPUs, plus about 13 for the
// peers section (its two contention runs wait up to 30 s between retries),
// about 3.5 for longrunning and 1.5 for webhooks.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/bench/internal/bench"
)

func main() {
	if bench.ScaleWorkerChild() {
		// A worker process of the scale section.
		if err := bench.ServeScaleWorker(os.Args[1:]); err != nil {
			fmt.Fprintln(os.Stderr, "bench scale worker:", err)
			os.Exit(1)
		}
		return
	}
	if bench.ReferenceChild() {
		// The longrunning section's reference server, in a process of its own.
		if err := bench.ServeReferenceChild(); err != nil {
			fmt.Fprintln(os.Stderr, "bench reference server:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run() error {
	out := flag.String("out", "results", "directory for RESULTS.md, results.json, contention.svg and outage.svg")
	cli := flag.String("cli", "", "Temporal CLI binary (default: bin/temporal, built from tools/go.mod if missing)")
	only := flag.String("only", "", "comma-separated sections to run, of "+strings.Join(bench.Sections, ",")+" (or "+bench.AttemptSection+": section 5's per-attempt rows alone)")
	gaps := flag.Int("gaps", 10, "retries measured per retry-spacing case")
	count := flag.Int("overhead-count", 9, "rounds of the overhead benchmarks")
	iters := flag.Int("overhead-iters", 30000, "iterations per overhead benchmark run")
	clusterRuns := flag.Int("cluster-runs", bench.DefaultClusterRuns, "consecutive runs of each shared-rate figure of the cluster section, the worst reported (1 for a quick check)")
	unkeyedOps := flag.Int("unkeyed-ops", 1000, "operations of each way's campaign of the unkeyed section (the key places' take a fifth)")
	scaleOps := flag.Int("scale-ops", 0, "operations waiting at once in the scale section (default 10000; half follow a 202, half await a webhook)")
	keepLogs := flag.Bool("keep-logs", false, "keep the dev server and worker logs (their directory is printed)")
	render := flag.Bool("render", false, "measure nothing: rewrite RESULTS.md and the plots from -out's results.json")
	flag.Parse()
	log.SetFlags(log.Ltime)
	if *render {
		b, err := os.ReadFile(filepath.Join(*out, "results.json"))
		if err != nil {
			return err
		}
		var res bench.Results
		if err := json.Unmarshal(b, &res); err != nil {
			return fmt.Errorf("%s: %w", filepath.Join(*out, "results.json"), err)
		}
		return write(*out, &res, false)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var sections []string
	for s := range strings.SplitSeq(*only, ",") {
		if s = strings.TrimSpace(s); s != "" {
			sections = append(sections, s)
		}
	}
	for _, s := range sections {
		if !slices.Contains(bench.Sections, s) && s != bench.AttemptSection {
			return fmt.Errorf("unknown section %q: use %s", s, strings.Join(bench.Sections, ","))
		}
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	logDir, err := os.MkdirTemp("", "idemhttp-bench-")
	if err != nil {
		return err
	}
	needCLI := len(sections) == 0
	for _, s := range sections {
		needCLI = needCLI || bench.NeedsDevServer(s)
	}
	var cliPath string
	if needCLI {
		if cliPath, err = bench.EnsureCLI(ctx, *cli, log.Printf); err != nil {
			return err
		}
	}
	start := time.Now()
	res, err := bench.Run(ctx, bench.Options{
		CLI: cliPath, LogDir: logDir, Only: sections, Gaps: *gaps, OverheadCount: *count, OverheadIters: *iters, ClusterRuns: *clusterRuns, UnkeyedOperations: *unkeyedOps, Scale: bench.ScaleParams{Operations: *scaleOps}, ProfileDir: *out, Logf: log.Printf,
	})
	if err != nil {
		log.Printf("logs kept in %s", logDir)
		return err
	}
	if *keepLogs {
		log.Printf("logs kept in %s", logDir)
	} else {
		_ = os.RemoveAll(logDir)
	}
	res.Command = strings.TrimSpace("cd bench && go run ./cmd/bench " + strings.Join(os.Args[1:], " "))
	if err := write(*out, res, true); err != nil {
		return err
	}
	log.Printf("wrote %s in %s", *out, time.Since(start).Round(time.Second))
	return nil
}

// write writes RESULTS.md, contention.svg, outage.svg, the cluster
// section's plots and, if withJSON, results.json to out.
func write(out string, res *bench.Results, withJSON bool) error {
	if err := writeFile(filepath.Join(out, "RESULTS.md"), func(f *os.File) error {
		return bench.WriteMarkdown(f, res, res.Command, "contention.svg")
	}); err != nil {
		return err
	}
	if withJSON {
		if err := writeFile(filepath.Join(out, "results.json"), func(f *os.File) error {
			enc := json.NewEncoder(f)
			enc.SetIndent("", " ")
			return enc.Encode(res)
		}); err != nil {
			return err
		}
	}
	if c := res.Contention; c != nil && len(c.Runs) >= 2 {
		if err := writeFile(filepath.Join(out, "contention.svg"), func(f *os.File) error {
			return bench.WriteContentionSVG(f, res)
		}); err != nil {
			return err
		}
	}
	if len(res.Outage) > 0 {
		if err := writeFile(filepath.Join(out, bench.OutageSVG), func(f *os.File) error {
			return bench.WriteOutageSVG(f, res)
		}); err != nil {
			return err
		}
	}
	if res.Actions != nil && len(res.Actions.Scenarios) > 0 {
		if err := writeFile(filepath.Join(out, bench.ActionsSVG), func(f *os.File) error {
			return bench.WriteActionsSVG(f, res)
		}); err != nil {
			return err
		}
	}
	if res.Partial != nil && len(res.Partial.Rounds) > 0 {
		if err := writeFile(filepath.Join(out, bench.PartialSVG), func(f *os.File) error {
			return bench.WritePartialSVG(f, res)
		}); err != nil {
			return err
		}
	}
	if res.Chaos != nil && res.Chaos.Campaign != nil {
		if err := writeFile(filepath.Join(out, bench.ChaosSVG), func(f *os.File) error {
			return bench.WriteChaosSVG(f, res)
		}); err != nil {
			return err
		}
	}
	if f := res.Fairness; f != nil {
		for _, plot := range []struct {
			name string
			ok   bool
			draw func(io.Writer, *bench.Results) error
		}{{bench.FairnessSVG, f.HasContention(), bench.WriteFairnessSVG}, {bench.FairnessOutageSVG, f.HasOutage(), bench.WriteFairnessOutageSVG}} {
			if !plot.ok {
				continue
			}
			if err := writeFile(filepath.Join(out, plot.name), func(f *os.File) error { return plot.draw(f, res) }); err != nil {
				return err
			}
		}
	}
	if sc := res.Scale; sc != nil {
		for _, plot := range []struct {
			name string
			ok   bool
			draw func(io.Writer, *bench.Results) error
		}{
			{bench.ScaleSVG, sc.Waiting != nil && len(sc.Waiting.Samples) >= 2, bench.WriteScaleSVG},
			{bench.ScaleThroughputSVG, sc.Throughput != nil && len(sc.Throughput.Rounds) > 0, bench.WriteScaleThroughputSVG},
		} {
			if !plot.ok {
				continue
			}
			if err := writeFile(filepath.Join(out, plot.name), func(f *os.File) error { return plot.draw(f, res) }); err != nil {
				return err
			}
		}
	}
	if cs := res.ClusterShared; cs != nil {
		for _, plot := range []struct {
			name string
			ok   bool
			draw func(io.Writer, *bench.Results) error
		}{
			{bench.ClusterContentionSVG, len(cs.Contention) > 0, bench.WriteClusterContentionSVG},
			{bench.ClusterOutageSVG, len(cs.Outage) > 0, bench.WriteClusterOutageSVG},
		} {
			if !plot.ok {
				continue
			}
			if err := writeFile(filepath.Join(out, plot.name), func(f *os.File) error { return plot.draw(f, res) }); err != nil {
				return err
			}
		}
	}
	return nil
}

func writeFile(path string, f func(*os.File) error) error {
	file, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := f(file); err != nil {
		file.Close()
		return err
	}
	return file.Close()
}
