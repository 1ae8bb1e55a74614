package activities

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemhttp/temporal-idempotent-http/internal/admission"
	"github.com/idemhttp/temporal-idempotent-http/internal/credential"
	"github.com/idemhttp/temporal-idempotent-http/internal/httpurl"
	"github.com/idemhttp/temporal-idempotent-http/internal/redact"
)

// Limits of Config.
const (
	// minCredentialBytes is the shortest credential value Config.Credentials
	// accepts: a shorter one cannot be redacted without rewriting unrelated text.
	minCredentialBytes = credential.MinSecretBytes

	maxRedirects     = 5
	errorBodyBytes   = 1 << 10
	maxHeaderValue   = 4 << 10
	maxHashedBody    = 64 << 20
	signalBodyPrefix = 64 << 10
)

// Config configures the activity on the worker. Its zero value is usable and
// safe: it allows no origin at all, so every request fails with
// workflows.ErrTypeOriginNotAllowed until AllowedOrigins names one.
type Config struct {
	// HTTPClient sends the requests. nil uses a client with a Transport cloned
	// from http.DefaultTransport. The activity never lets the client follow
	// redirects itself (it handles them as documented on Activities.Register); the
	// client's Timeout, if any, bounds each attempt together with the activity
	// context. Its Transport must not modify a request's headers in place
	// (http.RoundTripper's contract): the activity shares their values
	// between attempts.
	HTTPClient *http.Client
	// AllowedOrigins lists the origins ("https://api.example.com",
	// "http://127.0.0.1:8081") the worker may call, hosts in ASCII (punycode)
	// form. Nothing else is called.
	AllowedOrigins []string
	// Credentials maps an allowed origin to how the worker authorizes its
	// requests (see Credential): static headers, headers read from files,
	// OAuth 2.0 client credentials, a client certificate, AWS Signature V4.
	// They are applied to every request sent to that origin (redirect hops,
	// polls, cancel requests and result reads included) and to no other;
	// every secret of them is redacted from results, errors and logs (for a
	// header value, the token after an "Authorization" scheme, and the
	// password of Basic credentials, too).
	Credentials map[string]Credential
	// SealKeys are the keys (32 random bytes each, e.g. from
	// `openssl rand -base64 32`) that seal a URL a server names for a later
	// request when the URL carries a secret: a status monitor or result
	// URL with a credential of this worker in its path, or with query
	// values the origin's LongRunning.KeepQuery does not name (a
	// signature). Such a URL is written to Temporal's history only
	// encrypted (AES-256-GCM, bound to the operation's key:
	// workflows.Accepted.Sealed), redacted where it is shown, and opened
	// by the poll activity. The first key seals, every key opens. Every
	// worker that polls the origin's operations needs the same keys; a
	// poll that lands on a worker without the key waits for one that has
	// it (workflows.ErrTypeCredentialUnavailable, retried) until following
	// times out. To rotate: add the new key after the old one on every
	// worker, then, once all run with it, list it first; keep the old one
	// until the operations it sealed have ended. Default none: such a URL
	// is not followed (workflows.ErrTypeMonitorNotFollowed), and nothing
	// of it reaches history.
	SealKeys [][]byte
	// Conventions maps an allowed origin to its server's Convention; an
	// origin without one uses IETFConvention().
	Conventions map[string]Convention
	// MaxResponseBytes caps the response body kept in memory (default 1 MiB).
	// A larger 2xx body is a success with BodyOmitted set.
	MaxResponseBytes int64
	// MaxResultBytes caps the JSON-encoded activity result (default 1.5 MiB,
	// below Temporal's default 2 MiB payload limit; lower it for a server
	// with a smaller limit). A result that would be larger is a success with
	// the body omitted (BodyOmitted, OmittedReason "too large", BodyBytes and
	// BodySHA256 set).
	MaxResultBytes int
	// MaxRetryAfter caps the wait a server can ask for with Retry-After
	// (default 5 minutes).
	MaxRetryAfter time.Duration
	// ResultHeaders names the response headers copied into
	// workflows.Response.Headers (default Content-Type, Location, the
	// origin's replay header, Request-Id and X-Request-Id); New refuses a
	// name that redact.IsCredential calls a credential (Set-Cookie, …).
	// A value that is a URL (Location, Operation-Location, …) is stored
	// with its user info and query values redacted.
	ResultHeaders []string
	// UserAgent is sent as User-Agent (default "temporal-idempotent-http").
	UserAgent string
	// Now returns the current time, for Retry-After dates and deadlines,
	// the expiry of OAuth 2.0 tokens and the date of Signature V4 requests
	// (default time.Now; testsuite.Register sets the test environment's
	// clock). Files, certificates and the AWS SDK's credential cache are
	// read by the machine's clock.
	Now func() time.Time
	// Uniform returns a uniform random number in [0, 1) for jitter
	// (default math/rand/v2's Float64).
	Uniform func() float64
	// TracerProvider makes each attempt's HTTP client span (default
	// OpenTelemetry's global provider, otel.GetTracerProvider: no spans are
	// recorded until the worker sets one).
	TracerProvider trace.TracerProvider
	// Propagator writes the attempt's trace context into the request's
	// headers (default W3C Trace Context: traceparent and tracestate, and
	// no baggage, which is for the worker's own services, not every API).
	Propagator propagation.TextMapPropagator
	// SharedRate, if set, tells the activity which of its task queues have
	// a rate limit in force on the Temporal server, and hears what each
	// request on them got (see SharedRate). Default nil: every rate is the
	// worker's own.
	SharedRate SharedRate
	// Admission paces the requests to each origin by what the origin
	// answers, and stops them while it fails (default on; see Admission and
	// Breaker).
	Admission Admission
	// OriginAdmission gives origins their own admission, by origin, each
	// in place of Admission as a whole for that origin (default none:
	// every origin has Admission). An origin whose rate is known, one
	// that sheds load with 503, one whose breaker must never open: each
	// its own, the others the worker's. The worker's origins file sets it
	// from an origin's [origin."…".admission] table laid over [admission].
	OriginAdmission map[string]Admission
}

