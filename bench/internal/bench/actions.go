package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"

	"github.com/idemhttp/temporal-idempotent-http/harness/actions"
	"github.com/idemhttp/temporal-idempotent-http/harness/itest"
	"github.com/idemhttp/temporal-idempotent-http/host"
	"github.com/idemhttp/temporal-idempotent-http/internal/governor"
	"github.com/idemhttp/temporal-idempotent-http/webhooks"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// ActionsSection is the section of Temporal actions per call (-only
// actions).
const ActionsSection = "actions"

// ActionsSVG is the actions section's plot, next to RESULTS.md.
const ActionsSVG = "actions.svg"

// ActionsParams sizes the actions section.
type ActionsParams struct {
	// Calls per scenario of single calls (first try, retries, follow,
	// webhook, lookup), each way; Concurrency of them at a time.
	Calls       int `json:"calls"`
	Concurrency int `json:"concurrency"`
	// FailingCalls are the calls of the scenario whose retries answer 503
	// (the breakers hold them back: about 4 s a call).
	FailingCalls int `json:"failing_calls"`
	// Retries are the 503s before a call's 201; Polls the GETs of a
	// followed operation's monitor until its 200.
	Retries int `json:"retries"`
	Polls   int `json:"polls"`
	// Idle is how long the idle worker is watched.
	Idle time.Duration `json:"idle_ns"`
	// Stream is how long the steady stream of calls runs, at StreamRate
	// calls per second.
	Stream     time.Duration `json:"stream_ns"`
	StreamRate float64       `json:"stream_rate"`
}

// defaultActions is the section of make bench: about 4 minutes.
var defaultActions = ActionsParams{Calls: 20, Concurrency: 10, FailingCalls: 10, Retries: 3, Polls: 10, Idle: 30 * time.Second, Stream: 20 * time.Second, StreamRate: 4}

// withDefaults fills p's zero fields from defaultActions.
func (p ActionsParams) withDefaults() ActionsParams {
	d := defaultActions
	if p.Calls <= 0 {
		p.Calls = d.Calls
	}
	if p.Concurrency <= 0 {
		p.Concurrency = d.Concurrency
	}
	if p.FailingCalls <= 0 {
		p.FailingCalls = d.FailingCalls
	}
	if p.Retries <= 0 {
		p.Retries = d.Retries
	}
	if p.Polls <= 0 {
		p.Polls = d.Polls
	}
	if p.Idle <= 0 {
		p.Idle = d.Idle
	}
	if p.Stream <= 0 {
		p.Stream = d.Stream
	}
	if p.StreamRate <= 0 {
		p.StreamRate = d.StreamRate
	}
	return p
}

// The section's scenarios, in the order they run.
const (
	scenFirstTry   = "first-try"
	scenRetries    = "retries"
	scenRetries425 = "retries-425"
	scenFollow     = "follow"
	scenWebhook    = "webhook"
	scenLookup     = "lookup"
	scenLoad1      = "load-1"
	scenIdle       = "idle"
	scenLoad2      = "load-2"
)

// ActionsResult is the actions section: Temporal actions per call of the
// ready workflow on a worker wired by package host (its defaults: the
// shared rate on) against a plain activity in a minimal workflow, and the
// shared rate's own actions idle and under load.
type ActionsResult struct {
	Params    ActionsParams     `json:"params"`
	Scenarios []ActionsScenario `json:"scenarios"`
	// Namespace is where the counter was read.
	Namespace string `json:"namespace"`
}

// ActionsScenario is one scenario: the ready workflow's run (Ours) and,
// for single calls, the plain baseline's (Plain).
type ActionsScenario struct {
	Name  string      `json:"name"`
	Plain *ActionsRun `json:"plain,omitempty"`
	Ours  ActionsRun  `json:"ours"`
}

// ActionsRun is one run of a scenario: the server's counter over its
// window and what the histories say.
type ActionsRun struct {
	Calls   int `json:"calls"`
	Failed  int `json:"failed"`
	Workers int `json:"workers,omitempty"`
	// Window is from the counter's snapshot before to the one after;
	// Busy from the first call's start to the last one's end.
	Window time.Duration `json:"window_ns"`
	Busy   time.Duration `json:"busy_ns"`
	// Server is the increase of the server's action counter over the
	// window, by action_type.
	Server actions.Counts `json:"server"`
	// Calls' workflows, counted from their histories (server-style and
	// by Temporal Cloud's rules); Shared the governors' histories
	// within the window: the workers' reports (signal-with-start) and
	// the governor's own commands.
	History actions.Run `json:"history"`
	Shared  actions.Run `json:"shared"`
	// Requests the API took, and the records it made (lookup).
	Requests int `json:"requests"`
	Records  int `json:"records,omitempty"`
}

