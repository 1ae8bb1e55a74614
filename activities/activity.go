package activities

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/worker"
	"google.golang.org/grpc"

	"github.com/idemhttp/temporal-idempotent-http/internal/defaults"
	"github.com/idemhttp/temporal-idempotent-http/internal/idemkey"
	"github.com/idemhttp/temporal-idempotent-http/internal/input"
	"github.com/idemhttp/temporal-idempotent-http/internal/keyplace"
	"github.com/idemhttp/temporal-idempotent-http/internal/lastbeat"
	"github.com/idemhttp/temporal-idempotent-http/internal/poll"
	"github.com/idemhttp/temporal-idempotent-http/internal/redact"
	"github.com/idemhttp/temporal-idempotent-http/internal/rules"
	"github.com/idemhttp/temporal-idempotent-http/internal/seal"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
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
	// traceHeaders are the canonical names of the headers the propagator
	// writes: a request may not set them.
	traceHeaders map[string]bool
	// userAgent is the User-Agent header's value, shared by every request
	// (see send).
	userAgent []string
	// outcomeTags caches the attempts counter's label sets (see count).
	outcomeTags tagCache
	// urls caches the request URLs parsed lately.
	urls urlCache
	// seal is Config.SealKeys (nil: none).
	seal *seal.Keys
	// beats carries an attempt's progress on its failure response for
	// the clients dialed with ProgressInterceptor (see leave).
	beats *lastbeat.Carrier
}

// New validates cfg and returns the activities. It fails on an origin that is
// not scheme://host[:port], on credentials or conventions for an origin that
// is not allowed, on a credential value too short to redact, and on a
// credential whose files cannot be read or whose settings are incomplete.
func New(cfg Config) (*Activities, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	red := newRedactor(nil)
	origins, err := newOrigins(cfg, red)
	if err != nil {
		return nil, err
	}
	a := &Activities{cfg: cfg, origins: origins, redact: red, beats: lastbeat.New()}
	if len(cfg.SealKeys) > 0 {
		if a.seal, err = seal.New(cfg.SealKeys); err != nil {
			return nil, fmt.Errorf("Config.SealKeys: %w", err)
		}
		for _, k := range cfg.SealKeys {
			red.Add(string(k))
		}
	}
	if a.cfg.MaxResponseBytes <= 0 {
		a.cfg.MaxResponseBytes = defaults.MaxResponseBytes
	}
	if a.cfg.MaxResultBytes <= 0 {
		a.cfg.MaxResultBytes = defaults.MaxResultBytes
	}
	if a.cfg.MaxRetryAfter <= 0 {
		a.cfg.MaxRetryAfter = defaults.MaxRetryAfter
	}
	if a.cfg.UserAgent == "" {
		a.cfg.UserAgent = "temporal-idempotent-http"
	}
	a.userAgent = []string{a.cfg.UserAgent}
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
	for _, o := range origins {
		if o.client != nil {
			// The origin's own transport, with the worker's client's
			// other settings.
			oc := c
			oc.Transport = o.client.Transport
			o.client = &oc
		}
	}
	tp := cfg.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	a.tracer = tp.Tracer(tracerName)
	a.traceHeaders = map[string]bool{}
	for _, f := range a.propagator().Fields() {
		a.traceHeaders[http.CanonicalHeaderKey(f)] = true
	}
	return a, nil
}

