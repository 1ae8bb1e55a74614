package host

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/internal/admission"
	"github.com/idemhttp/temporal-idempotent-http/internal/cliutil"
	"github.com/idemhttp/temporal-idempotent-http/internal/defaults"
	"github.com/idemhttp/temporal-idempotent-http/internal/httpurl"
	"github.com/idemhttp/temporal-idempotent-http/internal/named"
)

// config is what the flags and the environment ask for.
type config struct {
	taskQueue, allow, conventions   string
	logLevel, identity, metricsAddr string
	token, tokenOrigin              string // API_TOKEN, --api-token-origin
	originsPath                     string // --origins
	sealKeysPath                    string // --seal-keys-file
	check                           bool   // --check
	file                            originSettings
	maxBody                         int64
	maxRetryAfter                   time.Duration
	queueRate                       float64
	sharedRate                      bool

	admissionOn, breakerOn bool
	throttles              string
	admission              activities.Admission // the rest of --admission-*, --breaker-*, --retry-budget-ratio

	webhooks webhookConfig // --webhook-*, --callback-base-url
}

// parse reads args, as the worker's command line, and the environment
// (API_TOKEN, …) into a config; fs is the flag set to declare the flags
// on.
func parse(fs *flag.FlagSet, args []string) (config, error) {
	var cfg config
	fs.StringVar(&cfg.taskQueue, "task-queue", cliutil.Env("TASK_QUEUE", defaults.TaskQueue), "task queue to poll (env TASK_QUEUE)")
	cliutil.ListVar(fs, &cfg.allow, "allow-origin", os.Getenv("ALLOW_ORIGINS"), "`ORIGIN`s the worker may call, e.g. http://127.0.0.1:8081 (env ALLOW_ORIGINS, comma-separated)")
	fs.Int64Var(&cfg.maxBody, "max-response-bytes", defaults.MaxResponseBytes, "largest response body kept in a result")
	fs.DurationVar(&cfg.maxRetryAfter, "max-retry-after", defaults.MaxRetryAfter, "longest Retry-After honoured")
	fs.StringVar(&cfg.logLevel, "log-level", cliutil.Env("LOG_LEVEL", "info"), "debug, info, warn or error (env LOG_LEVEL)")
	cliutil.ListVar(fs, &cfg.conventions, "convention", os.Getenv("CONVENTIONS"), "`ORIGIN=PRESET[+MODIFIER...][:KEY-HEADER]` for servers that are not IETF-style, PRESET "+named.OneOf[conventionPreset]()+"; +quoted sends the key as a quoted RFC 8941 string, as the IETF draft writes it (default: bare); "+longRunningModifiers()+" choose how long-running operations are followed (default: a 202 with Location), e.g. https://api.stripe.com=stripe,https://api-m.paypal.com=ietf:PayPal-Request-Id,https://api.example.com=ietf+quoted+azure; one per origin (env CONVENTIONS, comma-separated)")
	fs.StringVar(&cfg.originsPath, "origins", os.Getenv("ORIGINS_FILE"), "TOML `FILE` of origins the worker may call too, each with its convention and credentials (env ORIGINS_FILE; see docs/credentials.md); an origin it names may not be given by --allow-origin or --convention as well")
	fs.StringVar(&cfg.sealKeysPath, "seal-keys-file", os.Getenv("SEAL_KEYS_FILE"), "`FILE` of keys that seal a status monitor URL carrying a secret (a credential in its path, a signature in its query) before it is written to Temporal's history: one base64 key of 32 bytes a line (openssl rand -base64 32), the first sealing, all opening; chmod 600; every worker needs the same (env SEAL_KEYS_FILE; default: such a monitor is not followed)")
	fs.BoolVar(&cfg.check, "check", false, "check the configuration and every origin's credential (fetch each OAuth 2.0 token, resolve AWS credentials, a TLS handshake with each client certificate), print what was found and exit (status 1 on a refusal), without connecting to Temporal; a worker does the same check as it starts")
	fs.StringVar(&cfg.tokenOrigin, "api-token-origin", os.Getenv("API_TOKEN_ORIGIN"), "the `ORIGIN` API_TOKEN is sent to as Authorization: Bearer (env API_TOKEN_ORIGIN; default: the only allowed origin; required with several)")
	fs.StringVar(&cfg.identity, "identity", os.Getenv("WORKER_IDENTITY"), "worker identity shown in Temporal (env WORKER_IDENTITY; default pid@host)")
	fs.StringVar(&cfg.metricsAddr, "metrics-addr", os.Getenv("METRICS_ADDR"), "serve Prometheus metrics on http://ADDR/metrics, e.g. 127.0.0.1:9464 (env METRICS_ADDR; default: off)")
	admissionFlags(fs, &cfg)
	webhookFlags(fs, &cfg.webhooks)
	fs.BoolVar(&cfg.sharedRate, "shared-rate", cliutil.Env("SHARED_RATE", "on") != "off", "one learned rate per origin for every worker of --task-queue, kept by the Temporal server: run each request to an allowed origin on the origin's own task queue (TASK-QUEUE@ORIGIN), whose rate limit the governor (on TASK-QUEUE@governor) sets from every worker's reports; where the worker may not write the task-queue config it keeps its own rate and says so at start; --shared-rate=false (or SHARED_RATE=off): each worker's own rate. The origins' queues are polled either way (requests with origin_queue run there)")
	fs.Float64Var(&cfg.queueRate, "task-queue-activities-per-second", 0, "a fixed limit on activities started per second on the task queue, which the Temporal server enforces across all its workers (worker.Options.TaskQueueActivitiesPerSecond; 0: none); for an API whose capacity is known and fixed, instead of or beside adaptive admission")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("%q: the worker takes flags only (--help lists them)", fs.Arg(0))
	}

	if cfg.queueRate < 0 {
		return cfg, fmt.Errorf("--task-queue-activities-per-second %g: use a positive rate, or 0 for no limit", cfg.queueRate)
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if cfg.queueRate > 0 && cfg.sharedRate {
		if set["shared-rate"] || os.Getenv("SHARED_RATE") != "" {
			return cfg, errors.New("--shared-rate (SHARED_RATE) and --task-queue-activities-per-second: choose one; the shared rate sets each origin queue's limit itself")
		}
		// A fixed limit on the base queue: the requests stay there.
		cfg.sharedRate = false
	}
	cfg.admission.Off, cfg.admission.Breaker.Off = !cfg.admissionOn, !cfg.breakerOn
	cfg.token = os.Getenv("API_TOKEN")
	cfg.webhooks.readSecrets(os.Getenv)
	if cfg.originsPath != "" {
		var err error
		if cfg.file, err = loadOrigins(cfg.originsPath, os.LookupEnv); err != nil {
			return cfg, err
		}
		for _, name := range cfg.file.AdmissionFlags {
			if set[name] {
				return cfg, fmt.Errorf("--%s and the [admission] table of --origins %s set the same: give it in one place", name, cfg.originsPath)
			}
		}
	}
	return cfg, nil
}

