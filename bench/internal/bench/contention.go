package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/idemhttp/temporal-idempotent-http/internal/backoff"
	"github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// ContentionParams is the contention experiment: Clients workflows started
// at once against a reference server that accepts Capacity requests per
// Window and answers the rest 429 without Retry-After; each workflow needs
// one success and retries with the given policy.
type ContentionParams struct {
	Clients         int           `json:"clients"`
	Capacity        int           `json:"capacity"`
	Window          time.Duration `json:"window_ns"`
	Base            time.Duration `json:"base_ns"`
	Cap             time.Duration `json:"cap_ns"`
	Coefficient     float64       `json:"coefficient"`
	MaximumAttempts int32         `json:"maximum_attempts"`
	// EagerStart starts the workflows with eager workflow start, so their
	// first workflow task (and, eagerly, the first activity attempt) runs
	// on the local worker without a trip through matching: the herd of first
	// attempts is then as tight as the start calls.
	EagerStart bool `json:"eager_start"`
}

// defaultContention is the setup the bench command runs. With deterministic
// backoff it is 17 rounds of herds, most a full cap apart (about 2.5 min);
// the cap is 10 windows, so spreading retries over it can pay off; the
// window (1 s) is wider than the herd of first attempts Temporal leaves
// (about 0.5 s with eager start and 8 pollers), so a herd really contends;
// and the base (4 s) keeps most jittered delays above the 1 s below which
// Temporal's timers are not precise (see timerShiftArgs).
var defaultContention = ContentionParams{
	Clients: 100, Capacity: 6, Window: time.Second,
	Base: 4 * time.Second, Cap: 10 * time.Second, Coefficient: 2, MaximumAttempts: 1000,
	EagerStart: true,
}

// Herd and timer-floor parameters of temporalSimConfig, as measured on the
// dev server: first attempts of a burst of starts spread over about 0.5 s,
// and no retry sooner than about 1 s.
const (
	temporalHerdSpread = 500 * time.Millisecond
	temporalMinDelay   = time.Second
)

// backoff is the strategy's backoff.Backoff for these parameters.
func (p ContentionParams) backoff(j workflows.Jitter) backoff.Backoff {
	return backoff.Backoff{InitialInterval: p.Base, BackoffCoefficient: p.Coefficient, MaximumInterval: p.Cap, Jitter: j}
}

// simConfig is the pure in-process simulation of the experiment with
// clients clients, Brooker-style: all start at once, 1 ms ± 0.5 ms one-way
// network delay, delays exactly as computed.
func (p ContentionParams) simConfig(clients int, j workflows.Jitter, seed uint64) simConfig {
	return simConfig{
		Clients:  clients,
		Backoff:  p.backoff(j),
		NewModel: func() model { return &capacityModel{k: p.Capacity, window: p.Window} },
		NetMean:  time.Millisecond, NetSD: 500 * time.Microsecond,
		Seed: seed,
	}
}

// temporalSimConfig is simConfig with what the dev server adds: the herd of
// first attempts spread over temporalHerdSpread and no retry delay below
// temporalMinDelay. It predicts the dev-server run.
func (p ContentionParams) temporalSimConfig(clients int, j workflows.Jitter, seed uint64) simConfig {
	c := p.simConfig(clients, j, seed)
	c.StartSpread, c.MinRetryDelay = temporalHerdSpread, temporalMinDelay
	return c
}

// sharedSimConfig is admissionSimConfig with one rate for every worker,
// kept by the server (simShared, the governor's defaults).
func (p ContentionParams) sharedSimConfig(clients, workers int, seed uint64) simConfig {
	c := p.admissionSimConfig(clients, workers, seed)
	c.Admission.Shared = &simShared{}
	return c
}

// admissionSimConfig is temporalSimConfig for full jitter with the
// activity's adaptive admission (its defaults) on workers workers.
func (p ContentionParams) admissionSimConfig(clients, workers int, seed uint64) simConfig {
	c := p.temporalSimConfig(clients, workflows.JitterFull, seed)
	c.Admission = &simAdmission{Workers: workers}
	return c
}

// ContentionRun is one strategy's run on the dev server.
type ContentionRun struct {
	Strategy workflows.Jitter `json:"strategy"`
	// Admission: the worker's adaptive admission was on (a fresh worker).
	Admission bool `json:"admission,omitempty"`
	// Peer is the peer activity of a peers-section run (see peers.go),
	// empty for this library's workflow.
	Peer string `json:"peer,omitempty"`
	// Requests is every request the server received; Successes the 201s (one per workflow).
	Requests  int `json:"requests"`
	Successes int `json:"successes"`
	// Failed counts workflows that did not succeed (0 when MaximumAttempts is high enough).
	Failed int `json:"failed"`
	// ToLastSuccess is from the server's first request to its last success.
	ToLastSuccess time.Duration `json:"to_last_success_ns"`
	// Wall is from the first start call to the last workflow result.
	Wall time.Duration `json:"wall_ns"`
	// StartSpread is how long starting all workflows took.
	StartSpread time.Duration `json:"start_spread_ns"`
	// FirstSpread is from the first to the last workflow's first request:
	// the width of the herd that Temporal's start and dispatch leave.
	FirstSpread time.Duration `json:"first_spread_ns"`
	// MaxAttempts is the largest attempt number of a success; for a load
	// whose results do not say (a peer's), the most requests the server
	// received with one key.
	MaxAttempts int32 `json:"max_attempts"`
	// FirstRequest is from the first start call to the server's first
	// request (0 in results from before it was recorded).
	FirstRequest time.Duration `json:"first_request_ns,omitempty"`
	// Log is the server's request log (time offsets from the first request, status).
	Log []LogEntry `json:"log"`

	// began is when the first start call was made.
	began time.Time
}

