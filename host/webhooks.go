package host

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/idemhttp/temporal-idempotent-http/internal/cliutil"
	"github.com/idemhttp/temporal-idempotent-http/internal/defaults"
	"github.com/idemhttp/temporal-idempotent-http/internal/named"
	"github.com/idemhttp/temporal-idempotent-http/internal/signature"
	"github.com/idemhttp/temporal-idempotent-http/webhooks"
)

// The receiver's paths on --webhook-addr.
const (
	webhookPath  = "/webhooks"
	callbackPath = "/callbacks/"
)

// webhookConfig is what the --webhook-* and --callback-* flags ask for.
type webhookConfig struct {
	addr, scheme                             string
	hmac                                     webhooks.HMACOptions // --webhook-hmac-*; Secrets from WEBHOOK_SECRETS
	workflowIDField, opField, keyDigestField string
	callbackBase                             string
	secrets, callbackSecrets                 []string // WEBHOOK_SECRETS, CALLBACK_SECRETS
	namespace                                string
	maxBody                                  int64
	deliveryTimeout                          time.Duration
}

// hmacDefaults are the --webhook-hmac-* flags' defaults, those of
// webhooks.HMACOptions.
var hmacDefaults = webhooks.HMACOptions{Header: "X-Signature", Encoding: "hex"}

// webhookFlags declares the receiver's flags on fs.
func webhookFlags(fs *flag.FlagSet, c *webhookConfig) {
	fs.StringVar(&c.addr, "webhook-addr", os.Getenv("WEBHOOK_ADDR"), "serve the webhook receiver on http://ADDR: POST "+webhookPath+" takes a provider's signed events (fixed endpoint), "+callbackPath+"… the callback URLs of --callback-base-url; each verified event goes to the workflow awaiting its operation (env WEBHOOK_ADDR; default: off)")
	fs.StringVar(&c.scheme, "webhook-scheme", cliutil.Env("WEBHOOK_SCHEME", "standard-webhooks"), "signature scheme of the events: "+named.List(signature.Names()...)+" (hmac: HMAC-SHA256 of the body, as the --webhook-hmac-* flags say); the secrets come from WEBHOOK_SECRETS, comma-separated, the newest first (rotation) (env WEBHOOK_SCHEME)")
	fs.StringVar(&c.hmac.Header, "webhook-hmac-header", hmacDefaults.Header, "header of the hmac scheme's signature, e.g. X-Hub-Signature-256 (GitHub), X-Shopify-Hmac-Sha256 (Shopify)")
	fs.StringVar(&c.hmac.Prefix, "webhook-hmac-prefix", "", "text before each hmac signature, not part of it, e.g. sha256= (GitHub) (default none)")
	fs.StringVar(&c.hmac.Encoding, "webhook-hmac-encoding", hmacDefaults.Encoding, "encoding of the hmac signature: hex or base64 (Shopify)")
	fs.StringVar(&c.hmac.TimestampHeader, "webhook-hmac-timestamp-header", "", "header of the hmac scheme's Unix time in seconds; when set, \"timestamp.body\" is what is signed and the time must be within 5 minutes of now (default none: the body alone)")
	fs.StringVar(&c.hmac.IDHeader, "webhook-hmac-id-header", "", "header of the hmac scheme's event ID, e.g. X-GitHub-Delivery, X-Shopify-Webhook-Id (default none: the body's top-level \"id\"); not signed: the signed body's SHA-256 is then the event's identity")
	fs.StringVar(&c.hmac.TypeHeader, "webhook-hmac-type-header", "", "header of the hmac scheme's event type, e.g. X-GitHub-Event, X-Shopify-Topic (default none: the body's top-level \"type\"); not signed: such a type ends an operation only once the call's WebhookPoll confirms it")
	fs.StringVar(&c.workflowIDField, "webhook-workflow-id-field", defaults.WorkflowIDField, "dotted path of the workflow ID in a fixed endpoint's event (where the start request's metadata lands)")
	fs.StringVar(&c.opField, "webhook-operation-field", defaults.OperationField, "dotted path of the operation in a fixed endpoint's event")
	fs.StringVar(&c.keyDigestField, "webhook-key-digest-field", defaults.KeyDigestField, "dotted path of the digest of the call's idempotency key in an event (workflows.WebhookMetadata's \"key_digest\")")
	fs.StringVar(&c.callbackBase, "callback-base-url", os.Getenv("CALLBACK_BASE_URL"), "public URL of "+callbackPath+" on --webhook-addr, e.g. https://hooks.example.com/callbacks: workflows.CallbackURL builds per-operation URLs under it, with tokens keyed by CALLBACK_SECRETS (comma-separated, each ≥ 32 bytes, the newest first) (env CALLBACK_BASE_URL; default: no callbacks)")
	fs.Int64Var(&c.maxBody, "webhook-max-body-bytes", defaults.WebhookMaxBodyBytes, "largest event body taken; larger ones are answered 413")
	fs.DurationVar(&c.deliveryTimeout, "webhook-delivery-timeout", defaults.DeliveryTimeout, "longest wait for a workflow to take an event before answering 503 (the provider retries)")
}