// admissionFlags defines the flags of adaptive admission, the retry budget
// and the circuit breaker.
func admissionFlags(fs *flag.FlagSet, cfg *config) {
	a, b := &cfg.admission, &cfg.admission.Breaker
	fs.BoolVar(&cfg.admissionOn, "admission", cliutil.Env("ADMISSION", "on") != "off", "adaptive admission per origin and the retry budget; --admission=false (or ADMISSION=off) sends every attempt at once")
	fs.Float64Var(&a.InitialRate, "admission-initial-rate", admission.DefaultInitialRate, "requests/s of an origin that has not throttled yet")
	fs.Float64Var(&a.MinRate, "admission-min-rate", admission.DefaultMinRate, "lowest requests/s that 429s and 503s bring an origin to")
	fs.Float64Var(&a.RetryRatio, "retry-budget-ratio", admission.DefaultRetryRatio, "share of an origin's requests that retries may be (beyond 100 per 10 s); negative: no retry budget")
	cliutil.ListVar(fs, &cfg.throttles, "admission-throttles", "429", "`STATUS`es that mean \"too fast\" and cut an origin's rate; add 503 for an API that sheds load with it")
	fs.BoolVar(&cfg.breakerOn, "breaker", cliutil.Env("BREAKER", "on") != "off", "circuit breaker per origin (part of admission): an origin that is failing gets one probe at a time and nothing else; --breaker=false (or BREAKER=off) turns it off")
	fs.Float64Var(&b.FailureRatio, "breaker-failure-ratio", admission.DefaultFailureRatio, "share of an origin's answered requests within --breaker-window that must have failed (5xx or no answer) to open its breaker")
	fs.IntVar(&b.MinFailures, "breaker-min-failures", admission.DefaultMinFailures, "least number of failures within --breaker-window that opens an origin's breaker")
	fs.DurationVar(&b.FailureWindow, "breaker-window", admission.DefaultFailureWindow, "sliding window the breaker counts failures in")
	fs.DurationVar(&b.OpenTime, "breaker-open-time", admission.DefaultOpenTime, "how long a breaker stays open before its first probe (a failing answer's Retry-After replaces it)")
	fs.DurationVar(&b.MaxOpenTime, "breaker-max-open-time", admission.DefaultMaxOpenTime, "longest open time between probes: each failed probe doubles the last up to this")
	fs.Float64Var(&b.RestartRate, "breaker-restart-rate", 0, "requests/s an origin starts again at when its breaker closes, growing by one per answer (default: half of --admission-initial-rate)")
}

