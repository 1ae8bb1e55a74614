package webhooks

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/idemhttp/temporal-idempotent-http/internal/defaults"
	"github.com/idemhttp/temporal-idempotent-http/internal/input"
	"github.com/idemhttp/temporal-idempotent-http/internal/redact"
	"github.com/idemhttp/temporal-idempotent-http/internal/rules"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// Config configures a Receiver.
type Config struct {
	// Client delivers notifications to workflows (Temporal Updates).
	// Required.
	Client client.Client
	// Verifier checks each delivery's signature: StandardWebhooksVerifier,
	// StripeVerifier or HMACVerifier. Required, but with Callbacks, where nil means that the
	// callback token alone authenticates (for APIs that do not sign).
	Verifier Verifier
	// Callbacks, when set, makes this a callback endpoint: the workflow,
	// operation and call (its key's digest) come from the callback URL's
	// path, whose token must match (workflows.CallbackURL made it). With a
	// Verifier too, a signed event that does not name that workflow and
	// operation in the fields below reaches it marked
	// workflows.Notification OperationUnsigned (it ends nothing without
	// the resource's confirmation); one that names others, or another
	// call's key digest, is refused. Without it, a fixed endpoint: they
	// come from the event's fields below.
	Callbacks *Callbacks
	// WorkflowIDField and OperationField are the dotted paths of the
	// workflow ID and operation in a fixed endpoint's JSON event (default
	// "data.object.metadata.workflow_id" and
	// "data.object.metadata.operation": Stripe's place for the metadata the
	// start request set with workflows.WebhookMetadata). A verified event
	// without them is answered 200 and ignored: it is no operation's.
	WorkflowIDField string
	OperationField  string
	// KeyDigestField is the dotted path of the digest of the call's
	// idempotency key in a JSON event (default
	// "data.object.metadata.key_digest", where workflows.WebhookMetadata
	// with a key puts it): the workflow refuses an event that names
	// another call than the one waiting; an event without it names no
	// call (workflows.WebhookOptions says how such an event is taken).
	KeyDigestField string
	// MaxBodyBytes bounds a delivery's body (default 1 MiB): a larger one is answered 413 and not read further.
	MaxBodyBytes int64
	// MaxEventBytes bounds the event body handed to the workflow, which
	// history stores (default 64 KiB): a larger one
	// is handed without its body (Notification.BodyOmitted).
	MaxEventBytes int
	// DeliveryTimeout bounds the delivery to the workflow (default
	// 10 seconds): a delivery not durably with the
	// workflow by then is answered 503 with Retry-After, so the provider
	// retries it.
	DeliveryTimeout time.Duration
	// Logger logs each rejected or failed delivery (default
	// slog.Default()); it never logs a signature, a token or a body.
	Logger *slog.Logger
	// MetricsHandler records idempotent_http_webhooks_total (labelled
	// scheme and outcome) and idempotent_http_webhook_delivery_seconds
	// (default: none); pass the worker's client.Options.MetricsHandler.
	MetricsHandler client.MetricsHandler
	// TracerProvider traces each delivery (default otel's global).
	TracerProvider trace.TracerProvider
	// Now is the clock signatures' timestamps are checked against
	// (default time.Now).
	Now func() time.Time
}

// The outcomes of a delivery (the metric's outcome label, the answer's
// "status").
const (
	outcomeDelivered = "delivered" // the workflow took it
	outcomeDuplicate = "duplicate" // this receiver delivered it already
	outcomeIgnored   = "ignored"   // verified, but no workflow takes it
	outcomeRejected  = "rejected"  // signature, timestamp or token refused
	outcomeTooLarge  = "too_large"
	outcomeMalformed = "malformed"
	outcomeFailed    = "failed" // not delivered: the provider retries
)

// Metrics of the receiver.
const (
	metricWebhooks        = "idempotent_http_webhooks_total"
	metricWebhookDelivery = "idempotent_http_webhook_delivery_seconds"
)

// Receiver is an http.Handler that takes a provider's signed webhook
// deliveries and hands each verified one to the workflow awaiting its
// operation (workflows.Request.Webhook), as a Temporal Update whose ID is
// the event's: Temporal takes an event once per workflow, and the
// workflow refuses one after the operation ended.
//
// It answers 2xx only once the event is durably with the workflow
// (accepted and stored in its history), or when no workflow needs it (the
// workflow ended, or does not await that operation, or the event names
// none); a delivery that fails verification gets the scheme's reject
// status and never reaches Temporal; one Temporal could not take in time
// gets 503 with Retry-After, and the provider retries it.
type Receiver struct {
	cfg    Config
	tracer trace.Tracer
	// recent holds the update IDs this receiver delivered lately, so a
	// duplicate is answered without a call to Temporal.
	mu     sync.Mutex
	recent map[string]struct{}
	ring   []string
	next   int
}