// heartbeats are the heartbeats that reached the server.
func (r ActionsRun) heartbeats() float64 {
	return r.Server[actions.TypeHeartbeat] + r.Server[actions.TypeHeartbeatByID]
}

// counterOnly are the counted actions no history holds: heartbeats,
// queries and rejected updates (Cloud bills each).
func (r ActionsRun) counterOnly() float64 {
	return r.heartbeats() + r.Server[actions.TypeQuery] + r.Server[actions.TypeUpdateRejected]
}

// ServerOwn is the calls' own share of the counter: all of it but the
// shared rate's (its governors' histories, server-style).
func (r ActionsRun) ServerOwn() float64 { return r.Server.Total() - r.Shared.Server.Total() }

// ServerOwnTally is ServerOwn by category.
func (r ActionsRun) ServerOwnTally() actions.Tally {
	return r.Server.Tally().Add(r.Shared.Server.Scale(-1))
}

// CloudOwn is the calls' own actions by Temporal Cloud's rules: their
// histories, plus what only the counter sees.
func (r ActionsRun) CloudOwn() float64 { return r.History.Cloud.Total() + r.counterOnly() }

// CloudOwnTally is CloudOwn by category.
func (r ActionsRun) CloudOwnTally() actions.Tally {
	t := r.History.Cloud.Add(actions.Tally{actions.Heartbeat: r.heartbeats(), actions.Query: r.Server[actions.TypeQuery],
		actions.Update: r.Server[actions.TypeUpdateRejected]})
	for k, v := range t {
		if v == 0 {
			delete(t, k)
		}
	}
	return t
}

// Unexplained is the counter's increase that neither history explains
// (0 when every action of the window was the run's): a check.
func (r ActionsRun) Unexplained() float64 {
	return r.Server.Total() - r.History.Server.Total() - r.Shared.Server.Total() - r.counterOnly()
}

// perCall divides by the calls (0 without).
func (r ActionsRun) perCall(n float64) float64 {
	if r.Calls == 0 {
		return 0
	}
	return n / float64(r.Calls)
}

// SharedPerWorkerSecond is the shared rate's actions per worker per
// second of the window (server-style and Cloud's).
func (r ActionsRun) SharedPerWorkerSecond() (server, cloud float64) {
	d := r.Busy
	if d <= 0 {
		d = r.Window
	}
	n := float64(max(r.Workers, 1)) * d.Seconds()
	if n <= 0 {
		return 0, 0
	}
	return r.Shared.Server.Total() / n, r.Shared.Cloud.Total() / n
}

// scenario returns the scenario named name, or nil.
func (a *ActionsResult) scenario(name string) *ActionsScenario {
	for i := range a.Scenarios {
		if a.Scenarios[i].Name == name {
			return &a.Scenarios[i]
		}
	}
	return nil
}

// actionsEnv is the section's dev server (its metrics served), API,
// baseline worker and the webhook receiver's pieces.
type actionsEnv struct {
	dev     *itest.DevServer
	c       client.Client
	metrics string
	target  *targetServer
	plainTQ string
	plain   worker.Worker
	// plainClient is the baseline worker's (its log to the section's).
	plainClient client.Client
	p           ActionsParams
	tag         string
	logf        func(string, ...any)
	logFiles    []*os.File
	workerLog   *os.File
	namespace   string
}

// Settling: the counter must stand still this long before a snapshot: longer than
// the reporter's interval (1 s), so that a report after the calls is in.
const (
	actionsQuiet       = 1500 * time.Millisecond
	actionsSettleLimit = time.Minute
)

