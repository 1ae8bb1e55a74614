// Command demoapi serves the reference idempotent server of package
// testsuite on an address, for the demo, the integration tests and for
// trying clients against it.
//
//	go run ./cmd/demoapi --addr 127.0.0.1:8081 --script 503,429:1,201
//	go run ./cmd/demoapi --dialect stripe --orphan-prefix orphan-
//
// Any POST, PUT, PATCH or DELETE path creates a record per distinct
// Idempotency-Key; GET /stats reports requests, distinct keys and records as
// JSON, and the same figures are logged on exit. --dialect ietf|stripe|express
// picks the answers for in-flight keys, misuse, missing keys and replays
// (see testsuite.Dialect); --key-header, --replay-header and
// --in-flight-retry-after change one of them.
//
// Any --webhook-* flag makes each new key an operation that reports its
// outcome by signed webhooks (testsuite.Webhooks), readable at GET
// /resources/{id}; the secret is read from the environment variable
// --webhook-secret-env names, never from the command line:
//
//	WEBHOOK_SECRET=whsec_MDEyMzQ1Njc4OWFiY2RlZg== go run ./cmd/demoapi \
//	    --webhook-url http://127.0.0.1:8090/hooks --webhook-duration 5s --webhook-deliveries 2
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/internal/cliutil"
	"github.com/idemhttp/temporal-idempotent-http/internal/testing/serverflag"
	"github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

func main() {
	if err := run(); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "demoapi:", err)
		os.Exit(1)
	}
}

// config is what the command line asks for.
type config struct {
	addr, script, token string
	opts                testsuite.Options
	steps               []testsuite.Step
}

// parseFlags reads the command line; apiToken is the default of --require-token.
func parseFlags(args []string, apiToken string) (config, error) {
	fs := flag.NewFlagSet("demoapi", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:8081", "address to listen on")
	script := new(string)
	cliutil.ListVar(fs, script, "script", "", `scripted answers before normal processing, in order, e.g. "503,429:1,201"`)
	failureRate := fs.Float64("failure-rate", 0, "fraction of requests answered 503 at random, in [0, 1]")
	failureRetryAfter := fs.String("failure-retry-after", "", "Retry-After sent with random failures")
	processing := fs.Duration("processing-time", 0, "how long the work of a new key takes")
	window := fs.Duration("window", 24*time.Hour, "how long keys are remembered") // testsuite.Options.Window's default
	capacity := fs.Int("capacity", 0, "requests accepted per --capacity-window, 429 beyond (0: unlimited)")
	capacityWindow := fs.Duration("capacity-window", time.Second, "window of --capacity")
	dialectName := fs.String("dialect", "ietf", "convention played: ietf, stripe or express")
	keyHeader := fs.String("key-header", "", "request header carrying the key instead of the dialect's Idempotency-Key, e.g. PayPal-Request-Id")
	replayHeader := fs.String("replay-header", "", `header set to "true" on replays instead of the dialect's; --replay-header= for none`)
	inFlightRetryAfter := fs.Bool("in-flight-retry-after", false, "send Retry-After: 1 with the in-flight 409, or not with =false (default: the dialect's, on for ietf only)")
	lockTimeout := fs.Duration("lock-timeout", 0, "how long an unfinished first request keeps its key locked (0: until the window ends)")
	orphanPrefix := fs.String("orphan-prefix", "", "keys starting with this prefix are orphaned: their first request is never answered and the key stays locked")
	asyncStyle := fs.String("async", "", "make every new key's work a long-running operation, followed at a status monitor in this style: location, see-other, azure, operation-location or google (default: none, the work is done at once)")
	asyncDuration := fs.Duration("async-duration", 30*time.Second, "how long each long-running operation runs (with --async)")
	asyncRetryAfter := fs.Int("async-retry-after", 2, "Retry-After, in seconds, of the acceptance and of each poll while running; 0 for none (with --async)")
	asyncOutcome := fs.String("async-outcome", string(workflows.StateSucceeded), "how operations end: succeeded, failed, canceled or never (with --async)")
	asyncFlaky := fs.Int("async-flaky-polls", 0, "answer every n-th poll 503 (with --async; 0: none)")
	whURL := fs.String("webhook-url", "", "send each operation's signed webhooks to this URL (a start request's \"callback_url\" overrides it); any --webhook-* flag turns webhooks on")
	whScheme := fs.String("webhook-scheme", string(testsuite.SchemeStandardWebhooks), "webhook signature scheme: standard-webhooks, stripe or hmac")
	whSecretEnv := fs.String("webhook-secret-env", "WEBHOOK_SECRET", "the environment variable holding the webhook signing secret (whsec_ and base64 for standard-webhooks)")
	whDuration := fs.Duration("webhook-duration", 0, "how long each operation runs before its outcome webhook")
	whOutcome := fs.String("webhook-outcome", string(workflows.StateSucceeded), "how operations end: succeeded, failed or canceled")
	whDeliveries := fs.Int("webhook-deliveries", 1, "how many times the terminal event is delivered (same event ID)")
	whProgress := fs.Bool("webhook-progress", false, "also send an operation.processing event, after the terminal one")
	whShuffle := fs.Bool("webhook-shuffle", false, "send each operation's deliveries in random order")
	whJitter := fs.Duration("webhook-jitter", 0, "largest random delay before each delivery")
	whForged := fs.Int("webhook-forged", 0, "extra copies of the terminal event per operation with a wrong signature")
	whStale := fs.Int("webhook-stale", 0, "extra copies of the terminal event per operation signed 10 minutes ago")
	whDropRate := fs.Float64("webhook-drop-rate", 0, "fraction of operations whose webhooks are never sent, in [0, 1]")
	token := fs.String("require-token", apiToken, "if set, requests must carry Authorization: Bearer TOKEN (env API_TOKEN)")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	steps, err := serverflag.ParseScript(*script)
	if err != nil {
		return config{}, err
	}
	if *failureRate < 0 || *failureRate > 1 {
		return config{}, fmt.Errorf("--failure-rate %v: want a fraction in [0, 1]", *failureRate)
	}
	if *lockTimeout < 0 {
		return config{}, fmt.Errorf("--lock-timeout %v: want 0 or more", *lockTimeout)
	}
	dialect, err := serverflag.ParseDialect(*dialectName)
	if err != nil {
		return config{}, fmt.Errorf("--dialect: %w", err)
	}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "key-header":
			dialect.KeyHeader = *keyHeader
		case "replay-header":
			dialect.ReplayHeader = *replayHeader
		case "in-flight-retry-after":
			dialect.InFlightRetryAfter = *inFlightRetryAfter
		}
	})
	var async *testsuite.Async
	if *asyncStyle != "" {
		style, err := serverflag.ParseAsyncStyle(*asyncStyle)
		if err != nil {
			return config{}, fmt.Errorf("--async: %w", err)
		}
		switch workflows.State(*asyncOutcome) {
		case workflows.StateSucceeded, workflows.StateFailed, workflows.StateCanceled, testsuite.NeverEnds:
		default:
			return config{}, fmt.Errorf("--async-outcome %q: want succeeded, failed, canceled or never", *asyncOutcome)
		}
		async = &testsuite.Async{Style: style, Duration: *asyncDuration, RetryAfter: *asyncRetryAfter, Outcome: workflows.State(*asyncOutcome), FlakyPolls: *asyncFlaky}
	}
	var webhooks *testsuite.Webhooks
	fs.Visit(func(f *flag.Flag) {
		if strings.HasPrefix(f.Name, "webhook-") {
			webhooks = &testsuite.Webhooks{
				URL: *whURL, Scheme: testsuite.Scheme(*whScheme), Secret: os.Getenv(*whSecretEnv), Duration: *whDuration,
				Outcome: workflows.State(*whOutcome), Deliveries: *whDeliveries, Progress: *whProgress, Shuffle: *whShuffle,
				Jitter: *whJitter, Forged: *whForged, Stale: *whStale, DropRate: *whDropRate,
			}
		}
	})
	if webhooks != nil {
		switch {
		case async != nil:
			return config{}, errors.New("--async and --webhook-*: pick one way to report operations")
		case webhooks.Secret == "":
			return config{}, fmt.Errorf("--webhook-*: set the signing secret in the environment variable %s (--webhook-secret-env names another)", *whSecretEnv)
		case *whDeliveries < 1:
			return config{}, fmt.Errorf("--webhook-deliveries %d: want 1 or more", *whDeliveries)
		}
		if err := webhooks.Validate(); err != nil {
			return config{}, err
		}
	}
	var orphan func(string) bool
	if prefix := *orphanPrefix; prefix != "" {
		orphan = func(key string) bool { return strings.HasPrefix(key, prefix) }
	}
	return config{
		addr: *addr, script: *script, token: *token, steps: steps,
		opts: testsuite.Options{
			Dialect: dialect, Window: *window, ProcessingTime: *processing, FailureRate: *failureRate,
			FailureRetryAfter: *failureRetryAfter, Capacity: *capacity, CapacityWindow: *capacityWindow,
			LockTimeout: *lockTimeout, Orphan: orphan, Async: async, Webhooks: webhooks,
		},
	}, nil
}

