// Package host runs this module's activities and workflows on a Temporal
// worker you own, with everything the worker binary in worker/ has: the
// origins file and each origin's credentials, checked at start; the
// origins' own task queues and the routing onto them; the shared rate and
// its governors; the webhook receiver; metrics and tracing.
//
// The settings are the worker binary's flags and environment variables
// (go run ./worker --help lists them; docs/credentials.md describes the
// origins file), read by [Load]. A program's main then dials, starts
// what runs beside the worker, and registers on its own worker:
//
//	h, err := host.Load(os.Args[1:])
//	if err != nil || h.Checked() {
//		return err
//	}
//	c, err := client.Dial(h.ClientOptions())
//	if err != nil {
//		return err
//	}
//	defer c.Close()
//	if err := h.Start(c); err != nil {
//		return err
//	}
//	defer h.Close()
//	w := worker.New(c, h.TaskQueue(), h.WorkerOptions())
//	h.Register(w)
//	return w.Run(worker.InterruptCh())
//
// examples/ownworker is that program, tested against a Temporal dev server.
package host

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
	"go.temporal.io/sdk/interceptor"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"google.golang.org/grpc"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/internal/cliutil"
	"github.com/idemhttp/temporal-idempotent-http/internal/governor"
	"github.com/idemhttp/temporal-idempotent-http/internal/telemetry"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// Host is a worker's settings and what they build: the activities with
// each origin's credentials, the client options with telemetry, and,
// once started, the workers of the origins' queues and of the governors
// and the webhook receiver. Its methods are safe for one goroutine; Close
// may be called from any.
type Host struct {
	cfg    config
	logger *slog.Logger
	acts   *activities.Activities
	queues *originQueues
	opts   client.Options
	tel    *telemetry.Telemetry

	// gov are the governors' activities on the base queue, their client
	// set by Start.
	gov     governor.Activities
	started bool
	// shared is the shared rate in force, decided by Start; the routing
	// interceptor of WorkerOptions routes only while it is.
	shared atomic.Bool

	mu        sync.Mutex
	closed    bool
	stops     []func() // in the order to call them
	closeOnce sync.Once
}

// Load reads the settings from args (the worker's flags, without the
// program's name: os.Args[1:]), the environment (API_TOKEN, ALLOW_ORIGINS,
// …; a flag given on the command line replaces its variable) and the
// origins file they name, builds the activities and checks every
// origin's credential (activities.Activities.Check): a refused one is an
// error naming the origin and the file's key; one that cannot be had for
// now (a token endpoint that is down) is logged, and calls to its origin
// wait for it. With --check it stops there ([Host.Checked]). Otherwise it
// loads the client options from the environment or a profile as
// Temporal's envconfig does (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, …) and
// sets up telemetry: --metrics-addr starts serving metrics.
//
// --help prints the flags and returns flag.ErrHelp. An error in args
// (an unknown flag, a value that does not read) has a method ExitCode,
// 2, the status Go's flag package exits with.
func Load(args []string) (*Host, error) {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	cfg, err := parse(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, usageError{err}
	}
	if err := cfg.Webhooks.check(); err != nil {
		return nil, err
	}
	h := &Host{cfg: cfg}
	if h.logger, err = cliutil.NewLogger(cfg.LogLevel, cfg.secrets()...); err != nil {
		return nil, err
	}
	if h.acts, h.queues, err = newActivities(cfg); err != nil {
		return nil, err
	}
	if err := checkCredentials(h.acts, h.logger); err != nil {
		return nil, err
	}
	if cfg.Check {
		return h, nil
	}
	if h.opts, h.tel, err = clientOptions(cfg, h.logger); err != nil {
		return nil, err
	}
	// A retry's or a poll's progress rides on its attempt's failure
	// response: one Temporal action instead of two.
	h.opts.ConnectionOptions.DialOptions = append(h.opts.ConnectionOptions.DialOptions,
		grpc.WithChainUnaryInterceptor(h.acts.ProgressInterceptor(h.opts.DataConverter)))
	h.cfg.Webhooks.Namespace = cmp.Or(h.opts.Namespace, client.DefaultNamespace)
	h.stops = append(h.stops, func() { flush(h.tel, h.logger) })
	return h, nil
}

