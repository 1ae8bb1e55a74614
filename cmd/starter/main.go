// Command starter starts the ready idempotent HTTP workflow, waits for it and
// prints its result.
//
// Client options come from the environment or a profile, as Temporal's
// envconfig reads them (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY,
// TEMPORAL_PROFILE). On success it prints one JSON object on stdout and exits
// 0; on failure it prints the error type, last status, attempts and key on
// stderr and exits 1. The workflow's Web UI link goes to stderr: on --ui (env
// TEMPORAL_UI_URL), else on the UI derived from the frontend's address
// (Temporal Cloud's, or a dev server's: its port + 1000) when one answers
// there; otherwise the line says how to set it.
//
//	go run ./cmd/starter --url http://127.0.0.1:8081/payments --body '{"amount":42}'
//
// Starting again with the same --workflow-id (and --operation) reuses the
// same idempotency key, so the server returns its stored response.
//
// The SDK's OpenTelemetry tracing interceptor starts the workflow's trace;
// its spans are exported with OTLP when OTEL_EXPORTER_OTLP_ENDPOINT (or
// OTEL_TRACES_EXPORTER=otlp) is set, and then the trace ID is printed on
// stderr ("Trace: ID").
//
// The subcommand check-keys asks whether an API honours idempotency keys,
// without Temporal: it sends one request twice with one fresh key and
// reports whether the second answer was a replay, a conflict or a second
// record (starter check-keys -h; run it against a sandbox).
//
//	go run ./cmd/starter check-keys --url https://sandbox.api.example.com/payments --body '{"amount":42}'
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"

	"github.com/idemhttp/temporal-idempotent-http/internal/cliutil"
	"github.com/idemhttp/temporal-idempotent-http/internal/defaults"
	"github.com/idemhttp/temporal-idempotent-http/internal/idemkey"
	"github.com/idemhttp/temporal-idempotent-http/internal/input"
	"github.com/idemhttp/temporal-idempotent-http/internal/poll"
	"github.com/idemhttp/temporal-idempotent-http/internal/telemetry"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// Output is what the starter prints on success.
type Output struct {
	WorkflowID     string          `json:"workflow_id"`
	RunID          string          `json:"run_id"`
	IdempotencyKey string          `json:"idempotency_key"`
	Status         int             `json:"status"`
	Attempts       int32           `json:"attempts"`
	Replayed       bool            `json:"replayed"`
	Body           json.RawMessage `json:"body,omitempty"`
	BodyOmitted    bool            `json:"body_omitted,omitempty"`
	// Polls and State: how following a long-running operation went
	// (--follow), when the server accepted one.
	Polls int    `json:"polls,omitempty"`
	State string `json:"state,omitempty"`
	// Outcome: how an operation awaited by webhook (--await-webhook) ended,
	// and whether a notification or the fallback poll said so (the
	// notification without its body, which the Web UI shows).
	Outcome *workflows.Outcome `json:"outcome,omitempty"`
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run starts the workflow cfg asks for, waits for it and prints its result;
// it returns the exit code: 2 for a bad flag, 1 for any other failure.
// "check-keys" as the first argument runs that subcommand instead
// (runCheckKeys, its own exit codes).
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "check-keys" {
		return runCheckKeys(args[1:], stdout, stderr)
	}
	cfg, ok := parseFlags(args, stderr)
	if !ok {
		return 2
	}
	opts, tel, err := clientOptions()
	if err != nil {
		return fail(stderr, err)
	}
	defer flush(tel)
	c, err := client.Dial(opts)
	if err != nil {
		return fail(stderr, fmt.Errorf("connecting to Temporal at %q: %w", opts.HostPort, err))
	}
	defer c.Close()

	ctx, cancel := context.WithTimeout(context.Background(), cfg.wait)
	defer cancel()
	ctx, span := startTrace(ctx, cfg.req.Operation, tel, stderr)
	defer span.End()
	we, err := c.ExecuteWorkflow(ctx, cfg.startOptions(), workflows.WorkflowName, cfg.req)
	if err != nil {
		return fail(stderr, fmt.Errorf("starting the workflow: %w", err))
	}
	ns := cmp.Or(opts.Namespace, client.DefaultNamespace)
	printUILink(stderr, cfg.uiURL, opts.HostPort, ns, we.GetID(), we.GetRunID(), uiAnswers)
	var resp workflows.Response
	if err := we.Get(ctx, &resp); err != nil {
		if ctx.Err() != nil {
			// The starter stopped waiting; the workflow did not fail.
			fmt.Fprintf(stderr, "workflow %s still running after --wait %s: it goes on (the Web UI link above follows it); run the starter again with the same --workflow-id to wait for its result\n", we.GetID(), cfg.wait)
			return 1
		}
		span.SetStatus(codes.Error, "the workflow failed")
		printFailure(stderr, err, cfg.expectedKey(ns, we.GetID()))
		return 1
	}
	if err := json.NewEncoder(stdout).Encode(output(we, resp)); err != nil {
		return fail(stderr, err)
	}
	return 0
}

