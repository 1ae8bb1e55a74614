package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	dto "github.com/prometheus/client_model/go"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/idemhttp/temporal-idempotent-http/harness/itest"
	"github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// ScaleSection is issue 42 item 6: many operations waiting at once on the
// PostgreSQL cluster with three workers, and the uncontended calls per
// second of the ready workflow against a plain activity there.
const ScaleSection = "scale"

// ScaleParams is the setup of the scale section.
type ScaleParams struct {
	// Operations wait at once (default 10000): the even ones follow a 202
	// (Retry-After RetryAfter, running Duration), the odd ones await a
	// webhook.
	Operations int `json:"operations"`
	// Workers is the number of worker processes (default 3).
	Workers int `json:"workers"`
	// Duration is how long a followed operation runs from its acceptance
	// (default 60 s + 30 ms per operation: the followed half starts after
	// the webhooks' and every one must still be waiting through the
	// sampling window; the cluster on 2 CPUs accepted about 27 a second,
	// so the half takes about 18 ms per operation of the whole).
	Duration time.Duration `json:"duration_ns"`
	// RetryAfter is the monitor's Retry-After in seconds (default 120):
	// the polls' pace, 5000 ÷ 120 ≈ 42 polls/s at full size.
	RetryAfter int `json:"retry_after_s"`
	// Window is the longest sampling window while every operation waits
	// (default 60 s); IdleWindow the idle workers' (default 20 s).
	Window     time.Duration `json:"window_ns"`
	IdleWindow time.Duration `json:"idle_window_ns"`
	// StartConcurrency is how many ExecuteWorkflow calls are in flight
	// (default 50), DeliveryConcurrency how many webhook deliveries
	// (default 16).
	StartConcurrency    int `json:"start_concurrency"`
	DeliveryConcurrency int `json:"delivery_concurrency"`
	// ThroughputWorkflows run at once per batch of the throughput part
	// (default 200), ThroughputRounds rounds of a batch each way (default
	// 7).
	ThroughputWorkflows int `json:"throughput_workflows"`
	ThroughputRounds    int `json:"throughput_rounds"`
}

// defaultScale is the setup: 10,000 operations, three workers.
var defaultScale = ScaleParams{
	Operations: 10000, Workers: 3, RetryAfter: 120, Window: 60 * time.Second, IdleWindow: 20 * time.Second,
	StartConcurrency: 50, DeliveryConcurrency: 16, ThroughputWorkflows: 200, ThroughputRounds: 7,
}

// withDefaults fills p's zero fields from defaultScale (Duration from
// Operations).
func (p ScaleParams) withDefaults() ScaleParams {
	d := defaultScale
	set := func(v *int, def int) {
		if *v <= 0 {
			*v = def
		}
	}
	set(&p.Operations, d.Operations)
	set(&p.Workers, d.Workers)
	set(&p.RetryAfter, d.RetryAfter)
	set(&p.StartConcurrency, d.StartConcurrency)
	set(&p.DeliveryConcurrency, d.DeliveryConcurrency)
	set(&p.ThroughputWorkflows, d.ThroughputWorkflows)
	set(&p.ThroughputRounds, d.ThroughputRounds)
	if p.Window <= 0 {
		p.Window = d.Window
	}
	if p.IdleWindow <= 0 {
		p.IdleWindow = d.IdleWindow
	}
	if p.Duration <= 0 {
		p.Duration = 60*time.Second + time.Duration(p.Operations)*30*time.Millisecond
	}
	return p
}

// followedCount is how many of p's operations follow a 202 (the even
// ones).
func (p ScaleParams) followedCount() int { return (p.Operations + 1) / 2 }

// targetScaleThroughput is the bound: uncontended calls per
// second with three workers at least 0.9 × a plain activity's.
const targetScaleThroughput = 0.9

// ScaleResult is the scale section.
type ScaleResult struct {
	Params     ScaleParams      `json:"params"`
	Throughput *ScaleThroughput `json:"throughput,omitempty"`
	Waiting    *ScaleWaiting    `json:"waiting,omitempty"`
}

// ScaleThroughput is the uncontended calls per second on the workers:
// the ready workflow against the plain one, in interleaved rounds.
type ScaleThroughput struct {
	Workers   int                    `json:"workers"`
	Workflows int                    `json:"workflows"`
	Rounds    []ScaleThroughputRound `json:"rounds"`
}