// runActions runs the section on a dev server of its own, started with
// its metrics on a known port.
func runActions(ctx context.Context, cli, logDir string, p ActionsParams, logf func(string, ...any)) (*ActionsResult, error) {
	e := &actionsEnv{p: p, logf: logf, tag: fmt.Sprint(time.Now().Unix())}
	defer e.close()
	if err := e.start(ctx, cli, logDir); err != nil {
		return nil, err
	}
	res := &ActionsResult{Params: p, Namespace: e.namespace}
	for _, s := range []struct {
		name string
		run  func(context.Context) (ActionsScenario, error)
	}{
		{scenFirstTry, e.firstTry}, {scenRetries425, e.retries425}, {scenRetries, e.retries}, {scenFollow, e.follow}, {scenWebhook, e.webhook}, {scenLookup, e.lookup},
	} {
		sc, err := s.run(ctx)
		sc.Name = s.name
		if err != nil {
			return res, fmt.Errorf("actions, %s: %w", s.name, err)
		}
		res.Scenarios = append(res.Scenarios, sc)
		e.logScenario(sc)
	}
	load, err := e.sharedRate(ctx)
	for _, sc := range load {
		res.Scenarios = append(res.Scenarios, sc)
		e.logScenario(sc)
	}
	return res, err
}

// start starts the dev server (metrics on a free port), the API and the
// baseline worker.
func (e *actionsEnv) start(ctx context.Context, cli, logDir string) error {
	port, err := itest.FreePort()
	if err != nil {
		return err
	}
	devLog, err := os.Create(filepath.Join(logDir, "actions-devserver.log"))
	if err != nil {
		return err
	}
	e.logFiles = append(e.logFiles, devLog)
	if e.dev, err = itest.StartDevServer(ctx, itest.DevServerOptions{
		CLI: cli, LogLevel: "error", ExtraArgs: actions.ServerArgs(port), Output: devLog,
		Logger: sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(devLog, &slog.HandlerOptions{Level: slog.LevelWarn}))),
	}); err != nil {
		return err
	}
	e.c, e.metrics, e.namespace = e.dev.Client(), actions.MetricsURL(port), e.dev.Namespace
	if e.workerLog, err = os.Create(filepath.Join(logDir, "actions-workers.log")); err != nil {
		return err
	}
	e.logFiles = append(e.logFiles, e.workerLog)
	if e.target, err = startTarget(); err != nil {
		return err
	}
	e.plainTQ = "actions-plain-" + e.tag
	pc, err := e.dev.Dial(client.Options{Logger: sdklog.NewStructuredLogger(slog.New(slog.NewJSONHandler(e.workerLog, &slog.HandlerOptions{Level: slog.LevelWarn})))})
	if err != nil {
		return err
	}
	e.plainClient = pc
	e.plain = worker.New(pc, e.plainTQ, worker.Options{})
	registerPlainActions(e.plain, &http.Client{Transport: newTransport()})
	return e.plain.Start()
}

func (e *actionsEnv) close() {
	if e.plain != nil {
		e.plain.Stop()
	}
	if e.plainClient != nil {
		e.plainClient.Close()
	}
	if e.target != nil {
		_ = e.target.Close()
	}
	if e.dev != nil {
		_ = e.dev.Stop()
	}
	for _, f := range e.logFiles {
		_ = f.Close()
	}
}

// actionsHost is a worker wired as package host wires one on its
// defaults (the shared rate on): host.Load's settings, a client dialed
// with Host.ClientOptions (the dev server's address put in), Host.Start,
// and a worker of Host.WorkerOptions with Host.Register.
type actionsHost struct {
	h *host.Host
	c client.Client
	w worker.Worker
}

// startHost starts a host worker of task queue tq as identity.
func (e *actionsEnv) startHost(tq, identity string) (*actionsHost, error) {
	return startHostWorker(e.dev.HostPort, e.workerLog, "--allow-origin", e.target.URL, "--task-queue", tq, "--identity", identity)
}

// startHostWorker starts a host worker with the worker's flags args (at
// log level error) on the dev server at hostPort, the SDK's log going to
// logTo.
func startHostWorker(hostPort string, logTo io.Writer, args ...string) (*actionsHost, error) {
	h, err := host.Load(append(args, "--log-level", "error"))
	if err != nil {
		return nil, err
	}
	opts := h.ClientOptions()
	opts.HostPort = hostPort
	// The SDK logs each failed attempt at Error: to the section's log
	// rather than the terminal.
	opts.Logger = sdklog.NewStructuredLogger(slog.New(slog.NewJSONHandler(logTo, &slog.HandlerOptions{Level: slog.LevelWarn})))
	c, err := client.Dial(opts)
	if err != nil {
		return nil, err
	}
	if err := h.Start(c); err != nil {
		c.Close()
		return nil, err
	}
	w := worker.New(c, h.TaskQueue(), h.WorkerOptions())
	h.Register(w)
	if err := w.Start(); err != nil {
		h.Close()
		c.Close()
		return nil, err
	}
	return &actionsHost{h: h, c: c, w: w}, nil
}

