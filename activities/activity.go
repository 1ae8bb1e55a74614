package activities

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
)

// Activities holds the HTTP activity and its worker-side dependencies.
// Create it with New; it is safe for concurrent use.
type Activities struct {
	cfg     Config
	client  *http.Client
	origins map[string]bool
	creds   map[string]http.Header
	secrets []string
}

// New validates cfg and returns the activities. It fails on an origin that is
// not scheme://host[:port], on credentials for an origin that is not allowed,
// and on a MaxResponseBytes above MaxResponseBytesLimit.
func New(cfg Config) (*Activities, error) {
	a := &Activities{cfg: cfg, origins: map[string]bool{}, creds: map[string]http.Header{}}
	for _, s := range cfg.AllowedOrigins {
		o, err := parseOrigin(s)
		if err != nil {
			return nil, err
		}
		a.origins[o] = true
	}
	for s, h := range cfg.Credentials {
		o, err := parseOrigin(s)
		if err != nil {
			return nil, fmt.Errorf("credentials: %w", err)
		}
		if !a.origins[o] {
			return nil, fmt.Errorf("credentials for %s, which is not in AllowedOrigins: add it there or remove the credentials", o)
		}
		a.creds[o] = h.Clone()
		for _, vs := range h {
			for _, v := range vs {
				a.addSecret(v)
			}
		}
	}
	if a.cfg.MaxResponseBytes <= 0 {
		a.cfg.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if a.cfg.MaxResponseBytes > MaxResponseBytesLimit {
		return nil, fmt.Errorf("MaxResponseBytes %d is above %d: results must stay below Temporal's 2 MiB payload limit", a.cfg.MaxResponseBytes, MaxResponseBytesLimit)
	}
	if a.cfg.MaxRetryAfter <= 0 {
		a.cfg.MaxRetryAfter = DefaultMaxRetryAfter
	}
	if a.cfg.ResultHeaders == nil {
		a.cfg.ResultHeaders = DefaultResultHeaders
	}
	if a.cfg.UserAgent == "" {
		a.cfg.UserAgent = "temporal-idempotent-http"
	}
	if a.cfg.Now == nil {
		a.cfg.Now = time.Now
	}
	var c http.Client
	if cfg.HTTPClient != nil {
		c = *cfg.HTTPClient
	} else {
		c.Transport = http.DefaultTransport.(*http.Transport).Clone()
	}
	// Redirects are handled by Do, never by the client: the client would turn
	// a POST into a GET on 301–303 and carry headers across origins.
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	a.client = &c
	return a, nil
}

func (a *Activities) addSecret(v string) {
	v = strings.TrimSpace(v)
	if v == "" {
		return
	}
	a.secrets = append(a.secrets, v)
	// "Bearer tok" also hides a bare "tok" echoed by a server.
	if _, tok, ok := strings.Cut(v, " "); ok && len(strings.TrimSpace(tok)) >= 4 {
		a.secrets = append(a.secrets, strings.TrimSpace(tok))
	}
}

// Register registers the activity under ActivityName.
func (a *Activities) Register(r worker.ActivityRegistry) {
	r.RegisterActivityWithOptions(a.Do, activity.RegisterOptions{Name: ActivityName})
}

// prepared is a validated request, ready to send.
type prepared struct {
	req    Request
	method string
	url    *url.URL
	origin string
}

// Do performs one attempt of req. It validates req and sends nothing when it
// is invalid; otherwise it sends the request once with the Idempotency-Key
// header (and the origin's credentials), follows a 307 or 308 to the same
// origin with the same method, body and key, and classifies the answer with
// [Classify]. A 2xx is returned as the Response. Every failure is a
// *temporal.ApplicationError carrying FailureDetails: retryable ones with a
// NextRetryDelay (Retry-After, else jittered backoff), non-retryable ones with
// NonRetryable set and an ErrType constant as type.
func (a *Activities) Do(ctx context.Context, req Request) (*Response, error) {
	resp, err := a.do(ctx, req)
	a.count(ctx, req.Operation, err)
	return resp, err
}

func (a *Activities) do(ctx context.Context, req Request) (*Response, error) {
	info := activity.GetInfo(ctx)
	p, err := a.prepare(req)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	resp, body, final, sendErr := a.send(ctx, p)
	activity.GetMetricsHandler(ctx).WithTags(map[string]string{"operation": req.Operation}).
		Timer("idempotent_http_attempt_latency").Record(time.Since(start))
	d := FailureDetails{
		Operation: req.Operation, Method: p.method, URL: p.url.String(),
		IdempotencyKey: req.IdempotencyKey, Attempt: info.Attempt,
	}
	logger := activity.GetLogger(ctx)
	if sendErr != nil {
		outcome, errType := ClassifyError(sendErr)
		msg := fmt.Sprintf("%s %s: %s", p.method, p.url.Redacted(), a.redact(sendErr.Error()))
		if outcome == NonRetryable {
			logger.Error("HTTP request failed, not retrying", "key", req.IdempotencyKey, "url", p.url.Redacted(), "error", msg)
			return nil, a.nonRetryable(msg+"; fix the URL's scheme, the server's certificate or the worker's trusted roots", errType, d)
		}
		return nil, a.retry(ctx, info, p, d, errType, msg, nil)
	}
	defer resp.Body.Close()
	d.Status = resp.StatusCode
	if resp.StatusCode >= 300 && resp.StatusCode <= 399 && resp.Header.Get("Location") != "" {
		d.Location = resp.Header.Get("Location")
		d.Body = a.snippet(body)
		msg := fmt.Sprintf("%s %s answered %d with Location %q: not followed (only 307/308 to the same origin are followed, so a %s is never turned into a GET or sent with its key or credentials elsewhere); call the final URL directly",
			p.method, final.Redacted(), resp.StatusCode, d.Location, p.method)
		logger.Error("HTTP redirect not followed", "key", req.IdempotencyKey, "status", resp.StatusCode, "location", d.Location)
		return nil, a.nonRetryable(msg, ErrTypeRedirect, d)
	}
	outcome, errType := Classify(resp.StatusCode, resp.Header)
	switch outcome {
	case Success:
		r := a.result(resp, body, info.Attempt, req.IdempotencyKey)
		logger.Info("HTTP request succeeded", "key", req.IdempotencyKey, "status", r.Status, "attempt", r.Attempt, "replayed", r.Replayed)
		return r, nil
	case Retryable:
		d.Body = a.snippet(body)
		msg := fmt.Sprintf("%s %s answered %d %s", p.method, final.Redacted(), resp.StatusCode, http.StatusText(resp.StatusCode))
		return nil, a.retry(ctx, info, p, d, errType, msg, resp.Header)
	default:
		d.Body = a.snippet(body)
		msg := fmt.Sprintf("%s %s answered %d %s: not retrying, the same request cannot succeed; fix the request (response: %s)",
			p.method, final.Redacted(), resp.StatusCode, http.StatusText(resp.StatusCode), d.Body)
		logger.Error("HTTP request rejected, not retrying", "key", req.IdempotencyKey, "status", resp.StatusCode, "attempt", info.Attempt)
		return nil, a.nonRetryable(msg, errType, d)
	}
}

// prepare validates req; its errors are non-retryable ApplicationErrors.
func (a *Activities) prepare(req Request) (*prepared, error) {
	invalid := func(format string, args ...any) error {
		return a.nonRetryable(fmt.Sprintf(format, args...), ErrTypeInvalidRequest, FailureDetails{
			Operation: req.Operation, Method: req.Method, IdempotencyKey: req.IdempotencyKey, Attempt: 0,
		})
	}
	p := &prepared{req: req, method: strings.ToUpper(strings.TrimSpace(req.Method))}
	if p.method == "" {
		p.method = http.MethodPost
	}
	switch p.method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
	default:
		return nil, invalid("method %q is not supported: use POST, PUT, PATCH or DELETE", req.Method)
	}
	u, err := url.Parse(strings.TrimSpace(req.URL))
	if err != nil {
		return nil, invalid("invalid URL %q: %v", req.URL, err)
	}
	if u.User != nil {
		return nil, invalid("URL %s carries user info: credentials would be stored in Temporal's history; configure them on the worker (Config.Credentials)", u.Redacted())
	}
	origin, err := originOf(u)
	if err != nil {
		return nil, invalid("invalid URL %q: %v", req.URL, err)
	}
	u.Fragment, u.RawFragment = "", ""
	p.url, p.origin = u, origin
	if !a.origins[origin] {
		return nil, a.nonRetryable(fmt.Sprintf("origin %s is not allowed by this worker: add it to the worker's allowed origins (--allow-origin or ALLOW_ORIGINS) if it should be called", origin),
			ErrTypeOriginNotAllowed, FailureDetails{Operation: req.Operation, Method: p.method, URL: u.String(), IdempotencyKey: req.IdempotencyKey})
	}
	if err := ValidateKey(req.IdempotencyKey); err != nil {
		return nil, invalid("%v", err)
	}
	if len(req.Body) > 0 && !json.Valid(req.Body) {
		return nil, invalid("request body is not valid JSON (%d bytes): encode it with encoding/json", len(req.Body))
	}
	for name, value := range req.Headers {
		if err := a.checkHeader(origin, name, value); err != nil {
			return nil, invalid("%v", err)
		}
	}
	return p, nil
}

