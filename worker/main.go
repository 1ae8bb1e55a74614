// Command worker runs a Temporal worker with the idempotent HTTP activity and
// the ready workflow.
//
// Client options come from the environment or a profile, as Temporal's
// envconfig reads them (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE,
// TEMPORAL_API_KEY, TEMPORAL_TLS*, TEMPORAL_PROFILE). The worker calls only
// the origins it is given with --allow-origin or ALLOW_ORIGINS. The target
// API's token comes from API_TOKEN and is sent as "Authorization: Bearer" to
// those origins only; it never enters workflow input, results or history, and
// is redacted from logs.
//
// --shared-rate (SHARED_RATE=on) keeps one learned rate per origin for
// every worker of the task queue on the Temporal server: the worker also
// polls each allowed origin's own task queue (<task-queue>@<origin>, where
// requests with origin_queue run) and runs the governor workflows that set
// those queues' rate limits from every worker's reports.
//
// --metrics-addr (METRICS_ADDR) serves the SDK's worker metrics and the
// activity's in Prometheus' format on http://ADDR/metrics. The SDK's
// OpenTelemetry tracing interceptor is always installed; spans are exported
// with OTLP when OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_TRACES_EXPORTER=otlp)
// is set, as OpenTelemetry's environment variables configure it.
//
//	ALLOW_ORIGINS=http://127.0.0.1:8081 API_TOKEN=… go run ./worker
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/internal/admission"
	"github.com/idemhttp/temporal-idempotent-http/internal/cliutil"
	"github.com/idemhttp/temporal-idempotent-http/internal/telemetry"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
}

