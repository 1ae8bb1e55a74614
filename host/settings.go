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
	"strings"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/internal/httpurl"
	"github.com/idemhttp/temporal-idempotent-http/internal/named"
)

// settings are a worker's settings, each declared once by its field's
// tags (declare.go): its flag, environment variable, [admission] key,
// default and help. docs/settings.md is their table.
type settings struct {
	TaskQueue   string   `flag:"task-queue" env:"TASK_QUEUE" default:"idempotent-http" arg:"QUEUE" help:"task QUEUE the workflows schedule their HTTP activities on"`
	Allow       []string `flag:"allow-origin" env:"ALLOW_ORIGINS" arg:"ORIGIN" help:"ORIGINs the worker may call, e.g. http://127.0.0.1:8081 (comma-separated; the flag may be given again)"`
	Conventions []string `flag:"convention" env:"CONVENTIONS" arg:"ORIGIN=PRESET[+MODIFIER...][:KEY-HEADER]" help:"ORIGIN=PRESET[+MODIFIER...][:KEY-HEADER] for servers that are not IETF-style, PRESET {presets}; +quoted sends the key as a quoted RFC 8941 string, as the IETF draft writes it (default: bare); {modifiers} choose how long-running operations are followed (default: a 202 with Location), e.g. https://api.stripe.com=stripe,https://api-m.paypal.com=ietf:PayPal-Request-Id,https://api.example.com=ietf+quoted+azure; one per origin (comma-separated)"`
	OriginsPath string   `flag:"origins" env:"ORIGINS_FILE" arg:"FILE" help:"TOML FILE of origins the worker may call too, each with its convention, credentials and admission (docs/credentials.md); an origin it names may not be given by --allow-origin or --convention as well"`
	Token       string   `env:"API_TOKEN" help:"the target API's token, sent as Authorization: Bearer to --api-token-origin only (never a flag: it would show in the process list)"`
	TokenOrigin string   `flag:"api-token-origin" env:"API_TOKEN_ORIGIN" arg:"ORIGIN" help:"the ORIGIN API_TOKEN is sent to (default: the only allowed origin; required with several)"`
	SealKeys    string   `flag:"seal-keys-file" env:"SEAL_KEYS_FILE" arg:"FILE" help:"FILE of keys that seal a status monitor URL carrying a secret (a credential in its path, a signature in its query) before it is written to Temporal's history: one base64 key of 32 bytes a line (openssl rand -base64 32), the first sealing, all opening; chmod 600; every worker needs the same (default: such a monitor is not followed)"`
	Check       bool     `flag:"check" env:"-" help:"check the configuration and every origin's credential (fetch each OAuth 2.0 token, resolve AWS credentials, a TLS handshake with each client certificate), print what was found and exit (status 1 on a refusal), without connecting to Temporal; a worker does the same check as it starts"`
	Identity    string   `flag:"identity" env:"WORKER_IDENTITY" help:"worker identity shown in Temporal (default pid@host)"`
	LogLevel    string   `flag:"log-level" env:"LOG_LEVEL" default:"info" help:"debug, info, warn or error"`
	MetricsAddr string   `flag:"metrics-addr" env:"METRICS_ADDR" arg:"ADDR" help:"serve Prometheus metrics on http://ADDR/metrics, e.g. 127.0.0.1:9464 (default: off)"`
	// MaxBody and MaxRetryAfter are activities.Config's.
	MaxBody       int64         `flag:"max-response-bytes" env:"MAX_RESPONSE_BYTES" default:"1048576" help:"largest response body kept in a result"`
	MaxRetryAfter time.Duration `flag:"max-retry-after" env:"MAX_RETRY_AFTER" default:"5m0s" help:"longest Retry-After honoured, for every origin whose table in --origins does not say (max_retry_after)"`
	SharedRate    bool          `flag:"shared-rate" env:"SHARED_RATE" default:"true" help:"one learned rate per origin for every worker of --task-queue, kept by the Temporal server: run each request to an allowed origin on the origin's own task queue (TASK-QUEUE@ORIGIN), whose rate limit the governor (on TASK-QUEUE@governor) sets from every worker's reports; where the worker may not write the task-queue config it keeps its own rate and says so at start; --shared-rate=false (or SHARED_RATE=off): each worker's own rate. The origins' queues are polled either way (requests with origin_queue run there)"`
	QueueRate     float64       `flag:"task-queue-activities-per-second" env:"TASK_QUEUE_ACTIVITIES_PER_SECOND" default:"0" help:"a fixed limit on activities started per second on the task queue, which the Temporal server enforces across all its workers (worker.Options.TaskQueueActivitiesPerSecond; 0: none); for an API whose capacity is known and fixed, instead of or beside adaptive admission"`

	// Admission is activities.Config.Admission: each field is nil until
	// the environment or a flag sets it (the library's default applies),
	// then the origins file's [admission] table is laid over it.
	Admission admissionTable
	Webhooks  webhookSettings
}