// ScaleThroughputRound is one batch of each, back to back: the time from
// the first start to the last result.
type ScaleThroughputRound struct {
	Ready time.Duration `json:"ready_ns"`
	Plain time.Duration `json:"plain_ns"`
	// ReadyFirst: the ready workflow's batch ran first (rounds alternate).
	ReadyFirst bool `json:"ready_first"`
	// Failed counts the round's workflows that did not succeed.
	Failed int `json:"failed,omitempty"`
}

// ratio is the round's calls per second, ready ÷ plain: plain's time ÷
// ready's.
func (r ScaleThroughputRound) ratio() float64 {
	if r.Ready <= 0 {
		return 0
	}
	return r.Plain.Seconds() / r.Ready.Seconds()
}

// Ratio is the median over the rounds of ready ÷ plain calls per second.
func (t ScaleThroughput) Ratio() float64 {
	rs := make([]float64, 0, len(t.Rounds))
	for _, r := range t.Rounds {
		rs = append(rs, r.ratio())
	}
	return median(rs)
}

// perSecond is the median calls per second of the ready and plain batches.
func (t ScaleThroughput) perSecond() (ready, plain float64) {
	var rs, ps []float64
	for _, r := range t.Rounds {
		if r.Ready > 0 && r.Plain > 0 {
			rs = append(rs, float64(t.Workflows)/r.Ready.Seconds())
			ps = append(ps, float64(t.Workflows)/r.Plain.Seconds())
		}
	}
	return median(rs), median(ps)
}

// failed sums the rounds' failures.
func (t ScaleThroughput) failed() int {
	n := 0
	for _, r := range t.Rounds {
		n += r.Failed
	}
	return n
}

// ScaleSample is one sample of the waiting part, once a second: CPU times
// are cumulative since the process started, memory is the sum over the
// worker processes.
type ScaleSample struct {
	// At is the time since the sampler started.
	At time.Duration `json:"at_ns"`
	// Started counts the waiting part's ExecuteWorkflow calls returned,
	// Completed its workflows completed (visibility, every 2 s).
	Started   int           `json:"started"`
	Completed int           `json:"completed"`
	Server    time.Duration `json:"server_cpu_ns"`
	Postgres  time.Duration `json:"postgres_cpu_ns"`
	Workers   time.Duration `json:"workers_cpu_ns"`
	RSS       uint64        `json:"workers_rss_bytes"`
	// Heap is go_memstats_heap_alloc_bytes and Goroutines go_goroutines,
	// summed over the workers' metrics (0 when a scrape failed).
	Heap       uint64 `json:"workers_heap_bytes"`
	Goroutines int    `json:"workers_goroutines"`
}

// ScalePhase summarises the samples of one window.
type ScalePhase struct {
	Name   string        `json:"name"`
	From   time.Duration `json:"from_ns"`
	Window time.Duration `json:"window_ns"`
	// Samples taken; the memory figures are their medians.
	Samples    int    `json:"samples"`
	RSS        uint64 `json:"workers_rss_bytes"`
	Heap       uint64 `json:"workers_heap_bytes"`
	Goroutines int    `json:"workers_goroutines"`
	// CPU used over the window.
	Server   time.Duration `json:"server_cpu_ns"`
	Postgres time.Duration `json:"postgres_cpu_ns"`
	Workers  time.Duration `json:"workers_cpu_ns"`
	// Polls are the monitor GETs the API got in the window.
	Polls int `json:"polls"`
}

// rate is CPU-seconds per second of the window.
func (p ScalePhase) rate(cpu time.Duration) float64 {
	if p.Window <= 0 {
		return 0
	}
	return cpu.Seconds() / p.Window.Seconds()
}

// summarise is the phase of samples in [from, from+window].
func summarise(name string, samples []ScaleSample, from, window time.Duration) ScalePhase {
	p := ScalePhase{Name: name, From: from, Window: window}
	var in []ScaleSample
	for _, s := range samples {
		if s.At >= from && s.At <= from+window {
			in = append(in, s)
		}
	}
	if len(in) < 2 {
		return p
	}
	first, last := in[0], in[len(in)-1]
	p.Window = last.At - first.At
	p.Samples = len(in)
	p.Server, p.Postgres, p.Workers = last.Server-first.Server, last.Postgres-first.Postgres, last.Workers-first.Workers
	var rss, heap []uint64
	var gs []int
	for _, s := range in {
		rss, heap, gs = append(rss, s.RSS), append(heap, s.Heap), append(gs, s.Goroutines)
	}
	slices.Sort(rss)
	slices.Sort(heap)
	p.RSS, p.Heap = rss[(len(rss)-1)/2], heap[(len(heap)-1)/2]
	p.Goroutines, _ = medianMax(gs)
	return p
}

