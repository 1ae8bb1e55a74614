package chaos

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"sync"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/idemhttp/temporal-idempotent-http/harness/cluster"
	"github.com/idemhttp/temporal-idempotent-http/harness/itest"
	"github.com/idemhttp/temporal-idempotent-http/testsuite"
)

// Config configures [Run]. Cluster, WorkerBin, ToxiproxyBin and WorkDir
// are required; every other zero field has the default it names.
type Config struct {
	// Plan is the campaign's plan (operations, seed, pace of the faults).
	Plan Plan
	// Cluster is the running cluster; temporal-server is killed and
	// restarted once. Started with cluster.OnePartitionPerQueue,
	// its activity queues list a new worker's poller at once, which is
	// what Run waits for before the first operation.
	Cluster *cluster.Cluster
	// WorkerBin is the worker binary; ToxiproxyBin toxiproxy-server
	// ([BuildToxiproxy]).
	WorkerBin, ToxiproxyBin string
	// WorkDir receives the logs of the workers and of toxiproxy-server.
	WorkDir string
	// WorkerArgs are flags added to every worker's (e.g. --shared-rate).
	WorkerArgs []string
	// OriginQueue sets Request.OriginQueue on every operation (for workers
	// with --shared-rate).
	OriginQueue bool
	// ScheduleToClose is every operation's schedule-to-close timeout: it
	// must outlive the chaos (default 20 minutes).
	ScheduleToClose time.Duration
	// Drain bounds the wait for the operations after the last fault
	// (default 10 minutes).
	Drain time.Duration
	// APIProcessingTime is how long the API works on a new key (default
	// 500 ms, a payment API's pace): the faults then find requests in
	// flight, whose work is done while their answer is lost.
	APIProcessingTime time.Duration
	// Way is how the operations meet the API (default WayKeyed: an API
	// that honours keys); the others play an API that ignores them.
	Way Way
	// KeyIn is where the operations carry their key (Request.KeyIn) and
	// where the API reads it: "" the Idempotency-Key header, KeyInBody or
	// KeyInQuery. The ways without keys need KeyInBody (their default).
	KeyIn string
	// APICutRate is the share of requests the API processes and then cuts
	// without an answer (testsuite.Options.CutRate), beyond what the
	// toxics cut (default 0).
	APICutRate float64
	// Operator paces the person who decides, with the Temporal CLI, what
	// the calls waiting for a decision did (WayAtMostOnce only).
	Operator OperatorOptions
	// Logf, if not nil, gets progress lines.
	Logf func(string, ...any)
}

// Result is what a campaign did and found.
type Result struct {
	// Way and KeyIn are the campaign's Config.Way and Config.KeyIn.
	Way      Way      `json:"way,omitempty"`
	KeyIn    string   `json:"key_in,omitempty"`
	Plan     Plan     `json:"plan"`
	Schedule Schedule `json:"schedule"`
	Verdict  Verdict  `json:"verdict"`
	// Stats is the API's counters at the end; Requests the requests the
	// workers sent (what reached it through the proxy, which refuses the
	// rest during the outage; lookups included, the operator's not) and
	// RequestsPerSuccess those per operation that succeeded.
	Stats              testsuite.Stats `json:"api_stats"`
	Requests           int             `json:"requests"`
	RequestsPerSuccess float64         `json:"requests_per_success"`
	// Operator is what the operator did (WayAtMostOnce).
	Operator *OperatorReport `json:"operator,omitempty"`
	// Duration is from the first start to the last operation's end.
	Duration time.Duration `json:"duration_ns"`
	// Events is what the campaign did, when (faults as carried out).
	Events []Event `json:"events"`
	// Log is every request the API received: when and its answer.
	Log []Sample `json:"log"`
	// Completions is when each operation's workflow closed, in order.
	Completions []time.Duration `json:"completions_ns"`
	// Histories summarise the histories of the operations in the
	// Verdict's lists, by workflow ID.
	Histories map[string][]string `json:"histories,omitempty"`
}

// Event is one thing the campaign did, At after its start.
type Event struct {
	At   time.Duration `json:"at_ns"`
	What string        `json:"what"`
}

// Sample is one request at the API, At after the campaign's start.
type Sample struct {
	At     time.Duration `json:"at_ns"`
	Status int           `json:"status"`
}

// operationName is every operation's Request.Operation (part of its key).
const operationName = "charge"