func run() error {
	taskQueue := flag.String("task-queue", cliutil.Env("TASK_QUEUE", workflows.DefaultTaskQueue), "task queue to poll (env TASK_QUEUE)")
	allow := flag.String("allow-origin", os.Getenv("ALLOW_ORIGINS"), "comma-separated origins the worker may call, e.g. http://127.0.0.1:8081 (env ALLOW_ORIGINS)")
	maxBody := flag.Int64("max-response-bytes", activities.DefaultMaxResponseBytes, "largest response body kept in a result")
	maxRetryAfter := flag.Duration("max-retry-after", activities.DefaultMaxRetryAfter, "longest Retry-After honoured")
	logLevel := flag.String("log-level", cliutil.Env("LOG_LEVEL", "info"), "debug, info, warn or error (env LOG_LEVEL)")
	conventions := flag.String("convention", os.Getenv("CONVENTIONS"), "comma-separated ORIGIN=PRESET[+quoted][:KEY-HEADER] for servers that are not IETF-style, PRESET ietf or stripe; +quoted sends the key as a quoted RFC 8941 string, as the IETF draft writes it (default: bare), e.g. https://api.stripe.com=stripe,https://api-m.paypal.com=ietf:PayPal-Request-Id,https://api.example.com=ietf+quoted (env CONVENTIONS)")
	identity := flag.String("identity", os.Getenv("WORKER_IDENTITY"), "worker identity shown in Temporal (env WORKER_IDENTITY; default pid@host)")
	metricsAddr := flag.String("metrics-addr", os.Getenv("METRICS_ADDR"), "serve Prometheus metrics on http://ADDR/metrics, e.g. 127.0.0.1:9464 (env METRICS_ADDR; default: off)")
	admissionOn := flag.Bool("admission", cliutil.Env("ADMISSION", "on") != "off", "adaptive admission per origin and the retry budget; --admission=false (or ADMISSION=off) sends every attempt at once")
	initialRate := flag.Float64("admission-initial-rate", admission.DefaultInitialRate, "requests/s of an origin that has not throttled yet")
	minRate := flag.Float64("admission-min-rate", admission.DefaultMinRate, "lowest requests/s that 429s and 503s bring an origin to")
	retryRatio := flag.Float64("retry-budget-ratio", admission.DefaultRetryRatio, "share of an origin's requests that retries may be (beyond 100 per 10 s); negative: no retry budget")
	throttles := flag.String("admission-throttles", "429", "comma-separated statuses that mean \"too fast\" and cut an origin's rate; add 503 for an API that sheds load with it")
	breakerOn := flag.Bool("breaker", cliutil.Env("BREAKER", "on") != "off", "circuit breaker per origin (part of admission): an origin that is failing gets one probe at a time and nothing else; --breaker=false (or BREAKER=off) turns it off")
	failureRatio := flag.Float64("breaker-failure-ratio", admission.DefaultFailureRatio, "share of an origin's answered requests within --breaker-window that must have failed (5xx or no answer) to open its breaker")
	minFailures := flag.Int("breaker-min-failures", admission.DefaultMinFailures, "least number of failures within --breaker-window that opens an origin's breaker")
	failureWindow := flag.Duration("breaker-window", admission.DefaultFailureWindow, "sliding window the breaker counts failures in")
	openTime := flag.Duration("breaker-open-time", admission.DefaultOpenTime, "how long a breaker stays open before its first probe (a failing answer's Retry-After replaces it)")
	maxOpenTime := flag.Duration("breaker-max-open-time", admission.DefaultMaxOpenTime, "longest open time between probes: each failed probe doubles the last up to this")
	restartRate := flag.Float64("breaker-restart-rate", 0, "requests/s an origin starts again at when its breaker closes, growing by one per answer (default: half of --admission-initial-rate)")
	sharedRate := flag.Bool("shared-rate", cliutil.Env("SHARED_RATE", "") == "on", "one learned rate per origin for every worker of --task-queue, kept by the Temporal server: poll each allowed origin's own task queue (TASK-QUEUE@ORIGIN, where requests with origin_queue run: starter --origin-queue) and run the governor that sets its rate limit from every worker's reports (env SHARED_RATE=on)")
	queueRate := flag.Float64("task-queue-activities-per-second", 0, "a fixed limit on activities started per second on the task queue, which the Temporal server enforces across all its workers (worker.Options.TaskQueueActivitiesPerSecond; 0: none); for an API whose capacity is known and fixed, instead of or beside adaptive admission")
	flag.Parse()

	if *queueRate < 0 {
		return fmt.Errorf("--task-queue-activities-per-second %g: use a positive rate, or 0 for no limit", *queueRate)
	}
	token := os.Getenv("API_TOKEN")
	logger, err := cliutil.NewLogger(*logLevel, token, "Bearer "+token)
	if err != nil {
		return err
	}
	origins := cliutil.SplitList(*allow)
	if len(origins) == 0 {
		return fmt.Errorf("no origin allowed: pass --allow-origin http://host:port (or set ALLOW_ORIGINS); the worker calls nothing else")
	}
	cfg := activityConfig(origins, token)
	cfg.MaxResponseBytes, cfg.MaxRetryAfter = *maxBody, *maxRetryAfter
	cfg.Admission = activities.Admission{Off: !*admissionOn, InitialRate: *initialRate, MinRate: *minRate, RetryRatio: *retryRatio,
		Breaker: activities.Breaker{Off: !*breakerOn, FailureRatio: *failureRatio, MinFailures: *minFailures,
			FailureWindow: *failureWindow, OpenTime: *openTime, MaxOpenTime: *maxOpenTime, RestartRate: *restartRate}}
	for _, st := range cliutil.SplitList(*throttles) {
		n, err := strconv.Atoi(st)
		if err != nil {
			return fmt.Errorf("--admission-throttles: %q is not a status code: list statuses such as 429,503", st)
		}
		cfg.Admission.Throttles = append(cfg.Admission.Throttles, n)
	}
	if cfg.Conventions, err = parseConventions(*conventions); err != nil {
		return fmt.Errorf("--convention: %w", err)
	}
	var shared *originQueues
	if *sharedRate {
		if *queueRate > 0 {
			return fmt.Errorf("--shared-rate and --task-queue-activities-per-second: choose one; the shared rate sets each origin queue's limit itself")
		}
		shared = newOriginQueues(*taskQueue, origins)
		cfg.SharedRate = shared
	}
	acts, err := activities.New(cfg)
	if err != nil {
		return fmt.Errorf("configuration (--allow-origin, --convention, --admission-*, --breaker-*, --retry-budget-ratio, API_TOKEN): %w", err)
	}

	opts, err := envconfig.LoadDefaultClientOptions()
	if err != nil {
		return fmt.Errorf("loading Temporal client options (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, profile): %w", err)
	}
	opts.Logger = sdklog.NewStructuredLogger(logger)
	if *identity != "" {
		opts.Identity = *identity
	}
	tel, err := telemetry.Setup(context.Background(), telemetry.Options{ServiceName: "temporal-idempotent-http-worker", MetricsAddr: *metricsAddr, Logger: logger})
	if err != nil {
		return err
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := tel.Shutdown(ctx); err != nil {
			logger.Warn("telemetry shutdown", slog.String("error", err.Error()))
		}
	}()
	tel.Apply(&opts)
	if tel.MetricsURL != "" {
		logger.Info("serving metrics", slog.String("url", tel.MetricsURL))
	}
	if tel.TracesExporter != "" {
		logger.Info("exporting traces with OTLP", slog.String("protocol", tel.TracesExporter))
	}
	c, err := client.Dial(opts)
	if err != nil {
		return fmt.Errorf("connecting to Temporal at %q: %w", opts.HostPort, err)
	}
	defer c.Close()

	w := worker.New(c, *taskQueue, worker.Options{WorkerStopTimeout: 15 * time.Second, TaskQueueActivitiesPerSecond: *queueRate})
	acts.Register(w)
	workflows.Register(w)
	if shared != nil {
		stop, err := shared.start(c, w, acts, opts, logger)
		if err != nil {
			return err
		}
		defer stop()
	}
	logger.Info("worker starting", slog.String("task_queue", *taskQueue), slog.Any("allowed_origins", origins), slog.Bool("api_token", token != ""), slog.Bool("shared_rate", shared != nil))
	// worker.InterruptCh closes on SIGINT or SIGTERM; Run then stops polling
	// and waits for running activities up to WorkerStopTimeout.
	if err := w.Run(worker.InterruptCh()); err != nil {
		return fmt.Errorf("worker stopped: %w", err)
	}
	logger.Info("worker stopped")
	return nil
}