// ScaleWaiting is the waiting part: Operations started at once, half
// following a 202 and half awaiting a webhook, sampled while all wait,
// then completed.
type ScaleWaiting struct {
	// Operations started: Followed follow a 202 (running Duration at
	// Retry-After RetryAfter), Webhooks await a webhook.
	Operations int           `json:"operations"`
	Followed   int           `json:"followed"`
	Webhooks   int           `json:"webhooks"`
	Duration   time.Duration `json:"duration_ns"`
	RetryAfter int           `json:"retry_after_s"`
	// StartErrors counts the ExecuteWorkflow calls that failed.
	StartErrors int `json:"start_errors"`
	// The marks, since the sampler started: the first ExecuteWorkflow
	// call, the last one's return, every operation accepted at the API
	// (its records reached Operations; zero if they never did), the
	// webhooks' deliveries begun and ended, and the last workflow closed
	// (zero if not all did).
	FirstStart   time.Duration `json:"first_start_ns"`
	LastStarted  time.Duration `json:"last_started_ns"`
	AllAccepted  time.Duration `json:"all_accepted_ns"`
	DeliverBegin time.Duration `json:"deliver_begin_ns"`
	DeliverEnd   time.Duration `json:"deliver_end_ns"`
	AllClosed    time.Duration `json:"all_closed_ns"`
	// Idle is the workers before any operation; Waiting the window while
	// every operation waits (its Samples 0 if the window could not be
	// taken: WindowNote says why).
	Idle       ScalePhase `json:"idle"`
	Waiting    ScalePhase `json:"waiting"`
	WindowNote string     `json:"window_note,omitempty"`
	// Deliveries of the webhooks: answered other than 200 (Rejected), or
	// not at all (DeliveryErrors).
	Delivered      int `json:"delivered"`
	Rejected       int `json:"rejected"`
	DeliveryErrors int `json:"delivery_errors"`
	// Statuses counts the workflows by their final status at the server
	// (visibility); Completed those that succeeded.
	Statuses  map[string]int `json:"statuses"`
	Completed int            `json:"completed"`
	// The API's records: keys with one record, with more, and the
	// records in all.
	KeysOnce int `json:"keys_once"`
	KeysMore int `json:"keys_more"`
	Records  int `json:"records"`
	Requests int `json:"requests"`
	Mismatch int `json:"mismatches"`
	// Seen is, per followed operation, the time from its end at the API
	// to the poll that found it ended; FollowedClose the last followed
	// workflow's close after the last followed operation's end (its
	// acceptance, the API's clock, + Duration; the server's close
	// times); WebhookClose, per awaiting workflow, its close after its
	// delivery's 200.
	Seen          DurStats      `json:"seen"`
	FollowedClose time.Duration `json:"followed_close_ns"`
	WebhookClose  LatStats      `json:"webhook_close"`
	// Polls the API answered in all.
	Polls int `json:"polls"`
	// ServerTotal and PostgresTotal are the CPU they used from the first
	// start to the last close (or the end of the wait).
	ServerTotal   time.Duration `json:"server_cpu_total_ns"`
	PostgresTotal time.Duration `json:"postgres_cpu_total_ns"`
	WorkersTotal  time.Duration `json:"workers_cpu_total_ns"`
	Samples       []ScaleSample `json:"samples"`
}

// allOnce reports whether every operation completed and the API did each
// key's work exactly once.
func (w *ScaleWaiting) allOnce() bool {
	return w.Completed == w.Operations && w.KeysOnce == w.Operations && w.KeysMore == 0 && w.Records == w.Operations && w.StartErrors == 0
}

// perOp is (waiting − idle) ÷ operations, in bytes.
func (w *ScaleWaiting) perOp(waiting, idle uint64) float64 {
	if w.Operations == 0 {
		return 0
	}
	return (float64(waiting) - float64(idle)) / float64(w.Operations)
}

// started is the time from the first ExecuteWorkflow call to the last
// one's return; accepted to every operation's acceptance.
func (w *ScaleWaiting) started() time.Duration { return w.LastStarted - w.FirstStart }

func (w *ScaleWaiting) accepted() time.Duration {
	if w.AllAccepted == 0 {
		return 0
	}
	return w.AllAccepted - w.FirstStart
}

