// Command starter starts the ready idempotent HTTP workflow, waits for it and
// prints its result.
//
// Client options come from the environment or a profile, as Temporal's
// envconfig reads them (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY,
// TEMPORAL_PROFILE). On success it prints one JSON object on stdout and exits
// 0; on failure it prints the error type, last status, attempts and key on
// stderr and exits 1. The workflow's Web UI link goes to stderr.
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
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"

	"github.com/idemhttp/temporal-idempotent-http/internal/cliutil"
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
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("starter", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		rawURL      = fs.String("url", "", "URL to call (required), e.g. http://127.0.0.1:8081/payments")
		method      = fs.String("method", "POST", "POST, PUT, PATCH or DELETE")
		body        = fs.String("body", "", "JSON request body")
		workflowID  = fs.String("workflow-id", "", "business workflow ID (default: a new one); the same ID and operation give the same key")
		operation   = fs.String("operation", "call", "operation name, part of the idempotency key")
		key         = fs.String("key", "", "explicit idempotency key (default: derived from namespace, workflow ID and operation)")
		taskQueue   = fs.String("task-queue", cliutil.Env("TASK_QUEUE", workflows.DefaultTaskQueue), "task queue of the worker (env TASK_QUEUE)")
		attempts    = fs.Int("max-attempts", workflows.DefaultMaximumAttempts, "maximum attempts")
		perAttempt  = fs.Duration("start-to-close", workflows.DefaultStartToCloseTimeout, "timeout of each attempt")
		overall     = fs.Duration("schedule-to-close", workflows.DefaultScheduleToCloseTimeout, "deadline of the whole operation")
		jitter      = fs.String("jitter", "full", "backoff jitter: full, equal, decorrelated or none (Temporal's own)")
		uiURL       = fs.String("ui", cliutil.Env("TEMPORAL_UI_URL", "http://localhost:8233"), "Temporal Web UI base URL, for the link (env TEMPORAL_UI_URL)")
		waitTimeout = fs.Duration("wait", 10*time.Minute, "how long to wait for the result")
		originQueue = fs.Bool("origin-queue", cliutil.Env("ORIGIN_QUEUE", "") == "on", "run the request on its origin's own task queue, whose rate the Temporal server keeps for every worker (the workers need --shared-rate; env ORIGIN_QUEUE=on)")
	)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *rawURL == "" {
		fmt.Fprintln(stderr, "starter: --url is required")
		return 2
	}
	req := workflows.Request{
		Operation: *operation, Method: *method, URL: *rawURL, IdempotencyKey: *key,
		Retry:                  workflows.RetryOptions{MaximumAttempts: int32(*attempts), Jitter: workflows.Jitter(*jitter)},
		StartToCloseTimeout:    *perAttempt,
		ScheduleToCloseTimeout: *overall,
		OriginQueue:            *originQueue,
	}
	if *body != "" {
		req.Body = json.RawMessage(*body)
	}
	// The request becomes the workflow's input, stored in Temporal's history:
	// refuse it here, before the workflow starts, with the workflow's own rules.
	if err := req.Validate(); err != nil {
		var appErr *temporal.ApplicationError
		if errors.As(err, &appErr) {
			err = errors.New(appErr.Message())
		}
		fmt.Fprintf(stderr, "starter: %v\n", err)
		return 2
	}
	if *workflowID == "" {
		*workflowID = "http-" + uuid.NewString()
	}

	opts, err := envconfig.LoadDefaultClientOptions()
	if err != nil {
		fmt.Fprintln(stderr, "starter: loading Temporal client options:", err)
		return 1
	}
	logger, _ := cliutil.NewLogger("warn")
	opts.Logger = sdklog.NewStructuredLogger(logger)
	tel, err := telemetry.Setup(context.Background(), telemetry.Options{ServiceName: "temporal-idempotent-http-starter", Logger: logger})
	if err != nil {
		fmt.Fprintln(stderr, "starter:", err)
		return 1
	}
	defer func() {
		// Flush the spans before exiting.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = tel.Shutdown(ctx)
	}()
	tel.Apply(&opts)
	c, err := client.Dial(opts)
	if err != nil {
		fmt.Fprintf(stderr, "starter: connecting to Temporal at %q: %v\n", opts.HostPort, err)
		return 1
	}
	defer c.Close()

	ctx, cancel := context.WithTimeout(context.Background(), *waitTimeout)
	defer cancel()
	// The trace's root: the interceptor's StartWorkflow span, and through
	// it the workflow, its activity attempts and the API's requests, are
	// its descendants.
	ctx, span := otel.Tracer("github.com/idemhttp/temporal-idempotent-http/cmd/starter").Start(ctx, "starter "+*operation)
	defer span.End()
	if sc := span.SpanContext(); sc.IsSampled() && tel.TracesExporter != "" {
		fmt.Fprintf(stderr, "Trace: %s\n", sc.TraceID())
	}
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       *workflowID,
		TaskQueue:                *taskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		StaticSummary:            workflows.Summary(strings.ToUpper(*method), *rawURL, *operation),
	}, workflows.WorkflowName, req)
	if err != nil {
		fmt.Fprintln(stderr, "starter: starting the workflow:", err)
		return 1
	}
	ns := opts.Namespace
	if ns == "" {
		ns = client.DefaultNamespace
	}
	fmt.Fprintf(stderr, "Web UI: %s/namespaces/%s/workflows/%s/%s/history\n",
		strings.TrimRight(*uiURL, "/"), url.PathEscape(ns), url.PathEscape(run.GetID()), url.PathEscape(run.GetRunID()))

	expectedKey := *key
	if expectedKey == "" {
		expectedKey = workflows.DeriveKey(ns, run.GetID(), *operation)
	}
	var resp workflows.Response
	if err := run.Get(ctx, &resp); err != nil {
		span.SetStatus(codes.Error, "the workflow failed")
		printFailure(stderr, err, expectedKey)
		return 1
	}
	out := Output{
		WorkflowID: run.GetID(), RunID: run.GetRunID(), IdempotencyKey: resp.IdempotencyKey,
		Status: resp.Status, Attempts: resp.Attempt, Replayed: resp.Replayed, Body: resp.Body, BodyOmitted: resp.BodyOmitted,
	}
	if out.Body == nil && resp.RawBody != nil {
		out.Body, _ = json.Marshal(string(resp.RawBody))
	}
	enc := json.NewEncoder(stdout)
	if err := enc.Encode(out); err != nil {
		fmt.Fprintln(stderr, "starter:", err)
		return 1
	}
	return 0
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
