package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/idemhttp/temporal-idempotent-http/internal/named"
	"github.com/idemhttp/temporal-idempotent-http/internal/signature"
	"github.com/idemhttp/temporal-idempotent-http/webhooks"
)

// The receiver's paths on --webhook-addr.
const (
	webhookPath  = "/webhooks"
	callbackPath = "/callbacks/"
)

// webhookSettings are the receiver's settings (declared as settings'
// are: declare.go).
type webhookSettings struct {
	Addr            string        `flag:"webhook-addr" env:"WEBHOOK_ADDR" arg:"ADDR" help:"serve the webhook receiver on http://ADDR: POST /webhooks takes a provider's signed events (fixed endpoint), /callbacks/… the callback URLs of --callback-base-url; each verified event goes to the workflow awaiting its operation (default: off)"`
	Scheme          string        `flag:"webhook-scheme" env:"WEBHOOK_SCHEME" default:"standard-webhooks" help:"signature scheme of the events: {schemes} (hmac: HMAC-SHA256 of the body, as the --webhook-hmac-* flags say); the secrets come from WEBHOOK_SECRETS"`
	Secrets         []string      `env:"WEBHOOK_SECRETS" help:"the signing secrets of --webhook-scheme, comma-separated, the newest first (rotation)"`
	HMACHeader      string        `flag:"webhook-hmac-header" env:"WEBHOOK_HMAC_HEADER" default:"X-Signature" help:"header of the hmac scheme's signature, e.g. X-Hub-Signature-256 (GitHub), X-Shopify-Hmac-Sha256 (Shopify)"`
	HMACPrefix      string        `flag:"webhook-hmac-prefix" env:"WEBHOOK_HMAC_PREFIX" help:"text before each hmac signature, not part of it, e.g. sha256= (GitHub) (default none)"`
	HMACEncoding    string        `flag:"webhook-hmac-encoding" env:"WEBHOOK_HMAC_ENCODING" default:"hex" help:"encoding of the hmac signature: hex or base64 (Shopify)"`
	HMACTimestamp   string        `flag:"webhook-hmac-timestamp-header" env:"WEBHOOK_HMAC_TIMESTAMP_HEADER" help:"header of the hmac scheme's Unix time in seconds; when set, timestamp.body is what is signed and the time must be within 5 minutes of now (default none: the body alone)"`
	HMACID          string        `flag:"webhook-hmac-id-header" env:"WEBHOOK_HMAC_ID_HEADER" help:"header of the hmac scheme's event ID, e.g. X-GitHub-Delivery, X-Shopify-Webhook-Id (default none: the body's top-level id); not signed: the signed body's SHA-256 is then the event's identity"`
	HMACType        string        `flag:"webhook-hmac-type-header" env:"WEBHOOK_HMAC_TYPE_HEADER" help:"header of the hmac scheme's event type, e.g. X-GitHub-Event, X-Shopify-Topic (default none: the body's top-level type); not signed: such a type ends an operation only once the call's WebhookPoll confirms it"`
	WorkflowIDField string        `flag:"webhook-workflow-id-field" env:"WEBHOOK_WORKFLOW_ID_FIELD" default:"data.object.metadata.workflow_id" help:"dotted path of the workflow ID in a fixed endpoint's event (where the start request's metadata lands)"`
	OperationField  string        `flag:"webhook-operation-field" env:"WEBHOOK_OPERATION_FIELD" default:"data.object.metadata.operation" help:"dotted path of the operation in a fixed endpoint's event"`
	KeyDigestField  string        `flag:"webhook-key-digest-field" env:"WEBHOOK_KEY_DIGEST_FIELD" default:"data.object.metadata.key_digest" help:"dotted path of the digest of the call's idempotency key in an event (workflows.WebhookMetadata's key_digest)"`
	CallbackBase    string        `flag:"callback-base-url" env:"CALLBACK_BASE_URL" arg:"URL" help:"public URL of /callbacks/ on --webhook-addr, e.g. https://hooks.example.com/callbacks: workflows.CallbackURL builds per-operation URLs under it, with tokens keyed by CALLBACK_SECRETS (default: no callbacks)"`
	CallbackSecrets []string      `env:"CALLBACK_SECRETS" help:"the keys of the callback URLs' tokens, comma-separated, each at least 32 bytes, the newest first (rotation)"`
	MaxBody         int64         `flag:"webhook-max-body-bytes" env:"WEBHOOK_MAX_BODY_BYTES" default:"1048576" help:"largest event body taken; larger ones are answered 413"`
	DeliveryTimeout time.Duration `flag:"webhook-delivery-timeout" env:"WEBHOOK_DELIVERY_TIMEOUT" default:"10s" help:"longest wait for a workflow to take an event before answering 503 (the provider retries)"`
	// Namespace is the client's, for the callback URLs' tokens.
	Namespace string
}