// procCPU reads pid's user + system CPU time and its reaped children's,
// and its parent, from /proc/<pid>/stat.
func procCPU(pid int) (own, children time.Duration, ppid int, ok bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, 0, 0, false
	}
	return parseProcStat(string(b))
}

// parseProcStat reads a /proc/<pid>/stat line: after the parenthesised
// command, field 4 is the parent, 14 and 15 utime and stime, 16 and 17
// the reaped children's, in clock ticks (100 a second on Linux).
func parseProcStat(s string) (own, children time.Duration, ppid int, ok bool) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 15 {
		return 0, 0, 0, false
	}
	n := func(k int) int64 { v, _ := strconv.ParseInt(f[k], 10, 64); return v }
	const tick = 10 * time.Millisecond
	return time.Duration(n(11)+n(12)) * tick, time.Duration(n(13)+n(14)) * tick, int(n(1)), true
}

// treeCPU is the CPU time of pid, of the children it reaped, and of its
// live children: PostgreSQL's postmaster and its backends.
func treeCPU(pid int) time.Duration {
	own, reaped, _, ok := procCPU(pid)
	if !ok {
		return 0
	}
	total := own + reaped
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		child, err := strconv.Atoi(d.Name())
		if err != nil || child == pid {
			continue
		}
		if c, cr, ppid, ok := procCPU(child); ok && ppid == pid {
			total += c + cr
		}
	}
	return total
}

// processRSS is pid's resident set, from /proc/<pid>/status.
func processRSS(pid int) uint64 {
	f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var kb uint64
		if _, err := fmt.Sscanf(sc.Text(), "VmRSS: %d kB", &kb); err == nil {
			return kb << 10
		}
	}
	return 0
}

// gaugeValue is the first sample of the gauge name in fams (0 if none).
func gaugeValue(fams map[string]*dto.MetricFamily, name string) float64 {
	f := fams[name]
	if f == nil || len(f.GetMetric()) == 0 {
		return 0
	}
	return f.GetMetric()[0].GetGauge().GetValue()
}

// scaleRun is the waiting part's state on the cluster.
type scaleRun struct {
	bc       *benchCluster
	h        *harness
	p        ScaleParams
	ref      *refServer
	hooks    []string // the workers' receiver URLs
	metrics  []string // the workers' metrics URLs
	prefix   string   // the waiting workflows' IDs
	t0       time.Time
	started  atomic.Int64
	complete atomic.Int64
	mu       sync.Mutex
	samples  []ScaleSample
	logf     func(string, ...any)
}

// sample takes one ScaleSample.
func (r *scaleRun) sample(ctx context.Context) ScaleSample {
	s := ScaleSample{At: time.Since(r.t0), Started: int(r.started.Load()), Completed: int(r.complete.Load())}
	s.Server = processCPU(r.bc.c.ServerPID())
	s.Postgres = treeCPU(r.bc.c.PostgresPID())
	for _, pr := range r.h.procs {
		s.Workers += processCPU(pr.Pid())
		s.RSS += processRSS(pr.Pid())
	}
	for _, u := range r.metrics {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		fams, err := itest.ScrapeMetrics(sctx, u)
		cancel()
		if err != nil {
			continue
		}
		s.Heap += uint64(gaugeValue(fams, "go_memstats_heap_alloc_bytes"))
		s.Goroutines += int(gaugeValue(fams, "go_goroutines"))
	}
	return s
}

// sampler samples once a second until ctx ends, and counts the waiting
// workflows completed every 2 s (visibility).
func (r *scaleRun) sampler(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for n := 0; ; n++ {
		if n%2 == 0 && r.started.Load() > 0 {
			if c, err := r.count(ctx, "ExecutionStatus = 'Completed'"); err == nil {
				r.complete.Store(int64(c))
			}
		}
		s := r.sample(ctx)
		r.mu.Lock()
		r.samples = append(r.samples, s)
		r.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// count counts the waiting workflows matching cond (visibility).
func (r *scaleRun) count(ctx context.Context, cond string) (int, error) {
	q := fmt.Sprintf("WorkflowId STARTS_WITH '%s' AND %s", r.prefix, cond)
	resp, err := r.h.Client.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Query: q})
	if err != nil {
		return 0, err
	}
	return int(resp.GetCount()), nil
}

// now is the time since the sampler started.
func (r *scaleRun) now() time.Duration { return time.Since(r.t0) }