// recentEvents is how many delivered events a Receiver remembers.
const recentEvents = 16384

// NewReceiver checks cfg and returns its Receiver.
func NewReceiver(cfg Config) (*Receiver, error) {
	if cfg.Client == nil {
		return nil, errors.New("webhooks: Config.Client is nil: the receiver delivers to workflows through it")
	}
	if cfg.Verifier == nil && cfg.Callbacks == nil {
		return nil, errors.New("webhooks: Config.Verifier is nil: a fixed endpoint must verify signatures (StandardWebhooksVerifier, StripeVerifier or HMACVerifier); only a callback endpoint (Config.Callbacks) may rely on its token alone")
	}
	if cfg.Callbacks != nil {
		if err := cfg.Callbacks.check(); err != nil {
			return nil, err
		}
	}
	if cfg.MaxBodyBytes < 0 || cfg.MaxEventBytes < 0 || cfg.DeliveryTimeout < 0 {
		return nil, errors.New("webhooks: Config.MaxBodyBytes, MaxEventBytes and DeliveryTimeout must be 0 (the default) or more")
	}
	def := func(s *string, d string) {
		if *s == "" {
			*s = d
		}
	}
	def(&cfg.WorkflowIDField, defaults.WorkflowIDField)
	def(&cfg.OperationField, defaults.OperationField)
	def(&cfg.KeyDigestField, defaults.KeyDigestField)
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = defaults.WebhookMaxBodyBytes
	}
	if cfg.MaxEventBytes == 0 {
		cfg.MaxEventBytes = defaults.WebhookMaxEventBytes
	}
	if cfg.DeliveryTimeout == 0 {
		cfg.DeliveryTimeout = defaults.DeliveryTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MetricsHandler == nil {
		cfg.MetricsHandler = client.MetricsNopHandler
	}
	if cfg.TracerProvider == nil {
		cfg.TracerProvider = otel.GetTracerProvider()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Receiver{
		cfg: cfg, tracer: cfg.TracerProvider.Tracer("github.com/idemhttp/temporal-idempotent-http/webhooks"),
		recent: make(map[string]struct{}, recentEvents), ring: make([]string, recentEvents),
	}, nil
}

// answer is how a delivery ends.
type answer struct {
	status  int
	outcome string
	reason  string
}

// ServeHTTP takes one delivery.
func (rc *Receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	scheme := "callback"
	if rc.cfg.Verifier != nil {
		scheme = rc.cfg.Verifier.Scheme()
	}
	ctx, span := rc.tracer.Start(r.Context(), "webhook "+scheme, trace.WithSpanKind(trace.SpanKindServer))
	defer span.End()
	n, a := rc.receive(ctx, r, scheme)
	m := rc.cfg.MetricsHandler.WithTags(map[string]string{"scheme": scheme, "outcome": a.outcome})
	m.Counter(metricWebhooks).Inc(1)
	m.Timer(metricWebhookDelivery).Record(time.Since(start))
	span.SetAttributes(attribute.String("webhook.outcome", a.outcome), attribute.Int("http.response.status_code", a.status))
	if n != nil {
		span.SetAttributes(attribute.String("webhook.event_id", n.ID), attribute.String("webhook.event_type", n.Type),
			attribute.String("webhook.operation", n.Operation))
	}
	if a.status >= 400 {
		span.SetStatus(codes.Error, a.outcome)
		rc.cfg.Logger.Warn("webhook delivery not taken", "scheme", scheme, "status", a.status, "outcome", a.outcome, "reason", a.reason,
			"remote", r.RemoteAddr)
	} else if a.reason != "" {
		rc.cfg.Logger.Info("webhook delivery verified but ignored", "scheme", scheme, "reason", a.reason)
	}
	w.Header().Set("Content-Type", "application/json")
	if a.status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "5")
	}
	w.WriteHeader(a.status)
	answer := map[string]string{"status": a.outcome}
	if a.status >= 400 {
		// What to fix; an accepted delivery's answer carries nothing more.
		answer["reason"] = a.reason
	}
	body, _ := json.Marshal(answer)
	w.Write(append(body, '\n'))
}

