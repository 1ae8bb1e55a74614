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
//
// It can require a credential scheme, to test a client's set-up (see
// testsuite.Options): --require-oauth serves a client-credentials token
// endpoint at POST /oauth/token for one client (--oauth-client-id, the
// secret in the environment variable --oauth-client-secret-env names) and
// requires its bearer tokens, valid for --oauth-token-lifetime;
// --tls-cert and --tls-key serve HTTPS, and --client-ca requires client
// certificates signed by its CAs; --require-sigv4 requires AWS Signature
// V4 for --sigv4-service and --sigv4-region with the key in
// AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN:
//
//	OAUTH_CLIENT_SECRET=s3cret go run ./cmd/demoapi --require-oauth --oauth-token-lifetime 5s
//	go run ./cmd/demoapi --tls-cert server.pem --tls-key server-key.pem --client-ca clients-ca.pem
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
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

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/idemhttp/temporal-idempotent-http/harness/serverflag"
	"github.com/idemhttp/temporal-idempotent-http/internal/cliutil"
	"github.com/idemhttp/temporal-idempotent-http/internal/named"
	"github.com/idemhttp/temporal-idempotent-http/internal/signature"
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
	secrets             []string // the secrets the log must not show
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
	dialectSet := addDialectFlags(fs)
	lockTimeout := fs.Duration("lock-timeout", 0, "how long an unfinished first request keeps its key locked (0: until the window ends)")
	orphanPrefix := fs.String("orphan-prefix", "", "keys starting with this prefix are orphaned: their first request is never answered and the key stays locked")
	asyncSet := addAsyncFlags(fs)
	webhookSet := addWebhookFlags(fs)
	token := fs.String("require-token", apiToken, "if set, requests must carry Authorization: Bearer TOKEN (env API_TOKEN)")
	authSet := addAuthFlags(fs)
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
	dialect, err := dialectSet.dialect(fs)
	if err != nil {
		return config{}, err
	}
	async, err := asyncSet.async()
	if err != nil {
		return config{}, err
	}
	webhooks, err := webhookSet.webhooks(fs, async != nil)
	if err != nil {
		return config{}, err
	}
	cfg := config{
		addr: *addr, script: *script, token: *token, steps: steps, secrets: []string{*token},
		opts: testsuite.Options{
			Dialect: dialect, Window: *window, ProcessingTime: *processing, FailureRate: *failureRate,
			FailureRetryAfter: *failureRetryAfter, Capacity: *capacity, CapacityWindow: *capacityWindow,
			LockTimeout: *lockTimeout, Orphan: orphanKeys(*orphanPrefix), Async: async, Webhooks: webhooks,
		},
	}
	if err := authSet.apply(fs, &cfg); err != nil {
		return config{}, err
	}
	return cfg, cfg.opts.Validate()
}

// orphanKeys is testsuite.Options.Orphan for --orphan-prefix: nil, no key
// orphaned, when prefix is empty.
func orphanKeys(prefix string) func(string) bool {
	if prefix == "" {
		return nil
	}
	return func(key string) bool { return strings.HasPrefix(key, prefix) }
}

// dialectFlags are --dialect and the flags that change one of its answers.
type dialectFlags struct {
	name, keyHeader, replayHeader *string
	inFlightRetryAfter            *bool
}

func addDialectFlags(fs *flag.FlagSet) dialectFlags {
	return dialectFlags{
		name:               fs.String("dialect", "ietf", "convention played: ietf, stripe or express"),
		keyHeader:          fs.String("key-header", "", "request header carrying the key instead of the dialect's Idempotency-Key, e.g. PayPal-Request-Id"),
		replayHeader:       fs.String("replay-header", "", `header set to "true" on replays instead of the dialect's; --replay-header= for none`),
		inFlightRetryAfter: fs.Bool("in-flight-retry-after", false, "send Retry-After: 1 with the in-flight 409, or not with =false (default: the dialect's, on for ietf only)"),
	}
}

// dialect is the named dialect with the answers the command line set
// (fs parsed) in place of its own.
func (d dialectFlags) dialect(fs *flag.FlagSet) (testsuite.Dialect, error) {
	dialect, err := serverflag.ParseDialect(*d.name)
	if err != nil {
		return testsuite.Dialect{}, fmt.Errorf("--dialect: %w", err)
	}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "key-header":
			dialect.KeyHeader = *d.keyHeader
		case "replay-header":
			dialect.ReplayHeader = *d.replayHeader
		case "in-flight-retry-after":
			dialect.InFlightRetryAfter = *d.inFlightRetryAfter
		}
	})
	return dialect, nil
}

