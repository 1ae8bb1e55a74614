package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"go.temporal.io/api/serviceerror"

	"github.com/idemhttp/temporal-idempotent-http/harness/itest"
	"github.com/idemhttp/temporal-idempotent-http/internal/governor"
	"github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// PartialSection is the section of partial failure (-only partial): an
// API with ample capacity that fails a share of its requests at random,
// against the same API without failures, and the contention setup's API
// at capacity, on a worker wired by package host.
const PartialSection = "partial"

// PartialSVG is the partial section's plot, next to RESULTS.md.
const PartialSVG = "partial.svg"

// PartialParams sizes the partial section.
type PartialParams struct {
	// Clients workflows are started at once in each run.
	Clients int `json:"clients"`
	// FailureRate of the requests are answered FailureStatus at random
	// (testsuite.Options.FailureRate), before the key is looked at.
	FailureRate   float64 `json:"failure_rate"`
	FailureStatus int     `json:"failure_status"`
	// MaximumAttempts is each call's attempt budget. The ready workflow's
	// default (5) fails a call whose five attempts all fail: 0.3^5 = 0.24 %
	// of them, one run in two at 200; the claims are per success, so the
	// budget is raised (0.3^20: none fails) and the rest left at its
	// defaults.
	MaximumAttempts int32 `json:"maximum_attempts"`
	// Rounds is how many times the pair (no failures, then failures) runs,
	// each run on a fresh worker; the claims take the worst round.
	Rounds int `json:"rounds"`
}

// defaultPartial is the section of make bench: about 3.5 minutes. 400
// workflows rather than 200: a run's makespan then holds the tail of
// retries and of tasks that waited in matching (seconds either way) a
// smaller part of the time.
var defaultPartial = PartialParams{Clients: 400, FailureRate: 0.3, FailureStatus: http.StatusServiceUnavailable, MaximumAttempts: 20, Rounds: 3}

// withDefaults fills p's zero fields from defaultPartial.
func (p PartialParams) withDefaults() PartialParams {
	d := defaultPartial
	if p.Clients <= 0 {
		p.Clients = d.Clients
	}
	if p.FailureRate <= 0 {
		p.FailureRate = d.FailureRate
	}
	if p.FailureStatus == 0 {
		p.FailureStatus = d.FailureStatus
	}
	if p.MaximumAttempts <= 0 {
		p.MaximumAttempts = d.MaximumAttempts
	}
	if p.Rounds <= 0 {
		p.Rounds = d.Rounds
	}
	return p
}

// floor is the fewest requests per success the failures allow: 1 ÷ (1 −
// FailureRate).
func (p PartialParams) floor() float64 { return 1 / (1 - p.FailureRate) }

// PartialResult is the partial section: Rounds pairs of runs, and the
// API at capacity (the contention setup) on the same kind of worker.
type PartialResult struct {
	Params PartialParams  `json:"params"`
	Rounds []PartialRound `json:"rounds"`
	// Throttled is the contention setup (ThrottledParams: an API that
	// accepts Capacity per Window and answers the rest 429) on a fresh
	// host worker; nil if it did not run.
	Throttled       *PartialRun      `json:"throttled,omitempty"`
	ThrottledParams ContentionParams `json:"throttled_params"`
}

// PartialRound is one round: the API without failures (Clean), then with
// them (Failing), each on a fresh worker.
type PartialRound struct {
	Clean   PartialRun `json:"clean"`
	Failing PartialRun `json:"failing"`
}

// PartialRun is one run: the server's side (ContentionRun) and the
// worker's own metrics.
type PartialRun struct {
	ContentionRun
	// Failures are the answers of the API's random failures.
	Failures int `json:"failures"`
	// Attempts are the activity's attempts on the worker
	// (idempotent_http_attempts_total); Held those admission ended
	// without sending (idempotent_http_admission_delays_total), by reason:
	// rate, retry_budget, circuit_open.
	Attempts float64            `json:"attempts"`
	Held     map[string]float64 `json:"held,omitempty"`
	// Waits are the waits for admission spent inside an attempt, and
	// WaitSeconds their sum (idempotent_http_admission_wait_seconds).
	Waits       float64 `json:"waits"`
	WaitSeconds float64 `json:"wait_seconds"`
	// BreakerSeenOpen: some scrape of the worker's metrics during the run
	// (every 200 ms) showed its breaker open or half open
	// (idempotent_http_circuit_open 1); Scrapes counts them.
	BreakerSeenOpen bool `json:"breaker_seen_open"`
	Scrapes         int  `json:"scrapes"`
	// GovernorOpened is how often the cluster's breaker (the governor of
	// the worker's origin queue) opened; 0 when no governor started.
	GovernorOpened int `json:"governor_opened"`
}