// request is operation i's call: the even ones POST /charges, which the
// API accepts with a 202 and a monitor; the odd ones POST /payments,
// answered 201 at once, and await the provider's webhook.
func (r *scaleRun) request(id string, i int) workflows.Request {
	if i%2 == 0 {
		body, _ := json.Marshal(map[string]any{"amount": 2000, "op": i})
		return workflows.Request{Operation: whOperation, URL: r.ref.URL + "/charges", Body: body, Follow: &workflows.FollowOptions{}, OriginQueue: r.h.OriginQueue}
	}
	body, _ := json.Marshal(map[string]any{"amount": 2000, "currency": "usd", "op": i,
		"metadata": map[string]string{"workflow_id": id, "operation": whOperation}})
	return workflows.Request{Operation: whOperation, URL: r.ref.URL + "/payments", Body: body, OriginQueue: r.h.OriginQueue,
		Webhook: &workflows.WebhookOptions{Succeeded: []string{whSucceeded}, Failed: []string{"payment_intent.payment_failed"}, Timeout: time.Hour}}
}

// id is operation i's workflow ID.
func (r *scaleRun) id(i int) string { return fmt.Sprintf("%s%d", r.prefix, i) }

// waiting runs the waiting part into w.
func (r *scaleRun) waiting(ctx context.Context, w *ScaleWaiting) error {
	p := r.p
	sctx, stopSampler := context.WithCancel(ctx)
	var swg sync.WaitGroup
	swg.Go(func() { r.sampler(sctx) })
	defer func() {
		stopSampler()
		swg.Wait()
		w.Samples = r.samples
	}()
	sleep := func(d time.Duration) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
			return nil
		}
	}
	// Idle: the workers polling, nothing running.
	if err := sleep(p.IdleWindow + 500*time.Millisecond); err != nil {
		return err
	}
	st0, err := r.ref.Stats(ctx)
	if err != nil {
		return err
	}

	// Start every operation: the webhooks' first, so that the followed
	// operations' Duration need only cover their own half's start and the
	// window (a webhook's wait has no end of its own).
	order := make([]int, 0, p.Operations)
	for i := 1; i < p.Operations; i += 2 {
		order = append(order, i)
	}
	for i := 0; i < p.Operations; i += 2 {
		order = append(order, i)
	}
	var firstFollowed atomic.Int64
	w.FirstStart = r.now()
	_, errs, _ := runConcurrently(ctx, p.Operations, p.StartConcurrency, func(ctx context.Context, k int) error {
		i := order[k]
		if i%2 == 0 {
			firstFollowed.CompareAndSwap(0, int64(r.now()))
		}
		_, err := r.h.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: r.id(i), TaskQueue: r.h.TaskQueue}, workflows.WorkflowName, r.request(r.id(i), i))
		if err == nil {
			r.started.Add(1)
		}
		return err
	})
	w.LastStarted = r.now()
	for _, err := range errs {
		if err != nil {
			if w.StartErrors == 0 {
				r.logf("scale: starting a workflow: %v", err)
			}
			w.StartErrors++
		}
	}
	r.logf("scale: %d workflows started in %s (%d failed to start)", r.started.Load(), secs(w.started()), w.StartErrors)
	// Every operation accepted at the API; the first followed one ends
	// Duration after its acceptance, at the earliest Duration after its
	// start was asked for. The server takes minutes to work through
	// 10,000 starts, so once that bound passes, the API's clock says when
	// the first followed operation was accepted.
	firstEnd := time.Duration(firstFollowed.Load()) + p.Duration
	exact := false
	for {
		st, err := r.ref.Stats(ctx)
		if err != nil {
			return err
		}
		if st.Records-st0.Records >= p.Operations-w.StartErrors {
			w.AllAccepted = r.now()
			break
		}
		if r.now() > firstEnd && !exact {
			if firstEnd, err = r.firstFollowedEnd(ctx); err != nil {
				return err
			}
			exact = true
			continue
		}
		if r.now() > firstEnd {
			w.WindowNote = fmt.Sprintf("only %d of %d operations were accepted before the first followed one ended (%s after its acceptance)", st.Records-st0.Records, p.Operations, secs(p.Duration))
			break
		}
		if err := sleep(200 * time.Millisecond); err != nil {
			return err
		}
	}
	if w.AllAccepted > 0 {
		r.logf("scale: all %d operations accepted %s after the first start", p.Operations, secs(w.accepted()))
		// Let the last activities' completions and workflow tasks settle.
		if err := sleep(5 * time.Second); err != nil {
			return err
		}
		window := min(p.Window, firstEnd-r.now()-2*time.Second)
		if window < 10*time.Second {
			w.WindowNote = fmt.Sprintf("all accepted %s after the first start: %s left while all wait (Duration %s too short for this machine)", secs(w.accepted()), secs(max(window, 0)), secs(p.Duration))
		} else {
			from := r.now()
			pol0, err := r.ref.Stats(ctx)
			if err != nil {
				return err
			}
			if err := sleep(window); err != nil {
				return err
			}
			pol1, err := r.ref.Stats(ctx)
			if err != nil {
				return err
			}
			// The last sample of the window is at most a second away.
			if err := sleep(1100 * time.Millisecond); err != nil {
				return err
			}
			r.mu.Lock()
			w.Waiting = summarise("waiting", r.samples, from, window)
			r.mu.Unlock()
			w.Waiting.Polls = pol1.Polls - pol0.Polls
			r.logf("scale: %d operations waiting: workers %.0f MiB RSS, %.0f MiB heap, %d goroutines; CPU over %s: server %.2f, postgres %.2f, workers %.2f; %d polls",
				p.Operations, mib(w.Waiting.RSS), mib(w.Waiting.Heap), w.Waiting.Goroutines, secs(w.Waiting.Window),
				w.Waiting.rate(w.Waiting.Server), w.Waiting.rate(w.Waiting.Postgres), w.Waiting.rate(w.Waiting.Workers), w.Waiting.Polls)
		}
	}
	if w.WindowNote != "" {
		r.logf("scale: %s", w.WindowNote)
	}
	r.mu.Lock()
	w.Idle = summarise("idle", r.samples, 0, p.IdleWindow)
	r.mu.Unlock()

	// The webhooks, one per awaiting workflow, round robin over the receivers.
	answered := r.deliver(ctx, w)
	// Every workflow closed, at most until every followed operation has
	// ended and been polled twice more, and 5 minutes more.
	deadline := time.Now().Add(max(firstEnd+w.accepted()-r.now(), 0) + time.Duration(2*p.RetryAfter)*time.Second + 5*time.Minute)
	for {
		open, err := r.count(ctx, "ExecutionStatus = 'Running'")
		if err == nil && open == 0 && r.started.Load() > 0 {
			w.AllClosed = r.now()
			break
		}
		if time.Now().After(deadline) {
			r.logf("scale: %d workflows still running at the deadline (%v)", open, err)
			break
		}
		if err := sleep(time.Second); err != nil {
			return err
		}
	}
	r.mu.Lock()
	if end := len(r.samples) - 1; end >= 0 {
		s := r.samples[end]
		first := summarise("all", r.samples, w.FirstStart-time.Second, s.At)
		w.ServerTotal, w.PostgresTotal, w.WorkersTotal = first.Server, first.Postgres, first.Workers
	}
	r.mu.Unlock()
	return r.outcome(ctx, w, answered)
}

