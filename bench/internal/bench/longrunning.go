package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/harness/registered"
	"github.com/idemhttp/temporal-idempotent-http/internal/backoff"
	"github.com/idemhttp/temporal-idempotent-http/internal/input"
	"github.com/idemhttp/temporal-idempotent-http/internal/poll"
	"github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// LongRunningParams is the setup of the longrunning section.
type LongRunningParams struct {
	// Operations followed per pacing series (part 1), at once.
	Operations int `json:"operations"`
	// Duration and RetryAfter (seconds) of the Retry-After series'
	// operations.
	Duration   time.Duration `json:"duration_ns"`
	RetryAfter int           `json:"retry_after_s"`
	// BackoffDuration is the length of the operations of the series whose
	// monitor sends no Retry-After (the poll backoff paces them).
	BackoffDuration time.Duration `json:"backoff_duration_ns"`
	// Waiting operations are followed at once on one worker (part 2), each
	// running WaitingDuration with Retry-After WaitingRetryAfter.
	Waiting           int           `json:"waiting"`
	WaitingDuration   time.Duration `json:"waiting_duration_ns"`
	WaitingRetryAfter int           `json:"waiting_retry_after_s"`
	// SleepDuration is how long the comparison's workflows wait on a timer.
	SleepDuration time.Duration `json:"sleep_duration_ns"`
	// Window is the longest sampling window of a phase; IdleWindow the
	// idle worker's.
	Window     time.Duration `json:"window_ns"`
	IdleWindow time.Duration `json:"idle_window_ns"`
}

// defaultLongRunning: 20 operations of 20 s at Retry-After 2 (10 polls
// each, ideally); 20 of 15 s without Retry-After, so that the backoff's
// polls (about 0, 1, 2–3, 4–7, 8–15, 16–31 s) end by about 31 s whatever
// the jitter draws; 1000 of 75 s at Retry-After 5 (200 polls/s asked for):
// the dev server on 2 CPUs takes 20–30 s to start 1000 followed calls, so
// 75 s leaves a window of 30 s while all of them wait. The section takes
// about 3.5 minutes.
var defaultLongRunning = LongRunningParams{
	Operations: 20, Duration: 20 * time.Second, RetryAfter: 2, BackoffDuration: 15 * time.Second,
	Waiting: 1000, WaitingDuration: 75 * time.Second, WaitingRetryAfter: 5,
	SleepDuration: 50 * time.Second, Window: 30 * time.Second, IdleWindow: 10 * time.Second,
}

// targetPollGap is the bound of a poll's gap ÷ the delay it asked for:
// the Retry-After claim's (claim 3: a 1 s Retry-After kept within
// [1.00 s, 1.15 s]).
const targetPollGap = 1.15

// targetWaitGoroutines bounds the goroutines per waiting operation beyond
// the same number of workflows waiting on a timer, the HTTP client's
// pooled connections aside (at most 64 idle per host, two goroutines
// each, however many operations wait): none is held per operation.
const targetWaitGoroutines = 0.05

// sleepWorkflowName is the comparison of the waiting run: a workflow that
// only waits on a timer, as a followed call's workflow waits on its poll's
// retry timer.
const sleepWorkflowName = "BenchSleep"

func sleepWorkflow(ctx workflow.Context, d time.Duration) error { return workflow.Sleep(ctx, d) }

// RatioStats summarises ratios (a poll's gap ÷ the delay it asked for):
// nearest-rank percentiles.
type RatioStats struct {
	N   int     `json:"n"`
	Min float64 `json:"min"`
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
	Max float64 `json:"max"`
}