func run() error {
	cfg, err := parseFlags(os.Args[1:], os.Getenv("API_TOKEN"))
	if err != nil {
		return err
	}
	logger, err := cliutil.NewLogger("info", cfg.token)
	if err != nil {
		return err
	}
	srv := testsuite.NewServer(cfg.opts)
	srv.Script(cfg.steps...)

	var h http.Handler = srv
	if cfg.token != "" {
		h = requireToken(srv, cfg.token)
	}
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	hs.RegisterOnShutdown(srv.Close) // drop the orphaned requests it holds
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(shutdown)
	}()
	d := cfg.opts.Dialect
	logger.Info("reference API listening", "url", "http://"+ln.Addr().String(), "dialect", d.Name,
		"key_header", d.KeyHeader, "script", cfg.script, "failure_rate", cfg.opts.FailureRate)
	if w := cfg.opts.Webhooks; w != nil {
		logger.Info("webhooks on", "url", w.URL, "scheme", w.Scheme, "duration", w.Duration, "outcome", w.Outcome,
			"deliveries", w.Deliveries, "forged", w.Forged, "stale", w.Stale, "drop_rate", w.DropRate)
	}
	if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	st, _ := json.Marshal(srv.Stats())
	logger.Info("reference API stopped", slog.String("stats", string(st)))
	return nil
}

// requireToken answers 401 to requests without the expected bearer token,
// except GET /stats and /healthz.
func requireToken(next http.Handler, token string) http.Handler {
	want := "Bearer " + token
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Header.Get("Authorization") != want {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":"missing or wrong bearer token"}` + "\n"))
			return
		}
		next.ServeHTTP(w, r)
	})
}
