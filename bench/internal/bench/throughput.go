package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/idemhttp/temporal-idempotent-http/internal/defaults"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// Names of the minimal baseline workflow and activity.
const (
	minimalWorkflowName = "BenchMinimalPOST"
	minimalActivityName = "BenchRawPOST"
)

// minimalWorkflow is the throughput baseline: one activity that POSTs body to
// url with plain net/http, with no idempotency key, no validation, no
// classification and no result shaping, and the same timeouts as
// workflows.Call's defaults.
func minimalWorkflow(ctx workflow.Context, url string, body []byte) (int, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout:    defaults.StartToCloseTimeout,
		ScheduleToCloseTimeout: defaults.ScheduleToCloseTimeout,
		RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: defaults.MaximumAttempts},
	})
	var status int
	err := workflow.ExecuteActivity(ctx, minimalActivityName, url, body).Get(ctx, &status)
	return status, err
}

type minimalActivities struct{ client *http.Client }

// Post is the baseline activity: POST, read the body, return the status.
func (m *minimalActivities) Post(ctx context.Context, url string, body []byte) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := m.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return 0, err
	}
	if resp.StatusCode >= 300 {
		return resp.StatusCode, fmt.Errorf("status %d", resp.StatusCode)
	}
	return resp.StatusCode, nil
}

func registerMinimal(w worker.Worker, c *http.Client) {
	w.RegisterWorkflowWithOptions(minimalWorkflow, workflow.RegisterOptions{Name: minimalWorkflowName})
	w.RegisterActivityWithOptions((&minimalActivities{client: c}).Post, activity.RegisterOptions{Name: minimalActivityName})
}