// LogEntry is one request seen by the server.
type LogEntry struct {
	At     time.Duration `json:"at_ns"`
	Status int           `json:"status"`
}

// runContention runs the experiment on h for strategy j.
func runContention(ctx context.Context, h *harness, p ContentionParams, j workflows.Jitter, tag string) (ContentionRun, error) {
	run, err := runContentionLoad(ctx, h, p, readyLoad(h, p, j), tag)
	run.Strategy = j
	return run, err
}

// contentionLoad is what each workflow of the contention experiment runs.
type contentionLoad struct {
	// Name labels the workflow IDs (with the run's tag and the workflow's number).
	Name string
	// Workflow is the workflow type; Args returns the arguments of workflow i.
	Workflow string
	Args     func(i int) []any
	// Wait waits for a workflow's result and returns the attempt number of
	// its success when the result says (0 when it does not).
	Wait func(ctx context.Context, run client.WorkflowRun) (attempt int32, err error)
}

// readyLoad is the ready workflow (workflows.HTTPCallWorkflow) with p's
// retry policy and strategy j, calling h's target.
func readyLoad(h *harness, p ContentionParams, j workflows.Jitter) contentionLoad {
	return contentionLoad{
		Name:     string(j),
		Workflow: workflows.WorkflowName,
		Args: func(i int) []any {
			body, _ := json.Marshal(map[string]int{"client": i})
			return []any{workflows.Request{
				Operation: "charge",
				URL:       h.Target.URL + "/charges",
				Body:      body,
				Retry: workflows.RetryOptions{
					InitialInterval: p.Base, BackoffCoefficient: p.Coefficient, MaximumInterval: p.Cap,
					MaximumAttempts: p.MaximumAttempts, Jitter: j,
				},
				StartToCloseTimeout:    10 * time.Second,
				ScheduleToCloseTimeout: 30 * time.Minute,
				OriginQueue:            h.OriginQueue,
			}}
		},
		Wait: func(ctx context.Context, run client.WorkflowRun) (int32, error) {
			var resp workflows.Response
			err := run.Get(ctx, &resp)
			return resp.Attempt, err
		},
	}
}

// runContentionLoad runs the experiment on h with load: it puts a
// capacity-limited reference server behind h's target, starts and waits for
// the workflows, and reads the server's counts and log.
func runContentionLoad(ctx context.Context, h *harness, p ContentionParams, load contentionLoad, tag string) (ContentionRun, error) {
	return runLoad(ctx, h, p, testsuite.Options{Capacity: p.Capacity, CapacityWindow: p.Window}, load, tag)
}

// runLoad is runContentionLoad against a reference server with api's
// options instead (the partial section's: random failures, no capacity).
func runLoad(ctx context.Context, h *harness, p ContentionParams, api testsuite.Options, load contentionLoad, tag string) (ContentionRun, error) {
	srv := testsuite.NewServer(api)
	h.Target.Set(srv)
	defer h.Target.Set(okHandler())
	var run ContentionRun
	if err := startAndWait(ctx, h, p, load, tag, &run); err != nil {
		return run, err
	}
	st := srv.Stats()
	run.Requests, run.Successes = st.Requests, st.Records
	log := srv.Log()
	if len(log) > 0 {
		t0 := log[0].Time
		run.FirstRequest = t0.Sub(run.began)
		perKey := map[string]int32{}
		for _, l := range log {
			if perKey[l.IdempotencyKey] == 0 {
				run.FirstSpread = l.Time.Sub(t0)
			}
			perKey[l.IdempotencyKey]++
			at := l.Time.Sub(t0)
			run.Log = append(run.Log, LogEntry{At: at, Status: l.Status})
			if l.Status >= 200 && l.Status <= 299 {
				run.ToLastSuccess = max(run.ToLastSuccess, at)
			}
		}
		if run.MaxAttempts == 0 {
			for _, n := range perKey {
				run.MaxAttempts = max(run.MaxAttempts, n)
			}
		}
	}
	return run, nil
}

// startAndWait starts p.Clients workflows of load on h at once and waits
// for them, recording in run the start spread, the wall time, the failures
// and the largest attempt of a success.
func startAndWait(ctx context.Context, h *harness, p ContentionParams, load contentionLoad, tag string, run *ContentionRun) error {
	runs := make([]client.WorkflowRun, p.Clients)
	errs := make([]error, p.Clients)
	start := time.Now()
	run.began = start
	var wg sync.WaitGroup
	for i := range p.Clients {
		wg.Go(func() {
			runs[i], errs[i] = h.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
				ID: fmt.Sprintf("contention-%s-%s-%d", tag, load.Name, i), TaskQueue: h.TaskQueue,
				EnableEagerStart: p.EagerStart,
			}, load.Workflow, load.Args(i)...)
		})
	}
	wg.Wait()
	run.StartSpread = time.Since(start)
	for i, err := range errs {
		if err != nil {
			return fmt.Errorf("starting workflow %d: %w", i, err)
		}
	}
	var mu sync.Mutex
	for i := range p.Clients {
		wg.Go(func() {
			attempt, err := load.Wait(ctx, runs[i])
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				run.Failed++
				return
			}
			run.MaxAttempts = max(run.MaxAttempts, attempt)
		})
	}
	wg.Wait()
	run.Wall = time.Since(start)
	return ctx.Err()
}