// Admission configures adaptive admission: before the worker sends a
// request (a start, a poll of a long-running operation's monitor, a cancel
// request, the read of a result), the worker's limiter for the request's
// origin admits it or makes it wait, and learns from its answer. The limiter learns the origin's capacity from its answers, in the
// spirit of the AWS SDKs' adaptive retry mode: an origin starts at InitialRate
// requests per second, gaining one per second for each answer that is not a
// throttle; a throttle (Admission.Throttles, 429 by default) cuts the rate to
// 0.8 of what was being sent, and it grows back along a cubic curve (CUBIC).
// Waiting requests are served in the order they asked. A retry budget bounds
// the retries: within any RetryWindow, retries to one origin may be at most
// RetryRatio of its requests plus MinRetries, so an API that is down sees a
// bounded extra load.
//
// An attempt that must wait sends nothing: it waits inside the attempt when
// the wait is at most MaxWait (an open circuit breaker's waits, each at
// most MaxWait, for up to a fifth of the attempt's time), else it ends with the retryable
// workflows.ErrTypeNotAdmitted and NextRetryDelay set to come back shortly before its
// turn (at most MaxDelay later, to ask again). Such waits do not use up the
// attempt budget, and a Retry-After is still honoured first. With
// admission on, a throttle without Retry-After is retried as soon as the
// limiter admits it instead of after the backoff: the limiter's cut rate
// paces it. Each worker learns on its own; several workers calling one
// origin each adapt to what they see. With SharedRate, the N workers
// polling an origin's queue each start at InitialRate ÷ N
// (SharedRate.Workers), so that together they start as one worker would.
// A followed operation's start answer's Retry-After within the same bounds
// (at most MaxWait, and with the attempt's other waits a fifth of its
// time) is waited inside the start request's attempt, so that the workflow
// needs no timer (an action) before the first poll; with admission off,
// FollowOptions.CancelOperation or a heartbeat timeout on the call's
// activity options, the timer waits it.
//
// The zero value turns admission on with the defaults its fields state.
// The fields, each with its default, are documented where the type is
// declared: go doc github.com/idemhttp/temporal-idempotent-http/internal/admission.Config.
type Admission = admission.Config