func (a *actionsHost) stop() {
	a.w.Stop()
	a.h.Close()
	a.c.Close()
}

// governorID is the workflow ID of the governor of tq's requests to the
// API.
func (e *actionsEnv) governorID(tq string) string {
	q, _ := workflows.OriginTaskQueue(tq, e.target.URL)
	return governor.WorkflowID(q)
}

// measure takes the counter's snapshot, runs do (which returns the
// workflow IDs it ran, failures, and how long the calls took), takes the
// snapshot after, and reads the histories of those workflows and of the
// governors (within the window).
func (e *actionsEnv) measure(ctx context.Context, governors []string, do func() (ids []string, failed int, busy time.Duration, err error)) (ActionsRun, error) {
	before, err := actions.Settle(ctx, e.metrics, e.namespace, actionsQuiet, actionsSettleLimit)
	if err != nil {
		return ActionsRun{}, err
	}
	t0 := time.Now()
	ids, failed, busy, err := do()
	if err != nil {
		return ActionsRun{}, err
	}
	after, err := actions.Settle(ctx, e.metrics, e.namespace, actionsQuiet, actionsSettleLimit)
	if err != nil {
		return ActionsRun{}, err
	}
	t1 := time.Now()
	r := ActionsRun{Calls: len(ids), Failed: failed, Window: t1.Sub(t0), Busy: busy, Server: after.Sub(before)}
	for _, id := range ids {
		h, err := actions.FromWorkflow(ctx, e.c, id, actions.Window{})
		if err != nil {
			return r, err
		}
		r.History = r.History.Add(h)
	}
	for _, g := range governors {
		h, err := actions.FromWorkflow(ctx, e.c, g, actions.Window{From: t0, To: t1})
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			continue // no report: no governor
		}
		if err != nil {
			return r, err
		}
		r.Shared = r.Shared.Add(h)
	}
	return r, nil
}

// calls runs n workflows, conc at a time: start(id) starts the
// workflow of call id; after(id), if set, runs once it started (the
// webhook's delivery).
func (e *actionsEnv) calls(ctx context.Context, prefix string, n, conc int, start func(ctx context.Context, id string) (client.WorkflowRun, error), after func(ctx context.Context, id string) error) (ids []string, failed int, busy time.Duration, err error) {
	for i := range n {
		ids = append(ids, fmt.Sprintf("actions-%s-%s-%d", prefix, e.tag, i))
	}
	_, errs, busy := runConcurrently(ctx, n, conc, func(ctx context.Context, i int) error {
		run, err := start(ctx, ids[i])
		if err != nil {
			return err
		}
		if after != nil {
			if err := after(ctx, ids[i]); err != nil {
				return err
			}
		}
		return run.Get(ctx, nil)
	})
	for _, err := range errs {
		if err != nil {
			failed++
			e.logf("actions %s: %v", prefix, err)
		}
	}
	return ids, failed, busy, ctx.Err()
}

// body is a call's request body: the call's ID (the API answers each
// call alike whichever client sends it) and an amount.
func callBody(id string, extra string) []byte {
	return fmt.Appendf(nil, `{"call":%q,"amount":42,"currency":"EUR"%s}`, id, extra)
}

