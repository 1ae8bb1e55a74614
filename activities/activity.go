// Package activities holds the HTTP activity: it sends one attempt of an
// idempotent request with its idempotency key, classifies the answer, and
// lets Temporal's retry policy drive the attempts, handing it the delay
// (the server's Retry-After, else jittered backoff) as NextRetryDelay.
//
// Register it on a worker with [New] and [Activities.Register]; call it from
// a workflow through package workflows.
package activities

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/idemhttp/temporal-idempotent-http/internal/admission"
	"github.com/idemhttp/temporal-idempotent-http/internal/request"
)

// Activities holds the HTTP activity and its worker-side dependencies.
// Create it with New; it is safe for concurrent use.
type Activities struct {
	cfg     Config
	client  *http.Client
	origins map[string]*origin
	redact  *redactor
	tracer  trace.Tracer
	labels  labels
	// limiter is nil when Config.Admission.Off.
	limiter *admission.Limiter
	// throttles are Config.Admission.Throttles or their default.
	throttles []int
	// traceHeaders are the canonical names of the headers the propagator
	// writes: a request may not set them.
	traceHeaders map[string]bool
	// admission is Config.Admission's limiter configuration with its
	// defaults, worked out once.
	admission admission.Config
	// userAgent is the User-Agent header's value, shared by every request
	// (see send).
	userAgent []string
	// outcomeTags caches the attempts counter's label sets (see count).
	outcomeTags tagCache
	// urls caches the request URLs parsed lately.
	urls urlCache
}

