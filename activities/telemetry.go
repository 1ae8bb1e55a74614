package activities

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/idemhttp/temporal-idempotent-http/internal/rules"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// The activity's metrics, recorded through the worker's metrics handler
// (activity.GetMetricsHandler: the SDK adds its namespace, task_queue,
// activity_type and workflow_type tags). Every one is labelled origin (an
// allowed origin, "other" for any other) and operation (bounded, see
// operationLabel); the attempts counter also outcome (success, retryable,
// non_retryable) and error_type (an ErrType constant, "none" on success).
// The names are Prometheus names: a handler that appends units and _total
// (OpenTelemetry's Prometheus exporter) finds them there already.
const (
	// metricAttempts counts attempts, each once, by how it ended.
	metricAttempts = "idempotent_http_attempts_total"
	// metricAttemptDuration is the time from sending the request to reading
	// the answer (redirects included), for every attempt that sent one.
	metricAttemptDuration = "idempotent_http_attempt_duration_seconds"
	// metricRetryAfter is each wait that a server's Retry-After chose and
	// that was handed to Temporal (after the MaxRetryAfter cap).
	metricRetryAfter = "idempotent_http_retry_after_seconds"
	// metricRetryDelay is each NextRetryDelay handed to Temporal, whatever
	// chose it (Retry-After, backoff, the wait for a key in flight).
	metricRetryDelay = "idempotent_http_retry_delay_seconds"
	// metricInFlightWaits counts answers that a request with the key is
	// still being processed, waited out with the same key.
	metricInFlightWaits = "idempotent_http_in_flight_waits_total"
	// metricAdmissionWait is each wait for admission spent inside an attempt.
	metricAdmissionWait = "idempotent_http_admission_wait_seconds"
	// metricAdmissionDelays counts attempts that ended to wait for
	// admission (workflows.ErrTypeNotAdmitted): they sent nothing. Labelled reason:
	// rate, retry_budget or circuit_open.
	metricAdmissionDelays = "idempotent_http_admission_delays_total"
	// metricCircuitOpen is 1 while the origin's circuit breaker is open or
	// half open, 0 while it is closed (labelled origin only).
	metricCircuitOpen = "idempotent_http_circuit_open"
	// metricAdmissionRate is the origin's rate in requests per second, as
	// the worker's limiter has it: the slow start's, or learned from
	// throttles (labelled origin only).
	metricAdmissionRate = "idempotent_http_admission_rate"
	// metricRateLimit is the rate limit in force on the Temporal server
	// for the origin's task queue (Config.SharedRate), requests per
	// second; 0 while none is (labelled origin only).
	metricRateLimit = "idempotent_http_rate_limit"
	// metricPolls counts the poll activity's attempts (one poll of a
	// long-running operation's monitor each, but for those admission held
	// back: error_type NotAdmitted, nothing sent), labelled as the
	// attempts counter: a poll that found the operation still running is
	// retryable with error_type OperationRunning.
	metricPolls = "idempotent_http_polls_total"
)

// Bounds of the operation label: caller-chosen names keep their own value
// up to maxOperationLabels distinct ones per Activities (a worker), each at
// most maxOperationLabelBytes of UTF-8; any other is "other".
const (
	maxOperationLabels     = 100
	maxOperationLabelBytes = 64
	otherLabel             = "other"
)

// labels holds the operation label values seen so far.
type labels struct {
	mu  sync.Mutex
	ops map[string]struct{}
	// tags are the label sets of metrics, by origin and operation label.
	tags tagCache
}

// tagCache keeps the label sets handed to MetricsHandler.WithTags, built
// once per pair of values: a handler only reads the map it is given (the
// SDK's OpenTelemetry, tally and capturing handlers copy it), so one map
// serves every attempt. It holds at most
// maxCachedTags sets; beyond, each call builds its own.
type tagCache struct {
	mu   sync.RWMutex
	sets map[[2]string]map[string]string
}

const maxCachedTags = 1024