// SharedRate is one learned rate per origin for every worker, kept by the
// Temporal server: the origin's requests run on a task queue of their own
// (workflows.Request.OriginQueue), whose server-side rate limit a governor
// sets from what the workers report. The worker binary's --shared-rate
// sets it up; the activity only asks it and tells it.
type SharedRate interface {
	// Limit returns the rate limit in force on the activity task queue
	// taskQueue, in requests per second, this worker's share of it (the
	// limit ÷ the workers polling the queue; 0: none known), and whether
	// a limit is in force. While one is, the server paces the attempts of
	// every worker: the worker's own learned rate no longer makes them
	// wait (the breaker and the retry budget still apply), and the worker
	// spreads the attempts it is handed at its share with a burst of one,
	// so that the server's release of a second's tokens after an idle
	// moment does not reach the API at once.
	Limit(taskQueue string) (limit, share float64, ok bool)
	// Workers returns the number of workers polling the task queue
	// taskQueue, as last read, at least 1 (this worker; 1 when none is
	// known). While no limit is in force, each of N workers starts its
	// own learned rate for the queue's origin at its share,
	// Admission.InitialRate ÷ N, so that together they start as one
	// worker would rather than send the origin N × InitialRate in their
	// first second.
	Workers(taskQueue string) int
	// Record counts one request sent from an attempt on taskQueue and what
	// its answer was: a throttle (Admission.Throttles), a failure (a 5xx
	// or no answer, as the breaker counts them), or neither.
	Record(taskQueue string, throttled, failed bool)
}

// Breaker configures the circuit breaker of each origin, part of
// Admission: an origin that is failing gets no requests at all, first
// attempts included, except one probe at a time.
//
// A failure is an answer that says the origin is failing, not the request:
// a 5xx other than 501 and 505, or no answer (a transport error, a
// timeout, a body that broke off). Throttles and other 4xx are answers. The
// breaker opens when, within the last FailureWindow, at least MinFailures
// requests failed and they are clearly at least FailureRatio of the
// answered ones: by two standard errors of the measured ratio, so that an
// API failing some requests at random is not taken for one that is down
// (5 of 6 answers trip, 5 of 7 do not; every answer failed trips at
// MinFailures).
// Open, every attempt to the origin sends nothing. It waits inside itself
// while each of the breaker's waits is at most Admission.MaxWait (its open
// time, its probe's answer), for up to a fifth of its time in all; an
// attempt that ends to wait is an activity task for Temporal (an action).
// Otherwise it ends with the retryable workflows.ErrTypeNotAdmitted (not
// counted against the attempt budget), its NextRetryDelay bringing it
// back when the breaker lets a probe through: after OpenTime, or the
// failing answer's Retry-After (at most Config.MaxRetryAfter). The first
// attempt to ask then is the probe and the others wait for its answer.
// An answered probe closes the breaker, and the origin
// starts again from a slow start at RestartRate (one more request per
// second for each answer), so the attempts that waited reach a recovering
// API at a growing rate, not at once; a failed probe opens it again for
// twice the last open time, up to MaxOpenTime.
//
// With the defaults, an API that is down gets one probe a second from each
// worker, whatever the number of operations waiting for it, and its
// recovery is found within a second. The zero value turns the breaker on
// with the defaults its fields state, documented where the type is
// declared: go doc github.com/idemhttp/temporal-idempotent-http/internal/admission.Breaker.
type Breaker = admission.Breaker

// origin is what the activity knows about one allowed origin.
type origin struct {
	// sources authorize each request sent to the origin, in order.
	sources []credential.Source
	// refreshers are the sources that are credential.Refreshers.
	refreshers []credential.Refresher
	// set are the canonical names of the headers the sources set: a
	// request may not set them.
	set map[string]bool
	// client is the origin's own HTTP client when its credential
	// authenticates the connection (nil: the worker's).
	client *http.Client
	// names names its credential's settings in errors
	// (Credential.names).
	names credential.Names
	conv  Convention
	// resultHeaders are the canonical names of the response headers copied
	// into workflows.Response.Headers.
	resultHeaders []string
	// gaugeTags label the origin's gauges: {"origin": the origin}.
	gaugeTags map[string]string
	// retryRefused is Credential.RetryRefused (0: none).
	retryRefused time.Duration
	// limiter paces the requests to the origin (nil: its admission is
	// off); admission is its config with the defaults worked out, and
	// names it in errors ("Config.Admission" or the origin's own).
	limiter       *admission.Limiter
	admission     admission.Config
	admissionName string
}