// admissionTable is activities.Admission as settings (the flags, the
// environment) and as the origins file's [admission] table and an
// origin's [origin."ORIGIN".admission]: a nil field is not set. A
// field's example tag is the value the file's errors show.
type admissionTable struct {
	Off         *bool          `toml:"off" flag:"admission" invert:"true" env:"ADMISSION" default:"true" example:"true" help:"adaptive admission per origin and the retry budget; --admission=false (or ADMISSION=off, [admission] off = true) sends every attempt at once"`
	InitialRate *float64       `toml:"initial_rate" flag:"admission-initial-rate" env:"ADMISSION_INITIAL_RATE" default:"10" example:"10" help:"requests/s of an origin that has not throttled yet"`
	MinRate     *float64       `toml:"min_rate" flag:"admission-min-rate" env:"ADMISSION_MIN_RATE" default:"0.5" example:"0.5" help:"lowest requests/s that throttles bring an origin to"`
	RetryRatio  *float64       `toml:"retry_ratio" flag:"retry-budget-ratio" env:"RETRY_BUDGET_RATIO" default:"0.2" example:"0.2" help:"share of an origin's requests that retries may be, beyond admission-min-retries per admission-retry-window; negative: no retry budget"`
	MinRetries  *int           `toml:"min_retries" flag:"admission-min-retries" env:"ADMISSION_MIN_RETRIES" default:"100" example:"100" help:"retries always allowed per admission-retry-window, whatever the ratio"`
	RetryWindow *time.Duration `toml:"retry_window" flag:"admission-retry-window" env:"ADMISSION_RETRY_WINDOW" default:"10s" example:"10s" help:"window the retry budget counts requests in"`
	MaxWait     *time.Duration `toml:"max_wait" flag:"admission-max-wait" env:"ADMISSION_MAX_WAIT" default:"1s" example:"1s" help:"longest wait for admission inside an attempt; a longer one ends the attempt, which Temporal retries shortly before its turn"`
	MaxDelay    *time.Duration `toml:"max_delay" flag:"admission-max-delay" env:"ADMISSION_MAX_DELAY" default:"3s" example:"3s" help:"longest delay admission adds to an attempt's retry after a throttle"`
	Throttles   []int          `toml:"throttles" flag:"admission-throttles" env:"ADMISSION_THROTTLES" default:"429" arg:"STATUS" example:"[429, 503]" help:"STATUSes that mean too fast and cut an origin's rate; add 503 for an API that sheds load with it (comma-separated)"`
	Breaker     *breakerTable  `toml:"breaker"`
}

