package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/harness/itest"
	"github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// FairnessSection is issue 42's item 5: Temporal's own fairness keys on
// one task queue against a task queue per origin with the shared rate.
const FairnessSection = "fairness"

// FairnessParams is the fairness section's setup: two origins behind one
// API process, origin A taking Capacity[0] requests per Window and origin
// B Capacity[1], each answering 429 over it; Workflows workflows per
// origin started at once, each needing one success, retrying with the
// contention experiment's policy (full jitter).
type FairnessParams struct {
	Workflows       int           `json:"workflows"`
	Capacity        [2]int        `json:"capacity"`
	Window          time.Duration `json:"window_ns"`
	Base            time.Duration `json:"base_ns"`
	Cap             time.Duration `json:"cap_ns"`
	Coefficient     float64       `json:"coefficient"`
	MaximumAttempts int32         `json:"maximum_attempts"`
	// Outage is how long origin A answers 503 to everything from its
	// first request in the outage runs, before it takes Capacity[0].
	Outage time.Duration `json:"outage_ns"`
	// RunTimeout bounds one run; workflows not done by then count as
	// failed and are terminated.
	RunTimeout time.Duration `json:"run_timeout_ns"`
}

// defaultFairness is the setup: A at 6/s, B at 2/s, 50 workflows
// each, a 30 s outage of A.
var defaultFairness = FairnessParams{
	Workflows: 50, Capacity: [2]int{6, 2}, Window: time.Second,
	Base: 4 * time.Second, Cap: 10 * time.Second, Coefficient: 2, MaximumAttempts: 1000,
	Outage: 30 * time.Second, RunTimeout: 150 * time.Second,
}

// limit is origin i's limit: its workflows at its capacity, in seconds.
func (p FairnessParams) limit(i int) float64 {
	return float64(p.Workflows) / float64(p.Capacity[i]) * p.Window.Seconds()
}

// fairnessServerArgs are the section's dev-server arguments: fairness on
// (Server 1.29.1 enforces a per-key rate limit only with it; see
// service/matching/ratelimit_manager.go) and one partition per task queue
// (the per-key limit is split across read partitions).
var fairnessServerArgs = []string{
	"--dynamic-config-value", "matching.enableFairness=true",
	"--dynamic-config-value", "matching.numTaskqueueReadPartitions=1",
	"--dynamic-config-value", "matching.numTaskqueueWritePartitions=1",
}

// FairnessSetup is how a run paces the two origins: today's task queue
// per origin with the shared rate (its governor learning each origin's
// rate), or one task queue with a fairness key per origin (the origin),
// one default per-key rate limit and a FairnessWeight per origin fixed
// when the activity is scheduled; matching limits each key to KeyRate ×
// its weight.
type FairnessSetup struct {
	Keys    bool       `json:"keys"`
	KeyRate float64    `json:"key_rate,omitempty"`
	Weights [2]float32 `json:"weights,omitzero"`
}

// label names s.
func (s FairnessSetup) label() string {
	if !s.Keys {
		return "a task queue per origin, shared rate"
	}
	if s.Weights[0] == s.Weights[1] {
		return fmt.Sprintf("fairness keys, %g/s per key", s.KeyRate)
	}
	return fmt.Sprintf("fairness keys, %g/s × weights %g:%g", s.KeyRate, s.Weights[0], s.Weights[1])
}

// fairnessContentionSetups are the contention runs: today, then one
// default per-key rate at A's capacity, at B's, and at B's with weights
// in the ratio of the capacities (the best fairness can do when the rates
// are known in advance).
func fairnessContentionSetups(p FairnessParams) []FairnessSetup {
	a, b := float64(p.Capacity[0]), float64(p.Capacity[1])
	return []FairnessSetup{
		{},
		{Keys: true, KeyRate: a, Weights: [2]float32{1, 1}},
		{Keys: true, KeyRate: b, Weights: [2]float32{1, 1}},
		{Keys: true, KeyRate: b, Weights: [2]float32{float32(a / b), 1}},
	}
}