// ValidateKey reports whether key can be sent as an Idempotency-Key: 1 to 255
// printable ASCII characters.
func ValidateKey(key string) error {
	if key == "" {
		return errors.New("missing idempotency key: derive one with workflows.Key or pass Request.IdempotencyKey")
	}
	if len(key) > 255 {
		return fmt.Errorf("idempotency key is %d characters long: at most 255 are allowed", len(key))
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x21 || key[i] > 0x7e {
			return fmt.Errorf("idempotency key has a character (byte %#x at %d) outside printable ASCII", key[i], i)
		}
	}
	return nil
}

// forbiddenHeaders may not come from workflow input: they are credentials
// (which would be stored in history) or are set by the activity itself.
var forbiddenHeaders = map[string]string{
	"Authorization":       "credentials belong on the worker (Config.Credentials), not in workflow input stored in Temporal's history",
	"Proxy-Authorization": "credentials belong on the worker (Config.Credentials), not in workflow input stored in Temporal's history",
	"Cookie":              "credentials belong on the worker (Config.Credentials), not in workflow input stored in Temporal's history",
	"Idempotency-Key":     "set Request.IdempotencyKey instead",
	"Content-Type":        "the body is always sent as application/json",
	"Content-Length":      "it is computed from the body",
	"Host":                "it is taken from the URL",
	"Transfer-Encoding":   "it is managed by the HTTP client",
	"Connection":          "it is managed by the HTTP client",
}