// breakerTable is activities.Breaker as settings and as the [breaker]
// table of an [admission] table.
type breakerTable struct {
	Off           *bool          `toml:"off" flag:"breaker" invert:"true" env:"BREAKER" default:"true" example:"true" help:"circuit breaker per origin (part of admission): an origin that is failing gets one probe at a time and nothing else; --breaker=false (or BREAKER=off) turns it off"`
	FailureRatio  *float64       `toml:"failure_ratio" flag:"breaker-failure-ratio" env:"BREAKER_FAILURE_RATIO" default:"0.5" example:"0.5" help:"share of an origin's answered requests within the breaker's window that must have failed (5xx or no answer) to open its breaker"`
	MinFailures   *int           `toml:"min_failures" flag:"breaker-min-failures" env:"BREAKER_MIN_FAILURES" default:"5" example:"5" help:"least number of failures within the breaker's window that opens an origin's breaker"`
	FailureWindow *time.Duration `toml:"window" flag:"breaker-window" env:"BREAKER_WINDOW" default:"10s" example:"10s" help:"sliding window the breaker counts failures in"`
	OpenTime      *time.Duration `toml:"open_time" flag:"breaker-open-time" env:"BREAKER_OPEN_TIME" default:"1s" example:"1s" help:"how long a breaker stays open before its first probe (a failing answer's Retry-After replaces it)"`
	MaxOpenTime   *time.Duration `toml:"max_open_time" flag:"breaker-max-open-time" env:"BREAKER_MAX_OPEN_TIME" default:"1s" example:"1m" help:"longest open time between probes: each failed probe doubles the last up to this"`
	RestartRate   *float64       `toml:"restart_rate" flag:"breaker-restart-rate" env:"BREAKER_RESTART_RATE" default:"half of admission-initial-rate" example:"5" help:"requests/s an origin starts again at when its breaker closes, growing by one per answer"`
}

// config is what the settings and the origins file ask for.
type config struct {
	settings
	// given says who set each setting, by field name: its flag (--name)
	// or environment variable; a setting not in it has its default.
	given map[string]string
	file  originSettings
	// admission is the worker's admission: the settings', with the
	// origins file's [admission] laid over them.
	admission activities.Admission
}

// parse reads args, as the worker's command line, and the environment
// (getenv) into a config; fs is the flag set to declare the flags on.
func parse(fs *flag.FlagSet, args []string) (config, error) {
	return parseWith(fs, args, os.Getenv)
}

// parseWith is parse with getenv for the environment.
func parseWith(fs *flag.FlagSet, args []string, getenv func(string) string) (config, error) {
	var cfg config
	var err error
	if cfg.given, err = declare(fs, &cfg.settings, args, getenv); err != nil {
		return cfg, err
	}
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("%q: the worker takes flags only (--help lists them)", fs.Arg(0))
	}
	if cfg.QueueRate < 0 {
		return cfg, fmt.Errorf("--task-queue-activities-per-second %g: use a positive rate, or 0 for no limit", cfg.QueueRate)
	}
	if cfg.QueueRate > 0 && cfg.SharedRate {
		if by, ok := cfg.given["shared-rate"]; ok {
			return cfg, fmt.Errorf("%s and --task-queue-activities-per-second: choose one; the shared rate sets each origin queue's limit itself", by)
		}
		// A fixed limit on the base queue: the requests stay there.
		cfg.SharedRate = false
	}
	if err := cfg.Admission.check(cfg.given); err != nil {
		return cfg, err
	}
	if cfg.Webhooks.Namespace == "" {
		cfg.Webhooks.Namespace = "default"
	}
	if cfg.OriginsPath != "" {
		if cfg.file, err = loadOrigins(cfg.OriginsPath, envLookup(getenv)); err != nil {
			return cfg, err
		}
		if err := cfg.Admission.under(cfg.file.admission, cfg.given, cfg.OriginsPath); err != nil {
			return cfg, err
		}
	}
	cfg.Admission.apply(&cfg.admission)
	return cfg, nil
}