// throttle reports whether status is one of the statuses the origin's
// limiter learns its capacity from (Admission.Throttles).
func (o *origin) throttle(status int) bool {
	return slices.Contains(o.admission.Throttles, status)
}

// admit sets the origin's limiter up from cfg, named name in errors.
func (o *origin) admit(cfg Admission, name string) error {
	o.admissionName = name
	if cfg.Off {
		return nil
	}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("%s%s", name, strings.TrimPrefix(err.Error(), "Config.Admission"))
	}
	o.admission = cfg.WithDefaults()
	o.limiter = admission.New(o.admission)
	return nil
}

// newOrigins checks the origin-keyed parts of cfg and returns them by
// canonical origin; the credentials' sources tell red their secrets.
func newOrigins(cfg Config, red *redactor) (map[string]*origin, error) {
	origins := map[string]*origin{}
	for _, s := range cfg.AllowedOrigins {
		o, err := httpurl.ParseOrigin(s)
		if err != nil {
			return nil, fmt.Errorf("Config.AllowedOrigins: %w", err)
		}
		c, _ := IETFConvention().withDefaults()
		origins[o] = &origin{conv: c, gaugeTags: map[string]string{"origin": o}}
	}
	lookup := func(field, s string) (*origin, error) {
		o, err := httpurl.ParseOrigin(s)
		if err != nil {
			return nil, fmt.Errorf("Config.%s: %w", field, err)
		}
		if origins[o] == nil {
			return nil, fmt.Errorf("Config.%s names %s, which is not in Config.AllowedOrigins: add it there or remove it", field, o)
		}
		return origins[o], nil
	}
	for s, c := range cfg.Credentials {
		o, err := lookup("Credentials", s)
		if err != nil {
			return nil, err
		}
		if err := o.authorize(cfg, s, c, red); err != nil {
			return nil, err
		}
	}
	if !cfg.Admission.Off {
		if err := cfg.Admission.Validate(); err != nil {
			return nil, err // with no origin as well
		}
	}
	for _, o := range origins {
		if err := o.admit(cfg.Admission, "Config.Admission"); err != nil {
			return nil, err
		}
	}
	for s, c := range cfg.OriginAdmission {
		o, err := lookup("OriginAdmission", s)
		if err != nil {
			return nil, err
		}
		if err := o.admit(c, fmt.Sprintf("Config.OriginAdmission[%s]", s)); err != nil {
			return nil, err
		}
	}
	for s, c := range cfg.Conventions {
		o, err := lookup("Conventions", s)
		if err != nil {
			return nil, err
		}
		if o.conv, err = c.withDefaults(); err != nil {
			return nil, fmt.Errorf("Config.Conventions for %s: %w", s, err)
		}
		if err := o.conv.Reconcile.Validate("Reconcile", s); err != nil {
			return nil, fmt.Errorf("Config.Conventions for %s: %w", s, err)
		}
		if o.conv.Reconcile.LookupActivity != "" {
			return nil, fmt.Errorf("Config.Conventions for %s: Reconcile.LookupActivity is set per call (workflows.Request.Reconcile): the workflow runs it", s)
		}
	}
	for _, o := range origins {
		names := cfg.ResultHeaders
		if names == nil {
			names = append([]string{"Content-Type", "Location", "Request-Id", "X-Request-Id"}, o.conv.ReplayedHeaders...)
		}
		for _, n := range names {
			if redact.IsCredential(n) {
				return nil, fmt.Errorf("Config.ResultHeaders names %s, a header named like a credential: its value would be stored in Temporal's history; leave it out", http.CanonicalHeaderKey(n))
			}
			o.resultHeaders = append(o.resultHeaders, http.CanonicalHeaderKey(n))
		}
	}
	return origins, nil
}