// Makespan is from the first start call to the last success.
func (r PartialRun) Makespan() time.Duration { return r.FirstRequest + r.ToLastSuccess }

// Throughput is successes per second over the makespan.
func (r PartialRun) Throughput() float64 {
	if r.Makespan() <= 0 {
		return 0
	}
	return float64(r.Successes) / r.Makespan().Seconds()
}

// PerSuccess is the API's requests per success.
func (r PartialRun) PerSuccess() float64 {
	return float64(r.Requests) / float64(max(r.Successes, 1))
}

// HeldTotal is every attempt admission held.
func (r PartialRun) HeldTotal() float64 {
	n := 0.0
	for _, v := range r.Held {
		n += v
	}
	return n
}

// BreakerOpened: the worker's breaker (an attempt held for it, or a
// scrape showing it open) or the cluster's opened.
func (r PartialRun) BreakerOpened() bool {
	return r.BreakerSeenOpen || r.Held[reasonCircuitOpen] > 0 || r.GovernorOpened > 0
}

// reasonCircuitOpen is the admission delays' reason label of an open
// breaker.
const reasonCircuitOpen = "circuit_open"

// runPartial runs the section on h's dev server and target: Rounds pairs
// of runs, then the contention setup, each on a fresh host worker (its
// task queue, governor and breaker its own).
func runPartial(ctx context.Context, h *harness, p PartialParams, logDir string, logf func(string, ...any)) (*PartialResult, error) {
	res := &PartialResult{Params: p, ThrottledParams: defaultContention}
	// The workflows are started by the harness's client, not the worker's:
	// eager start does not apply.
	res.ThrottledParams.EagerStart = false
	workerLog, err := os.Create(filepath.Join(logDir, "partial-workers.log"))
	if err != nil {
		return res, err
	}
	defer workerLog.Close()
	tag := fmt.Sprint(time.Now().Unix())
	// ready is the ready workflow on its defaults but for the attempt
	// budget.
	ready := ContentionParams{Clients: p.Clients, MaximumAttempts: p.MaximumAttempts}
	type pairRun struct {
		name string
		api  testsuite.Options
		run  *PartialRun
	}
	for i := range p.Rounds {
		var round PartialRound
		pair := []pairRun{
			{"clean", testsuite.Options{}, &round.Clean},
			{"failing", testsuite.Options{FailureRate: p.FailureRate, FailureStatus: p.FailureStatus}, &round.Failing},
		}
		// Every other round runs the failing API first: a drift of the
		// machine's other load then weighs on both sides alike.
		if i%2 == 1 {
			pair[0], pair[1] = pair[1], pair[0]
		}
		for _, c := range pair {
			name := fmt.Sprintf("partial-%s-%s-%d", tag, c.name, i+1)
			run, err := runPartialLoad(ctx, h, workerLog, name, func(hh *harness) (ContentionRun, error) {
				return runLoad(ctx, hh, ready, c.api, readyLoad(hh, ready, workflows.JitterFull), name)
			})
			*c.run = run
			if err != nil {
				return res, fmt.Errorf("partial, round %d, %s: %w", i+1, c.name, err)
			}
			logPartialRun(logf, fmt.Sprintf("round %d, %s", i+1, c.name), run)
		}
		res.Rounds = append(res.Rounds, round)
	}
	name := fmt.Sprintf("partial-%s-throttled", tag)
	run, err := runPartialLoad(ctx, h, workerLog, name, func(hh *harness) (ContentionRun, error) {
		return runContentionLoad(ctx, hh, res.ThrottledParams, readyLoad(hh, res.ThrottledParams, workflows.JitterFull), name)
	})
	res.Throttled = &run
	if err != nil {
		return res, fmt.Errorf("partial, 429 at capacity: %w", err)
	}
	logPartialRun(logf, "429 at capacity", run)
	return res, nil
}

func logPartialRun(logf func(string, ...any), what string, r PartialRun) {
	logf("partial %-18s %4d requests (%d failures) for %d successes, %.2f per success; %.1f successes/s over %.1f s; %d failed; %g attempts, held %v, %g waits inside attempts (%.1f s); breaker seen open %v, governor opened %d",
		what, r.Requests, r.Failures, r.Successes, r.PerSuccess(), r.Throughput(), r.Makespan().Seconds(), r.Failed, r.Attempts, r.Held, r.Waits, r.WaitSeconds, r.BreakerSeenOpen, r.GovernorOpened)
}