// starterUsage heads the starter's help.
const starterUsage = `Usage: starter --url URL [flags]
       starter check-keys --url URL [flags]

starter starts the ready idempotent HTTP workflow, waits for it and prints
its result (Temporal's client settings come from TEMPORAL_ADDRESS,
TEMPORAL_NAMESPACE, TEMPORAL_API_KEY or TEMPORAL_PROFILE).

starter check-keys checks whether an API honours idempotency keys, without
Temporal: it sends one request twice with one fresh key and reports a
replay, a conflict or a second record; run it against a sandbox (starter
check-keys -h).

Flags:
`

// config is what the flags ask for.
type config struct {
	url, method, body          string // the call
	workflowID, operation, key string // what the idempotency key is made of, or the key
	attempts                   int
	perAttempt, overall        time.Duration
	jitter                     string
	originQueue                bool
	follow                     bool
	followTimeout              time.Duration
	awaitWebhook, webhookFail  string // event types
	webhookPoll                string
	webhookPollAfter, webhookT time.Duration
	taskQueue, uiURL           string
	wait                       time.Duration

	req workflows.Request // the workflow's input, made of the above
}

// parseFlags reads args into a config with a valid request. It reports a bad
// flag on stderr and returns false.
func parseFlags(args []string, stderr io.Writer) (config, bool) {
	var cfg config
	fs := flag.NewFlagSet("starter", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), starterUsage)
		fs.PrintDefaults()
	}
	fs.StringVar(&cfg.url, "url", "", "URL to call (required), e.g. http://127.0.0.1:8081/payments")
	fs.StringVar(&cfg.method, "method", "POST", "POST, PUT, PATCH or DELETE")
	fs.StringVar(&cfg.body, "body", "", "JSON request body")
	fs.StringVar(&cfg.workflowID, "workflow-id", "", "business workflow ID (default: a new one); the same ID and operation give the same key")
	fs.StringVar(&cfg.operation, "operation", "call", "operation name, part of the idempotency key")
	fs.StringVar(&cfg.key, "key", "", "explicit idempotency key (default: derived from namespace, workflow ID and operation)")
	fs.StringVar(&cfg.taskQueue, "task-queue", cliutil.Env("TASK_QUEUE", defaults.TaskQueue), "task queue of the worker (env TASK_QUEUE)")
	fs.IntVar(&cfg.attempts, "max-attempts", defaults.MaximumAttempts, "maximum attempts")
	fs.DurationVar(&cfg.perAttempt, "start-to-close", defaults.StartToCloseTimeout, "timeout of each attempt")
	fs.DurationVar(&cfg.overall, "schedule-to-close", defaults.ScheduleToCloseTimeout, "deadline of the whole operation")
	fs.StringVar(&cfg.jitter, "jitter", "full", "backoff jitter: full, equal, decorrelated or none (Temporal's own)")
	fs.StringVar(&cfg.uiURL, "ui", cliutil.Env("TEMPORAL_UI_URL", ""), "Temporal Web UI base URL, for the workflow's link (env TEMPORAL_UI_URL; default: Temporal Cloud's for a Cloud address, else a dev server's, the frontend's port + 1000, if it answers)")
	fs.DurationVar(&cfg.wait, "wait", 10*time.Minute, "how long to wait for the result")
	fs.BoolVar(&cfg.follow, "follow", false, "follow a long-running operation: when the server answers with a status monitor (a 202 with Location, or what the worker's --convention names), poll it to the operation's end and print the final result")
	fs.DurationVar(&cfg.followTimeout, "follow-timeout", poll.DefaultFollowTimeout, "how long to follow the operation, all polls included (with --follow)")
	fs.BoolVar(&cfg.originQueue, "origin-queue", cliutil.Env("ORIGIN_QUEUE", "") == "on", "run the request on its origin's own task queue, whose rate the Temporal server keeps for every worker (the repository's worker polls it, and with its shared rate, on by default, runs every request there without this flag; env ORIGIN_QUEUE=on)")
	cliutil.ListVar(fs, &cfg.awaitWebhook, "await-webhook", "", "event `TYPE`s that mean the operation succeeded: await the provider's signed webhook (the worker's --webhook-addr receives it); the body gets \"metadata\": {\"workflow_id\", \"operation\"} for the provider to copy into its events")
	cliutil.ListVar(fs, &cfg.webhookFail, "webhook-failed", "", "event `TYPE`s that mean the operation failed (with --await-webhook)")
	fs.StringVar(&cfg.webhookPoll, "webhook-poll", "", "the fallback: GET this resource URL when no webhook came within --webhook-poll-after, {field} filled from the start answer, e.g. http://127.0.0.1:8081/resources/{id}; its \"status\" succeeded, failed or canceled ends the wait (with --await-webhook)")
	fs.DurationVar(&cfg.webhookPollAfter, "webhook-poll-after", defaults.PollAfter, "how long to wait for a webhook before polling (with --webhook-poll)")
	fs.DurationVar(&cfg.webhookT, "webhook-timeout", defaults.WebhookTimeout, "how long to await the outcome, polls included (with --await-webhook)")
	if err := fs.Parse(args); err != nil {
		return cfg, false // the flag set printed it
	}
	if cfg.workflowID == "" {
		cfg.workflowID = "http-" + uuid.NewString()
	}
	var err error
	if cfg.req, err = cfg.request(); err != nil {
		fmt.Fprintf(stderr, "starter: %v\n", err)
		return cfg, false
	}
	return cfg, true
}