// get returns the label set {k1: v1, k2: v2}. Every call of one cache uses
// the same k1 and k2.
func (c *tagCache) get(k1, v1, k2, v2 string) map[string]string {
	key := [2]string{v1, v2}
	c.mu.RLock()
	tags, ok := c.sets[key]
	c.mu.RUnlock()
	if ok {
		return tags
	}
	tags = map[string]string{k1: v1, k2: v2}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.sets) < maxCachedTags {
		if c.sets == nil {
			c.sets = map[[2]string]map[string]string{}
		}
		c.sets[key] = tags
	}
	return tags
}

// operationLabel returns the metrics label for an operation name: the name
// itself while it is short and one of the first maxOperationLabels names
// seen, "other" otherwise. Operation names are chosen by workflows (a
// period, an order ID could be in them): this keeps a worker's series
// bounded whatever they do.
func (l *labels) operationLabel(op string) string {
	if op == "" || len(op) > maxOperationLabelBytes || !utf8.ValidString(op) {
		return otherLabel
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.ops[op]; ok {
		return op
	}
	if len(l.ops) >= maxOperationLabels {
		return otherLabel
	}
	if l.ops == nil {
		l.ops = map[string]struct{}{}
	}
	l.ops[op] = struct{}{}
	return op
}

// metrics returns the worker's metrics handler tagged with the attempt's
// origin and operation labels. origin is "" when the request was refused
// before its origin was known to be allowed.
func (a *Activities) metrics(ctx context.Context, origin, operation string) client.MetricsHandler {
	if origin == "" {
		origin = otherLabel
	}
	return activity.GetMetricsHandler(ctx).WithTags(a.labels.tags.get("origin", origin, "operation", a.labels.operationLabel(operation)))
}

// resultOf returns an attempt's verdict kind and error type as metrics, spans and
// logs name them: requestActivity's error decides, so that a retryable type made final
// on the last attempt counts as non_retryable.
func resultOf(err error) (verdictKind, string) {
	if err == nil {
		return kindSuccess, "none"
	}
	var appErr *temporal.ApplicationError
	switch {
	case errors.As(err, &appErr) && appErr.NonRetryable():
		return kindFinal, appErr.Type()
	case errors.As(err, &appErr):
		return kindRetry, appErr.Type()
	default:
		return kindRetry, "unknown"
	}
}

// count adds one to the attempts counter.
func (a *Activities) count(m client.MetricsHandler, err error) {
	a.countIn(m, metricAttempts, err)
}

// countIn adds one to the counter name, labelled by how err ends the attempt.
func (a *Activities) countIn(m client.MetricsHandler, name string, err error) {
	kind, errType := resultOf(err)
	m.WithTags(a.outcomeTags.get("outcome", kind.String(), "error_type", errType)).Counter(name).Inc(1)
}

// tracerName is the instrumentation scope of the attempts' spans.
const tracerName = "github.com/idemhttp/temporal-idempotent-http/activities"

// Span attributes of this package, beside OpenTelemetry's HTTP ones.
const (
	attrOperation  = attribute.Key("idempotent_http.operation")
	attrKey        = attribute.Key("idempotent_http.idempotency_key")
	attrAttempt    = attribute.Key("idempotent_http.attempt")
	attrOutcome    = attribute.Key("idempotent_http.outcome")
	attrErrorType  = attribute.Key("idempotent_http.error_type")
	attrRetryDelay = attribute.Key("idempotent_http.retry_delay_seconds")
	attrReplayed   = attribute.Key("idempotent_http.replayed")
)

// clientSpan are the options of every attempt's span.
var clientSpan = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient)}