// readSecrets fills c's secrets from the environment.
func (c *webhookConfig) readSecrets(getenv func(string) string) {
	c.secrets = cliutil.SplitList(getenv("WEBHOOK_SECRETS"))
	c.callbackSecrets = cliutil.SplitList(getenv("CALLBACK_SECRETS"))
	c.namespace = cliutil.Env("TEMPORAL_NAMESPACE", "default")
}

// verifier is the verifier --webhook-scheme names, nil without secrets;
// the scheme and its flags are checked either way.
func (c *webhookConfig) verifier() (webhooks.Verifier, error) {
	scheme := strings.ToLower(c.scheme)
	newVerifier, ok := named.Lookup[schemeVerifier](scheme)
	if _, signed := signature.Lookup(scheme); !ok || !signed {
		return nil, fmt.Errorf("--webhook-scheme %q: want %s", c.scheme, named.List(signature.Names()...))
	}
	if o := c.hmac; scheme != "hmac" && (o.Header != hmacDefaults.Header || o.Encoding != hmacDefaults.Encoding || o.Prefix+o.TimestampHeader+o.IDHeader+o.TypeHeader != "") {
		return nil, fmt.Errorf("--webhook-hmac-* are for --webhook-scheme hmac, not %q: drop them, or use hmac", c.scheme)
	}
	if len(c.secrets) == 0 {
		return nil, nil
	}
	if scheme == "hmac" {
		o := c.hmac
		o.Secrets = c.secrets
		return webhooks.HMACVerifier(o)
	}
	return newVerifier(c.secrets...)
}

// schemeVerifier is the type of the verifiers package webhooks registers
// by scheme name (internal/named), one per scheme of internal/signature.
type schemeVerifier = func(secrets ...string) (webhooks.Verifier, error)

// callbacks is the Callbacks --callback-base-url asks for, nil without.
func (c *webhookConfig) callbacks() *webhooks.Callbacks {
	if c.callbackBase == "" {
		return nil
	}
	return &webhooks.Callbacks{BaseURL: c.callbackBase, Secrets: c.callbackSecrets, Namespace: c.namespace}
}

// startWebhooks serves the receiver, when the flags ask for it (Register
// registers the callback activity); stop shuts the server down.
func startWebhooks(c webhookConfig, cl client.Client, metrics client.MetricsHandler, logger *slog.Logger) (stop func(), err error) {
	cb := c.callbacks()
	if cb != nil {
		if _, err := cb.URL("check", "check", ""); err != nil {
			return nil, fmt.Errorf("--callback-base-url, CALLBACK_SECRETS: %w", err)
		}
	}
	if c.addr == "" {
		if len(c.secrets) > 0 {
			return nil, errors.New("WEBHOOK_SECRETS is set but --webhook-addr is not: set the address to serve the receiver on")
		}
		return func() {}, nil
	}
	v, err := c.verifier()
	if err != nil {
		return nil, fmt.Errorf("--webhook-scheme, WEBHOOK_SECRETS: %w", err)
	}
	mux := http.NewServeMux()
	base := webhooks.Config{Client: cl, Verifier: v, MaxBodyBytes: c.maxBody, DeliveryTimeout: c.deliveryTimeout,
		WorkflowIDField: c.workflowIDField, OperationField: c.opField, KeyDigestField: c.keyDigestField, Logger: logger, MetricsHandler: metrics}
	if v != nil {
		fixed, err := webhooks.NewReceiver(base)
		if err != nil {
			return nil, err
		}
		mux.Handle("POST "+webhookPath, fixed)
	}
	if cb != nil {
		cc := base
		cc.Callbacks = cb
		callbacks, err := webhooks.NewReceiver(cc)
		if err != nil {
			return nil, err
		}
		mux.Handle(callbackPath, callbacks)
	}
	if v == nil && cb == nil {
		return nil, errors.New("--webhook-addr needs WEBHOOK_SECRETS (a fixed endpoint's signing secrets) or --callback-base-url with CALLBACK_SECRETS")
	}
	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		return nil, fmt.Errorf("--webhook-addr: %w", err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("webhook receiver stopped", slog.String("error", err.Error()))
		}
	}()
	logger.Info("serving the webhook receiver", slog.String("url", "http://"+ln.Addr().String()), slog.String("scheme", c.scheme),
		slog.Bool("fixed_endpoint", v != nil), slog.Bool("callbacks", cb != nil))
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, nil
}