// request is the workflow's input. It is stored in Temporal's history: it
// is refused here, before the workflow starts, by the workflow's own rules.
func (cfg config) request() (workflows.Request, error) {
	if cfg.url == "" {
		return workflows.Request{}, errors.New("--url is required")
	}
	req := workflows.Request{
		Operation: cfg.operation, Method: cfg.method, URL: cfg.url, IdempotencyKey: cfg.key,
		Retry:                  workflows.RetryOptions{MaximumAttempts: int32(cfg.attempts), Jitter: workflows.Jitter(cfg.jitter)},
		StartToCloseTimeout:    cfg.perAttempt,
		ScheduleToCloseTimeout: cfg.overall,
		OriginQueue:            cfg.originQueue,
	}
	if cfg.follow {
		req.Follow = &workflows.FollowOptions{Timeout: cfg.followTimeout}
	}
	if cfg.body != "" {
		req.Body = json.RawMessage(cfg.body)
	}
	if cfg.awaitWebhook != "" {
		var err error
		if req.Body, err = withMetadata(req.Body, cfg.workflowID, cfg.operation); err != nil {
			return req, err
		}
		req.Webhook = &workflows.WebhookOptions{Succeeded: cliutil.SplitList(cfg.awaitWebhook), Failed: cliutil.SplitList(cfg.webhookFail), Timeout: cfg.webhookT}
		if cfg.webhookPoll != "" {
			req.Webhook.Poll = &workflows.WebhookPoll{URL: cfg.webhookPoll, After: cfg.webhookPollAfter,
				Succeeded: []string{"succeeded"}, Failed: []string{"failed"}, Canceled: []string{"canceled"}}
		}
	}
	if err := req.Validate(); err != nil {
		var appErr *temporal.ApplicationError
		if errors.As(err, &appErr) {
			err = errors.New(appErr.Message())
		}
		return req, err
	}
	return req, nil
}