// Register registers the two activities on a worker (or a test
// environment) under the names workflows.Call schedules, which are their
// activity types in Temporal's metrics and Web UI:
//
//   - "IdempotentHTTPRequest" performs one attempt of a call. It sends
//     nothing for an invalid request or one its origin's admission holds
//     back (Config.Admission); otherwise it sends the request once with the
//     idempotency key and the origin's credentials, follows a 307 or 308
//     to the same origin, and classifies the answer by the classification
//     table of docs/how-it-works.md: a 2xx is the workflows.Response; every
//     failure is a *temporal.ApplicationError of a workflows.ErrType… type
//     carrying a workflows.Failure, retryable ones with their
//     NextRetryDelay (the server's Retry-After, else the jittered backoff
//     of workflows.RetryOptions). Each attempt that sends is an HTTP client
//     span and is counted in the worker's metrics (docs/observability.md).
//   - "IdempotentHTTPPoll" follows a long-running operation
//     (workflows.Request.Follow, workflows.FollowAccepted), one GET of its
//     status monitor per attempt, read by the origin's
//     Convention.LongRunning; the wait between polls is Temporal's retry
//     timer, so a waiting operation holds no goroutine of the worker.
//
// Their inputs are internal: workflows build them, users do not.
func (a *Activities) Register(r worker.ActivityRegistry) {
	r.RegisterActivityWithOptions(a.requestActivity, activity.RegisterOptions{Name: input.ActivityName})
	r.RegisterActivityWithOptions(a.requestActivity, activity.RegisterOptions{Name: input.ActivityNameV2})
	r.RegisterActivityWithOptions(a.pollActivity, activity.RegisterOptions{Name: poll.ActivityName})
}

// ProgressInterceptor returns a gRPC client interceptor for the client
// the worker runs these activities on (dc is that client's
// DataConverter; nil: the default). With it, an attempt that fails and
// leaves progress for the next (the attempts spent, an outcome it could
// not know, a monitor a 202 moved) sends it on its failure response,
// where Temporal saves it as it saves a heartbeat's details, instead of
// in a heartbeat call of its own: a retry or a poll costs one Temporal
// action instead of two. host.Host.ClientOptions installs it; a client
// dialed without it loses nothing (its attempts heartbeat). Add it to
// the options before dialing:
//
//	opts.ConnectionOptions.DialOptions = append(opts.ConnectionOptions.DialOptions,
//		grpc.WithChainUnaryInterceptor(acts.ProgressInterceptor(opts.DataConverter)))
func (a *Activities) ProgressInterceptor(dc converter.DataConverter) grpc.UnaryClientInterceptor {
	return a.beats.Interceptor(dc)
}

// leave leaves next, this attempt's progress, for the next attempt,
// which reads it as heartbeat details: on the attempt's failure response
// when its task came through ProgressInterceptor, else by a heartbeat.
// Call it only right before returning the attempt's error.
func (a *Activities) leave(ctx context.Context, next progress) {
	if a.beats.Hold(ctx, activity.GetInfo(ctx).TaskToken, next) {
		return
	}
	activity.RecordHeartbeat(ctx, next)
}

// requestActivity is the HTTP activity, registered as "IdempotentHTTPRequest": one
// attempt of req, the input workflows.Call schedules it with. It sends
// nothing for an invalid request or one its origin's admission holds back
// (Config.Admission); otherwise it sends the request once with the
// idempotency key and the origin's credentials, follows a 307 or 308 to
// the same origin, and classifies the answer by the classification
// table of docs/how-it-works.md, implemented once in outcome.go: a 2xx is the
// workflows.Response; every failure is a *temporal.ApplicationError of a
// workflows.ErrType… type carrying a workflows.Failure, retryable ones with
// their NextRetryDelay (retry.go says which delay wins). Each attempt that
// sends is an HTTP client span and is counted in the worker's metrics (docs/observability.md).
func (a *Activities) requestActivity(ctx context.Context, req input.Input) (*workflows.Response, error) {
	if !activity.IsActivity(ctx) {
		return nil, errors.New("activities: the HTTP activity runs only as a Temporal activity: register it with Activities.Register and call it from a workflow (workflows.Call)")
	}
	info := activity.GetInfo(ctx)
	prev := loadProgress(ctx, info.Attempt)
	p, err := a.prepare(req, info.Attempt, prev.hint())
	if err != nil {
		origin := ""
		if pu, perr := a.urls.parse(req.URL); perr == nil && a.origins[pu.origin] != nil {
			origin = pu.origin
		}
		a.count(a.metrics(ctx, origin, req.Operation), err)
		return nil, err
	}
	m := a.metrics(ctx, p.origin, req.Operation)
	// admit updates the progress: kept in p, it needs no allocation of its own.
	p.prev = prev
	if err := a.admit(ctx, p, m, asking{info: info, prev: &p.prev, retry: prev.Sent > 0,
		d: workflows.Failure{
			Operation: req.Operation, Method: p.method, URL: p.shown, IdempotencyKey: req.IdempotencyKey,
			Attempt: info.Attempt, InFlightSince: prev.InFlightSince, InFlightCount: prev.InFlightCount, OutcomeUnknown: prev.hint(),
		},
		lateType: workflows.ErrTypeRetryWouldExceedDeadline, lateAdvice: "Raise ScheduleToCloseTimeout, or run the same workflow ID again later (it sends the same key)",
	}); err != nil {
		// Nothing was sent: no client span.
		a.count(m, err)
		return nil, err
	}
	ctx, span := a.startSpan(ctx, p, info.Attempt)
	p.inject = a.cfg.Propagator != nil || span.SpanContext().IsValid()
	resp, status, err := a.do(ctx, info, p, m, p.prev)
	endSpan(span, status, resp, err)
	a.count(m, err)
	if err == nil && resp.Accepted != nil {
		waitInStart(ctx, p, resp.Accepted)
	}
	return resp, err
}