// fairnessOutageSetups are the outage runs: today, and the weighted keys.
func fairnessOutageSetups(p FairnessParams) []FairnessSetup {
	s := fairnessContentionSetups(p)
	return []FairnessSetup{s[0], s[3]}
}

// FairnessResult is the fairness section.
type FairnessResult struct {
	Params     FairnessParams `json:"params"`
	ServerArgs []string       `json:"server_args"`
	Runs       []FairnessRun  `json:"runs"`
}

// FairnessRun is one run: both origins' workflows started at once.
type FairnessRun struct {
	Setup FairnessSetup `json:"setup"`
	// Outage: origin A answered 503 for this long from its first request
	// (0: the contention run).
	Outage time.Duration `json:"outage_ns,omitempty"`
	// StoredKeyRate is the per-key default rate the server returned when
	// it was set (keys only).
	StoredKeyRate float64 `json:"stored_key_rate,omitempty"`
	// Origins are A's figures, then B's.
	Origins [2]FairnessOrigin `json:"origins"`
	// Failed counts workflows that did not succeed (or were not done by
	// the run's timeout).
	Failed int `json:"failed"`
	// Wall is from the first start call to the last result.
	Wall time.Duration `json:"wall_ns"`
	// Load is the machine's load average (1, 5, 15 min) after the run:
	// the CPUs are shared, and a stall of the worker shows as a gap.
	Load string `json:"load,omitempty"`
}

// FairnessOrigin is one origin's figures in a run.
type FairnessOrigin struct {
	Capacity  int `json:"capacity"`
	Requests  int `json:"requests"`
	Successes int `json:"successes"`
	// ToLastSuccess is from the run's first request (to either origin)
	// to this origin's last success.
	ToLastSuccess time.Duration `json:"to_last_success_ns"`
	// DuringOutage counts the requests during A's outage.
	DuringOutage int `json:"during_outage,omitempty"`
	// Log is every request, offsets from the run's first request.
	Log []LogEntry `json:"log"`
}

// perSuccess is o's requests per success.
func (o FairnessOrigin) perSuccess() float64 {
	return float64(o.Requests) / float64(max(o.Successes, 1))
}

// fairCallName is the bench's workflow for the fairness-key runs.
const fairCallName = "BenchFairCall"

// fairCallWorkflow is the ready workflow's call (workflows.Call) with pri
// on its activity options: its fairness key and weight, fixed when the
// activity is scheduled. Eager execution is off: matching does not
// rate-limit eager activities.
func fairCallWorkflow(ctx workflow.Context, req workflows.Request, pri temporal.Priority) (*workflows.Response, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{DisableEagerExecution: true, Priority: pri})
	return workflows.Call(ctx, req)
}

// fairnessEnv is what the section runs on: a dev server with
// fairnessServerArgs, the two origins, and a client.
type fairnessEnv struct {
	p       FairnessParams
	dev     *itest.DevServer
	c       client.Client
	origins [2]*targetServer
	log     *os.File
	logDir  string
	logf    func(string, ...any)
}