// withMetadata adds "metadata": {"workflow_id", "operation"} to the JSON
// object body (workflows.WebhookMetadata's fields, which the worker's
// receiver reads from the provider's events).
func withMetadata(body json.RawMessage, workflowID, operation string) (json.RawMessage, error) {
	obj := map[string]json.RawMessage{}
	if len(body) > 0 && json.Unmarshal(body, &obj) != nil {
		return nil, errors.New("--await-webhook needs a JSON object --body (its metadata names the workflow for the provider's events)")
	}
	md, _ := json.Marshal(map[string]string{"workflow_id": workflowID, "operation": operation})
	obj["metadata"] = md
	return json.Marshal(obj)
}

// startOptions starts the workflow cfg.workflowID, or joins it if it runs.
func (cfg config) startOptions() client.StartWorkflowOptions {
	return client.StartWorkflowOptions{
		ID:                       cfg.workflowID,
		TaskQueue:                cfg.taskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		StaticSummary:            input.Summary(strings.ToUpper(cfg.method), cfg.url, cfg.operation),
	}
}

// expectedKey is the idempotency key of the workflow workflowID in
// namespace ns: --key, or the one the workflow derives.
func (cfg config) expectedKey(ns, workflowID string) string {
	if cfg.key != "" {
		return cfg.key
	}
	return idemkey.Derive(ns, workflowID, cfg.operation)
}

// clientOptions loads the client options from the environment or a profile,
// with a logger of warnings and the telemetry's interceptor and metrics.
func clientOptions() (client.Options, *telemetry.Telemetry, error) {
	opts, err := envconfig.LoadDefaultClientOptions()
	if err != nil {
		return opts, nil, fmt.Errorf("loading Temporal client options: %w", err)
	}
	logger, _ := cliutil.NewLogger("warn")
	opts.Logger = sdklog.NewStructuredLogger(logger)
	tel, err := telemetry.Setup(context.Background(), telemetry.Options{ServiceName: "temporal-idempotent-http-starter", Logger: logger})
	if err != nil {
		return opts, nil, err
	}
	tel.Apply(&opts)
	return opts, tel, nil
}

// flush exports the spans not yet exported, before the starter exits.
func flush(tel *telemetry.Telemetry) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = tel.Shutdown(ctx)
}

// startTrace starts the trace's root span: the interceptor's StartWorkflow
// span, and through it the workflow, its activity attempts and the API's
// requests, are its descendants. The trace ID goes to stderr when the trace
// is exported.
func startTrace(ctx context.Context, operation string, tel *telemetry.Telemetry, stderr io.Writer) (context.Context, trace.Span) {
	ctx, span := otel.Tracer("github.com/idemhttp/temporal-idempotent-http/cmd/starter").Start(ctx, "starter "+operation)
	if sc := span.SpanContext(); sc.IsSampled() && tel.TracesExporter != "" {
		fmt.Fprintf(stderr, "Trace: %s\n", sc.TraceID())
	}
	return ctx, span
}