// pair runs a scenario of single calls: the plain baseline, then the
// ready workflow on a fresh host worker (a task queue, and so a governor,
// of its own), each against a fresh api.
func (e *actionsEnv) pair(ctx context.Context, name string, n, conc int, api func() *actionsAPI, plain func(id string) PlainCall, ours func(id string) workflows.Request,
	plainAfter, oursAfter func(api *actionsAPI, h *actionsHost) func(ctx context.Context, id string) error) (ActionsScenario, error) {
	var sc ActionsScenario
	a := api()
	e.target.Set(a)
	var pa func(ctx context.Context, id string) error
	if plainAfter != nil {
		pa = plainAfter(a, nil)
	}
	if plain != nil {
		pr, err := e.measure(ctx, nil, func() ([]string, int, time.Duration, error) {
			return e.calls(ctx, name+"-plain", n, conc, func(ctx context.Context, id string) (client.WorkflowRun, error) {
				return e.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: e.plainTQ}, plainActionsWorkflow, plain(id))
			}, pa)
		})
		pr.Requests, pr.Records = a.stats()
		sc.Plain = &pr
		if err != nil {
			return sc, err
		}
	}
	tq := "actions-" + name + "-" + e.tag
	h, err := e.startHost(tq, tq+"-worker")
	if err != nil {
		return sc, err
	}
	defer h.stop()
	a = api()
	e.target.Set(a)
	var oa func(ctx context.Context, id string) error
	if oursAfter != nil {
		oa = oursAfter(a, h)
	}
	sc.Ours, err = e.measure(ctx, []string{e.governorID(tq)}, func() ([]string, int, time.Duration, error) {
		return e.calls(ctx, name+"-ours", n, conc, func(ctx context.Context, id string) (client.WorkflowRun, error) {
			return e.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: tq}, workflows.WorkflowName, ours(id))
		}, oa)
	})
	sc.Ours.Requests, sc.Ours.Records = a.stats()
	sc.Ours.Workers = 1
	return sc, err
}

// firstTry: a call the API answers 201 at once.
func (e *actionsEnv) firstTry(ctx context.Context) (ActionsScenario, error) {
	url := e.target.URL + "/charges"
	return e.pair(ctx, scenFirstTry, e.p.Calls, e.p.Concurrency, func() *actionsAPI { return newActionsAPI(apiOK, 0, 0, 0) },
		func(id string) PlainCall { return PlainCall{Mode: plainPost, URL: url, Body: callBody(id, "")} },
		func(id string) workflows.Request {
			return workflows.Request{Operation: "charge", URL: url, Body: callBody(id, "")}
		}, nil, nil)
}

// retries: a call the API answers 503 Retries times, then 201. On the
// host's defaults the 503s are failures to the worker's breaker and to
// the governor's: both hold attempts back.
func (e *actionsEnv) retries(ctx context.Context) (ActionsScenario, error) {
	url := e.target.URL + "/charges"
	return e.pair(ctx, scenRetries, e.p.FailingCalls, e.p.Concurrency, func() *actionsAPI { return newActionsAPI(apiRetries, e.p.Retries, 0, http.StatusServiceUnavailable) },
		func(id string) PlainCall { return PlainCall{Mode: plainPost, URL: url, Body: callBody(id, "")} },
		func(id string) workflows.Request {
			return workflows.Request{Operation: "charge", URL: url, Body: callBody(id, "")}
		}, nil, nil)
}

// retries425: a call the API answers 425 Too Early Retries times, then
// 201: retried as a 503 is, but neither a throttle nor a failure to any
// breaker, so every retry is the retry alone. The plain activity retries
// any error alike: its figures are the 503 scenario's.
func (e *actionsEnv) retries425(ctx context.Context) (ActionsScenario, error) {
	url := e.target.URL + "/charges"
	return e.pair(ctx, scenRetries425, e.p.Calls, e.p.Concurrency, func() *actionsAPI { return newActionsAPI(apiRetries, e.p.Retries, 0, http.StatusTooEarly) },
		func(id string) PlainCall { return PlainCall{Mode: plainPost, URL: url, Body: callBody(id, "")} },
		func(id string) workflows.Request {
			return workflows.Request{Operation: "charge", URL: url, Body: callBody(id, "")}
		}, nil, nil)
}

// follow: a call the API answers 202 with a monitor, polled Polls times
// (Retry-After: 1). Its calls run all at once: each waits about Polls
// seconds and sends a request a second.
func (e *actionsEnv) follow(ctx context.Context) (ActionsScenario, error) {
	url := e.target.URL + "/transfers"
	return e.pair(ctx, scenFollow, e.p.Calls, e.p.Calls, func() *actionsAPI { return newActionsAPI(apiFollow, 0, e.p.Polls, 0) },
		func(id string) PlainCall { return PlainCall{Mode: plainFollow, URL: url, Body: callBody(id, "")} },
		func(id string) workflows.Request {
			return workflows.Request{Operation: "transfer", URL: url, Body: callBody(id, ""), Follow: &workflows.FollowOptions{}}
		}, nil, nil)
}

// actionsWebhookWait is the webhook scenario's timeout, both ways.
const actionsWebhookWait = 10 * time.Minute