func (c *Config) withDefaults() error {
	if c.Cluster == nil || c.WorkerBin == "" || c.ToxiproxyBin == "" || c.WorkDir == "" {
		return errors.New("chaos: Config needs Cluster, WorkerBin, ToxiproxyBin and WorkDir")
	}
	if err := c.checkWay(); err != nil {
		return err
	}
	c.Plan = c.Plan.withDefaults()
	if c.Plan.Operations <= 0 {
		return errors.New("chaos: Plan.Operations must be positive")
	}
	if c.ScheduleToClose <= 0 {
		c.ScheduleToClose = 20 * time.Minute
	}
	if c.Drain <= 0 {
		c.Drain = 10 * time.Minute
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	if c.APIProcessingTime <= 0 {
		c.APIProcessingTime = 500 * time.Millisecond
	}
	if !(c.APICutRate >= 0 && c.APICutRate <= 1) {
		return fmt.Errorf("chaos: Config.APICutRate %v: want a fraction in [0, 1]", c.APICutRate)
	}
	c.Operator = c.Operator.withDefaults(c.APIProcessingTime)
	return nil
}

// Run runs one campaign on cfg.Cluster: the API behind toxiproxy, the
// workers, the operations and the faults of [NewSchedule](cfg.Plan); then
// it waits for every operation (until the last fault plus cfg.Drain),
// and checks them with [Verify]. The error is for a campaign that could
// not be carried out (a process that did not start, the server not
// coming back); what the operations did is in the Result's Verdict.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.withDefaults(); err != nil {
		return nil, err
	}
	api := testsuite.NewServer(cfg.apiOptions())
	hs := httptest.NewServer(api)
	defer hs.Close()
	defer api.Close()
	px, err := startProxy(ctx, cfg.ToxiproxyBin, cfg.WorkDir, hs.Listener.Addr().String(), cfg.Plan.Seed)
	if err != nil {
		return nil, err
	}
	defer func() { _ = px.stop() }()
	cl, err := client.Dial(client.Options{HostPort: cfg.Cluster.FrontendHostPort(), Namespace: cfg.Cluster.Namespace(), Logger: itest.QuietLogger()})
	if err != nil {
		return nil, fmt.Errorf("chaos: dialling the cluster: %w", err)
	}
	defer cl.Close()
	c := &campaign{cfg: cfg, cl: cl, api: api, apiURL: hs.URL, px: px, schedule: NewSchedule(cfg.Plan),
		taskQueue: cfg.prefix()}
	if err := c.startWorkers(ctx); err != nil {
		return nil, err
	}
	defer c.stopWorkers()
	return c.run(ctx)
}

// campaign is one run's state.
type campaign struct {
	cfg       Config
	cl        client.Client
	api       *testsuite.Server
	apiURL    string // the API's own URL, not through the proxy
	px        *proxy
	schedule  Schedule
	taskQueue string
	start     time.Time

	mu      sync.Mutex
	events  []Event
	workers []*workerSlot
}

// event records what happened now, and logs it.
func (c *campaign) event(format string, args ...any) {
	c.mu.Lock()
	at := time.Since(c.start)
	if c.start.IsZero() {
		at = 0
	}
	c.events = append(c.events, Event{At: at, What: fmt.Sprintf(format, args...)})
	c.mu.Unlock()
	c.cfg.Logf("chaos %6.1fs: "+format, append([]any{at.Seconds()}, args...)...)
}

// run carries out the schedule and collects the result.
func (c *campaign) run(ctx context.Context) (*Result, error) {
	ops := c.operations()
	c.start = time.Now()
	c.event("campaign: %d operations, %d faults, chaos until %.0f s (seed %d, way %s, key in %s)", len(ops), len(c.schedule.Faults), c.schedule.End.Seconds(), c.schedule.Seed, c.cfg.Way, cmp.Or(c.cfg.KeyIn, "the Idempotency-Key header"))
	wctx, cancel := context.WithDeadline(ctx, c.start.Add(c.schedule.End+c.cfg.Drain))
	defer cancel()
	fctx, cancelFaults := context.WithCancel(ctx)
	faultErr, chaosOver := make(chan error, 1), make(chan struct{})
	go func() {
		err := c.faults(fctx, chaosOver)
		if err != nil {
			cancel() // a campaign that cannot go on: stop waiting
		}
		faultErr <- err
	}()
	var op *operator
	if c.cfg.Way == WayAtMostOnce {
		op = c.startOperator(wctx, ops)
	}
	c.startAndWait(wctx, ops)
	c.event("every operation ended or the wait ran out")
	if op != nil {
		op.halt()
	}
	// The whole schedule runs, even when the operations ended sooner.
	<-chaosOver
	cancelFaults()
	if err := <-faultErr; err != nil {
		return nil, err
	}
	return c.collect(ctx, ops, op)
}