// firstFollowedEnd is when the first followed operation the API accepted
// ends (since the sampler started), by the API's clock; Duration from now
// if none was accepted yet.
func (r *scaleRun) firstFollowedEnd(ctx context.Context) (time.Duration, error) {
	snap, err := r.ref.Clock(ctx)
	if err != nil {
		return 0, err
	}
	if len(snap.Accepted) == 0 {
		return r.now() + r.p.Duration, nil
	}
	first := slices.Min(slices.Collect(maps.Values(snap.Accepted)))
	return r.ref.began.Add(first + r.p.Duration).Sub(r.t0), nil
}

// deliver sends each awaiting workflow its signed Stripe event through
// the workers' receivers, DeliveryConcurrency at once, and returns when
// each was answered (zero if it was not answered 200).
func (r *scaleRun) deliver(ctx context.Context, w *ScaleWaiting) []time.Time {
	var ids []string
	for i := 1; i < r.p.Operations; i += 2 {
		ids = append(ids, r.id(i))
	}
	provider := &http.Client{Transport: newTransport(), Timeout: 60 * time.Second}
	answered := make([]time.Time, len(ids))
	w.DeliverBegin = r.now()
	_, errs, _ := runConcurrently(ctx, len(ids), r.p.DeliveryConcurrency, func(ctx context.Context, i int) error {
		evID := "evt_" + ids[i]
		ts := time.Now().Unix()
		body := webhookEvent(evID, ids[i], whOperation, ts, false)
		h, err := signWebhook("stripe", evID, ts, body)
		if err != nil {
			return err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.hooks[i%len(r.hooks)]+"/webhooks", bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header = h
		resp, err := provider.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("answered %s", resp.Status)
		}
		answered[i] = time.Now()
		return nil
	})
	w.DeliverEnd = r.now()
	for _, err := range errs {
		switch {
		case err == nil:
			w.Delivered++
		case strings.HasPrefix(err.Error(), "answered"):
			w.Rejected++
		default:
			w.DeliveryErrors++
		}
	}
	r.logf("scale: %d webhooks delivered in %s (%d refused, %d errors)", w.Delivered, secs(w.DeliverEnd-w.DeliverBegin), w.Rejected, w.DeliveryErrors)
	return answered
}