// New validates cfg and returns the activities. It fails on an origin that is
// not scheme://host[:port], on credentials or conventions for an origin that
// is not allowed, and on a credential value too short to redact.
func New(cfg Config) (*Activities, error) {
	origins, secrets, err := newOrigins(cfg)
	if err != nil {
		return nil, err
	}
	a := &Activities{cfg: cfg, origins: origins, redact: newRedactor(secrets)}
	if a.cfg.MaxResponseBytes <= 0 {
		a.cfg.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if a.cfg.MaxResultBytes <= 0 {
		a.cfg.MaxResultBytes = DefaultMaxResultBytes
	}
	if a.cfg.MaxRetryAfter <= 0 {
		a.cfg.MaxRetryAfter = DefaultMaxRetryAfter
	}
	if a.cfg.UserAgent == "" {
		a.cfg.UserAgent = "temporal-idempotent-http"
	}
	a.userAgent = []string{a.cfg.UserAgent}
	if a.cfg.Now == nil {
		a.cfg.Now = time.Now
	}
	var c http.Client
	if cfg.HTTPClient != nil {
		c = *cfg.HTTPClient
	} else {
		c.Transport = http.DefaultTransport.(*http.Transport).Clone()
	}
	// Redirects are handled by send, never by the client: the client would
	// turn a POST into a GET on 301–303 and carry headers across origins.
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	a.client = &c
	tp := cfg.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	a.tracer = tp.Tracer(tracerName)
	a.traceHeaders = map[string]bool{}
	for _, f := range a.propagator().Fields() {
		a.traceHeaders[http.CanonicalHeaderKey(f)] = true
	}
	if !cfg.Admission.Off {
		if err := cfg.Admission.validate(); err != nil {
			return nil, err
		}
		a.admission = cfg.Admission.limiterConfig().WithDefaults()
		a.limiter = admission.New(cfg.Admission.limiterConfig())
		a.throttles = slices.Clone(cfg.Admission.Throttles)
		if len(a.throttles) == 0 {
			a.throttles = defaultThrottles
		}
	}
	return a, nil
}

// Register registers the activity under ActivityName.
func (a *Activities) Register(r worker.ActivityRegistry) {
	r.RegisterActivityWithOptions(a.Do, activity.RegisterOptions{Name: ActivityName})
}

// Do performs one attempt of req, the input that workflows.Call (and the
// ready workflow, workflows.HTTPCallWorkflow) schedules the activity with.
// Its type is internal: a workflow does not call Do or build its input, it
// calls workflows.Call or workflows.Post (or starts the ready workflow),
// which validate the request, derive the key and fill the retry options
// first. Do validates req again and sends nothing when it is invalid; it
// asks the origin's adaptive admission (Config.Admission) and, when the
// attempt must wait longer than it can inside the attempt, sends nothing and
// returns the retryable ErrTypeNotAdmitted (not counted against the budget);
// otherwise it sends the request once with the idempotency key (and the
// origin's credentials), follows a 307 or 308 to the same origin with the
// same method, body and key, and classifies the answer:
//
//   - 2xx: the Response.
//   - a request with this key still in flight at the server (a 409 the
//     server marks so, or any 409 after an attempt of this activity that
//     ended without an answer): retried as ErrTypeKeyInFlight, not counted
//     against the attempt budget (workflows.RetryOptions.MaximumAttempts),
//     until the server answers or the schedule-to-close deadline; then
//     ErrTypeKeyLocked.
//   - the key reused with another request: ErrTypeKeyReused.
//   - server advice (Stripe-Should-Retry, X-Should-Retry) over the status
//     table (retryableStatus) and transport errors retried; a 2xx whose
//     body broke off is a transport error, retried for its whole answer.
//
// Every failure is a *temporal.ApplicationError carrying FailureDetails:
// retryable ones with a NextRetryDelay (Retry-After, else jittered backoff;
// with admission on, a throttle (Admission.Throttles: 429 by default) without
// Retry-After is retried as soon as the limiter admits it), final ones with
// NonRetryable set and FailureDetails.OutcomeUnknown saying whether the
// server may have done the work. Called outside an activity, Do returns an
// error.
//
// Each attempt that sends a request is an HTTP client span (a child of the
// span in ctx: the activity's, with the SDK's tracing interceptor) named in
// the W3C traceparent the request carries; the activity logs with that
// span's context, so the interceptor's logger adds its TraceID and SpanID.
// Each attempt is counted in the worker's metrics handler (see the
// README's Observability section).
func (a *Activities) Do(ctx context.Context, req request.Input) (*Response, error) {
	if !activity.IsActivity(ctx) {
		return nil, errors.New("activities: Do runs only as a Temporal activity: register it with Activities.Register and call it from a workflow (workflows.Call)")
	}
	info := activity.GetInfo(ctx)
	prev := loadProgress(ctx, info.Attempt)
	p, err := a.prepare(req, prev.hint())
	if err != nil {
		origin := ""
		if _, o, perr := request.ParseURL(req.URL); perr == nil && a.origins[o] != nil {
			origin = o
		}
		a.count(a.metrics(ctx, origin, req.Operation), err)
		return nil, err
	}
	m := a.metrics(ctx, p.origin, req.Operation)
	if err := a.admit(ctx, info, p, m, &prev); err != nil {
		// Nothing was sent: no client span.
		a.count(m, err)
		return nil, err
	}
	ctx, span := a.startSpan(ctx, p, info.Attempt)
	p.inject = a.cfg.Propagator != nil || span.SpanContext().IsValid()
	resp, status, err := a.do(ctx, info, p, m, prev)
	endSpan(span, status, resp, err)
	a.count(m, err)
	return resp, err
}

// do sends p once, classifies the answer and returns the Response or the
// error for Temporal, with the status the server answered (0 for none).
// prev is the progress of the attempts before this one.
func (a *Activities) do(ctx context.Context, info activity.Info, p *prepared, m client.MetricsHandler, prev progress) (*Response, int, error) {
	req := p.req
	start := time.Now()
	sentAt := a.cfg.Now()
	sendCtx, cancel := withMargin(ctx)
	ans := a.send(sendCtx, p)
	// send has read the answer: its context may go.
	cancel()
	m.Timer(metricAttemptDuration).Record(time.Since(start))
	prev.Sent++
	a.observe(ctx, info.TaskQueue, p, sentAt, &ans)
	v := decide(&ans, &p.o.conv, prev.hint())
	d := FailureDetails{
		Operation: req.Operation, Method: p.method, URL: p.shown,
		IdempotencyKey: req.IdempotencyKey, Attempt: info.Attempt, Status: ans.status, Reason: v.reason,
	}
	logger := activity.GetLogger(ctx)
	if v.outcome == outcomeSuccess {
		r := a.result(&ans, p, info.Attempt)
		logger.Info("HTTP request succeeded", "key", req.IdempotencyKey, "status", r.Status, "attempt", r.Attempt,
			"replayed", r.Replayed, "body_sha256", hexSHA256(req.Body), "body_omitted", r.OmittedReason)
		return r, ans.status, nil
	}
	var msg string
	from := request.RedactURL(ans.from.String())
	if ans.err != nil {
		msg = fmt.Sprintf("%s %s: %s (%s)", p.method, from, request.RedactErr(ans.err), v.reason)
	} else {
		if ans.encoded != "" {
			d.Body = a.redact.string("[body withheld: Content-Encoding " + ans.encoded + ", which the worker cannot decode to redact it]")
		} else {
			d.Body = a.redact.snippet(ans.body)
		}
		if v.errType == ErrTypeRedirect {
			d.Location = a.redact.string(request.RedactURL(ans.header.Get("Location")))
			if len(d.Location) > errorBodyBytes {
				d.Location = strings.ToValidUTF8(d.Location[:errorBodyBytes], "") + "…"
			}
			msg = fmt.Sprintf("%s %s answered %d with Location %q: not followed (%s); call the final URL directly",
				p.method, from, ans.status, d.Location, v.reason)
		} else {
			msg = fmt.Sprintf("%s %s answered %s: %s", p.method, from, strings.TrimSpace(fmt.Sprint(ans.status, " ", http.StatusText(ans.status))), v.reason)
			if v.outcome == outcomeFinal && d.Body != "" {
				msg += " (response: " + d.Body + ")"
			}
		}
	}
	if v.outcome == outcomeFinal {
		d.OutcomeUnknown = prev.hint() || v.unknown
		logger.Error("HTTP request failed, not retrying", "key", req.IdempotencyKey, "status", ans.status, "attempt", info.Attempt, "error_type", v.errType, "error", a.redact.string(msg))
		return nil, ans.status, a.fail(msg, v.errType, d)
	}
	return nil, ans.status, a.retry(ctx, &failure{info: info, p: p, m: m, prev: prev, v: v, d: d, msg: msg, header: ans.header})
}

// withMargin returns ctx with its deadline brought forward by a fifth of
// the time left (at least 100 ms or half the time left, at most 1 s), so that a request without an answer ends the
// attempt with a retryable error the activity chose (its delay, its details,
// its progress for the next attempt) instead of a timeout imposed by Temporal.
// Call cancel once the answer is read: it stops the context's timer.
func withMargin(ctx context.Context) (context.Context, context.CancelFunc) {
	dl, ok := ctx.Deadline()
	if !ok {
		return ctx, noCancel
	}
	left := time.Until(dl)
	margin := min(time.Second, max(left/5, min(100*time.Millisecond, left/2)))
	return context.WithDeadline(ctx, dl.Add(-margin))
}

// noCancel is withMargin's cancel for a context it did not derive.
func noCancel() {}

// prepare validates req with the rules of package request and the origin's
// convention; its errors are non-retryable ApplicationErrors, of unknown
// outcome when an earlier attempt may have reached the server (unknown).
func (a *Activities) prepare(req request.Input, unknown bool) (*prepared, error) {
	invalid := func(err error) error {
		return a.fail(err.Error(), ErrTypeInvalidRequest, FailureDetails{
			Operation: req.Operation, Method: req.Method, IdempotencyKey: req.IdempotencyKey, OutcomeUnknown: unknown,
		})
	}
	method, err := request.Method(req.Method)
	if err != nil {
		return nil, invalid(err)
	}
	pu, err := a.urls.parse(req.URL)
	if err != nil {
		return nil, invalid(err)
	}
	o := pu.origin
	p := &prepared{req: req, method: method, url: pu.url, raw: pu.raw, shown: pu.shown, origin: o, o: a.origins[o]}
	if p.o == nil {
		return nil, a.fail(fmt.Sprintf("origin %s is not allowed by this worker: add it to Config.AllowedOrigins if it should be called", o),
			ErrTypeOriginNotAllowed, FailureDetails{Operation: req.Operation, Method: method, URL: p.shown, IdempotencyKey: req.IdempotencyKey, OutcomeUnknown: unknown})
	}
	if err := request.Operation(req.Operation); err != nil {
		return nil, invalid(err)
	}
	if err := request.Key(req.IdempotencyKey); err != nil {
		return nil, invalid(err)
	}
	if err := p.o.conv.checkKey(req.IdempotencyKey); err != nil {
		return nil, invalid(err)
	}
	if err := request.Body(req.Body); err != nil {
		return nil, invalid(err)
	}
	if len(req.Headers) == 0 {
		// Nothing more to check.
		return p, nil
	}
	if err := request.Headers(req.Headers); err != nil {
		return nil, invalid(err)
	}
	for name := range req.Headers {
		canon := http.CanonicalHeaderKey(name)
		if _, ok := p.o.creds[canon]; ok || canon == p.o.conv.KeyHeader {
			return nil, invalid(fmt.Errorf("header %s may not be set in the request: the worker sets it (from its credentials or as this origin's key header)", canon))
		}
		if a.traceHeaders[canon] {
			return nil, invalid(fmt.Errorf("header %s may not be set in the request: the worker writes it with each attempt's trace context (Config.Propagator)", canon))
		}
	}
	return p, nil
}