// receive reads, verifies, routes and delivers one delivery.
func (rc *Receiver) receive(ctx context.Context, r *http.Request, scheme string) (*workflows.Notification, answer) {
	if r.Method != http.MethodPost {
		return nil, answer{http.StatusMethodNotAllowed, outcomeMalformed, "webhook deliveries are POSTs"}
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, rc.cfg.MaxBodyBytes+1))
	if err != nil {
		return nil, answer{http.StatusBadRequest, outcomeMalformed, "the body could not be read"}
	}
	if int64(len(body)) > rc.cfg.MaxBodyBytes {
		return nil, answer{http.StatusRequestEntityTooLarge, outcomeTooLarge, fmt.Sprintf("the body is larger than %d bytes (the receiver's Config.MaxBodyBytes)", rc.cfg.MaxBodyBytes)}
	}
	var workflowID, operation, digest string
	if c := rc.cfg.Callbacks; c != nil {
		if workflowID, operation, digest, err = c.route(r.URL.EscapedPath()); err != nil {
			return nil, answer{http.StatusUnauthorized, outcomeRejected, err.Error()}
		}
	}
	now := rc.cfg.Now()
	var ev Event
	if v := rc.cfg.Verifier; v != nil {
		if ev, err = v.Verify(r.Header, body, now); err != nil {
			return nil, answer{v.RejectStatus(), outcomeRejected, err.Error()}
		}
	}
	// The event is decoded once, for the fields the receiver reads.
	doc := decode(body)
	if rc.cfg.Verifier == nil {
		// A callback that its token alone authenticates: its content
		// deduplicates (a body's "id" is often the resource's, the same in
		// every event of it).
		ev.Type, ev.IDUnsigned = stringAt(doc, "type"), true
	}
	if ev.IDUnsigned {
		// An ID that nothing signed is not the event's identity (a new
		// header would make a new event of the same delivery): its signed
		// content is.
		sum := sha256.Sum256(body)
		ev.ID = "sha256:" + hex.EncodeToString(sum[:16])
	}
	unbound := false
	named := stringAt(doc, rc.cfg.KeyDigestField)
	if rc.cfg.Callbacks != nil {
		// The path is not signed: a signed event that names a workflow,
		// operation or call must name the callback's own, and one that
		// does not name both workflow and operation (another operation's,
		// posted here?) ends nothing alone.
		wf, op := stringAt(doc, rc.cfg.WorkflowIDField), stringAt(doc, rc.cfg.OperationField)
		if wf != "" && wf != workflowID || op != "" && op != operation || named != "" && digest != "" && named != digest {
			return nil, answer{http.StatusUnauthorized, outcomeRejected, "the event names another workflow, operation or call than its callback URL"}
		}
		unbound = rc.cfg.Verifier != nil && (wf == "" || op == "")
		if digest == "" && rc.cfg.Verifier != nil {
			// A URL made without a key: the signed event may name one.
			digest = named
		}
	} else {
		workflowID, operation, digest = stringAt(doc, rc.cfg.WorkflowIDField), stringAt(doc, rc.cfg.OperationField), named
		if workflowID == "" || operation == "" {
			return nil, answer{http.StatusOK, outcomeIgnored, fmt.Sprintf("the event names no workflow and operation (%s, %s)", rc.cfg.WorkflowIDField, rc.cfg.OperationField)}
		}
	}
	if len(workflowID) > 1000 || !utf8.ValidString(workflowID) || rules.Operation(operation) != nil || len(operation) > 1000 ||
		len(digest) > maxKeyDigest || !utf8.ValidString(digest) {
		return nil, answer{http.StatusOK, outcomeIgnored, "the event's workflow ID, operation or key digest is not one a workflow could have"}
	}
	n := &workflows.Notification{ID: ev.ID, Type: ev.Type, Operation: operation, KeyDigest: digest, Scheme: scheme, Sent: ev.Time, Received: now,
		TypeUnsigned: ev.TypeUnsigned, OperationUnsigned: unbound}
	if len(body) > rc.cfg.MaxEventBytes {
		n.BodyOmitted = true
	} else if b, ok := scrub(body, doc); ok {
		n.Body = b
	} else {
		n.BodyOmitted = true // not JSON: history takes JSON events only
	}
	return n, rc.deliver(ctx, workflowID, n)
}

// maxKeyDigest bounds the key digest an event names (idemkey.Digest's
// are 16 characters).
const maxKeyDigest = 64