// check refuses an admission setting out of range, naming the flag or
// variable that set it, as the origins file's loader names its keys.
func (t *admissionTable) check(given map[string]string) error {
	if s, ok := t.outOfRange(); ok {
		fv := fieldValue{v: s.value, invert: s.field.Tag.Get("invert") == "true"}
		return fmt.Errorf("%s %s: out of range: %s", given[s.field.Tag.Get("flag")], fv.String(), admissionAdvice(s.key[len(s.key)-1]))
	}
	if t.minAboveInitial() {
		return fmt.Errorf("%s %g is above %s %g: give a lowest rate at most the first", given["admission-min-rate"], *t.MinRate, given["admission-initial-rate"], *t.InitialRate)
	}
	return nil
}

// envLookup is getenv as an environ: a variable set empty is unset.
func envLookup(getenv func(string) string) environ {
	return func(name string) (string, bool) {
		v := getenv(name)
		return v, v != ""
	}
}

// under lays file, the origins file's [admission] table, over t, the
// settings': a key the table sets that a flag or variable set too
// (given) is refused.
func (t *admissionTable) under(file *admissionTable, given map[string]string, path string) error {
	for _, s := range file.each() {
		if by, ok := given[s.field.Tag.Get("flag")]; ok {
			return fmt.Errorf("%s and admission.%s in --origins %s set the same: give it in one place", by, strings.Join(s.key, "."), path)
		}
		t.set(s)
	}
	return nil
}

// newActivities makes the activity cfg asks for and the origins' task
// queues, whose shared rates it follows with --shared-rate.
func newActivities(cfg config) (*activities.Activities, *originQueues, error) {
	ac, err := activityConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	origins := ac.AllowedOrigins
	ac.MaxResponseBytes, ac.MaxRetryAfter, ac.Admission = cfg.MaxBody, cfg.MaxRetryAfter, cfg.admission
	if ac.OriginAdmission, err = cfg.file.admissions(ac.Admission); err != nil {
		return nil, nil, err
	}
	queues := newOriginQueues(cfg.TaskQueue, origins)
	queues.setAdmission(ac.Admission, ac.OriginAdmission)
	if cfg.SharedRate {
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

// activityConfig allows the origins of --allow-origin and of the origins
// file, with their conventions and credentials, and sends API_TOKEN, if
// set, as a bearer token to its one origin.
func activityConfig(cfg config) (activities.Config, error) {
	ac := activities.Config{HTTPClient: &http.Client{Transport: transport()}}
	conventions, err := parseConventions(cfg.Conventions)
	if err != nil {
		return ac, fmt.Errorf("--convention: %w", err)
	}
	flagged := map[string]bool{} // canonical origins of --allow-origin and --convention
	for _, o := range slices.Concat(cfg.Allow, slices.Collect(maps.Keys(conventions))) {
		flagged[canonical(o)] = true
	}
	for _, o := range cfg.file.Origins {
		if flagged[o] {
			return ac, fmt.Errorf("origin %s is in --origins %s and in --allow-origin or --convention (ALLOW_ORIGINS, CONVENTIONS): give it in one place, its table in the file", o, cfg.OriginsPath)
		}
	}
	ac.AllowedOrigins = slices.Concat(cfg.Allow, cfg.file.Origins)
	if len(ac.AllowedOrigins) == 0 {
		return ac, errors.New("no origin allowed: pass --allow-origin http://host:port (or set ALLOW_ORIGINS), or --origins FILE; the worker calls nothing else")
	}
	maps.Copy(conventions, cfg.file.Conventions)
	ac.Conventions = conventions
	creds, err := workerCredentials(ac.AllowedOrigins, cfg.file.Credentials, cfg.Token, cfg.TokenOrigin)
	if err != nil {
		return ac, err
	}
	ac.Credentials = creds
	if ac.SealKeys, err = readSealKeys(cfg.SealKeys); err != nil {
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

// conventionPresets lists the convention presets: "ietf or stripe".
func conventionPresets() string { return named.OneOf[conventionPreset]() }

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
func parseConventions(list []string) (map[string]activities.Convention, error) {
	out := map[string]activities.Convention{}
	for _, item := range list {
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