// ratioStats summarises xs.
func ratioStats(xs []float64) RatioStats {
	if len(xs) == 0 {
		return RatioStats{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	rank := func(p float64) float64 { return s[max(int(math.Ceil(p*float64(len(s))))-1, 0)] }
	return RatioStats{N: len(s), Min: s[0], P50: rank(0.50), P95: rank(0.95), Max: s[len(s)-1]}
}

// within reports whether every ratio is in [1, hi].
func (r RatioStats) within(hi float64) bool { return r.N > 0 && r.Min >= 1 && r.Max <= hi }

// CountStats summarises polls per operation.
type CountStats struct {
	Mean float64 `json:"mean"`
	Min  int     `json:"min"`
	Max  int     `json:"max"`
}

func countStats(ns []int) CountStats {
	if len(ns) == 0 {
		return CountStats{}
	}
	c := CountStats{Min: ns[0], Max: ns[0]}
	sum := 0
	for _, n := range ns {
		sum += n
		c.Min, c.Max = min(c.Min, n), max(c.Max, n)
	}
	c.Mean = float64(sum) / float64(len(ns))
	return c
}

// PollGap is one wait between two polls of an operation: the delay the
// earlier poll's attempt asked Temporal for (its NextRetryDelay) and the
// time between the two GETs at the reference server.
type PollGap struct {
	Poll  int32         `json:"poll"` // the attempt that asked (from 1)
	Asked time.Duration `json:"asked_ns"`
	Gap   time.Duration `json:"gap_ns"`
}

// EarlyGap is a gap shorter than its asked delay, with what the worker saw
// of the two attempts (for diagnosis).
type EarlyGap struct {
	Monitor string     `json:"monitor"`
	Gap     PollGap    `json:"gap"`
	Before  attemptRec `json:"before"`
	After   attemptRec `json:"after"`
	Polls   int        `json:"polls"`
}

// DurStats summarises durations: nearest-rank percentiles.
type DurStats struct {
	N   int           `json:"n"`
	P50 time.Duration `json:"p50_ns"`
	P95 time.Duration `json:"p95_ns"`
	Max time.Duration `json:"max_ns"`
}

func durStats(ds []time.Duration) DurStats {
	if len(ds) == 0 {
		return DurStats{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := func(p float64) time.Duration { return s[max(int(math.Ceil(p*float64(len(s))))-1, 0)] }
	return DurStats{N: len(s), P50: rank(0.50), P95: rank(0.95), Max: s[len(s)-1]}
}

// PollSeries is one series of operations followed at once.
type PollSeries struct {
	Name string `json:"name"`
	// RetryAfter is the monitor's Retry-After in seconds (0: none sent).
	RetryAfter int           `json:"retry_after_s"`
	Duration   time.Duration `json:"duration_ns"`
	Operations int           `json:"operations"`
	Failed     int           `json:"failed"`
	// Polls are the monitor GETs per operation the server counted;
	// PollsMismatch the operations whose Response.Operation.Polls said
	// otherwise.
	Polls         CountStats `json:"polls"`
	PollsMismatch int        `json:"polls_mismatch"`
	// FirstPoll is the longest time from an operation's acceptance to its
	// first poll, FirstPollMedian the median.
	FirstPoll       time.Duration `json:"first_poll_max_ns"`
	FirstPollMedian time.Duration `json:"first_poll_median_ns"`
	// Ratios are every gap ÷ its asked delay; Unmatched counts gaps whose
	// asked delay was not recorded (left out of Ratios).
	Ratios    RatioStats `json:"ratios"`
	Unmatched int        `json:"unmatched,omitempty"`
	// Seen is, per operation that succeeded, the time from its end at the
	// server (acceptance + Duration) to the poll that found it ended.
	Seen DurStats `json:"seen"`
	// Late is, per gap, how much later than asked the server started the
	// next attempt (its StartedTime − the earlier attempt's return − the
	// delay: the failure's report, Temporal's retry timer and matching);
	// Delivery how long the started attempt took to reach the activity
	// function.
	Late     DurStats `json:"late"`
	Delivery DurStats `json:"delivery"`
	// EarlyCount counts the gaps shorter than asked; Early holds up to 10
	// of them, with their attempts.
	EarlyCount int        `json:"early_count"`
	Early      []EarlyGap `json:"early,omitempty"`
	// Gaps are every gap (left out for the waiting run).
	Gaps []PollGap `json:"gaps,omitempty"`
}

// idealPolls is Duration ÷ RetryAfter (0 without a Retry-After).
func (s PollSeries) idealPolls() float64 {
	if s.RetryAfter <= 0 {
		return 0
	}
	return s.Duration.Seconds() / float64(s.RetryAfter)
}

// pollSeries computes a series from the server's clock, the poll attempts
// the worker recorded (per monitor, by attempt) and the polls each
// operation's final Response reported (per monitor; -1 for an operation
// that failed). Operations are those in reported. The k-th GET of a
// monitor is taken to be its attempt k (PollsMismatch counts the
// operations where the numbers differ).
func pollSeries(name string, retryAfter int, d time.Duration, snap ClockSnapshot, attempts map[string][]attemptRec, reported map[string]int32, keepGaps bool) PollSeries {
	s := PollSeries{Name: name, RetryAfter: retryAfter, Duration: d, Operations: len(reported)}
	var counts []int
	var ratios []float64
	var firsts, late, delivery, seen []time.Duration
	monitors := slices.Sorted(maps.Keys(reported))
	for _, m := range monitors {
		rep := reported[m]
		if rep < 0 {
			s.Failed++
		}
		polls := snap.Polls[m]
		counts = append(counts, len(polls))
		if rep >= 0 && int(rep) != len(polls) {
			s.PollsMismatch++
		}
		if at, ok := snap.Accepted[m]; ok && len(polls) > 0 {
			firsts = append(firsts, polls[0]-at)
			if rep > 0 {
				seen = append(seen, polls[len(polls)-1]-at-d)
			}
		}
		a := attempts[m]
		for k := 1; k < len(polls); k++ {
			g := PollGap{Poll: int32(k), Gap: polls[k] - polls[k-1]}
			if k-1 < len(a) {
				g.Asked = a[k-1].Asked
			}
			if g.Asked <= 0 {
				s.Unmatched++
				continue
			}
			ratios = append(ratios, float64(g.Gap)/float64(g.Asked))
			if k < len(a) && !a[k].Started.IsZero() && !a[k-1].Ended.IsZero() {
				late = append(late, a[k].Started.Sub(a[k-1].Ended)-g.Asked)
				delivery = append(delivery, a[k].Began.Sub(a[k].Started))
			}
			if g.Gap < g.Asked {
				s.EarlyCount++
				if len(s.Early) < 10 && k < len(a) {
					s.Early = append(s.Early, EarlyGap{Monitor: m, Gap: g, Before: a[k-1], After: a[k], Polls: len(polls)})
				}
			}
			if keepGaps {
				s.Gaps = append(s.Gaps, g)
			}
		}
	}
	slices.SortStableFunc(s.Gaps, func(a, b PollGap) int { return int(a.Poll - b.Poll) })
	s.Polls, s.Ratios = countStats(counts), ratioStats(ratios)
	s.Late, s.Delivery, s.Seen = durStats(late), durStats(delivery), durStats(seen)
	if len(firsts) > 0 {
		slices.Sort(firsts)
		s.FirstPoll, s.FirstPollMedian = firsts[len(firsts)-1], firsts[(len(firsts)-1)/2]
	}
	return s
}

// BackoffRow is what the polls without Retry-After waited after poll n: the
// documented range of the delay (the poll backoff's equal jitter under its
// ceiling, at least MinPollInterval), the delays drawn and the gaps seen.
type BackoffRow struct {
	Poll     int32         `json:"poll"`
	Ceiling  time.Duration `json:"ceiling_ns"`
	Lo       time.Duration `json:"lo_ns"`
	Hi       time.Duration `json:"hi_ns"`
	N        int           `json:"n"`
	AskedMin time.Duration `json:"asked_min_ns"`
	AskedMax time.Duration `json:"asked_max_ns"`
	GapMin   time.Duration `json:"gap_min_ns"`
	GapMax   time.Duration `json:"gap_max_ns"`
	// Outside counts the drawn delays outside [Lo, Hi].
	Outside int `json:"outside"`
}

// backoffRows groups gaps by poll against backoff b (poll.Backoff).
func backoffRows(gaps []PollGap, b backoff.Backoff) []BackoffRow {
	byPoll := map[int32]*BackoffRow{}
	var rows []*BackoffRow
	for _, g := range gaps {
		r := byPoll[g.Poll]
		if r == nil {
			ceil := b.Ceiling(g.Poll)
			r = &BackoffRow{Poll: g.Poll, Ceiling: ceil, Lo: max(ceil/2, poll.MinInterval), Hi: max(ceil, poll.MinInterval),
				AskedMin: g.Asked, AskedMax: g.Asked, GapMin: g.Gap, GapMax: g.Gap}
			byPoll[g.Poll] = r
			rows = append(rows, r)
		}
		r.N++
		r.AskedMin, r.AskedMax = min(r.AskedMin, g.Asked), max(r.AskedMax, g.Asked)
		r.GapMin, r.GapMax = min(r.GapMin, g.Gap), max(r.GapMax, g.Gap)
		if g.Asked < r.Lo || g.Asked > r.Hi {
			r.Outside++
		}
	}
	slices.SortFunc(rows, func(a, b *BackoffRow) int { return int(a.Poll - b.Poll) })
	out := make([]BackoffRow, len(rows))
	for i, r := range rows {
		out[i] = *r
	}
	return out
}

// ResourcePhase is one sampling window of the worker's process while it
// held Workflows workflows (0: idle).
type ResourcePhase struct {
	Name      string        `json:"name"`
	Workflows int           `json:"workflows"`
	Window    time.Duration `json:"window_ns"`
	Samples   int           `json:"samples"`
	// Goroutines is the median of one sample a second, GoroutinesMax the
	// largest; NoPool the median of the samples less the HTTP client's
	// connection goroutines. Kinds are the median of each kind over the
	// samples (classifyGoroutines), KindsMax the largest.
	Goroutines    int            `json:"goroutines"`
	GoroutinesMax int            `json:"goroutines_max"`
	NoPool        int            `json:"goroutines_no_pool"`
	Kinds         map[string]int `json:"goroutine_kinds,omitempty"`
	KindsMax      map[string]int `json:"goroutine_kinds_max,omitempty"`
	// HeapBytes is the live heap after a GC at the window's end; RSSBytes
	// the median resident set.
	HeapBytes uint64 `json:"heap_bytes"`
	RSSBytes  uint64 `json:"rss_bytes"`
	// CPU is the worker process's CPU time (user + system) over the
	// window, DevCPU the dev server's (0 if its process was not found).
	CPU    time.Duration `json:"cpu_ns"`
	DevCPU time.Duration `json:"dev_cpu_ns"`
	// Polls are the monitor GETs the reference server got in the window.
	Polls int `json:"polls"`
}

// cpuRate is CPU-seconds per second of the window.
func (p ResourcePhase) cpuRate() float64 {
	if p.Window <= 0 {
		return 0
	}
	return p.CPU.Seconds() / p.Window.Seconds()
}

func (p ResourcePhase) devCPURate() float64 {
	if p.Window <= 0 {
		return 0
	}
	return p.DevCPU.Seconds() / p.Window.Seconds()
}

// WaitingResult is part 2: many operations waiting at once on one worker,
// beside the same worker idle and holding as many workflows waiting on a
// timer.
type WaitingResult struct {
	Operations int           `json:"operations"`
	Duration   time.Duration `json:"duration_ns"`
	RetryAfter int           `json:"retry_after_s"`
	// Started is how long the ExecuteWorkflow calls took; Accepted the
	// time from the first call to the last operation's acceptance.
	Started  time.Duration `json:"started_ns"`
	Accepted time.Duration `json:"accepted_ns"`
	Idle     ResourcePhase `json:"idle"`
	Follow   ResourcePhase `json:"following"`
	Sleep    ResourcePhase `json:"sleeping"`
	// Series is the polls per operation and the gap ratios of the run.
	Series PollSeries `json:"series"`
}

// goroutinesPerOp is (goroutines while following − base's) ÷ operations.
func (w WaitingResult) goroutinesPerOp(base ResourcePhase) float64 {
	if w.Operations == 0 {
		return 0
	}
	return float64(w.Follow.Goroutines-base.Goroutines) / float64(w.Operations)
}

// heldPerOp is goroutinesPerOp without the HTTP client's pooled
// connections (NoPool).
func (w WaitingResult) heldPerOp(base ResourcePhase) float64 {
	if w.Operations == 0 {
		return 0
	}
	return float64(w.Follow.NoPool-base.NoPool) / float64(w.Operations)
}

// heapPerOp is (live heap while following − base's) ÷ operations, in bytes.
func (w WaitingResult) heapPerOp(base ResourcePhase) float64 {
	if w.Operations == 0 {
		return 0
	}
	return (float64(w.Follow.HeapBytes) - float64(base.HeapBytes)) / float64(w.Operations)
}

// rssPerOp is (resident set while following − idle) ÷ operations, in bytes.
func (w WaitingResult) rssPerOp() float64 {
	if w.Operations == 0 {
		return 0
	}
	return (float64(w.Follow.RSSBytes) - float64(w.Idle.RSSBytes)) / float64(w.Operations)
}

// cpuPerOpMinute is the worker process's CPU time per waiting operation
// per minute of waiting, over the idle worker's, in seconds; dev the dev
// server's.
func (w WaitingResult) cpuPerOpMinute() (worker, dev float64) {
	if w.Operations == 0 {
		return 0, 0
	}
	n := float64(w.Operations)
	return (w.Follow.cpuRate() - w.Idle.cpuRate()) * 60 / n, (w.Follow.devCPURate() - w.Idle.devCPURate()) * 60 / n
}

// cpuPerPoll is the worker process's CPU time per poll over the idle
// worker's, and the dev server's.
func (w WaitingResult) cpuPerPoll() (worker, dev time.Duration) {
	f := w.Follow
	if f.Polls == 0 {
		return 0, 0
	}
	wk := f.CPU.Seconds() - w.Idle.cpuRate()*f.Window.Seconds()
	dv := f.DevCPU.Seconds() - w.Idle.devCPURate()*f.Window.Seconds()
	return time.Duration(wk / float64(f.Polls) * 1e9), time.Duration(dv / float64(f.Polls) * 1e9)
}

// LongRunningResult is the longrunning section.
type LongRunningResult struct {
	Params LongRunningParams `json:"params"`
	// RetryAfter and Backoff are the pacing series (part 1); BackoffRows
	// Backoff's gaps by poll.
	RetryAfter  PollSeries     `json:"retry_after"`
	Backoff     PollSeries     `json:"backoff"`
	BackoffRows []BackoffRow   `json:"backoff_rows"`
	Waiting     *WaitingResult `json:"waiting,omitempty"`
}

// Goroutine kinds of classifyGoroutines.
const (
	kindWorkflow = "workflow coroutines"
	kindPoll     = "poll activity"
	kindStart    = "start activity"
	kindHTTP     = "HTTP connections"
	kindOther    = "other"
)

// classifyGoroutines counts the goroutines of a goroutine profile in its
// debug=1 text form (runtime/pprof: blocks of "N @ pcs" then "#\tpc\tfunc…"
// lines) by what their stacks run: the poll or the start activity, a
// cached workflow's coroutine (the SDK keeps one goroutine per coroutine of
// every workflow in its cache), an HTTP connection (client or server), or
// other.
func classifyGoroutines(profile string) map[string]int {
	kinds := map[string]int{}
	for block := range strings.SplitSeq(profile, "\n\n") {
		block = strings.TrimSpace(block)
		if strings.HasPrefix(block, "goroutine profile:") {
			// The profile's header line, then its first record.
			_, block, _ = strings.Cut(block, "\n")
		}
		head, _, _ := strings.Cut(block, "\n")
		f := strings.Fields(head)
		if len(f) < 2 || f[1] != "@" {
			continue
		}
		n, err := strconv.Atoi(f[0])
		if err != nil {
			continue
		}
		switch {
		case strings.Contains(block, "activities.(*Activities).pollActivity"):
			kinds[kindPoll] += n
		case strings.Contains(block, "activities.(*Activities).requestActivity"):
			kinds[kindStart] += n
		case strings.Contains(block, "go.temporal.io/sdk/internal.(*coroutineState)"):
			kinds[kindWorkflow] += n
		case strings.Contains(block, "net/http.(*persistConn)"), strings.Contains(block, "net/http.(*conn).serve"):
			kinds[kindHTTP] += n
		default:
			kinds[kindOther] += n
		}
	}
	return kinds
}

func goroutineKinds() map[string]int {
	var b bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&b, 1); err != nil {
		return nil
	}
	return classifyGoroutines(b.String())
}

// rssBytes is this process's resident set (processRSS).
func rssBytes() uint64 { return processRSS(os.Getpid()) }

// attemptRec is one poll attempt as the worker saw it: the delay it
// asked for (its NextRetryDelay, 0 if none), when the server started it
// (activity.Info.StartedTime) and when the worker's activity function began
// and returned (wall clock, as StartedTime).
type attemptRec struct {
	Asked   time.Duration `json:"asked_ns"`
	Started time.Time     `json:"started"`
	Began   time.Time     `json:"began"`
	Ended   time.Time     `json:"ended"`
}

// askedDelays records every poll attempt, per monitor URL and attempt.
type askedDelays struct {
	mu sync.Mutex
	m  map[string][]attemptRec
}

// wrap returns the poll activity next recording its attempts.
func (a *askedDelays) wrap(next func(context.Context, poll.Monitor) (*workflows.Response, error)) func(context.Context, poll.Monitor) (*workflows.Response, error) {
	return func(ctx context.Context, in poll.Monitor) (*workflows.Response, error) {
		began := time.Now()
		resp, err := next(ctx, in)
		rec := attemptRec{Started: activity.GetInfo(ctx).StartedTime, Began: began, Ended: time.Now()}
		var ae *temporal.ApplicationError
		if errors.As(err, &ae) {
			rec.Asked = ae.NextRetryDelay()
		}
		attempt := int(activity.GetInfo(ctx).Attempt)
		a.mu.Lock()
		s := a.m[in.Monitor]
		for len(s) < attempt {
			s = append(s, attemptRec{})
		}
		s[attempt-1] = rec
		a.m[in.Monitor] = s
		a.mu.Unlock()
		return resp, err
	}
}

func (a *askedDelays) snapshot() map[string][]attemptRec {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[string][]attemptRec, len(a.m))
	for k, v := range a.m {
		out[k] = slices.Clone(v)
	}
	return out
}

// lroRun is the longrunning section's worker: its own task queue on h's
// dev server and client, allowing the reference servers' origins, its
// poll activity wrapped to record every attempt (askedDelays).
type lroRun struct {
	h         *harness
	tq        string
	w         worker.Worker
	transport *http.Transport
	asked     *askedDelays
	devPID    int
	logDir    string
	logf      func(string, ...any)
}

// lroWorker starts the worker: the HTTP activity (adaptive admission off,
// as the harness's worker: the polls are paced by the monitor alone), the
// recording poll activity, the ready workflow and sleepWorkflow.
func lroWorker(h *harness, tq string, origins []string) (*lroRun, error) {
	r := &lroRun{h: h, tq: tq, transport: newTransport(), asked: &askedDelays{m: map[string][]attemptRec{}}}
	acts, err := activities.New(activities.Config{
		AllowedOrigins: origins,
		HTTPClient:     &http.Client{Transport: r.transport},
		Admission:      activities.Admission{Off: true},
	})
	if err != nil {
		return nil, err
	}
	r.w = worker.New(h.Client, tq, workerOptions)
	reg := registered.Of(acts)
	r.w.RegisterActivityWithOptions(reg.Do, activity.RegisterOptions{Name: input.ActivityName})
	r.w.RegisterActivityWithOptions(r.asked.wrap(reg.Poll), activity.RegisterOptions{Name: poll.ActivityName})
	workflows.Register(r.w)
	r.w.RegisterWorkflowWithOptions(sleepWorkflow, workflow.RegisterOptions{Name: sleepWorkflowName})
	if err := r.w.Start(); err != nil {
		return nil, fmt.Errorf("starting the longrunning worker: %w", err)
	}
	return r, nil
}

// seriesStagger separates the starts of the two pacing series.
const seriesStagger = 3 * time.Second

// startConcurrency is how many ExecuteWorkflow calls startMany keeps in
// flight: with 100, the dev server on 2 CPUs timed out some of its SQLite
// updates while starting 1000 followed calls.
const startConcurrency = 50

// startMany starts n workflows at once (startConcurrency ExecuteWorkflow
// calls in flight, eager start) and returns their runs, the i-th made by args(i).
func (r *lroRun) startMany(ctx context.Context, prefix string, n int, wf string, args func(i int) any) ([]client.WorkflowRun, error) {
	runs := make([]client.WorkflowRun, n)
	errs := make([]error, n)
	sem := make(chan struct{}, startConcurrency)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			runs[i], errs[i] = r.h.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
				ID: fmt.Sprintf("%s-%d", prefix, i), TaskQueue: r.tq, EnableEagerStart: true,
			}, wf, args(i))
		})
	}
	wg.Wait()
	return runs, errors.Join(errs...)
}