// asyncFlags are --async and its --async-* settings.
type asyncFlags struct {
	style, outcome    *string
	duration          *time.Duration
	retryAfter, flaky *int
}

func addAsyncFlags(fs *flag.FlagSet) asyncFlags {
	return asyncFlags{
		style:      fs.String("async", "", "make every new key's work a long-running operation, followed at a status monitor in this style: location, see-other, azure, operation-location or google (default: none, the work is done at once)"),
		duration:   fs.Duration("async-duration", 30*time.Second, "how long each long-running operation runs (with --async)"),
		retryAfter: fs.Int("async-retry-after", 2, "Retry-After, in seconds, of the acceptance and of each poll while running; 0 for none (with --async)"),
		outcome:    fs.String("async-outcome", string(workflows.StateSucceeded), "how operations end: succeeded, failed, canceled or never (with --async)"),
		flaky:      fs.Int("async-flaky-polls", 0, "answer every n-th poll 503 (with --async; 0: none)"),
	}
}

// async is testsuite.Options.Async: nil without --async.
func (a asyncFlags) async() (*testsuite.Async, error) {
	if *a.style == "" {
		return nil, nil
	}
	style, err := serverflag.ParseAsyncStyle(*a.style)
	if err != nil {
		return nil, fmt.Errorf("--async: %w", err)
	}
	out := &testsuite.Async{Style: style, Duration: *a.duration, RetryAfter: *a.retryAfter, FlakyPolls: *a.flaky}
	switch workflows.State(*a.outcome) {
	case workflows.StateSucceeded, workflows.StateFailed, workflows.StateCanceled:
		out.State = workflows.State(*a.outcome)
	case "never":
		out.Endless = true
	default:
		return nil, fmt.Errorf("--async-outcome %q: want succeeded, failed, canceled or never", *a.outcome)
	}
	return out, nil
}

// webhookFlags are the --webhook-* flags; any of them turns webhooks on.
type webhookFlags struct {
	url, scheme, secretEnv, outcome *string
	duration, jitter                *time.Duration
	deliveries, forged, stale       *int
	progress, shuffle               *bool
	dropRate                        *float64
}

func addWebhookFlags(fs *flag.FlagSet) webhookFlags {
	return webhookFlags{
		url:        fs.String("webhook-url", "", "send each operation's signed webhooks to this URL (a start request's \"callback_url\" overrides it); any --webhook-* flag turns webhooks on"),
		scheme:     fs.String("webhook-scheme", string("standard-webhooks"), "webhook signature scheme: "+named.List(signature.Names()...)),
		secretEnv:  fs.String("webhook-secret-env", "WEBHOOK_SECRET", "the environment variable holding the webhook signing secret (whsec_ and base64 for standard-webhooks)"),
		duration:   fs.Duration("webhook-duration", 0, "how long each operation runs before its outcome webhook"),
		outcome:    fs.String("webhook-outcome", string(workflows.StateSucceeded), "how operations end: succeeded, failed or canceled"),
		deliveries: fs.Int("webhook-deliveries", 1, "how many times the terminal event is delivered (same event ID)"),
		progress:   fs.Bool("webhook-progress", false, "also send an operation.processing event, after the terminal one"),
		shuffle:    fs.Bool("webhook-shuffle", false, "send each operation's deliveries in random order"),
		jitter:     fs.Duration("webhook-jitter", 0, "largest random delay before each delivery"),
		forged:     fs.Int("webhook-forged", 0, "extra copies of the terminal event per operation with a wrong signature"),
		stale:      fs.Int("webhook-stale", 0, "extra copies of the terminal event per operation signed 10 minutes ago"),
		dropRate:   fs.Float64("webhook-drop-rate", 0, "fraction of operations whose webhooks are never sent, in [0, 1]"),
	}
}