// Checked reports whether the settings asked for the check alone
// (--check): Load checked the configuration and every origin's
// credential, and the program should exit.
func (h *Host) Checked() bool { return h.cfg.Check }

// TaskQueue is the task queue the settings name (--task-queue): the one
// workflows schedule their HTTP activities on, for the worker of
// [Host.WorkerOptions] and [Host.Register].
func (h *Host) TaskQueue() string { return h.cfg.TaskQueue }

// Logger is the worker's logger (--log-level, JSON on stderr), which
// redacts every secret the settings hold.
func (h *Host) Logger() *slog.Logger { return h.logger }

// ClientOptions are the options to dial Temporal with: those of the
// environment or a profile, with the worker's logger, --identity, the
// telemetry's tracing interceptor and metrics handler, and the
// activities' ProgressInterceptor (activities.Activities.ProgressInterceptor)
// in ConnectionOptions.DialOptions. Set what else you need on them;
// append to DialOptions, keep Interceptors and MetricsHandler, and set the
// namespace and identity by TEMPORAL_NAMESPACE (or a profile) and
// --identity, not here: the governors, the reporter and the callback
// URLs use these options' own.
func (h *Host) ClientOptions() client.Options { return h.opts }

// Start starts, on c (dialled with [Host.ClientOptions]), what runs
// beside the worker: a worker on each allowed origin's own task queue,
// and, with the shared rate (--shared-rate, on by default), the
// governors' worker and the reporter to them; the webhook receiver with
// --webhook-addr. The shared rate needs the right to update the
// task-queue config: where the server refuses it, each worker keeps its
// own rate per origin, said in one log line. Call it before
// [Host.WorkerOptions]; [Host.Close] stops what it started.
func (h *Host) Start(c client.Client) error {
	switch {
	case c == nil:
		return errors.New("host: Start needs a client: dial one with Host.ClientOptions")
	case h.cfg.Check:
		return errors.New("host: --check asked for the check alone: exit when Host.Checked reports true")
	case h.started:
		return errors.New("host: Start called twice: call it once per Host")
	}
	h.started, h.gov.Client = true, c
	namespace := cmp.Or(h.opts.Namespace, client.DefaultNamespace)
	shared := h.cfg.SharedRate && sharedRateAllowed(context.Background(), c, namespace, h.cfg.TaskQueue, h.logger)
	h.shared.Store(shared)
	stop, err := h.queues.start(c, h.acts, h.opts, h.logger, shared)
	if err == nil {
		err = h.push(stop)
	}
	if err == nil {
		if stop, err = startWebhooks(h.cfg.Webhooks, c, h.opts.MetricsHandler, h.logger); err == nil {
			err = h.push(stop)
		}
	}
	if err != nil {
		h.Close()
		return err
	}
	h.logger.Info("worker starting", slog.String("task_queue", h.cfg.TaskQueue),
		slog.Any("allowed_origins", slices.Concat(h.cfg.Allow, h.cfg.file.Origins)),
		slog.String("origins_file", h.cfg.OriginsPath), slog.Bool("api_token", h.cfg.Token != ""), slog.Bool("shared_rate", shared))
	return nil
}