// followed is the request of operation i, following its operation.
func followed(url string, i int) any {
	body, _ := json.Marshal(map[string]int{"client": i})
	return workflows.Request{Operation: "charge", URL: url + "/charges", Body: body, Follow: &workflows.FollowOptions{}}
}

// waitFollowed waits for runs (at most 50 at a time) and returns the polls
// each operation's Response reported, by monitor (-1 for a failed one;
// a failure that names no monitor is counted in failed).
func waitFollowed(ctx context.Context, runs []client.WorkflowRun) (map[string]int32, int) {
	reported := map[string]int32{}
	failed := 0
	var mu sync.Mutex
	sem := make(chan struct{}, 50)
	var wg sync.WaitGroup
	for _, run := range runs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			var resp workflows.Response
			err := run.Get(ctx, &resp)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil && resp.Accepted != nil:
				reported[resp.Accepted.Monitor] = int32(resp.Accepted.Polls)
			default:
				if f, ok := workflows.AsFailure(err); ok && f.Accepted != nil {
					reported[f.Accepted.Monitor] = -1
				} else {
					failed++
				}
			}
		})
	}
	wg.Wait()
	return reported, failed
}

// series follows n operations at once against ref, started playing a,
// and measures their polls.
func (r *lroRun) series(ctx context.Context, name, tag string, n int, a testsuite.Async, ref *refServer) (PollSeries, error) {
	if err := ref.start(ctx, a, r.logDir, "longrunning-"+tag); err != nil {
		return PollSeries{}, err
	}
	runs, err := r.startMany(ctx, fmt.Sprintf("lro-%s-%d", tag, time.Now().UnixNano()), n, workflows.WorkflowName,
		func(i int) any { return followed(ref.URL, i) })
	if err != nil {
		return PollSeries{}, err
	}
	reported, failed := waitFollowed(ctx, runs)
	snap, err := ref.Clock(ctx)
	if err != nil {
		return PollSeries{}, err
	}
	s := pollSeries(name, a.RetryAfter, a.Duration, snap, r.asked.snapshot(), reported, true)
	s.Failed += failed
	s.Operations += failed
	return s, ctx.Err()
}

