// Command worker runs a Temporal worker with the idempotent HTTP activity and
// the ready workflow: package host's settings and wiring, on the task queue
// they name. go run ./worker --help lists the settings; docs/credentials.md
// describes the origins file.
//
// Client options come from the environment or a profile, as Temporal's
// envconfig reads them (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE,
// TEMPORAL_API_KEY, TEMPORAL_TLS*, TEMPORAL_PROFILE). The worker calls only
// the origins it is given with --allow-origin or ALLOW_ORIGINS, and those of
// the origins file --origins (ORIGINS_FILE) names: a TOML file with each
// origin's convention and credentials. The target API's token comes from
// API_TOKEN and is sent as "Authorization: Bearer" to one origin only,
// --api-token-origin (API_TOKEN_ORIGIN; default: the only allowed origin);
// it never enters workflow input, results or history, and is redacted from
// logs.
//
// The worker polls each allowed origin's own task queue
// (<task-queue>@<origin>, where requests with origin_queue run). The shared
// rate (--shared-rate, on by default; --shared-rate=false or SHARED_RATE=off
// turns it off) keeps one learned rate per origin for every worker of the
// task queue on the Temporal server: the worker runs every HTTP request a
// workflow schedules on the task queue on its origin's queue, and the
// governor workflows (on <task-queue>@governor) set those queues' rate
// limits from every worker's reports. Where the worker may not write the
// task-queue config (no permission, an older server), it keeps its own
// rate per origin and says so at start.
//
// --webhook-addr (WEBHOOK_ADDR) serves the webhook receiver: a provider's
// signed events (--webhook-scheme, secrets in WEBHOOK_SECRETS) and the
// callback URLs of --callback-base-url (token keys in CALLBACK_SECRETS)
// go to the workflows awaiting them (workflows.Request.Webhook).
//
// --metrics-addr (METRICS_ADDR) serves the SDK's worker metrics and the
// activity's in Prometheus' format on http://ADDR/metrics. The SDK's
// OpenTelemetry tracing interceptor is always installed; spans are exported
// with OTLP when OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_TRACES_EXPORTER=otlp)
// is set, as OpenTelemetry's environment variables configure it.
//
// --check checks the configuration and every origin's credential and exits
// (status 1 on a refusal), without connecting to Temporal.
//
//	ALLOW_ORIGINS=http://127.0.0.1:8081 API_TOKEN=… go run ./worker
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/idemhttp/temporal-idempotent-http/host"
)

func main() {
	err := run()
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return
	}
	fmt.Fprintln(os.Stderr, "worker:", err)
	var usage interface{ ExitCode() int } // an error in the command line
	if errors.As(err, &usage) {
		os.Exit(usage.ExitCode())
	}
	os.Exit(1)
}

// run polls the task queue with the activity and the workflow until SIGINT
// or SIGTERM.
func run() error {
	h, err := host.Load(os.Args[1:])
	if err != nil {
		return err
	}
	if h.Checked() {
		fmt.Println("worker --check: the configuration and every origin's credential are good")
		return nil
	}
	opts := h.ClientOptions()
	c, err := client.Dial(opts)
	if err != nil {
		h.Close()
		return fmt.Errorf("connecting to Temporal at %q: %w", opts.HostPort, err)
	}
	defer c.Close()
	if err := h.Start(c); err != nil {
		return err
	}
	defer h.Close()
	w := worker.New(c, h.TaskQueue(), h.WorkerOptions())
	h.Register(w)
	// worker.InterruptCh closes on SIGINT or SIGTERM; Run then stops polling
	// and waits for running activities up to WorkerStopTimeout.
	if err := w.Run(worker.InterruptCh()); err != nil {
		return fmt.Errorf("worker stopped: %w", err)
	}
	h.Logger().Info("worker stopped")
	return nil
}