// WorkerOptions are the options of the worker of [Host.TaskQueue]: a
// 15 s WorkerStopTimeout, --task-queue-activities-per-second and, with
// --shared-rate, the interceptor that runs each HTTP activity on its
// origin's queue once [Host.Start] finds the shared rate in force. Set
// what else you need on them; keep Interceptors.
func (h *Host) WorkerOptions() worker.Options {
	o := worker.Options{WorkerStopTimeout: 15 * time.Second, TaskQueueActivitiesPerSecond: h.cfg.QueueRate}
	if h.cfg.SharedRate {
		o.Interceptors = []interceptor.WorkerInterceptor{newRouting(h.cfg.TaskQueue, h.queues.queues, h.shared.Load)}
	}
	return o
}

// Register registers on w (a worker of [Host.TaskQueue]) the HTTP
// activities, this module's workflows, the callback activity with
// --callback-base-url, and the governors' activities (governors started
// on this queue by an earlier version run here until they continue as
// new).
func (h *Host) Register(w worker.Registry) {
	h.acts.Register(w)
	workflows.Register(w)
	if cb := h.cfg.Webhooks.callbacks(); cb != nil {
		cb.Register(w)
	}
	h.gov.Register(w) // its client is Start's
}

// Close stops what [Host.Start] started, each worker waiting for its
// running activities up to its stop timeout, and exports the telemetry
// not yet exported. Call it before closing the client. It may be called
// from any goroutine, and more than once: each call returns once all is
// stopped; what a Start still running starts after it is stopped at once,
// and that Start fails.
func (h *Host) Close() {
	h.closeOnce.Do(func() {
		h.mu.Lock()
		stops := h.stops
		h.stops, h.closed = nil, true
		h.mu.Unlock()
		for _, stop := range slices.Backward(stops) {
			stop()
		}
	})
}

// push adds stop to what Close calls, first; after Close it calls stop
// at once and says so.
func (h *Host) push(stop func()) error {
	h.mu.Lock()
	if !h.closed {
		h.stops = append(h.stops, stop)
		h.mu.Unlock()
		return nil
	}
	h.mu.Unlock()
	stop()
	return errors.New("host: Close was called while Start ran: start again with a new Host")
}

// usageError is an error in the worker's args.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() + " (--help lists the flags)" }
func (e usageError) Unwrap() error { return e.err }

// ExitCode is 2, the status Go's flag package exits with on an error in
// the command line.
func (usageError) ExitCode() int { return 2 }

// secrets are the secret values of cfg, for the logger to redact.
func (cfg config) secrets() []string {
	var token []string
	if cfg.Token != "" {
		token = []string{cfg.Token, "Bearer " + cfg.Token}
	}
	return slices.Concat(token, cfg.Webhooks.Secrets, cfg.file.Secrets, cfg.Webhooks.CallbackSecrets)
}

// clientOptions loads the client options from the environment or a profile,
// with logger, --identity and the telemetry's interceptor and metrics.
func clientOptions(cfg config, logger *slog.Logger) (client.Options, *telemetry.Telemetry, error) {
	opts, err := envconfig.LoadDefaultClientOptions()
	if err != nil {
		return opts, nil, fmt.Errorf("loading Temporal client options (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, profile): %w", err)
	}
	opts.Logger = sdklog.NewStructuredLogger(logger)
	if cfg.Identity != "" {
		opts.Identity = cfg.Identity
	}
	tel, err := telemetry.Setup(context.Background(), telemetry.Options{ServiceName: "temporal-idempotent-http-worker", MetricsAddr: cfg.MetricsAddr, Logger: logger})
	if err != nil {
		return opts, nil, err
	}
	tel.Apply(&opts)
	if tel.MetricsURL != "" {
		logger.Info("serving metrics", slog.String("url", tel.MetricsURL))
	}
	if tel.TracesExporter != "" {
		logger.Info("exporting traces with OTLP", slog.String("protocol", tel.TracesExporter))
	}
	return opts, tel, nil
}

// flush exports the telemetry not yet exported and stops serving metrics.
func flush(tel *telemetry.Telemetry, logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tel.Shutdown(ctx); err != nil {
		logger.Warn("telemetry shutdown", slog.String("error", err.Error()))
	}
}