// runFairness runs the fairness section: the contention runs of
// fairnessContentionSetups, then the outage runs of fairnessOutageSetups,
// each on fresh task queues and workers.
func runFairness(ctx context.Context, cli, logDir string, p FairnessParams, logf func(string, ...any)) (_ *FairnessResult, err error) {
	e := &fairnessEnv{p: p, logDir: logDir, logf: logf}
	defer func() { err = errors.Join(err, e.close()) }()
	if err := e.start(ctx, cli); err != nil {
		return nil, err
	}
	res := &FairnessResult{Params: p, ServerArgs: fairnessServerArgs}
	stamp := time.Now().Unix() % 100000
	for _, outage := range []time.Duration{0, p.Outage} {
		setups := fairnessContentionSetups(p)
		if outage > 0 {
			setups = fairnessOutageSetups(p)
		}
		for i, s := range setups {
			run, err := e.run(ctx, s, outage, fmt.Sprintf("f%d-%d-%d", outage/time.Second, i, stamp))
			if err != nil {
				return res, fmt.Errorf("fairness, %s (outage %s): %w", s.label(), outage, err)
			}
			a, b := run.Origins[0], run.Origins[1]
			logf("fairness %-40s outage %3.0f s: A %4d requests (%.2f per success), last success %5.1f s (%.2f × limit); B %4d requests (%.2f per success), last success %5.1f s (%.2f × limit); %d failed; load %s",
				s.label(), outage.Seconds(), a.Requests, a.perSuccess(), a.ToLastSuccess.Seconds(), a.ToLastSuccess.Seconds()/p.limit(0),
				b.Requests, b.perSuccess(), b.ToLastSuccess.Seconds(), b.ToLastSuccess.Seconds()/p.limit(1), run.Failed, run.Load)
			res.Runs = append(res.Runs, run)
		}
	}
	return res, nil
}