// ValidateHeader reports whether a header may come from a Request: a valid
// name, a value without CR, LF or NUL, and not one of the headers that carry
// credentials (Authorization, Proxy-Authorization, Cookie) or that the
// activity sets itself. The workflows package checks it before scheduling
// the activity, so a credential never reaches Temporal's history.
func ValidateHeader(name, value string) error {
	if !validHeaderName(name) {
		return fmt.Errorf("invalid header name %q", name)
	}
	if strings.ContainsAny(value, "\r\n\x00") {
		return fmt.Errorf("invalid value for header %s: it contains CR, LF or NUL", name)
	}
	canon := http.CanonicalHeaderKey(name)
	if why, ok := forbiddenHeaders[canon]; ok {
		return fmt.Errorf("header %s may not be set in the request: %s", canon, why)
	}
	return nil
}

func (a *Activities) checkHeader(origin, name, value string) error {
	if err := ValidateHeader(name, value); err != nil {
		return err
	}
	canon := http.CanonicalHeaderKey(name)
	if _, ok := a.creds[origin][canon]; ok {
		return fmt.Errorf("header %s may not be set in the request: the worker sets it from its credentials", canon)
	}
	return nil
}

func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			continue
		}
		if !strings.ContainsRune("!#$%&'*+-.^_`|~", rune(c)) {
			return false
		}
	}
	return true
}