// activityConfig allows origins and sends token, if set, as a bearer token
// to each of them.
func activityConfig(origins []string, token string) activities.Config {
	cfg := activities.Config{AllowedOrigins: origins, HTTPClient: &http.Client{Transport: transport()}}
	if token != "" {
		cfg.Credentials = map[string]http.Header{}
		for _, o := range origins {
			cfg.Credentials[o] = http.Header{"Authorization": {"Bearer " + token}}
		}
	}
	return cfg
}

// parseConventions reads ORIGIN=PRESET[+quoted][:KEY-HEADER] items; +quoted
// sets Convention.KeyQuoted.
func parseConventions(list string) (map[string]activities.Convention, error) {
	out := map[string]activities.Convention{}
	for _, item := range cliutil.SplitList(list) {
		origin, spec, ok := strings.Cut(item, "=")
		preset, keyHeader, _ := strings.Cut(spec, ":")
		preset, suffix, quoted := strings.Cut(preset, "+")
		if quoted && !strings.EqualFold(strings.TrimSpace(suffix), "quoted") {
			ok = false
		}
		var c activities.Convention
		switch strings.ToLower(strings.TrimSpace(preset)) {
		case "ietf":
			c = activities.IETF()
		case "stripe":
			c = activities.Stripe()
		default:
			ok = false
		}
		if !ok {
			return nil, fmt.Errorf("%q: want ORIGIN=PRESET[+quoted][:KEY-HEADER] with PRESET ietf or stripe, e.g. https://api.stripe.com=stripe or https://api.example.com=ietf+quoted", item)
		}
		c.KeyQuoted = quoted
		if keyHeader != "" {
			c.KeyHeader = strings.TrimSpace(keyHeader)
		}
		out[strings.TrimSpace(origin)] = c
	}
	return out, nil
}

// transport is http.DefaultTransport with bounded waits for a connection and
// response headers; the activity's StartToCloseTimeout bounds the rest.
func transport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.ResponseHeaderTimeout = 60 * time.Second
	t.MaxIdleConnsPerHost = 64
	return t
}