// okHandler answers every request 201 with a small JSON record, like the
// reference server's answer to a new key, without storing anything: the
// server side costs the same whichever client calls it.
func okHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"id":"rec_1","status":"created","amount":42,"currency":"EUR"}`)
	})
}

// ThroughputRound is one batch of workflows run to completion.
type ThroughputRound struct {
	Kind      string        `json:"kind"` // "ours" or "minimal"
	Workflows int           `json:"workflows"`
	Elapsed   time.Duration `json:"elapsed_ns"`
	PerSecond float64       `json:"per_second"`
	// CPU is the CPU time (user + system) the dev server and this process
	// (worker, client, HTTP server) used during the batch, when the dev
	// server's process could be found.
	CPU time.Duration `json:"cpu_ns"`
}

// ThroughputResult holds every round and the medians.
type ThroughputResult struct {
	Rounds        []ThroughputRound `json:"rounds"`
	OursPerSecond float64           `json:"ours_per_second"`
	MinimalPerSec float64           `json:"minimal_per_second"`
	// Ratios are ours ÷ minimal workflows/s of each round (the two batches
	// run back to back); Ratio is their median.
	Ratios []float64 `json:"ratios"`
	Ratio  float64   `json:"ratio"`
	// CPURatio is the median of minimal ÷ ours CPU time per workflow, per
	// round: workflows per CPU-second, ours ÷ minimal (0 if not measured).
	CPURatios       []float64 `json:"cpu_ratios,omitempty"`
	CPURatio        float64   `json:"cpu_ratio,omitempty"`
	Concurrency     int       `json:"concurrency"`
	WorkflowsPerRun int       `json:"workflows_per_round"`
	// AdmissionRatios are, per round, the ready workflow's workflows/s on a
	// worker with adaptive admission on ÷ on the worker without it;
	// AdmissionRatio is their median, AdmissionPerSecond the median rate.
	AdmissionRatios    []float64 `json:"admission_ratios,omitempty"`
	AdmissionRatio     float64   `json:"admission_ratio,omitempty"`
	AdmissionPerSecond float64   `json:"admission_per_second,omitempty"`
	// Warmups are the uncounted first batches, one per kind, on workers
	// that have just started: with admission on, the slow start's cost.
	Warmups []ThroughputRound `json:"warmups,omitempty"`
}

// throughputOptions configures runThroughput.
type throughputOptions struct {
	// Workflows per batch (default 300) and Rounds (default 9). A round is
	// one batch of each kind back to back, the order alternating between
	// rounds, so machine noise hits both.
	Workflows, Rounds int
	// Concurrency is how many workflows are started and awaited at once
	// (default 50): enough to keep the worker busy without measuring how
	// fast the dev server accepts a burst of starts.
	Concurrency int
	// Warmup workflows of each kind run first and are not counted (default
	// Workflows): a worker that has just started is held back by the slow
	// start of admission for its first second or two, once per origin.
	Warmup int
	Logf   func(string, ...any)
}

// runThroughput measures completed workflows per second through h's one
// worker: the ready workflow (one attempt, success) against minimalWorkflow
// doing the same POST, both against okHandler.
func runThroughput(ctx context.Context, h *harness, o throughputOptions) (ThroughputResult, error) {
	if o.Workflows <= 0 {
		o.Workflows = 300
	}
	if o.Rounds <= 0 {
		o.Rounds = 9
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 50
	}
	if o.Warmup <= 0 {
		o.Warmup = o.Workflows
	}
	h.Target.Set(okHandler())
	url := h.Target.URL + "/charges"
	body := []byte(`{"amount":42,"currency":"EUR"}`)
	devPID := findDevServerPID(h.Dev.HostPort)
	cpuNow := func() time.Duration {
		if devPID == 0 {
			return 0
		}
		return cpuTime() + processCPU(devPID)
	}
	// The ready workflow again on a worker with adaptive admission on.
	ha, stopAdmission, err := h.admissionWorker(h.TaskQueue + "-admission-throughput")
	if err != nil {
		return ThroughputResult{}, err
	}
	defer stopAdmission()
	seq := 0
	runOne := func(kind string, i int) error {
		id := fmt.Sprintf("tput-%s-%d-%d", kind, time.Now().UnixNano(), i)
		opts := client.StartWorkflowOptions{ID: id, TaskQueue: h.TaskQueue}
		if kind == "admission" {
			opts.TaskQueue = ha.TaskQueue
		}
		var run client.WorkflowRun
		var err error
		if kind == "ours" || kind == "admission" {
			run, err = h.Client.ExecuteWorkflow(ctx, opts, workflows.WorkflowName, workflows.Request{
				Operation: "charge", URL: url, Body: body,
			})
		} else {
			run, err = h.Client.ExecuteWorkflow(ctx, opts, minimalWorkflowName, url, body)
		}
		if err != nil {
			return err
		}
		return run.Get(ctx, nil)
	}
	batch := func(kind string, n int) (ThroughputRound, error) {
		sem := make(chan struct{}, o.Concurrency)
		var wg sync.WaitGroup
		var mu sync.Mutex
		var first error
		cpu0, start := cpuNow(), time.Now()
		for range n {
			seq++
			i := seq
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				if err := runOne(kind, i); err != nil {
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("%s workflow: %w", kind, err)
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		el := time.Since(start)
		rd := ThroughputRound{Kind: kind, Workflows: n, Elapsed: el, PerSecond: float64(n) / el.Seconds()}
		if devPID != 0 {
			rd.CPU = cpuNow() - cpu0
		}
		return rd, first
	}
	res := ThroughputResult{Concurrency: o.Concurrency, WorkflowsPerRun: o.Workflows}
	for _, kind := range []string{"ours", "minimal", "admission"} {
		rd, err := batch(kind, o.Warmup)
		if err != nil {
			return res, err
		}
		res.Warmups = append(res.Warmups, rd)
		if o.Logf != nil {
			o.Logf("throughput: %-7s warm-up: %d workflows in %s = %.1f/s", kind, o.Warmup, rd.Elapsed.Round(time.Millisecond), rd.PerSecond)
		}
	}
	var ours, minimal, adm []float64
	for r := range o.Rounds {
		order := []string{"ours", "minimal", "admission"}
		if r%2 == 1 {
			order = []string{"admission", "minimal", "ours"}
		}
		got := map[string]ThroughputRound{}
		for _, kind := range order {
			rd, err := batch(kind, o.Workflows)
			if err != nil {
				return res, err
			}
			got[kind] = rd
			res.Rounds = append(res.Rounds, rd)
			if o.Logf != nil {
				o.Logf("throughput: %-7s round %d: %d workflows in %s = %.1f/s, %s CPU", kind, r+1, o.Workflows, rd.Elapsed.Round(time.Millisecond), rd.PerSecond, rd.CPU.Round(time.Millisecond))
			}
		}
		ours, minimal = append(ours, got["ours"].PerSecond), append(minimal, got["minimal"].PerSecond)
		adm = append(adm, got["admission"].PerSecond)
		res.AdmissionRatios = append(res.AdmissionRatios, got["admission"].PerSecond/got["ours"].PerSecond)
		res.Ratios = append(res.Ratios, got["ours"].PerSecond/got["minimal"].PerSecond)
		if got["ours"].CPU > 0 {
			res.CPURatios = append(res.CPURatios, got["minimal"].CPU.Seconds()/got["ours"].CPU.Seconds())
		}
	}
	res.OursPerSecond, res.MinimalPerSec = median(ours), median(minimal)
	res.Ratio, res.CPURatio = median(res.Ratios), median(res.CPURatios)
	res.AdmissionPerSecond, res.AdmissionRatio = median(adm), median(res.AdmissionRatios)
	return res, nil
}

// findDevServerPID finds the process listening for `temporal server
// start-dev` on hostPort (the SDK does not expose it), or 0.
func findDevServerPID(hostPort string) int {
	_, port, err := net.SplitHostPort(hostPort)
	if err != nil {
		return 0
	}
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if slices.Contains(args, "start-dev") && slices.Contains(args, port) {
			return pid
		}
	}
	return 0
}

// processCPU is the user plus system CPU time of process pid, from /proc
// (0 when it cannot be read).
func processCPU(pid int) time.Duration {
	own, _, _, _ := procCPU(pid)
	return own
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