// webhook: a call whose operation ends by a webhook; the ready workflow's
// comes through the receiver (webhooks.NewReceiver, as host serves it with
// --webhook-addr: a signed Stripe event, an Update), the plain one's is a
// signal a handler of the user's own would send.
func (e *actionsEnv) webhook(ctx context.Context) (ActionsScenario, error) {
	url := e.target.URL + "/charges"
	v, err := benchVerifier("stripe")
	if err != nil {
		return ActionsScenario{}, err
	}
	provider := &http.Client{Transport: newTransport(), Timeout: 30 * time.Second}
	var closers []func()
	defer func() {
		for _, c := range closers {
			c()
		}
	}()
	return e.pair(ctx, scenWebhook, e.p.Calls, e.p.Concurrency, func() *actionsAPI { return newActionsAPI(apiWebhook, 0, 0, 0) },
		func(id string) PlainCall {
			return PlainCall{Mode: plainWebhook, URL: url, Body: callBody(id, ""), Wait: actionsWebhookWait}
		},
		func(id string) workflows.Request {
			return workflows.Request{Operation: whOperation, URL: url, Body: callBody(id, ""),
				Webhook: &workflows.WebhookOptions{Succeeded: []string{whSucceeded}, Failed: []string{"payment_intent.payment_failed"}, Timeout: actionsWebhookWait}}
		},
		func(a *actionsAPI, _ *actionsHost) func(ctx context.Context, id string) error {
			return func(ctx context.Context, id string) error {
				if err := awaitPost(ctx, a, id); err != nil {
					return err
				}
				return e.c.SignalWorkflow(ctx, id, "", plainWebhookSignal, []byte(`{"type":"`+whSucceeded+`"}`))
			}
		},
		func(a *actionsAPI, h *actionsHost) func(ctx context.Context, id string) error {
			rc, err := webhooks.NewReceiver(webhooks.Config{Client: h.c, Verifier: v, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				return func(context.Context, string) error { return err }
			}
			srv := httptest.NewServer(rc)
			closers = append(closers, srv.Close)
			return func(ctx context.Context, id string) error {
				if err := awaitPost(ctx, a, id); err != nil {
					return err
				}
				ts := time.Now().Unix()
				evID := "evt_" + id
				body := webhookEvent(evID, id, whOperation, ts, false)
				hdr, err := signWebhook("stripe", evID, ts, body)
				if err != nil {
					return err
				}
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/webhooks/stripe", bytes.NewReader(body))
				if err != nil {
					return err
				}
				req.Header = hdr
				resp, err := provider.Do(req)
				if err != nil {
					return err
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					return fmt.Errorf("the receiver answered %s", resp.Status)
				}
				return nil
			}
		})
}

// awaitPost waits until the API answered call id's first POST (the
// workflow awaits its webhook from then on).
func awaitPost(ctx context.Context, a *actionsAPI, id string) error {
	select {
	case <-a.expect(id):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Minute):
		return fmt.Errorf("call %s: no POST within a minute", id)
	}
}

// lookup: an API without keys whose first answer to each call is lost
// after its record was made: the ready workflow's call (Reconcile.Lookup,
// its key in the body's client_reference) asks the lookup and finds it;
// the plain activity sends again and makes a second record.
func (e *actionsEnv) lookup(ctx context.Context) (ActionsScenario, error) {
	url := e.target.URL + "/payments"
	return e.pair(ctx, scenLookup, e.p.Calls, e.p.Concurrency, func() *actionsAPI { return newActionsAPI(apiLookup, 0, 0, 0) },
		func(id string) PlainCall {
			return PlainCall{Mode: plainPost, URL: url, Body: callBody(id, fmt.Sprintf(`,"client_reference":%q`, id))}
		},
		func(id string) workflows.Request {
			return workflows.Request{Operation: "pay", URL: url, Body: callBody(id, ""), KeyIn: "body:client_reference",
				Reconcile: workflows.Reconcile{Lookup: url + "?client_reference={key}"}}
		}, nil, nil)
}