// newActivities makes the activity cfg asks for and the origins' task
// queues, whose shared rates it follows with --shared-rate.
func newActivities(cfg config) (*activities.Activities, *originQueues, error) {
	ac, err := activityConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	origins := ac.AllowedOrigins
	ac.MaxResponseBytes, ac.MaxRetryAfter, ac.Admission = cfg.maxBody, cfg.maxRetryAfter, cfg.admission
	if ac.Admission.Throttles, err = parseThrottles(cfg.throttles); err != nil {
		return nil, nil, err
	}
	cfg.file.apply(&ac.Admission)
	ac.OriginAdmission = cfg.file.admissions(ac.Admission)
	queues := newOriginQueues(cfg.taskQueue, origins)
	if cfg.sharedRate {
		ac.SharedRate = queues
	}
	acts, err := activities.New(ac)
	if err != nil {
		return nil, nil, fmt.Errorf("configuration (--allow-origin, --convention, --origins, --admission-*, --breaker-*, --retry-budget-ratio, API_TOKEN): %w", err)
	}
	return acts, queues, nil
}

// checkCredentials asks every origin's credential before the worker takes
// work (activities.Activities.Check): a refused or misconfigured one
// stops the start, naming the origin; one that cannot be had for now (a
// token endpoint that is down) is logged, and the calls wait for it.
func checkCredentials(acts *activities.Activities, logger *slog.Logger) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := acts.Check(ctx, func(err error) {
		logger.Warn("credential not available at start: calls to its origin wait for it", slog.String("error", err.Error()))
	})
	if err != nil {
		return fmt.Errorf("credentials refused at start (fix them, then start again; --check checks without starting): %w", err)
	}
	logger.Info("credentials checked")
	return nil
}

// parseThrottles reads --admission-throttles, a list of statuses.
func parseThrottles(list string) ([]int, error) {
	var out []int
	for _, st := range cliutil.SplitList(list) {
		n, err := strconv.Atoi(st)
		if err != nil {
			return nil, fmt.Errorf("--admission-throttles: %q is not a status code: list statuses such as 429,503", st)
		}
		out = append(out, n)
	}
	return out, nil
}

// activityConfig allows the origins of --allow-origin and of the origins
// file, with their conventions and credentials, and sends API_TOKEN, if
// set, as a bearer token to its one origin.
func activityConfig(cfg config) (activities.Config, error) {
	ac := activities.Config{HTTPClient: &http.Client{Transport: transport()}}
	conventions, err := parseConventions(cfg.conventions)
	if err != nil {
		return ac, fmt.Errorf("--convention: %w", err)
	}
	flagged := map[string]bool{} // canonical origins of --allow-origin and --convention
	for _, o := range slices.Concat(cliutil.SplitList(cfg.allow), slices.Collect(maps.Keys(conventions))) {
		flagged[canonical(o)] = true
	}
	for _, o := range cfg.file.Origins {
		if flagged[o] {
			return ac, fmt.Errorf("origin %s is in --origins %s and in --allow-origin or --convention (ALLOW_ORIGINS, CONVENTIONS): give it in one place, its table in the file", o, cfg.originsPath)
		}
	}
	ac.AllowedOrigins = slices.Concat(cliutil.SplitList(cfg.allow), cfg.file.Origins)
	if len(ac.AllowedOrigins) == 0 {
		return ac, errors.New("no origin allowed: pass --allow-origin http://host:port (or set ALLOW_ORIGINS), or --origins FILE; the worker calls nothing else")
	}
	maps.Copy(conventions, cfg.file.Conventions)
	ac.Conventions = conventions
	creds, err := workerCredentials(ac.AllowedOrigins, cfg.file.Credentials, cfg.token, cfg.tokenOrigin)
	if err != nil {
		return ac, err
	}
	ac.Credentials = creds
	if ac.SealKeys, err = readSealKeys(cfg.sealKeysPath); err != nil {
		return ac, err
	}
	return ac, nil
}