// waitInStart spends the start answer's wait before the first poll of op
// (its Retry-After, at most what the workflow asked the start to wait,
// input.Input.StartWait) inside the start request p's attempt, when the
// origin's admission would spend a wait that long there with the waits
// the attempt spent already (admission.Limiter.WaitInside: at most
// MaxWait, 1 s by default, and all of them at most a fifth of the
// attempt's time), and records it in op.Waited, which the workflow takes
// off its timer: a timer is an action Temporal bills, one per followed
// call, and the wait inside costs none. With admission off, a heartbeat
// timeout set (a waiting attempt sends no heartbeat; the workflow side
// asks for none then either) or a workflow that asked for none
// (CancelOperation, an earlier version), the timer waits it all. The
// attempt's context done (the worker stopping) ends the wait early:
// op.Waited says how long it was, and the answer is returned. A worker
// lost meanwhile loses the answer with the attempt: Temporal retries the
// start, which sends the same key again (TestFollowStartWaitWorkerKilled).
func waitInStart(ctx context.Context, p *prepared, op *workflows.Accepted) {
	w := min(op.RetryAfter, p.req.StartWait)
	if w <= 0 || p.o.limiter == nil || activity.GetInfo(ctx).HeartbeatTimeout > 0 ||
		!p.o.limiter.WaitInside(p.waited, w, attemptLeft(ctx)) {
		return
	}
	start := time.Now()
	t := time.NewTimer(w)
	defer t.Stop()
	select {
	case <-t.C:
		op.Waited = w
	case <-ctx.Done():
		op.Waited = min(time.Since(start), w)
	}
}