// send sends p, following 307/308 redirects to the same origin. It returns
// the last response with its body read (up to MaxResponseBytes+1 bytes) and
// the URL that answered it.
func (a *Activities) send(ctx context.Context, p *prepared) (*http.Response, []byte, *url.URL, error) {
	target := p.url
	for hop := 0; ; hop++ {
		var body io.Reader
		if len(p.req.Body) > 0 {
			body = bytes.NewReader(p.req.Body)
		}
		hr, err := http.NewRequestWithContext(ctx, p.method, target.String(), body)
		if err != nil {
			return nil, nil, target, err
		}
		for k, v := range p.req.Headers {
			hr.Header.Set(k, v)
		}
		for k, vs := range a.creds[p.origin] {
			hr.Header[http.CanonicalHeaderKey(k)] = vs
		}
		hr.Header.Set(IdempotencyKeyHeader, p.req.IdempotencyKey)
		hr.Header.Set("User-Agent", a.cfg.UserAgent)
		hr.Header.Set("Accept", "application/json")
		if body != nil {
			hr.Header.Set("Content-Type", "application/json")
		}
		resp, err := a.client.Do(hr)
		if err != nil {
			return nil, nil, target, err
		}
		data, err := io.ReadAll(io.LimitReader(resp.Body, a.cfg.MaxResponseBytes+1))
		if err != nil {
			resp.Body.Close()
			return nil, nil, target, fmt.Errorf("reading the %d response body: %w", resp.StatusCode, err)
		}
		if (resp.StatusCode == http.StatusTemporaryRedirect || resp.StatusCode == http.StatusPermanentRedirect) && hop < maxRedirects {
			next, err := target.Parse(resp.Header.Get("Location"))
			if err == nil && resp.Header.Get("Location") != "" {
				if o, err := originOf(next); err == nil && o == p.origin {
					resp.Body.Close()
					target = next
					continue
				}
			}
		}
		return resp, data, target, nil
	}
}

// ClassifyError decides the outcome of an error from sending a request or
// reading its response: TLS certificate errors are NonRetryable
// (ErrTypeTLS); every other transport error (refused, reset, timeout, DNS,
// EOF, a body cut short) is Retryable (ErrTypeNetwork), since the key makes a
// repeat safe.
func ClassifyError(err error) (Outcome, string) {
	var (
		verr  *tls.CertificateVerificationError
		uaerr x509.UnknownAuthorityError
		herr  x509.HostnameError
		cerr  x509.CertificateInvalidError
		rerr  tls.RecordHeaderError
	)
	switch {
	case errors.As(err, &verr), errors.As(err, &uaerr), errors.As(err, &herr), errors.As(err, &cerr):
		return NonRetryable, ErrTypeTLS
	case errors.As(err, &rerr), strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		// A plain http server answering a TLS handshake: the URL's scheme is wrong.
		return NonRetryable, ErrTypeTLS
	default:
		return Retryable, ErrTypeNetwork
	}
}

// retry builds the retryable error for a failed attempt, with the delay from
// Retry-After (when header has a valid one) or from the jittered backoff, or
// a non-retryable ErrTypeDeadline when that delay would pass the activity's
// schedule-to-close deadline.
func (a *Activities) retry(ctx context.Context, info activity.Info, p *prepared, d FailureDetails, errType, msg string, header http.Header) error {
	b := p.req.Backoff
	if rp := info.RetryPolicy; rp != nil {
		b.InitialInterval, b.BackoffCoefficient, b.MaximumInterval = rp.InitialInterval, rp.BackoffCoefficient, rp.MaximumInterval
	}
	b = b.withDefaults()
	now := a.cfg.Now()
	var delay time.Duration
	source := "backoff (" + string(b.Jitter) + " jitter)"
	raValue := header.Get("Retry-After")
	ra, fromRetryAfter := ParseRetryAfter(raValue, now)
	if fromRetryAfter {
		d.RetryAfter = ra
		delay, source = max(min(ra, a.cfg.MaxRetryAfter), MinRetryDelay), fmt.Sprintf("Retry-After %q", raValue)
	} else {
		delay = b.Delay(info.Attempt, a.cfg.Uniform, decorrelatedSeed(p.req.IdempotencyKey, info.ScheduledTime))
	}
	logger := activity.GetLogger(ctx)
	if rp := info.RetryPolicy; rp != nil && rp.MaximumAttempts > 0 && info.Attempt >= rp.MaximumAttempts {
		logger.Error("HTTP attempt failed, no attempts left", "key", d.IdempotencyKey, "status", d.Status, "attempt", d.Attempt)
		return temporal.NewApplicationErrorWithOptions(fmt.Sprintf("%s; that was the last of %d attempts (RetryPolicy.MaximumAttempts)", msg, rp.MaximumAttempts), errType, temporal.ApplicationErrorOptions{Details: []any{d}})
	}
	if info.ScheduleToCloseTimeout > 0 {
		deadline := info.ScheduledTime.Add(info.ScheduleToCloseTimeout)
		if left := deadline.Sub(now); delay >= left {
			d.NextRetryDelay = delay
			full := fmt.Sprintf("%s; the next attempt would wait %s (%s) but only %s remain before the schedule-to-close deadline (%s): failing now instead of waiting; raise ScheduleToCloseTimeout or retry later with the same key",
				msg, delay, source, max(left, 0).Round(time.Millisecond), info.ScheduleToCloseTimeout)
			logger.Error("HTTP retry cannot fit before the deadline", "key", d.IdempotencyKey, "status", d.Status, "attempt", d.Attempt, "delay", delay, "left", left)
			return a.nonRetryable(full, ErrTypeDeadline, d)
		}
	}
	opts := temporal.ApplicationErrorOptions{}
	if fromRetryAfter || b.Jitter != JitterNone {
		// JitterNone without Retry-After leaves the interval to Temporal.
		d.NextRetryDelay = delay
		opts.NextRetryDelay = delay
	}
	opts.Details = []any{d}
	logger.Warn("HTTP attempt failed, Temporal will retry", "key", d.IdempotencyKey, "status", d.Status, "attempt", d.Attempt, "delay", delay, "source", source)
	return temporal.NewApplicationErrorWithOptions(fmt.Sprintf("%s; retrying in %s (%s)", msg, delay, source), errType, opts)
}