// startSpan starts the attempt's HTTP client span, a child of the span in
// ctx (the activity's, with the SDK's tracing interceptor), after
// OpenTelemetry's HTTP client conventions: named by the method, with the
// URL's user info dropped and its query values redacted. The key is an
// attribute; it is no secret, and it is what joins the trace to the API's
// own records. A span that records nothing (no tracer provider set) gets
// no attributes: they cost a URL parse per attempt.
func (a *Activities) startSpan(ctx context.Context, p *prepared, attempt int32) (context.Context, trace.Span) {
	ctx, span := a.tracer.Start(ctx, p.method, clientSpan...)
	if !span.IsRecording() {
		return ctx, span
	}
	attrs := []attribute.KeyValue{
		semconv.HTTPRequestMethodKey.String(p.method),
		semconv.URLFull(p.shown),
		semconv.ServerAddress(p.url.Hostname()),
		attrOperation.String(p.req.Operation),
		attrKey.String(p.req.IdempotencyKey),
		attrAttempt.Int(int(attempt)),
	}
	port := p.url.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[p.url.Scheme]
	}
	if n, err := strconv.Atoi(port); err == nil {
		attrs = append(attrs, semconv.ServerPort(n))
	}
	if attempt > 1 {
		attrs = append(attrs, semconv.HTTPRequestResendCount(int(attempt-1)))
	}
	span.SetAttributes(attrs...)
	return ctx, span
}

// endSpan sets what the attempt got and ends the span: the status code,
// the outcome, and for a failure error.type (the status code from 400 up,
// the error type otherwise) with the span's status set to Error.
func endSpan(span trace.Span, status int, resp *workflows.Response, err error) {
	defer span.End()
	if !span.IsRecording() {
		return
	}
	if status > 0 {
		span.SetAttributes(semconv.HTTPResponseStatusCode(status))
	}
	kind, errType := resultOf(err)
	span.SetAttributes(attrOutcome.String(kind.String()))
	switch {
	case err == nil:
		span.SetAttributes(attrReplayed.Bool(resp.Replayed))
	default:
		span.SetAttributes(attrErrorType.String(errType))
		if status >= 400 {
			span.SetAttributes(semconv.ErrorTypeKey.String(strconv.Itoa(status)))
		} else {
			span.SetAttributes(semconv.ErrorTypeKey.String(errType))
		}
		var appErr *temporal.ApplicationError
		if errors.As(err, &appErr) {
			if d := appErr.NextRetryDelay(); d > 0 {
				span.SetAttributes(attrRetryDelay.Float64(d.Seconds()))
			}
		}
		span.SetStatus(codes.Error, errType)
	}
}

// inject writes the trace context of ctx (the attempt's span) into h, so
// that the API's own trace continues the workflow's: W3C Trace Context
// unless Config.Propagator says otherwise. Not the global propagator: its
// baggage, meant for the worker's own services, would go to every API.
func (a *Activities) inject(ctx context.Context, h propagation.HeaderCarrier) {
	a.propagator().Inject(ctx, h)
}

// propagator is Config.Propagator or its default, W3C Trace Context.
func (a *Activities) propagator() propagation.TextMapPropagator {
	if a.cfg.Propagator != nil {
		return a.cfg.Propagator
	}
	return propagation.TraceContext{}
}

// bodyHash is a body whose SHA-256 (rules.BodyHash) a log line shows,
// worked out only when the line is written: slog resolves a LogValuer only
// for a record its handler takes (not below its level), and other loggers
// print it with String. A log line takes a *bodyHash to the body of the
// prepared request, which is on the heap already: a pointer goes into the
// line's interface value without an allocation of its own, a slice does not.
type bodyHash []byte

// LogValue is the hash, for slog.
func (b bodyHash) LogValue() slog.Value { return slog.StringValue(rules.BodyHash(b)) }

// String is the hash.
func (b bodyHash) String() string { return rules.BodyHash(b) }

// observeRetry records a retry handed to Temporal: its delay (when the
// activity chose one), the Retry-After wait, the wait for a key in flight.
func observeRetry(m client.MetricsHandler, delay time.Duration, handed, fromRetryAfter, inFlight bool) {
	if handed {
		m.Timer(metricRetryDelay).Record(delay)
	}
	if fromRetryAfter {
		m.Timer(metricRetryAfter).Record(delay)
	}
	if inFlight {
		m.Counter(metricInFlightWaits).Inc(1)
	}
}