// updateID is the Temporal Update ID of n: the same for every delivery of
// the event to its operation's call, so that Temporal takes it once per
// workflow run, and another for another operation's or call's event of
// the same ID (a call's digest is in it; an event that names none has the
// ID it had before calls were named).
func updateID(n *workflows.Notification) string {
	op := n.Operation
	if n.KeyDigest != "" {
		op += "/" + n.KeyDigest
	}
	id := "webhook/" + n.Scheme + "/" + op + "/" + n.ID
	if len(id) > 200 || !utf8.ValidString(id) {
		sum := sha256.Sum256([]byte(op + "\x00" + n.ID))
		id = "webhook/" + n.Scheme + "/sha256:" + hex.EncodeToString(sum[:])
	}
	return id
}

// deliver hands n to workflowID as an Update and waits for it to complete.
func (rc *Receiver) deliver(ctx context.Context, workflowID string, n *workflows.Notification) answer {
	id := updateID(n)
	memo := workflowID + "\x00" + id
	if rc.seen(memo) {
		return answer{http.StatusOK, outcomeDuplicate, ""}
	}
	ctx, cancel := context.WithTimeout(ctx, rc.cfg.DeliveryTimeout)
	defer cancel()
	h, err := rc.cfg.Client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		UpdateID: id, WorkflowID: workflowID, UpdateName: input.WebhookUpdate(n.Operation),
		Args: []any{n}, WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf):
		// No such workflow, or it ended: no one needs the event. The answer
		// says no more than "ignored" (a callback URL's holder learns
		// nothing); the log says why.
		rc.cfg.Logger.Info("webhook verified but no running workflow takes it", "workflow_id", workflowID,
			"operation", n.Operation, "event", n.ID)
		return answer{http.StatusOK, outcomeIgnored, ""}
	case err != nil:
		rc.cfg.Logger.Error("webhook not delivered to its workflow: the provider will retry", "workflow_id", workflowID,
			"operation", n.Operation, "event", n.ID, "error", err)
		return answer{http.StatusServiceUnavailable, outcomeFailed, "the workflow could not take the event in time: retry"}
	}
	var took string
	if err := h.Get(ctx, &took); err != nil {
		// The workflow refused it (the operation ended, the event was taken,
		// or it awaits no such operation): verified, but not needed. Not
		// remembered: a workflow that awaits the operation later takes it.
		rc.cfg.Logger.Info("webhook verified but refused by its workflow", "workflow_id", workflowID,
			"operation", n.Operation, "event", n.ID, "reason", err.Error())
		return answer{http.StatusOK, outcomeIgnored, ""}
	}
	rc.remember(memo)
	rc.cfg.Logger.Debug("webhook delivered", "workflow_id", workflowID, "operation", n.Operation, "event", n.ID, "result", took)
	return answer{http.StatusOK, outcomeDelivered, ""}
}

// seen reports whether this receiver delivered memo lately.
func (rc *Receiver) seen(memo string) bool {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	_, ok := rc.recent[memo]
	return ok
}

// remember records memo, forgetting the oldest beyond recentEvents.
func (rc *Receiver) remember(memo string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if _, ok := rc.recent[memo]; ok {
		return
	}
	if old := rc.ring[rc.next]; old != "" {
		delete(rc.recent, old)
	}
	rc.ring[rc.next] = memo
	rc.recent[memo] = struct{}{}
	rc.next = (rc.next + 1) % len(rc.ring)
}

// decode is body's JSON document, nil when it is not JSON.
func decode(body []byte) any {
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil || d.More() {
		return nil
	}
	return v
}

// stringAt is the string at a dotted path in doc, "" when there is none
// (jsonfield.String's reading, on a document decoded once).
func stringAt(doc any, path string) string {
	for name := range strings.SplitSeq(path, ".") {
		obj, ok := doc.(map[string]any)
		if !ok {
			return ""
		}
		doc = obj[name]
	}
	s, _ := doc.(string)
	return s
}

// scrub returns the JSON body (doc, decoded) with the value of every member
// named like a credential (redact.IsCredential, the rule for header names
// and answers too) replaced by "[redacted]", every other byte as sent; and
// false when body is not JSON in UTF-8.
func scrub(body []byte, doc any) (json.RawMessage, bool) {
	if doc == nil || !utf8.Valid(body) {
		return nil, false
	}
	out, _ := redact.Fields(body, "[redacted]")
	return out, true
}