// sample samples the process for window while it holds held workflows,
// once a second: goroutines and their kinds, RSS; CPU time over the
// window; the live heap after a GC at its end; polls from ref, when set.
func (r *lroRun) sample(ctx context.Context, name string, held int, window time.Duration, ref *refServer) (ResourcePhase, error) {
	p := ResourcePhase{Name: name, Workflows: held}
	var polls0 int
	if ref != nil {
		st, err := ref.Stats(ctx)
		if err != nil {
			return p, err
		}
		polls0 = st.Polls
	}
	dev := func() time.Duration {
		if r.devPID == 0 {
			return 0
		}
		return processCPU(r.devPID)
	}
	var gs, noPool []int
	var rss []uint64
	kinds := map[string][]int{}
	cpu0, dev0, start := cpuTime(), dev(), time.Now()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for time.Since(start) < window {
		g, k := runtime.NumGoroutine(), goroutineKinds()
		gs, noPool = append(gs, g), append(noPool, g-k[kindHTTP])
		for _, name := range []string{kindWorkflow, kindPoll, kindStart, kindHTTP, kindOther} {
			kinds[name] = append(kinds[name], k[name])
		}
		rss = append(rss, rssBytes())
		select {
		case <-ctx.Done():
			return p, ctx.Err()
		case <-tick.C:
		}
	}
	p.Window, p.CPU, p.DevCPU = time.Since(start), cpuTime()-cpu0, dev()-dev0
	if ref != nil {
		st, err := ref.Stats(ctx)
		if err != nil {
			return p, err
		}
		p.Polls = st.Polls - polls0
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	p.HeapBytes = ms.HeapAlloc
	p.Samples = len(gs)
	p.Goroutines, p.GoroutinesMax = medianMax(gs)
	p.NoPool, _ = medianMax(noPool)
	p.Kinds, p.KindsMax = map[string]int{}, map[string]int{}
	for name, ns := range kinds {
		if md, mx := medianMax(ns); mx > 0 {
			p.Kinds[name], p.KindsMax[name] = md, mx
		}
	}
	slices.Sort(rss)
	p.RSSBytes = rss[(len(rss)-1)/2]
	return p, nil
}

// waiting is part 2: the worker idle, then holding p.Waiting followed
// operations waiting at once, then as many workflows waiting on a timer.
func (r *lroRun) waiting(ctx context.Context, p LongRunningParams, ref *refServer) (*WaitingResult, error) {
	w := &WaitingResult{Operations: p.Waiting, Duration: p.WaitingDuration, RetryAfter: p.WaitingRetryAfter}
	var err error
	runtime.GC()
	if w.Idle, err = r.sample(ctx, "idle", 0, p.IdleWindow, nil); err != nil {
		return w, err
	}
	r.logf("longrunning: idle worker: %d goroutines, %.1f MiB heap, %.1f MiB RSS", w.Idle.Goroutines, mib(w.Idle.HeapBytes), mib(w.Idle.RSSBytes))

	// Following.
	if err := ref.start(ctx, testsuite.Async{Duration: p.WaitingDuration, RetryAfter: p.WaitingRetryAfter}, r.logDir, "longrunning-waiting"); err != nil {
		return w, err
	}
	t0 := time.Now()
	runs, err := r.startMany(ctx, fmt.Sprintf("lro-wait-%d", t0.UnixNano()), p.Waiting, workflows.WorkflowName,
		func(i int) any { return followed(ref.URL, i) })
	w.Started = time.Since(t0)
	if err != nil {
		return w, err
	}
	for {
		st, err := ref.Stats(ctx)
		if err != nil {
			return w, err
		}
		if st.Operations >= p.Waiting {
			break
		}
		if time.Since(t0) > p.WaitingDuration-p.Window/2 {
			return w, fmt.Errorf("longrunning: only %d of %d operations accepted after %s", st.Operations, p.Waiting, time.Since(t0).Round(time.Second))
		}
		time.Sleep(100 * time.Millisecond)
	}
	w.Accepted = time.Since(t0)
	r.logf("longrunning: %d operations started in %s, all accepted after %s", p.Waiting, w.Started.Round(time.Millisecond), w.Accepted.Round(time.Millisecond))
	// The start burst leaves up to 64 idle connections per host in the
	// pool (closed after 90 s idle); close them, the polls open what they need.
	time.Sleep(3 * time.Second)
	r.transport.CloseIdleConnections()
	window := min(p.Window, time.Until(t0.Add(p.WaitingDuration-2*time.Second)))
	if window < 10*time.Second {
		return w, fmt.Errorf("longrunning: starting %d operations took %s: %s left to sample while all wait", p.Waiting, w.Accepted.Round(time.Second), window.Round(time.Second))
	}
	if w.Follow, err = r.sample(ctx, "following", p.Waiting, window, ref); err != nil {
		return w, err
	}
	r.logf("longrunning: %d operations waiting: %d goroutines (%v), %.1f MiB heap, %.1f MiB RSS, %d polls in %s",
		p.Waiting, w.Follow.Goroutines, w.Follow.Kinds, mib(w.Follow.HeapBytes), mib(w.Follow.RSSBytes), w.Follow.Polls, w.Follow.Window.Round(time.Second))
	reported, failed := waitFollowed(ctx, runs)
	snap, err := ref.Clock(ctx)
	if err != nil {
		return w, err
	}
	w.Series = pollSeries(fmt.Sprintf("%d operations at once, Retry-After: %d", p.Waiting, p.WaitingRetryAfter), p.WaitingRetryAfter, p.WaitingDuration, snap, r.asked.snapshot(), reported, false)
	w.Series.Failed += failed
	w.Series.Operations += failed

	// As many workflows waiting on a timer.
	t0 = time.Now()
	if _, err := r.startMany(ctx, fmt.Sprintf("lro-sleep-%d", t0.UnixNano()), p.Waiting, sleepWorkflowName, func(int) any { return p.SleepDuration }); err != nil {
		return w, err
	}
	time.Sleep(3 * time.Second)
	window = min(p.Window, time.Until(t0.Add(p.SleepDuration-2*time.Second)))
	if window < 10*time.Second {
		return w, fmt.Errorf("longrunning: starting %d sleeping workflows took %s", p.Waiting, time.Since(t0).Round(time.Second))
	}
	if w.Sleep, err = r.sample(ctx, "timer", p.Waiting, window, nil); err != nil {
		return w, err
	}
	r.logf("longrunning: %d workflows on a timer: %d goroutines (%v), %.1f MiB heap", p.Waiting, w.Sleep.Goroutines, w.Sleep.Kinds, mib(w.Sleep.HeapBytes))
	// Not waited for: their timers fire on their own, and nothing is
	// measured after this window.
	return w, nil
}

// medianMax returns the median (the lower one of an even count) and the
// largest of ns.
func medianMax(ns []int) (median, largest int) {
	if len(ns) == 0 {
		return 0, 0
	}
	s := slices.Clone(ns)
	slices.Sort(s)
	return s[(len(s)-1)/2], s[len(s)-1]
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

// runLongRunning runs the longrunning section on h's dev server (the
// default one, history.timerProcessorMaxTimeShift at 1 s, as claim 3's
// runs) with a worker of its own: the two pacing series at once, each
// against its own reference server, then the waiting run.
func runLongRunning(ctx context.Context, h *harness, p LongRunningParams, logDir string, logf func(string, ...any)) (*LongRunningResult, error) {
	res := &LongRunningResult{Params: p}
	// The servers' listeners first: the worker allows their origins.
	var refs []*refServer
	defer func() {
		for _, ref := range refs {
			if err := ref.Close(); err != nil {
				logf("longrunning: %v", err)
			}
		}
	}()
	for range 3 {
		ref, err := listenRef()
		if err != nil {
			return res, err
		}
		refs = append(refs, ref)
	}
	r, err := lroWorker(h, h.TaskQueue+"-longrunning", []string{refs[0].URL, refs[1].URL, refs[2].URL})
	if err != nil {
		return res, err
	}
	defer r.w.Stop()
	r.logDir, r.logf, r.devPID = logDir, logf, findDevServerPID(h.Dev.HostPort)

	// The longer backoff series first, the other 3 s later, so that
	// neither's start burst lands on the other's first gaps.
	var wg sync.WaitGroup
	var errRA, errBackoff error
	wg.Go(func() {
		res.Backoff, errBackoff = r.series(ctx, "no Retry-After (poll backoff)", "backoff", p.Operations,
			testsuite.Async{Duration: p.BackoffDuration}, refs[1])
	})
	wg.Go(func() {
		select {
		case <-time.After(seriesStagger):
		case <-ctx.Done():
		}
		res.RetryAfter, errRA = r.series(ctx, fmt.Sprintf("Retry-After: %d", p.RetryAfter), "retryafter", p.Operations,
			testsuite.Async{Duration: p.Duration, RetryAfter: p.RetryAfter}, refs[0])
	})
	wg.Wait()
	if err := errors.Join(errRA, errBackoff); err != nil {
		return res, err
	}
	res.BackoffRows = backoffRows(res.Backoff.Gaps, poll.Backoff(0, 0))
	for _, s := range []PollSeries{res.RetryAfter, res.Backoff} {
		logf("longrunning: %-32s %d operations, %d failed, polls %.1f (%d–%d), gap ÷ asked p50 %.3f p95 %.3f max %.3f (%d gaps), first poll %s after the acceptance",
			s.Name, s.Operations, s.Failed, s.Polls.Mean, s.Polls.Min, s.Polls.Max, s.Ratios.P50, s.Ratios.P95, s.Ratios.Max, s.Ratios.N, s.FirstPollMedian.Round(time.Millisecond))
	}
	res.Waiting, err = r.waiting(ctx, p, refs[2])
	return res, err
}