// printUILink prints the Web UI's link to the workflow run id/runID in
// namespace ns: on uiURL (--ui) when set, else on the UI derived from the
// frontend's address hostPort (client.DefaultHostPort when empty):
// Temporal Cloud's for a Cloud endpoint, else the dev server's default
// (temporal server start-dev serves it on the frontend's IP, at its port +
// 1000), if answers says one answers there. A UI that does not answer gets
// no dead link, but how to set it.
func printUILink(w io.Writer, uiURL, hostPort, ns, id, runID string, answers func(base string) bool) {
	base := strings.TrimRight(uiURL, "/")
	if base == "" {
		hostPort = cmp.Or(hostPort, client.DefaultHostPort)
		host, port, err := net.SplitHostPort(hostPort)
		p, perr := strconv.Atoi(port)
		switch {
		case err == nil && (strings.HasSuffix(host, ".tmprl.cloud") || strings.HasSuffix(host, ".api.temporal.io")):
			base = "https://cloud.temporal.io"
		case err != nil || perr != nil || p+1000 > 65535:
			fmt.Fprintf(w, "Web UI: no address derived from the frontend %s; set --ui or TEMPORAL_UI_URL to the Web UI's address for a link\n", hostPort)
			return
		default:
			base = "http://" + net.JoinHostPort(host, strconv.Itoa(p+1000))
			if !answers(base) {
				fmt.Fprintf(w, "Web UI: nothing answers at %s (a dev server's default for the frontend %s: its port + 1000); set --ui or TEMPORAL_UI_URL to the Web UI's address for a link\n", base, hostPort)
				return
			}
		}
	}
	fmt.Fprintf(w, "Web UI: %s/namespaces/%s/workflows/%s/%s/history\n", base, url.PathEscape(ns), url.PathEscape(id), url.PathEscape(runID))
}

// uiAnswers reports whether a web server answers GET base/ within a
// second with a status below 400.
func uiAnswers(base string) bool {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get(base + "/")
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode < 400
}

// output is what the starter prints of the result of we: a body that is
// not JSON is printed as a JSON string.
func output(we client.WorkflowRun, resp workflows.Response) Output {
	out := Output{
		WorkflowID: we.GetID(), RunID: we.GetRunID(), IdempotencyKey: resp.IdempotencyKey,
		Status: resp.Status, Attempts: resp.Attempt, Replayed: resp.Replayed, Body: resp.Body, BodyOmitted: resp.BodyOmitted,
	}
	if resp.Accepted != nil {
		out.Polls, out.State = resp.Accepted.Polls, resp.Accepted.State
	}
	if o := resp.Outcome; o != nil {
		// The event's body is in the workflow's history (the Web UI); the
		// line printed keeps what identifies it.
		c := *o
		if o.Notification != nil {
			n := *o.Notification
			n.Body = nil
			c.Notification = &n
		}
		out.Outcome = &c
	}
	if out.Body == nil && resp.RawBody != nil {
		out.Body, _ = json.Marshal(string(resp.RawBody))
	}
	return out
}

// fail prints err and returns the exit code of a failure.
func fail(stderr io.Writer, err error) int {
	fmt.Fprintln(stderr, "starter:", err)
	return 1
}

func printFailure(w io.Writer, err error, key string) {
	errType := "unknown"
	var appErr *temporal.ApplicationError
	var timeoutErr *temporal.TimeoutError
	switch {
	case errors.As(err, &appErr):
		errType = appErr.Type()
	case errors.As(err, &timeoutErr):
		errType = "Timeout(" + timeoutErr.TimeoutType().String() + ")"
	}
	d, _ := workflows.AsFailure(err)
	if d.IdempotencyKey != "" {
		key = d.IdempotencyKey
	}
	fmt.Fprintf(w, "workflow failed: type=%s last_status=%d attempts=%d idempotency_key=%s\nerror: %v\n", errType, d.Status, d.Attempt, key, err)
}