// hmac are the hmac scheme's options the settings give.
func (c *webhookSettings) hmac() webhooks.HMACOptions {
	return webhooks.HMACOptions{Header: c.HMACHeader, Prefix: c.HMACPrefix, Encoding: c.HMACEncoding, TimestampHeader: c.HMACTimestamp, IDHeader: c.HMACID, TypeHeader: c.HMACType}
}

// hmacDefaults are the --webhook-hmac-* flags' defaults, those of
// webhooks.HMACOptions.
var hmacDefaults = webhooks.HMACOptions{Header: "X-Signature", Encoding: "hex"}

// schemeNames lists the signature schemes, for --webhook-scheme's help.
func schemeNames() string { return named.List(signature.Names()...) }

// verifier is the verifier --webhook-scheme names, nil without secrets;
// the scheme and its flags are checked either way.
func (c *webhookSettings) verifier() (webhooks.Verifier, error) {
	scheme := strings.ToLower(c.Scheme)
	newVerifier, ok := named.Lookup[schemeVerifier](scheme)
	if _, signed := signature.Lookup(scheme); !ok || !signed {
		return nil, fmt.Errorf("--webhook-scheme %q: want %s", c.Scheme, schemeNames())
	}
	if o := c.hmac(); scheme != "hmac" && (o.Header != hmacDefaults.Header || o.Encoding != hmacDefaults.Encoding || o.Prefix+o.TimestampHeader+o.IDHeader+o.TypeHeader != "") {
		return nil, fmt.Errorf("--webhook-hmac-* are for --webhook-scheme hmac, not %q: drop them, or use hmac", c.Scheme)
	}
	if len(c.Secrets) == 0 {
		return nil, nil
	}
	if scheme == "hmac" {
		o := c.hmac()
		o.Secrets = c.Secrets
		return webhooks.HMACVerifier(o)
	}
	return newVerifier(c.Secrets...)
}

// schemeVerifier is the type of the verifiers package webhooks registers
// by scheme name (internal/named), one per scheme of internal/signature.
type schemeVerifier = func(secrets ...string) (webhooks.Verifier, error)

// callbacks is the Callbacks --callback-base-url asks for, nil without.
func (c *webhookSettings) callbacks() *webhooks.Callbacks {
	if c.CallbackBase == "" {
		return nil
	}
	return &webhooks.Callbacks{BaseURL: c.CallbackBase, Secrets: c.CallbackSecrets, Namespace: c.Namespace}
}

// check checks the receiver's settings without serving anything (Load
// runs it, --check too): the scheme and its secrets, the callback URLs'
// keys, an address with something to serve, the limits.
func (c *webhookSettings) check() error {
	if cb := c.callbacks(); cb != nil {
		if _, err := cb.URL("check", "check", ""); err != nil {
			return fmt.Errorf("--callback-base-url, CALLBACK_SECRETS: %w", err)
		}
	}
	if c.Addr == "" {
		if len(c.Secrets) > 0 {
			return errors.New("WEBHOOK_SECRETS is set but --webhook-addr is not: set the address to serve the receiver on")
		}
		return nil
	}
	v, err := c.verifier()
	if err != nil {
		return fmt.Errorf("--webhook-scheme, WEBHOOK_SECRETS: %w", err)
	}
	if v == nil && c.callbacks() == nil {
		return errors.New("--webhook-addr needs WEBHOOK_SECRETS (a fixed endpoint's signing secrets) or --callback-base-url with CALLBACK_SECRETS")
	}
	if c.MaxBody < 0 || c.DeliveryTimeout < 0 {
		return errors.New("--webhook-max-body-bytes and --webhook-delivery-timeout must be 0 (the default) or more")
	}
	return nil
}

// startWebhooks serves the receiver, when the settings ask for it
// (check has checked them; Register registers the callback activity);
// stop shuts the server down.
func startWebhooks(c webhookSettings, cl client.Client, metrics client.MetricsHandler, logger *slog.Logger) (stop func(), err error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	if c.Addr == "" {
		return func() {}, nil
	}
	cb := c.callbacks()
	v, err := c.verifier()
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	base := webhooks.Config{Client: cl, Verifier: v, MaxBodyBytes: c.MaxBody, DeliveryTimeout: c.DeliveryTimeout,
		WorkflowIDField: c.WorkflowIDField, OperationField: c.OperationField, KeyDigestField: c.KeyDigestField, Logger: logger, MetricsHandler: metrics}
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
	ln, err := net.Listen("tcp", c.Addr)
	if err != nil {
		return nil, fmt.Errorf("--webhook-addr: %w", err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("webhook receiver stopped", slog.String("error", err.Error()))
		}
	}()
	logger.Info("serving the webhook receiver", slog.String("url", "http://"+ln.Addr().String()), slog.String("scheme", c.Scheme),
		slog.Bool("fixed_endpoint", v != nil), slog.Bool("callbacks", cb != nil))
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, nil
}