// do sends p once, classifies the answer and returns the workflows.Response or the
// error for Temporal, with the status the server answered (0 for none).
// prev is the progress of the attempts before this one.
func (a *Activities) do(ctx context.Context, info activity.Info, p *prepared, m client.MetricsHandler, prev progress) (*workflows.Response, int, error) {
	req := p.req
	if p.rec.Lookup != "" || !p.rec.IsZero() && prev.Unknown {
		// A lookup comes before every request, the first of a run too:
		// an earlier run of the workflow, or the run before a reset, may
		// have made the record.
		if resp, status, send, err := a.settle(ctx, info, p, m, &prev); !send {
			return resp, status, err
		}
	}
	start := time.Now()
	ans := a.exchange(ctx, info.TaskQueue, p)
	m.Timer(metricAttemptDuration).Record(time.Since(start))
	if !ans.unsent() {
		prev.Sent++
	}
	v := decide(&ans, &p.o.conv, prev)
	if v.refused {
		// Read the clock only for a refused credential's window.
		v = askAgain(v, p.o, prev.RefusedSince, a.cfg.Now())
	}
	if req.Follow && ans.err == nil && ans.status == http.StatusSeeOther && ans.header.Get("Location") != "" {
		// RFC 9110's 303: the result is at Location, which the poll
		// activity reads (accepted checks it as a monitor).
		v = verdict{kind: kindSuccess}
	}
	d := workflows.Failure{
		Operation: req.Operation, Method: p.method, URL: p.shown,
		IdempotencyKey: req.IdempotencyKey, Attempt: info.Attempt, Status: ans.status, Reason: v.reason,
	}
	logger := activity.GetLogger(ctx)
	if v.kind == kindSuccess {
		var acc *workflows.Accepted
		if req.Follow {
			var err error
			if acc, err = a.accepted(&ans, p, info.Attempt); err != nil {
				logger.Error("HTTP request accepted an operation whose monitor this worker will not follow", "key", req.IdempotencyKey, "status", ans.status, "error", err)
				return nil, ans.status, err
			}
		}
		r := a.result(&ans, p, info.Attempt, acc)
		logger.Info("HTTP request succeeded", "key", req.IdempotencyKey, "status", r.Status, "attempt", r.Attempt,
			"replayed", r.Replayed, "body_sha256", (*bodyHash)(&p.req.Body), "body_omitted", r.OmittedReason)
		return r, ans.status, nil
	}
	var msg string
	from := redact.URL(ans.from.String())
	if ans.err != nil {
		msg = fmt.Sprintf("%s %s: %s (%s)", p.method, from, redact.Err(ans.err), v.reason)
	} else {
		if ans.encoded != "" {
			d.Body = a.redact.string("[body withheld: Content-Encoding " + ans.encoded + ", which the worker cannot decode to redact it]")
		} else {
			d.Body = a.redact.snippet(ans.body)
		}
		if v.errType == workflows.ErrTypeRedirectNotFollowed {
			d.Location = a.redact.string(redact.URL(ans.header.Get("Location")))
			if len(d.Location) > errorBodyBytes {
				d.Location = strings.ToValidUTF8(d.Location[:errorBodyBytes], "") + "…"
			}
			msg = fmt.Sprintf("%s %s answered %d with Location %q: not followed (%s); call the final URL directly",
				p.method, from, ans.status, d.Location, v.reason)
		} else {
			msg = fmt.Sprintf("%s %s answered %s: %s", p.method, from, strings.TrimSpace(fmt.Sprint(ans.status, " ", http.StatusText(ans.status))), v.reason)
			if v.kind == kindFinal && d.Body != "" {
				msg += " (response: " + d.Body + ")"
			}
		}
	}
	if v.kind == kindFinal {
		d.OutcomeUnknown = prev.hint() || v.unknown
		log := logger.Error
		if rules.CallerHandles(ans.status, v.errType == workflows.ErrTypeHTTPClientError, d.OutcomeUnknown) {
			log = logger.Warn
		}
		log("HTTP request failed, not retrying", "key", req.IdempotencyKey, "status", ans.status, "attempt", info.Attempt, "error_type", v.errType, "outcome_unknown", d.OutcomeUnknown, "error", a.redact.string(msg))
		return nil, ans.status, a.fail(msg, v.errType, d)
	}
	return nil, ans.status, a.retry(ctx, &failure{info: info, p: p, m: m, prev: prev, v: v, d: d, msg: msg, header: ans.header, got: ans.got()})
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
func (a *Activities) prepare(req input.Input, attempt int32, unknown bool) (*prepared, error) {
	invalid := func(err error) error {
		return a.fail(err.Error(), workflows.ErrTypeInvalidRequest, workflows.Failure{
			Operation: req.Operation, Method: req.Method, IdempotencyKey: req.IdempotencyKey, Attempt: attempt, OutcomeUnknown: unknown,
		})
	}
	method, err := rules.Method(req.Method)
	if err != nil {
		return nil, invalid(err)
	}
	pu, err := a.urls.parse(req.URL)
	if err != nil {
		return nil, invalid(err)
	}
	o := pu.origin
	p := &prepared{req: req, method: method, url: pu.url, raw: pu.raw, shown: a.redact.string(pu.shown), origin: o, o: a.origins[o]}
	if p.o == nil {
		return nil, a.fail(fmt.Sprintf("origin %s is not allowed by this worker: add it to Config.AllowedOrigins if it should be called", o),
			workflows.ErrTypeOriginNotAllowed, workflows.Failure{Operation: req.Operation, Method: method, URL: p.shown, IdempotencyKey: req.IdempotencyKey, Attempt: attempt, OutcomeUnknown: unknown})
	}
	if err := rules.Operation(req.Operation); err != nil {
		return nil, invalid(err)
	}
	if err := idemkey.Check(req.IdempotencyKey); err != nil {
		return nil, invalid(err)
	}
	if err := p.o.conv.checkKey(req.IdempotencyKey); err != nil {
		return nil, invalid(err)
	}
	if err := rules.Body(req.Body); err != nil {
		return nil, invalid(err)
	}
	if err := p.placeKey(); err != nil {
		return nil, invalid(err)
	}
	if p.rec = req.Reconcile; p.rec.IsZero() {
		p.rec = p.o.conv.Reconcile
	}
	if err := p.rec.Validate("Reconcile", req.URL); err != nil {
		return nil, invalid(err)
	}
	if err := p.rec.CheckPlace("Reconcile", p.place); err != nil {
		return nil, invalid(err)
	}
	if req.Follow && !p.rec.IsZero() {
		return nil, invalid(fmt.Errorf("the origin's Convention.Reconcile cannot be combined with Request.Follow yet: a lookup's record, or a person's answer, is no operation to follow; call this origin without Follow"))
	}
	if len(req.Headers) == 0 {
		// Nothing more to check.
		return p, nil
	}
	if err := rules.Headers(req.Headers); err != nil {
		return nil, invalid(err)
	}
	for name := range req.Headers {
		canon := http.CanonicalHeaderKey(name)
		if p.o.set[canon] || p.place.In == keyplace.Header && canon == p.place.Name {
			return nil, invalid(fmt.Errorf("header %s may not be set in the request: the worker sets it (from its credentials or as this origin's key header)", canon))
		}
		if a.traceHeaders[canon] {
			return nil, invalid(fmt.Errorf("header %s may not be set in the request: the worker writes it with each attempt's trace context (Config.Propagator)", canon))
		}
	}
	return p, nil
}

// placeKey puts the key where the call's KeyIn, else its origin's
// Convention.KeyIn, says: p.place, and p.body or p.url with the key in
// them (a header is set by setHeaders).
func (p *prepared) placeKey() error {
	p.body, p.place = p.req.Body, p.o.conv.place
	if p.req.KeyIn != "" {
		place, err := keyplace.Parse(p.req.KeyIn)
		if err != nil {
			return fmt.Errorf("KeyIn: %w", err)
		}
		p.place = place
	}
	key := p.req.IdempotencyKey
	switch p.place.In {
	case keyplace.Header:
		if p.req.KeyIn == "" {
			// The origin's header, canonical and checked once, by New
			// (Convention.withDefaults).
			return nil
		}
		if p.place.Name == "" {
			p.place.Name = p.o.conv.KeyHeader
		}
		p.place.Name = http.CanonicalHeaderKey(p.place.Name)
		return checkKeyHeader(p.place.Name)
	case keyplace.Body:
		if len(p.body) == 0 {
			return fmt.Errorf("the key goes in the body member %s, but the request has no body: send a JSON object", p.place.Name)
		}
		body, err := keyplace.InsertBody(p.body, p.place.Name, key)
		if err != nil {
			return fmt.Errorf("the key goes in the body member %s (KeyIn %s): %w", p.place.Name, p.place, err)
		}
		p.body = body
	case keyplace.Query:
		u, err := keyplace.InsertQuery(p.url, p.place.Name, key)
		if err != nil {
			return fmt.Errorf("the key goes in the query parameter %s (KeyIn %s): %w", p.place.Name, p.place, err)
		}
		p.url, p.raw = u, u.String()
	}
	return nil
}