func (a *Activities) nonRetryable(msg, errType string, d FailureDetails) error {
	return temporal.NewApplicationErrorWithOptions(a.redact(msg), errType, temporal.ApplicationErrorOptions{
		NonRetryable: true, Details: []any{d},
	})
}

func (a *Activities) result(resp *http.Response, body []byte, attempt int32, key string) *Response {
	r := &Response{
		Status:         resp.StatusCode,
		Attempt:        attempt,
		IdempotencyKey: key,
		BodyBytes:      int64(len(body)),
		Replayed:       strings.EqualFold(strings.TrimSpace(resp.Header.Get(ReplayedHeader)), "true"),
	}
	for _, name := range a.cfg.ResultHeaders {
		if v := resp.Header.Get(name); v != "" {
			if r.Headers == nil {
				r.Headers = map[string]string{}
			}
			r.Headers[http.CanonicalHeaderKey(name)] = a.redact(v)
		}
	}
	switch {
	case int64(len(body)) > a.cfg.MaxResponseBytes:
		r.BodyOmitted = true
	case len(body) == 0:
	case json.Valid(body):
		r.Body = json.RawMessage(a.redactBytes(body))
	default:
		r.RawBody = a.redactBytes(body)
	}
	return r
}

func (a *Activities) snippet(body []byte) string {
	if len(body) > errorBodyBytes {
		body = body[:errorBodyBytes]
	}
	return strings.TrimSpace(strings.ToValidUTF8(a.redact(string(body)), "\uFFFD"))
}

// redact replaces every credential value in s with [REDACTED].
func (a *Activities) redact(s string) string {
	for _, v := range a.secrets {
		s = strings.ReplaceAll(s, v, "[REDACTED]")
	}
	return s
}

func (a *Activities) redactBytes(b []byte) []byte {
	for _, v := range a.secrets {
		if bytes.Contains(b, []byte(v)) {
			b = bytes.ReplaceAll(b, []byte(v), []byte("[REDACTED]"))
		}
	}
	return b
}

// count adds one to the attempts counter, tagged with the operation, the
// outcome and the error type of the attempt's result.
func (a *Activities) count(ctx context.Context, operation string, err error) {
	outcome, errType := Success, "none"
	var appErr *temporal.ApplicationError
	switch {
	case errors.As(err, &appErr) && appErr.NonRetryable():
		outcome, errType = NonRetryable, appErr.Type()
	case errors.As(err, &appErr):
		outcome, errType = Retryable, appErr.Type()
	case err != nil:
		outcome, errType = Retryable, "unknown"
	}
	activity.GetMetricsHandler(ctx).WithTags(map[string]string{
		"operation": operation, "outcome": outcome.String(), "error_type": errType,
	}).Counter("idempotent_http_attempts").Inc(1)
}