// runPartialLoad starts a host worker on task queue name, its metrics
// served, runs do against it while scraping them, and reads the worker's
// metrics and its governor's breaker after.
func runPartialLoad(ctx context.Context, h *harness, log io.Writer, name string, do func(*harness) (ContentionRun, error)) (PartialRun, error) {
	var run PartialRun
	port, err := itest.FreePort()
	if err != nil {
		return run, err
	}
	metrics := "http://" + itest.HostPort(port) + "/metrics"
	hw, err := startHostWorker(h.Dev.HostPort, log, "--allow-origin", h.Target.URL, "--task-queue", name, "--identity", name+"-worker",
		"--log-level", "error", "--metrics-addr", itest.HostPort(port))
	if err != nil {
		return run, err
	}
	defer hw.stop()

	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			m, err := scrapeWorker(ctx, metrics)
			if err != nil {
				continue
			}
			run.Scrapes++
			run.BreakerSeenOpen = run.BreakerSeenOpen || m.CircuitOpen
		}
	})
	cr, err := do(&harness{Dev: h.Dev, Client: h.Client, Target: h.Target, TaskQueue: name})
	close(done)
	wg.Wait()
	run.ContentionRun = cr
	for _, l := range cr.Log {
		if l.Status >= 500 {
			run.Failures++
		}
	}
	if err != nil {
		return run, err
	}
	m, err := scrapeWorker(ctx, metrics)
	if err != nil {
		return run, fmt.Errorf("the worker's metrics: %w", err)
	}
	run.Attempts, run.Held, run.Waits, run.WaitSeconds = m.Attempts, m.Held, m.Waits, m.WaitSeconds
	run.BreakerSeenOpen = run.BreakerSeenOpen || m.CircuitOpen
	run.GovernorOpened, err = governorOpened(ctx, h, name)
	return run, err
}

// workerMetrics are what runPartialLoad reads of a worker's /metrics.
type workerMetrics struct {
	Attempts           float64
	Held               map[string]float64
	Waits, WaitSeconds float64
	CircuitOpen        bool
}

// scrapeWorker reads url, a host worker's /metrics.
func scrapeWorker(ctx context.Context, url string) (workerMetrics, error) {
	fams, err := itest.ScrapeMetrics(ctx, url)
	if err != nil {
		return workerMetrics{}, err
	}
	return workerMetricsOf(fams), nil
}

// parseWorkerMetrics reads the activity's attempts, admission delays and
// breaker gauges from Prometheus' text format (every origin summed).
func parseWorkerMetrics(b []byte) (workerMetrics, error) {
	fams, err := itest.ParseMetrics(b)
	if err != nil {
		return workerMetrics{}, err
	}
	return workerMetricsOf(fams), nil
}

// workerMetricsOf reads workerMetrics from a scrape's families.
func workerMetricsOf(fams map[string]*dto.MetricFamily) workerMetrics {
	m := workerMetrics{Held: map[string]float64{}}
	for _, s := range fams["idempotent_http_attempts_total"].GetMetric() {
		m.Attempts += s.GetCounter().GetValue()
	}
	for _, s := range fams["idempotent_http_admission_delays_total"].GetMetric() {
		for _, l := range s.GetLabel() {
			if l.GetName() == "reason" {
				m.Held[l.GetValue()] += s.GetCounter().GetValue()
			}
		}
	}
	for _, s := range fams["idempotent_http_admission_wait_seconds"].GetMetric() {
		m.Waits += float64(s.GetHistogram().GetSampleCount())
		m.WaitSeconds += s.GetHistogram().GetSampleSum()
	}
	for _, s := range fams["idempotent_http_circuit_open"].GetMetric() {
		m.CircuitOpen = m.CircuitOpen || s.GetGauge().GetValue() > 0
	}
	if len(m.Held) == 0 {
		m.Held = nil
	}
	return m
}

// governorOpened asks the governor of tq's origin queue how often its
// breaker opened: 0 when none started (no worker reported a throttle or
// a failure).
// The governor is terminated after: it would outlive its run's
// worker, its timers firing on the dev server during the next runs.
func governorOpened(ctx context.Context, h *harness, tq string) (int, error) {
	q, err := workflows.OriginTaskQueue(tq, h.Target.URL)
	if err != nil {
		return 0, err
	}
	id := governor.WorkflowID(q)
	v, err := h.Client.QueryWorkflow(ctx, id, "", governor.QueryName)
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("querying the governor of %s: %w", q, err)
	}
	var st governor.State
	if err := v.Get(&st); err != nil {
		return 0, err
	}
	if err := h.Client.TerminateWorkflow(ctx, id, "", "bench: the run is over"); err != nil && !errors.As(err, &nf) {
		return st.Breaker.Opened, fmt.Errorf("terminating the governor of %s: %w", q, err)
	}
	return st.Breaker.Opened, nil
}