// sharedRate runs the shared rate's scenarios: a steady stream of calls
// on one host worker, the same worker idle, then the stream on two.
func (e *actionsEnv) sharedRate(ctx context.Context) ([]ActionsScenario, error) {
	var out []ActionsScenario
	api := newActionsAPI(apiOK, 0, 0, 0)
	e.target.Set(api)
	tq1 := "actions-" + scenLoad1 + "-" + e.tag
	h1, err := e.startHost(tq1, tq1+"-worker")
	if err != nil {
		return out, err
	}
	defer h1.stop()
	run, err := e.stream(ctx, scenLoad1, tq1, 1, api)
	out = append(out, ActionsScenario{Name: scenLoad1, Ours: run})
	if err != nil {
		return out, err
	}
	run, err = e.measure(ctx, []string{e.governorID(tq1)}, func() ([]string, int, time.Duration, error) {
		select {
		case <-time.After(e.p.Idle):
		case <-ctx.Done():
		}
		return nil, 0, 0, ctx.Err()
	})
	run.Workers = 1
	out = append(out, ActionsScenario{Name: scenIdle, Ours: run})
	if err != nil {
		return out, err
	}
	tq2 := "actions-" + scenLoad2 + "-" + e.tag
	var hs []*actionsHost
	defer func() {
		for _, h := range hs {
			h.stop()
		}
	}()
	for i := range 2 {
		h, err := e.startHost(tq2, fmt.Sprintf("%s-worker-%d", tq2, i+1))
		if err != nil {
			return out, err
		}
		hs = append(hs, h)
	}
	api = newActionsAPI(apiOK, 0, 0, 0)
	e.target.Set(api)
	run, err = e.stream(ctx, scenLoad2, tq2, 2, api)
	out = append(out, ActionsScenario{Name: scenLoad2, Ours: run})
	return out, err
}

// stream starts a ready workflow on tq every 1/StreamRate s for Stream,
// waits for them all, and measures it; api is the API they call.
func (e *actionsEnv) stream(ctx context.Context, name, tq string, workers int, api *actionsAPI) (ActionsRun, error) {
	run, err := e.measure(ctx, []string{e.governorID(tq)}, func() ([]string, int, time.Duration, error) {
		url := e.target.URL + "/charges"
		every := time.Duration(float64(time.Second) / e.p.StreamRate)
		n := int(e.p.Stream / every)
		var ids []string
		var mu sync.Mutex
		failed := 0
		var wg sync.WaitGroup
		start := time.Now()
		var end time.Time
		tick := time.NewTicker(every)
		defer tick.Stop()
		for i := range n {
			id := fmt.Sprintf("actions-%s-%s-%d", name, e.tag, i)
			ids = append(ids, id)
			wg.Go(func() {
				run, err := e.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: tq}, workflows.WorkflowName,
					workflows.Request{Operation: "charge", URL: url, Body: callBody(id, "")})
				if err == nil {
					err = run.Get(ctx, nil)
				}
				mu.Lock()
				defer mu.Unlock()
				end = time.Now()
				if err != nil {
					failed++
					e.logf("actions %s: %v", name, err)
				}
			})
			if i < n-1 {
				select {
				case <-tick.C:
				case <-ctx.Done():
				}
			}
		}
		wg.Wait()
		return ids, failed, end.Sub(start), ctx.Err()
	})
	run.Workers = workers
	run.Requests, _ = api.stats()
	return run, err
}

// logScenario logs a scenario's figures per call.
func (e *actionsEnv) logScenario(sc ActionsScenario) {
	o := sc.Ours
	if sc.Plain != nil {
		p := *sc.Plain
		e.logf("actions %-9s plain: %s per call (Cloud %s) [%s]; ours: %s per call own (Cloud %s) [%s], shared rate %s; unexplained %g/%g",
			sc.Name, actions.Num(p.perCall(p.ServerOwn())), actions.Num(p.perCall(p.CloudOwn())), p.ServerOwnTally().Scale(1/float64(max(p.Calls, 1))),
			actions.Num(o.perCall(o.ServerOwn())), actions.Num(o.perCall(o.CloudOwn())), o.ServerOwnTally().Scale(1/float64(max(o.Calls, 1))),
			actions.Num(o.Shared.Server.Total()), p.Unexplained(), o.Unexplained())
		return
	}
	s, c := o.SharedPerWorkerSecond()
	e.logf("actions %-9s %d calls on %d worker(s) over %s: own %s (Cloud %s); shared rate %s per worker per second (Cloud %s) [%s]; unexplained %g",
		sc.Name, o.Calls, o.Workers, o.Busy.Round(100*time.Millisecond), actions.Num(o.ServerOwn()), actions.Num(o.CloudOwn()),
		actions.Num(s), actions.Num(c), o.Shared.Server, o.Unexplained())
}