func (e *fairnessEnv) start(ctx context.Context, cli string) error {
	devLog, err := os.Create(filepath.Join(e.logDir, "fairness-devserver.log"))
	if err != nil {
		return err
	}
	e.log = devLog
	logger := sdklog.NewStructuredLogger(slog.New(slog.NewJSONHandler(devLog, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if e.dev, err = itest.StartDevServer(ctx, itest.DevServerOptions{
		CLI: cli, LogLevel: "error", ExtraArgs: fairnessServerArgs, Output: devLog, Logger: logger,
	}); err != nil {
		return err
	}
	if e.c, err = e.dev.Dial(client.Options{Logger: logger}); err != nil {
		return err
	}
	for i := range e.origins {
		if e.origins[i], err = startTarget(); err != nil {
			return err
		}
	}
	return nil
}

func (e *fairnessEnv) close() error {
	var errs []error
	for _, o := range e.origins {
		if o != nil {
			errs = append(errs, o.Close())
		}
	}
	if e.c != nil {
		e.c.Close()
	}
	if e.dev != nil {
		errs = append(errs, e.dev.Stop())
	}
	if e.log != nil {
		errs = append(errs, e.log.Close())
	}
	return errors.Join(errs...)
}

// run runs setup s once: fresh workers and task queues, both origins'
// servers fresh (A down for outage first, when set), both origins'
// workflows started at once.
func (e *fairnessEnv) run(ctx context.Context, s FairnessSetup, outage time.Duration, tag string) (_ FairnessRun, err error) {
	run := FairnessRun{Setup: s, Outage: outage}
	var srv [2]*testsuite.Server
	var down *itest.Outage
	for i := range srv {
		srv[i] = testsuite.NewServer(testsuite.Options{Capacity: e.p.Capacity[i], CapacityWindow: e.p.Window})
		var h http.Handler = srv[i]
		if i == 0 && outage > 0 {
			down = &itest.Outage{Next: srv[i], Duration: outage}
			h = down
		}
		e.origins[i].Set(h)
	}
	defer func() {
		for _, o := range e.origins {
			o.Set(okHandler())
		}
	}()
	h, load, stop, err := e.workers(ctx, s, tag)
	if err != nil {
		return run, err
	}
	defer func() { err = errors.Join(err, stop()) }()
	if s.Keys {
		if run.StoredKeyRate, err = setKeyRate(ctx, e.c, e.dev.Namespace, fairHTTPQueue(h.TaskQueue), s.KeyRate); err != nil {
			return run, err
		}
	}
	rctx, cancel := context.WithTimeout(ctx, e.p.RunTimeout)
	defer cancel()
	var cr ContentionRun
	cp := ContentionParams{Clients: 2 * e.p.Workflows, EagerStart: true}
	err = startAndWait(rctx, h, cp, load, tag, &cr)
	run.Failed, run.Wall = cr.Failed, cr.Wall
	if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		e.logf("fairness %s: %d workflows not done after %s: counted failed, terminated", s.label(), cr.Failed, e.p.RunTimeout)
		for i := range cp.Clients {
			_ = e.c.TerminateWorkflow(ctx, fmt.Sprintf("contention-%s-%s-%d", tag, load.Name, i), "", "bench run timed out")
		}
		err = nil
	}
	if err != nil {
		return run, err
	}
	var logs [2][]stamped
	for i := range srv {
		for _, l := range srv[i].Log() {
			logs[i] = append(logs[i], stamped{l.Time, l.Status})
		}
	}
	if down != nil {
		// The outage's own log holds its 503s and what srv answered after.
		logs[0] = nil
		for _, l := range down.Log() {
			logs[0] = append(logs[0], stamped{down.Began().Add(l.At), l.Status})
		}
	}
	run.Origins = fairnessOrigins(logs, e.p.Capacity, outage)
	run.Load = loadAvg()
	return run, nil
}

// stamped is a request an origin got: when, and its answer.
type stamped struct {
	at     time.Time
	status int
}

// fairnessOrigins turns the origins' request logs into their figures,
// offsets from the first request to either; with an outage, the requests
// before outage after A's first request are counted as during it.
func fairnessOrigins(logs [2][]stamped, capacity [2]int, outage time.Duration) [2]FairnessOrigin {
	var t0, a0 time.Time
	for i, l := range logs {
		for _, s := range l {
			if t0.IsZero() || s.at.Before(t0) {
				t0 = s.at
			}
			if i == 0 && (a0.IsZero() || s.at.Before(a0)) {
				a0 = s.at
			}
		}
	}
	var out [2]FairnessOrigin
	for i, l := range logs {
		o := FairnessOrigin{Capacity: capacity[i]}
		for _, s := range l {
			at := s.at.Sub(t0)
			o.Requests++
			o.Log = append(o.Log, LogEntry{At: at, Status: s.status})
			if s.status >= 200 && s.status <= 299 {
				o.Successes++
				o.ToLastSuccess = max(o.ToLastSuccess, at)
			}
			if outage > 0 && s.at.Sub(a0) < outage {
				o.DuringOutage++
			}
		}
		out[i] = o
	}
	return out
}

// fairHTTPQueue is the one task queue of the fairness-key runs' HTTP
// activities, beside the workflows' queue tq.
func fairHTTPQueue(tq string) string { return tq + "-http" }

// workers starts s's workers on fresh task queues named after tag and
// returns a harness that starts workflows there, the load of both
// origins' workflows, and the function that stops the workers. Today's
// setup is a host worker on its defaults (its origins' own queues, the
// shared rate: its governors and reporter), the requests on their
// origin's queue; the keys' setup is a worker of the workflows and one
// of the HTTP activity (adaptive admission off: matching's per-key limit
// is the only pacing), the requests on fairHTTPQueue with their origin as
// the fairness key.
func (e *fairnessEnv) workers(ctx context.Context, s FairnessSetup, tag string) (*harness, contentionLoad, func() error, error) {
	tq := "fair-" + tag
	var urls [2]string
	for i, o := range e.origins {
		urls[i] = o.URL
	}
	req := func(i int) (workflows.Request, int) {
		o := i / e.p.Workflows
		body, _ := json.Marshal(map[string]int{"client": i})
		return workflows.Request{
			Operation: "charge", URL: urls[o] + "/charges", Body: body,
			Retry: workflows.RetryOptions{
				InitialInterval: e.p.Base, BackoffCoefficient: e.p.Coefficient, MaximumInterval: e.p.Cap,
				MaximumAttempts: e.p.MaximumAttempts, Jitter: workflows.JitterFull,
			},
			StartToCloseTimeout: 10 * time.Second, ScheduleToCloseTimeout: 30 * time.Minute,
		}, o
	}
	wait := func(ctx context.Context, run client.WorkflowRun) (int32, error) {
		var resp workflows.Response
		err := run.Get(ctx, &resp)
		return resp.Attempt, err
	}
	if !s.Keys {
		ah, err := startHostWorker(e.dev.HostPort, e.log, "--allow-origin", urls[0], "--allow-origin", urls[1], "--task-queue", tq, "--identity", tq+"-worker", "--log-level", "error")
		if err != nil {
			return nil, contentionLoad{}, nil, err
		}
		load := contentionLoad{Name: "queues", Workflow: workflows.WorkflowName, Wait: wait, Args: func(i int) []any {
			r, _ := req(i)
			r.OriginQueue = true
			return []any{r}
		}}
		return &harness{Client: ah.c, TaskQueue: tq}, load, func() error { ah.stop(); return nil }, nil
	}
	acts, err := activities.New(activities.Config{
		AllowedOrigins: urls[:],
		HTTPClient:     &http.Client{Transport: newTransport()},
		Admission:      activities.Admission{Off: true},
	})
	if err != nil {
		return nil, contentionLoad{}, nil, err
	}
	ww := worker.New(e.c, tq, workerOptions)
	workflows.Register(ww)
	ww.RegisterWorkflowWithOptions(fairCallWorkflow, workflow.RegisterOptions{Name: fairCallName})
	hw := worker.New(e.c, fairHTTPQueue(tq), workerOptions)
	acts.Register(hw)
	var started []worker.Worker
	stop := func() error {
		for _, w := range started {
			w.Stop()
		}
		return nil
	}
	for _, w := range []worker.Worker{ww, hw} {
		if err := w.Start(); err != nil {
			_ = stop()
			return nil, contentionLoad{}, nil, err
		}
		started = append(started, w)
	}
	// The HTTP queue's partition is loaded by the poll: the per-key
	// limit is set on a queue that is already polled.
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := itest.Eventually(wctx, 100*time.Millisecond, func() error {
		resp, err := e.c.DescribeTaskQueue(wctx, fairHTTPQueue(tq), enumspb.TASK_QUEUE_TYPE_ACTIVITY)
		if err != nil {
			return err
		}
		if len(resp.GetPollers()) == 0 {
			return errors.New("no activity poller yet")
		}
		return nil
	}); err != nil {
		_ = stop()
		return nil, contentionLoad{}, nil, err
	}
	load := contentionLoad{Name: "keys", Workflow: fairCallName, Wait: wait, Args: func(i int) []any {
		r, o := req(i)
		r.TaskQueue = fairHTTPQueue(tq)
		return []any{r, temporal.Priority{FairnessKey: urls[o], FairnessWeight: s.Weights[o]}}
	}}
	return &harness{Client: e.c, TaskQueue: tq}, load, stop, nil
}

// setKeyRate sets the per-fairness-key default rate limit of tq's
// activity queue to rps (UpdateTaskQueueConfig) and returns what the
// server stored, which must be rps.
func setKeyRate(ctx context.Context, c client.Client, namespace, tq string, rps float64) (float64, error) {
	resp, err := c.WorkflowService().UpdateTaskQueueConfig(ctx, &workflowservice.UpdateTaskQueueConfigRequest{
		Namespace: namespace, Identity: "bench", TaskQueue: tq, TaskQueueType: enumspb.TASK_QUEUE_TYPE_ACTIVITY,
		UpdateFairnessKeyRateLimitDefault: &workflowservice.UpdateTaskQueueConfigRequest_RateLimitUpdate{
			RateLimit: &taskqueuepb.RateLimit{RequestsPerSecond: float32(rps)}, Reason: "bench fairness section",
		},
	})
	if err != nil {
		return 0, fmt.Errorf("setting %s's per-key rate limit: %w", tq, err)
	}
	stored := float64(resp.GetConfig().GetFairnessKeysRateLimitDefault().GetRateLimit().GetRequestsPerSecond())
	if float32(stored) != float32(rps) {
		return stored, fmt.Errorf("%s's per-key rate limit: set %g/s, the server stored %g/s", tq, rps, stored)
	}
	return stored, nil
}