// outcome reads what became of every workflow (visibility: status and
// close time) and of every key at the API.
func (r *scaleRun) outcome(ctx context.Context, w *ScaleWaiting, answered []time.Time) error {
	w.Statuses = map[string]int{}
	closed := map[string]time.Time{}
	var token []byte
	for {
		resp, err := r.h.Client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query: fmt.Sprintf("WorkflowId STARTS_WITH '%s'", r.prefix), PageSize: 1000, NextPageToken: token})
		if err != nil {
			return fmt.Errorf("listing the workflows: %w", err)
		}
		for _, e := range resp.GetExecutions() {
			st := e.GetStatus()
			w.Statuses[strings.ToLower(strings.TrimPrefix(st.String(), "WORKFLOW_EXECUTION_STATUS_"))]++
			if st == enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
				w.Completed++
				closed[e.GetExecution().GetWorkflowId()] = e.GetCloseTime().AsTime()
			}
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			break
		}
	}
	var lat []time.Duration
	for k, at := range answered {
		if c, ok := closed[r.id(2*k+1)]; ok && !at.IsZero() {
			lat = append(lat, c.Sub(at))
		}
	}
	w.WebhookClose = latStats(lat)
	per, err := r.ref.RecordsPerKey(ctx)
	if err != nil {
		return err
	}
	for _, n := range per {
		if n == 1 {
			w.KeysOnce++
		} else {
			w.KeysMore++
		}
	}
	st, err := r.ref.Stats(ctx)
	if err != nil {
		return err
	}
	w.Records, w.Requests, w.Mismatch, w.Polls = st.Records, st.Requests, st.Mismatches, st.Polls
	snap, err := r.ref.Clock(ctx)
	if err != nil {
		return err
	}
	reported := map[string]int32{}
	for m := range snap.Accepted {
		reported[m] = 1
	}
	s := pollSeries("followed", r.p.RetryAfter, r.p.Duration, snap, nil, reported, false)
	w.Seen = s.Seen
	// The last followed close after the last followed end: both on this
	// machine's wall clock, the end from the API's acceptance times.
	var lastEnd time.Duration
	for _, at := range snap.Accepted {
		lastEnd = max(lastEnd, at)
	}
	var lastClose time.Time
	for i := 0; i < r.p.Operations; i += 2 {
		if c, ok := closed[r.id(i)]; ok && c.After(lastClose) {
			lastClose = c
		}
	}
	if !lastClose.IsZero() && !r.ref.began.IsZero() {
		w.FollowedClose = lastClose.Sub(r.ref.began.Add(lastEnd + r.p.Duration))
	}
	r.logf("scale: %d of %d completed (%v); API: %d keys done once, %d more than once, %d records; followed: end seen after p50 %s, max %s; last close %s after the last end; webhooks: close − 200 p50 %s, max %s",
		w.Completed, w.Operations, w.Statuses, w.KeysOnce, w.KeysMore, w.Records, gap(w.Seen.P50), gap(w.Seen.Max), secs(w.FollowedClose), gap(w.WebhookClose.P50), gap(w.WebhookClose.Max))
	return nil
}