// webhooks is testsuite.Options.Webhooks: nil when no --webhook-* flag is
// set (fs parsed); async says --async is set too, which excludes them.
func (w webhookFlags) webhooks(fs *flag.FlagSet, async bool) (*testsuite.Webhooks, error) {
	on := false
	fs.Visit(func(f *flag.Flag) { on = on || strings.HasPrefix(f.Name, "webhook-") })
	if !on {
		return nil, nil
	}
	webhooks := &testsuite.Webhooks{
		URL: *w.url, Scheme: *w.scheme, Secret: os.Getenv(*w.secretEnv), Duration: *w.duration,
		State: workflows.State(*w.outcome), Deliveries: *w.deliveries, Progress: *w.progress, Shuffle: *w.shuffle,
		Jitter: *w.jitter, Forged: *w.forged, Stale: *w.stale, DropRate: *w.dropRate,
	}
	switch {
	case async:
		return nil, errors.New("--async and --webhook-*: pick one way to report operations")
	case webhooks.Secret == "":
		return nil, fmt.Errorf("--webhook-*: set the signing secret in the environment variable %s (--webhook-secret-env names another)", *w.secretEnv)
	case webhooks.Deliveries < 1:
		return nil, fmt.Errorf("--webhook-deliveries %d: want 1 or more", webhooks.Deliveries)
	}
	if err := webhooks.Validate(); err != nil {
		return nil, err
	}
	return webhooks, nil
}

func run() error {
	cfg, err := parseFlags(os.Args[1:], os.Getenv("API_TOKEN"))
	if err != nil {
		return err
	}
	logger, err := cliutil.NewLogger("info", cfg.secrets...)
	if err != nil {
		return err
	}
	srv, hs := newServer(cfg)
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(shutdown)
	}()
	d := cfg.opts.Dialect
	scheme := "http://"
	if hs.TLSConfig != nil {
		scheme = "https://"
	}
	logger.Info("reference API listening", "url", scheme+ln.Addr().String(), "dialect", d.Name,
		"key_header", d.KeyHeader, "script", cfg.script, "failure_rate", cfg.opts.FailureRate, "requires", cfg.requires())
	if w := cfg.opts.Webhooks; w != nil {
		logger.Info("webhooks on", "url", w.URL, "scheme", w.Scheme, "duration", w.Duration, "outcome", w.State,
			"deliveries", w.Deliveries, "forged", w.Forged, "stale", w.Stale, "drop_rate", w.DropRate)
	}
	if err := serve(hs, ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	st, _ := json.Marshal(srv.Stats())
	logger.Info("reference API stopped", slog.String("stats", string(st)))
	return nil
}

// newServer is the reference server cfg asks for and the http.Server
// serving it, with TLS when cfg has a certificate.
func newServer(cfg config) (*testsuite.Server, *http.Server) {
	srv := testsuite.NewServer(cfg.opts)
	srv.Script(cfg.steps...)
	var h http.Handler = srv
	if cfg.token != "" {
		h = requireToken(srv, cfg.token)
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, TLSConfig: srv.TLSConfig()}
	hs.RegisterOnShutdown(srv.Close) // drop the orphaned requests it holds
	return srv, hs
}