// workerCredentials adds API_TOKEN, if set, to the origins file's
// credentials, as a bearer token for tokenOrigin, or for the only allowed
// origin without one.
func workerCredentials(origins []string, file map[string]activities.Credential, token, tokenOrigin string) (map[string]activities.Credential, error) {
	creds := maps.Clone(file)
	if token == "" {
		return creds, nil
	}
	target := canonical(tokenOrigin)
	switch {
	case tokenOrigin == "" && len(origins) != 1:
		return nil, fmt.Errorf("API_TOKEN is set and the worker may call %d origins (%s): name the one it is for with --api-token-origin ORIGIN (env API_TOKEN_ORIGIN); give the others their credentials in an origins file (--origins)", len(origins), strings.Join(origins, ", "))
	case tokenOrigin == "":
		target = canonical(origins[0])
	case !slices.ContainsFunc(origins, func(o string) bool { return canonical(o) == target }):
		return nil, fmt.Errorf("--api-token-origin %s (API_TOKEN_ORIGIN) is not an allowed origin (%s): name one of them", tokenOrigin, strings.Join(origins, ", "))
	}
	if _, twice := creds[target]; twice {
		return nil, fmt.Errorf("API_TOKEN is for %s, which has credentials in the origins file: give that origin its token in the file, or send API_TOKEN to another with --api-token-origin", target)
	}
	if creds == nil {
		creds = map[string]activities.Credential{}
	}
	creds[target] = activities.Credential{Header: http.Header{"Authorization": {"Bearer " + token}}}
	return creds, nil
}

// canonical is the canonical form of origin o, or o if it is none (which
// activities.New then refuses).
func canonical(o string) string {
	if c, err := httpurl.ParseOrigin(strings.TrimSpace(o)); err == nil {
		return c
	}
	return o
}

// conventionPreset is the type of the convention presets package
// activities registers by name (internal/named): ietf, stripe, ….
type conventionPreset = func() activities.Convention

// longRunningPreset is the type of the long-running presets package
// activities registers by name (internal/named): azure, …, each given the
// origin.
type longRunningPreset = func(origin string) activities.LongRunning

// longRunningModifiers lists the --convention modifiers of the
// long-running presets: "+azure, … or +google".
func longRunningModifiers() string {
	names := named.Names[longRunningPreset]()
	for i, n := range names {
		names[i] = "+" + n
	}
	return named.List(names...)
}

// parseConventions reads ORIGIN=PRESET[+MODIFIER...][:KEY-HEADER] items:
// +quoted sets Convention.KeyQuoted; a long-running preset's name
// (+azure, +operation-location, +google) sets Convention.LongRunning to
// it (AzureAsyncOperation, OperationLocation, GoogleOperation(ORIGIN +
// "/v1/")).
func parseConventions(list string) (map[string]activities.Convention, error) {
	out := map[string]activities.Convention{}
	for _, item := range cliutil.SplitList(list) {
		origin, spec, ok := strings.Cut(item, "=")
		preset, keyHeader, _ := strings.Cut(spec, ":")
		preset, modifiers, hasModifiers := strings.Cut(preset, "+")
		var c activities.Convention
		if p, known := named.Lookup[conventionPreset](strings.TrimSpace(preset)); known {
			c = p()
		} else {
			ok = false
		}
		origin = strings.TrimSpace(origin)
		seen, lroSet := map[string]bool{}, false
		for m := range strings.SplitSeq(modifiers, "+") {
			if !hasModifiers {
				break
			}
			m = strings.ToLower(strings.TrimSpace(m))
			longRunning, lro := named.Lookup[longRunningPreset](m)
			if seen[m] || lro && lroSet {
				ok = false // twice, or two long-running conventions
			}
			seen[m], lroSet = true, lroSet || lro
			switch {
			case m == "quoted":
				c.KeyQuoted = true
			case lro:
				c.LongRunning = longRunning(origin)
			default:
				ok = false
			}
		}
		if !ok {
			return nil, fmt.Errorf("%q: want ORIGIN=PRESET[+MODIFIER...][:KEY-HEADER] with PRESET %s and MODIFIER %s, e.g. https://api.stripe.com=stripe or https://api.example.com=ietf+quoted+azure", item, named.OneOf[conventionPreset](), named.List(append([]string{"quoted"}, named.Names[longRunningPreset]()...)...))
		}
		if keyHeader != "" {
			c.KeyHeader = strings.TrimSpace(keyHeader)
		}
		if _, twice := out[origin]; twice {
			return nil, fmt.Errorf("%s is given twice: give each origin one ORIGIN=PRESET[+MODIFIER...][:KEY-HEADER], its modifiers joined by +", origin)
		}
		out[origin] = c
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