// runScaleThroughput measures the uncontended calls per second on h's
// workers: after a warm-up batch of each, rounds of a batch of the ready
// workflow and one of the plain workflow doing the same POST, back to
// back, the order alternating, against an API that takes everything.
func runScaleThroughput(ctx context.Context, h *harness, p ScaleParams, logf func(string, ...any)) (*ScaleThroughput, error) {
	res := &ScaleThroughput{Workers: p.Workers, Workflows: p.ThroughputWorkflows}
	h.Target.Set(okHandler())
	stamp := time.Now().Unix() % 100000
	cp := defaultContention
	cp.EagerStart = false
	plain := contentionLoad{
		Name:     "plain",
		Workflow: plainActionsWorkflow,
		Args: func(i int) []any {
			body, _ := json.Marshal(map[string]int{"client": i})
			return []any{PlainCall{Mode: plainPost, URL: h.Target.URL + "/charges", Body: body}}
		},
		Wait: func(ctx context.Context, run client.WorkflowRun) (int32, error) {
			var status int
			return 0, run.Get(ctx, &status)
		},
	}
	batch := func(ready bool, name string, n int) (ContentionRun, error) {
		q := cp
		q.Clients = n
		load := plain
		if ready {
			load = readyLoad(h, q, workflows.JitterFull)
		}
		var run ContentionRun
		err := startAndWait(ctx, h, q, load, fmt.Sprintf("%s-%d", name, stamp), &run)
		return run, err
	}
	err := pairedRounds(p.ThroughputRounds, p.ThroughputWorkflows, "scale-tput-%t", batch, func(i int, pr pairedRound) {
		rd := ScaleThroughputRound{Ready: pr.a, Plain: pr.b, ReadyFirst: pr.aFirst, Failed: pr.failed}
		logf("scale throughput, round %d: %d workflows in %.1f s ready, %.1f s plain (ready ÷ plain %.2f as calls/s), %d failed",
			i+1, p.ThroughputWorkflows, rd.Ready.Seconds(), rd.Plain.Seconds(), rd.ratio(), rd.Failed)
		res.Rounds = append(res.Rounds, rd)
	})
	return res, err
}

// runScale runs the scale section: the cluster, an API (a reference
// server in a process of its own: 202 and a monitor on /charges, 201 on
// /payments) and p.Workers worker processes (the bench command as
// ServeScaleWorker: the worker binary's wiring and the plain baseline)
// with their webhook receivers and metrics; then the throughput part, and
// the waiting part.
func runScale(ctx context.Context, p ScaleParams, logDir string, logf func(string, ...any)) (_ *ScaleResult, err error) {
	res := &ScaleResult{Params: p}
	begin := time.Now()
	bc, stop, err := startBenchCluster(ctx, logDir, logf)
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, stop()) }()
	ref, err := listenRef()
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, ref.Close()) }()
	if err := ref.start(ctx, testsuite.Async{Paths: []string{"/charges"}, Duration: p.Duration, RetryAfter: p.RetryAfter}, logDir, "scale"); err != nil {
		return res, err
	}
	exe, err := os.Executable()
	if err != nil {
		return res, err
	}
	ports, err := itest.FreePortsIn(15000, 32767, 2*p.Workers)
	if err != nil {
		return res, err
	}
	r := &scaleRun{bc: bc, p: p, ref: ref, logf: logf, prefix: fmt.Sprintf("scale-wait-%d-", time.Now().Unix()%100000)}
	for i := range p.Workers {
		r.hooks = append(r.hooks, "http://"+itest.HostPort(ports[2*i]))
		r.metrics = append(r.metrics, "http://"+itest.HostPort(ports[2*i+1])+"/metrics")
	}
	h, stopWorkers, err := startClusterWorkers(ctx, bc, clusterWorkers{
		Tag: fmt.Sprintf("scale-%d", time.Now().Unix()%100000), Workers: p.Workers, Shared: true,
		Args: []string{"--allow-origin", ref.URL, "--webhook-scheme", "stripe"},
		PerWorker: func(i int) []string {
			return []string{"--webhook-addr", itest.HostPort(ports[2*i]), "--metrics-addr", itest.HostPort(ports[2*i+1])}
		},
		Bin: exe, Env: []string{scaleWorkerEnv + "=1", "WEBHOOK_SECRETS=" + whStripeSecret, refChildEnv + "="},
	}, logDir, logf)
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, stopWorkers()) }()
	r.h = h
	if res.Throughput, err = runScaleThroughput(ctx, h, p, logf); err != nil {
		return res, err
	}
	t := res.Throughput
	ready, plain := t.perSecond()
	logf("scale: throughput ready ÷ plain %.2f (median of %d rounds; %.1f and %.1f calls/s), %d failed; at %s", t.Ratio(), len(t.Rounds), ready, plain, t.failed(), time.Since(begin).Round(time.Second))
	w := &ScaleWaiting{Operations: p.Operations, Followed: p.followedCount(), Webhooks: p.Operations - p.followedCount(), Duration: p.Duration, RetryAfter: p.RetryAfter}
	res.Waiting = w
	r.t0 = time.Now()
	err = r.waiting(ctx, w)
	logf("scale: done in %s", time.Since(begin).Round(time.Second))
	return res, err
}