// serve serves hs on ln, with TLS when hs has a TLSConfig.
func serve(hs *http.Server, ln net.Listener) error {
	if hs.TLSConfig != nil {
		return hs.ServeTLS(ln, "", "")
	}
	return hs.Serve(ln)
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

// authFlags are the flags requiring a credential scheme.
type authFlags struct {
	oauth, sigv4              *bool
	clientID, clientSecretEnv *string
	lifetime                  *time.Duration
	tlsCert, tlsKey, clientCA *string
	sigv4Service, sigv4Region *string
}

func addAuthFlags(fs *flag.FlagSet) authFlags {
	return authFlags{
		oauth:           fs.Bool("require-oauth", false, "serve an OAuth 2.0 client-credentials token endpoint at POST /oauth/token and require its bearer tokens"),
		clientID:        fs.String("oauth-client-id", "demoapi", "the client ID the token endpoint knows (with --require-oauth)"),
		clientSecretEnv: fs.String("oauth-client-secret-env", "OAUTH_CLIENT_SECRET", "the environment variable holding the client secret (with --require-oauth)"),
		lifetime:        fs.Duration("oauth-token-lifetime", time.Hour, "how long an issued token is valid (with --require-oauth)"),
		tlsCert:         fs.String("tls-cert", "", "serve HTTPS with this PEM certificate (chain), with --tls-key"),
		tlsKey:          fs.String("tls-key", "", "the PEM private key of --tls-cert"),
		clientCA:        fs.String("client-ca", "", "require client certificates signed by a CA of this PEM file (with --tls-cert)"),
		sigv4:           fs.Bool("require-sigv4", false, "require AWS Signature V4 with the key in AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN (optional)"),
		sigv4Service:    fs.String("sigv4-service", "execute-api", "the service requests are signed for (with --require-sigv4)"),
		sigv4Region:     fs.String("sigv4-region", "us-east-1", "the region requests are signed for (with --require-sigv4)"),
	}
}

// apply sets the credential scheme of cfg the command line asks for (fs
// parsed), reading secrets from the environment and PEM files.
func (a authFlags) apply(fs *flag.FlagSet, cfg *config) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for _, dep := range []struct{ flag, needs string }{
		{"oauth-client-id", "require-oauth"}, {"oauth-client-secret-env", "require-oauth"}, {"oauth-token-lifetime", "require-oauth"},
		{"sigv4-service", "require-sigv4"}, {"sigv4-region", "require-sigv4"},
		{"tls-key", "tls-cert"}, {"tls-cert", "tls-key"}, {"client-ca", "tls-cert"},
	} {
		if set[dep.flag] && !set[dep.needs] {
			return fmt.Errorf("--%s needs --%s", dep.flag, dep.needs)
		}
	}
	if cfg.token != "" && (*a.oauth || *a.sigv4) {
		return errors.New("--require-token (or API_TOKEN) with --require-oauth or --require-sigv4: require one kind of Authorization (unset API_TOKEN)")
	}
	if *a.oauth {
		secret := os.Getenv(*a.clientSecretEnv)
		if secret == "" {
			return fmt.Errorf("--require-oauth: set the client secret in the environment variable %s (--oauth-client-secret-env names another)", *a.clientSecretEnv)
		}
		cfg.opts.OAuthClients = map[string]string{*a.clientID: secret}
		cfg.opts.OAuthTokenLifetime = *a.lifetime
		cfg.secrets = append(cfg.secrets, secret)
	}
	if *a.sigv4 {
		c := aws.Credentials{AccessKeyID: os.Getenv("AWS_ACCESS_KEY_ID"), SecretAccessKey: os.Getenv("AWS_SECRET_ACCESS_KEY"), SessionToken: os.Getenv("AWS_SESSION_TOKEN")}
		if c.AccessKeyID == "" || c.SecretAccessKey == "" {
			return errors.New("--require-sigv4: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for a session) in the environment")
		}
		cfg.opts.SigV4Credentials, cfg.opts.SigV4Service, cfg.opts.SigV4Region = &c, *a.sigv4Service, *a.sigv4Region
		cfg.secrets = append(cfg.secrets, c.SecretAccessKey, c.SessionToken)
	}
	return a.applyTLS(cfg)
}

// applyTLS loads --tls-cert, --tls-key and --client-ca into cfg.
func (a authFlags) applyTLS(cfg *config) error {
	if *a.tlsCert == "" {
		return nil
	}
	cert, err := tls.LoadX509KeyPair(*a.tlsCert, *a.tlsKey)
	if err != nil {
		return fmt.Errorf("--tls-cert %s, --tls-key %s: %w (want PEM files of a certificate and its private key)", *a.tlsCert, *a.tlsKey, err)
	}
	cfg.opts.TLSCertificate = &cert
	if *a.clientCA == "" {
		return nil
	}
	pem, err := os.ReadFile(*a.clientCA)
	if err != nil {
		return fmt.Errorf("--client-ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return fmt.Errorf("--client-ca %s: no PEM certificate in it", *a.clientCA)
	}
	cfg.opts.ClientCAs = pool
	return nil
}

// requires names the credential scheme the server requires, for the log.
func (c config) requires() string {
	var s []string
	if c.token != "" {
		s = append(s, "static bearer")
	}
	if c.opts.OAuthClients != nil {
		s = append(s, "oauth2 client credentials")
	}
	if c.opts.ClientCAs != nil {
		s = append(s, "mutual TLS")
	}
	if c.opts.SigV4Credentials != nil {
		s = append(s, "sigv4 "+c.opts.SigV4Service+" "+c.opts.SigV4Region)
	}
	return strings.Join(s, ", ")
}
