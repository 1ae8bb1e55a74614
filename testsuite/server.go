// Package testsuite holds a reference idempotent HTTP server and helpers for
// testing workflows that use this module: in Temporal's test environment
// (NewEnv, Register: the SDK's go.temporal.io/sdk/testsuite environment,
// quiet, on one clock) or against a real server.
//
// The reference server does what a server must do for idempotency keys to
// protect anything. By default it plays the IETF draft "The Idempotency-Key
// HTTP Header Field" ([IETFDialect]); [Options.Dialect] makes it play Stripe's
// ([StripeDialect]) or express-idempotency's ([ExpressDialect]) answers, another key
// header or no replay marker:
//
//   - A request without the key is rejected with 400 (problem+json), or, in a
//     dialect where the key is optional, processed every time. The IETF
//     dialect takes the key bare or quoted as the draft writes it, an RFC
//     8941 sf-string ("k1" and k1 are one key), and rejects a malformed
//     quoted key with 400 ([Dialect.KeyString]).
//   - The first request with a key is processed (the "work": one record is
//     created) and the server stores the key with the method, the path, the
//     SHA-256 of the request body and the response.
//   - A repeated key with the same method, path and body gets the stored
//     response, with the header Idempotent-Replayed: true, and no new work.
//   - A repeated key with another body, method or path is misuse: 422.
//   - A repeated key while the first request is still being processed is
//     answered 409 with Retry-After; so is every request for a key whose
//     first request was orphaned ([Options.Orphan]) until its lock expires
//     ([Options.LockTimeout]).
//   - A key expires Window (default 24 h) after it was first seen; after that
//     the same key is new again. Expired keys are trimmed on traffic.
//
// Where the key goes and whether it counts are the dialect's: a header, a
// member of the JSON body or a query parameter ([Dialect.KeyIn]); or a
// server that ignores keys ([PlainDialect]), making a record per request,
// where a client finds what an earlier request made by a lookup on a body
// member ([Options.Lookup]: GET /payments?client_reference=r1).
//
// Transient failures can be scripted ([Server.Script]) or drawn at random
// ([Options.FailureRate]); they happen in front of the key logic, as a load
// balancer or an overloaded upstream would answer, and are never stored.
// So can unknown outcomes ([CutAfterWork], [Options.CutRate]): the request
// is processed as any other, then its connection is cut without an answer,
// as when the answer is lost on its way back.
//
// The work of a new key can also be a long-running operation, followed at
// a status monitor ([Options.Async], on every path or on some:
// [Async.Paths]) or reported by signed webhooks ([Options.Webhooks]),
// with the resource to poll as the fallback.
//
// The server can require a credential scheme, to test a client's set-up:
// bearer tokens of a client-credentials token endpoint it serves
// ([Options.OAuthClients]), client certificates ([Options.ClientCAs]) or
// AWS Signature V4 ([Options.SigV4Credentials]).
package testsuite

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/idemhttp/temporal-idempotent-http/internal/keyplace"
)

// defaultWindow is how long the reference server remembers a key.
const defaultWindow = 24 * time.Hour

const (
	maxBody = 1 << 20
	// maxLog bounds the request log and the records of a long-running
	// server; counters go on.
	maxLog = 1 << 17
)

// Options configures a Server. The zero value is a well-behaved idempotent
// server with a 24 h window and no failures, playing the IETF dialect.
type Options struct {
	// Dialect is the convention the server plays (the zero value is [IETFDialect]).
	Dialect Dialect
	// Window is how long a key is remembered after its first request (default 24 hours).
	Window time.Duration
	// Now is the clock used for expiry, operations, tokens and request
	// times (default time.Now, and, once Register registers an activity
	// that calls the server, that activity's clock: the test
	// environment's).
	Now func() time.Time
	// ProcessingTime is how long the work of a new key takes. The work runs to
	// the end even if the client goes away, like a real server's.
	ProcessingTime time.Duration
	// InFlightRetryAfter is the Retry-After, in seconds, of the in-flight
	// answer when the dialect sends one (default 1).
	InFlightRetryAfter int
	// LockTimeout is how long a key stays locked by a first request that has
	// not completed (still working, or orphaned); after it the next request
	// with the key is processed as new, and the late work, if it ever ends,
	// is not stored. 0: the lock never expires on its own, it goes with the
	// key at the end of Window.
	LockTimeout time.Duration
	// Orphan, if set, is asked about every new key (also a key new again
	// after its window or lock expired). When it returns true the request
	// takes the lock but its work is abandoned: no record, no stored
	// response; the server holds the request without answering until the
	// client gives up or [Server.Close], then drops the connection, as a
	// crashed worker would. Every later request with the key gets the
	// in-flight answer until the lock expires. It is called with the
	// server's lock held and must not call the Server's methods.
	Orphan func(key string) bool
	// FailureRate is the fraction of requests, in [0, 1], answered with
	// FailureStatus before the key is looked at.
	FailureRate float64
	// FailureStatus is the status of random failures (default 503).
	FailureStatus int
	// FailureRetryAfter, if set, is sent as Retry-After with random failures.
	FailureRetryAfter string
	// CutRate is the fraction of requests, in [0, 1], that are processed
	// and then cut, as by a scripted CutAfterWork (default 0: none), for
	// chaos runs: drawn for every request that neither a scripted step
	// nor a failure answered. NewServer panics if it is out of range
	// (Options.Validate).
	CutRate float64
	// Capacity, if positive, is how many requests the server accepts per
	// CapacityWindow (default 1 s); the rest are answered CapacityStatus
	// (default 429 Too Many Requests, as a rate-limited API answers)
	// without Retry-After. It models a rate-limited API for contention
	// benchmarks.
	Capacity       int
	CapacityWindow time.Duration
	CapacityStatus int // the status of an answer over capacity
	// Rand returns a uniform number in [0, 1) for FailureRate, CutRate
	// and Webhooks.DropRate (default math/rand/v2). A request draws for
	// FailureRate, then, if not failed, for CutRate.
	Rand func() float64
	// Work, if set, is the work for a new key instead of the default (which
	// answers 201 with the record). It is called once per new key (per
	// request without a key, or with Dialect.IgnoreKeys); a 2xx
	// answer creates a record, a nil respBody answers with the record. It
	// is not called for a path Async covers (Async.Paths), nor with
	// Webhooks.
	Work func(r *http.Request, body []byte) (status int, respBody []byte)
	// Async, if set, makes the work a long-running operation, on every
	// path or on Async.Paths: the record is made at once, the answer is
	// the Async.Style's acceptance (a 202 with a status monitor) and the
	// monitor reports the operation's state until it ends (see Async).
	// Work is not called for those paths.
	Async *Async
	// Lookup, if set, is the dotted path of a member of the request body
	// ("client_reference", "metadata.ref") by which a client finds the
	// records, as an API that ignores keys lets it find what an earlier
	// request made (default "": no lookup). GET PATH?LOOKUP=VALUE (the
	// query parameter is named by the path itself, as json-server filters
	// nested members: ?metadata.ref=r1) answers 200 application/json
	// with the array of the answers of the records made at PATH by a
	// request whose body had the string VALUE at Lookup, in the order
	// made; [] when none. An answer is the work's (the record as JSON, or
	// Options.Work's answer; one that is not JSON is put in as a JSON
	// string), for the first 131072 records with the member. It works in
	// every dialect. A lookup is counted in Stats.Requests and
	// Stats.Lookups and logged, and is subject to Script, FailureRate and
	// Capacity as any request is; any other GET is answered as without
	// Lookup. NewServer panics if it is not a path (Options.Validate).
	Lookup string
	// Webhooks, if set and Async is not, makes the work an operation that
	// reports its outcome by signed webhooks: the record is made at once,
	// the answer is 201 {"id": "op_N", "status": "processing"}, GET
	// /resources/op_N reports its status, and its webhooks go out when it
	// ends (see Webhooks). NewServer panics if it is invalid
	// (Webhooks.Validate). Work is not called.
	Webhooks *Webhooks

	// The credential scheme the server requires, so that a client's
	// set-up can be tested: a bearer token of its own token endpoint
	// (OAuthClients), a client certificate (ClientCAs) or Signature V4
	// (SigV4Credentials); ClientCAs goes with either of the others. Every
	// request but GET /stats and /healthz (and the token endpoint's) needs
	// it; a request without it is refused before anything else but a
	// scripted, random or over-capacity failure, is counted in
	// Stats.Unauthorized and logged, and makes no record: its key stays
	// free. NewServer panics if the settings do not fit (Options.Validate).

	// OAuthClients, if set, are the OAuth 2.0 clients (client ID to client
	// secret) that may get bearer tokens at the client-credentials token
	// endpoint the server serves, POST /oauth/token (RFC 6749 §4.4: the
	// client authenticated by HTTP Basic or client_id and client_secret in
	// the form; the answer per §5.1 and §5.2), and the server then
	// requires such a live token as Authorization: Bearer. A missing
	// token is answered 401 with WWW-Authenticate: Bearer realm=…, an
	// unknown, expired or revoked one 401 with error="invalid_token" (RFC
	// 6750 §3.1). Server.RevokeClient revokes a client mid-run.
	OAuthClients map[string]string
	// OAuthTokenLifetime is how long an issued token is valid, by Now
	// (default 1 hour; the answer's expires_in, in whole seconds).
	OAuthTokenLifetime time.Duration
	// TLSCertificate, if set, is the certificate the server presents:
	// StartServer serves TLS with it (Server.TLSConfig) and the URL is
	// https. ClientCAs, if set, requires client certificates signed by
	// one of them (tls.RequireAndVerifyClientCert): a client without one
	// fails in the handshake, before any request; the handler refuses
	// with 403 a request that came without a verified certificate.
	TLSCertificate *tls.Certificate
	ClientCAs      *x509.CertPool
	// SigV4Credentials, if set, is the AWS access key (and session token,
	// sent as X-Amz-Security-Token, if set) every request must be signed
	// with by AWS Signature Version 4 for SigV4Service (e.g. execute-api)
	// and SigV4Region. The server signs the request it received again with
	// AWS's Go signer (the method, path, query, the headers the request
	// names as signed, the SHA-256 of the body received) and compares the
	// signatures in constant time. A request unsigned, signed otherwise,
	// with another key or session token, or with X-Amz-Date more than 5
	// minutes from Now is answered 403 with an AWS-style error
	// ({"__type": …, "message": …} and X-Amzn-ErrorType).
	SigV4Credentials *aws.Credentials
	SigV4Service     string
	SigV4Region      string
}

// Step is one scripted answer. Status 0 or any 2xx lets the request through
// to normal processing; any other status is answered as is, with RetryAfter
// as the Retry-After header when set; Cut lets it through and loses the
// answer.
type Step struct {
	Status     int    // the status to answer; 0 or a 2xx: process the request
	RetryAfter string // the Retry-After header's value, if any
	// Cut, if set, makes an unknown outcome ([CutAfterWork]): the request
	// is processed as without a step (the record made, the key stored, a
	// replay or a refusal decided), then its connection is closed without
	// an answer, as when the answer is lost on its way back; the client
	// sees EOF or a reset. Status and RetryAfter are unused. Counted in
	// Stats.Cut. Note that Go's http.Transport sends a request cut on a
	// reused connection again, on its own, when the request is a GET or
	// carries an Idempotency-Key or X-Idempotency-Key header and its body
	// can be sent again: a client that must see the cut uses a connection
	// of its own (Transport.DisableKeepAlives).
	Cut bool
}

// CutAfterWork is a Step that processes the request, then cuts its
// connection without an answer (Step.Cut): the request's outcome is
// unknown to the client, though the work was done.
func CutAfterWork() Step { return Step{Cut: true} }

// Fail is a Step answering status, with an optional Retry-After value.
func Fail(status int, retryAfter ...string) Step {
	s := Step{Status: status}
	if len(retryAfter) > 0 {
		s.RetryAfter = retryAfter[0]
	}
	return s
}

// Record is one unit of work done by the server: one per distinct key (one
// per request without a key, or with Dialect.IgnoreKeys).
type Record struct {
	// ID is the record's own ID ("rec_1", "rec_2", …), in the order made.
	ID string `json:"id"`
	// IdempotencyKey is the key the record was made under ("" without one;
	// with Dialect.IgnoreKeys, the key the request carried, unused);
	// BodySHA256 the hex SHA-256 of the request body that made it.
	IdempotencyKey string `json:"idempotency_key"`
	BodySHA256     string `json:"body_sha256"`
	// Request is the request body. It is kept while the key is stored and
	// dropped when the key expires (never kept for a request without a key),
	// so that memory follows the live keys; with Dialect.IgnoreKeys it is
	// always kept, as the records are (the first 131072).
	Request json.RawMessage `json:"request,omitempty"`
	// Method, Path and Created are the request's method and path and when
	// the record was made.
	Method  string    `json:"method"`
	Path    string    `json:"path"`
	Created time.Time `json:"created"`
}

// RequestLog is one request the server received.
type RequestLog struct {
	// Time is when the request arrived.
	Time time.Time `json:"time"`
	// IdempotencyKey is the key as the server read it (the content of a
	// quoted key, see Dialect.KeyString), or the header as received when it
	// is an invalid key.
	IdempotencyKey string `json:"idempotency_key"`
	// Status is the status answered; 0 for an orphaned request (never
	// answered); for a request cut (Cut), the status it was not answered.
	Status int `json:"status"`
	// Cut is true when the request was processed and its connection cut
	// instead of answering it (Step.Cut, Options.CutRate).
	Cut bool `json:"cut,omitempty"`
	// Replayed is true when the answer was a stored response.
	Replayed bool `json:"replayed,omitempty"`
	// Authorization is true when the request carried an Authorization
	// header (its value is never kept).
	Authorization bool `json:"authorization,omitempty"`
}

// Stats counts what the server did.
type Stats struct {
	// Requests is every request received (GET /stats and /healthz, and the
	// token endpoint's, excluded).
	Requests int `json:"requests"`
	// DistinctKeys is how many different keys the requests carried,
	// whatever each was answered (a scripted failure, a refusal, a replay):
	// the number of different valid keys in Log, a key seen again after it
	// expired or after its work was refused counted once.
	DistinctKeys int `json:"distinct_keys"`
	// Records is how many times the work was done.
	Records int `json:"records"`
	// Replays is how many stored responses were sent again.
	Replays int `json:"replays"`
	// Mismatches is how many requests misused a key: reused it with another
	// body, method or path (the dialect's misuse answer, 422 by default).
	Mismatches int `json:"mismatches"`
	// InFlight is how many requests got the in-flight answer (409): their key
	// was being processed, or its lock orphaned.
	InFlight int `json:"in_flight"`
	// MissingKey is how many requests had no key (answered 400, or processed
	// without idempotency when the dialect's key is optional) or an invalid
	// one (answered 400; see Dialect.KeyString); never with
	// Dialect.IgnoreKeys.
	MissingKey int `json:"missing_key"`
	// Failures is how many scripted, random or over-capacity failures were sent.
	Failures int `json:"failures"`
	// Cut is how many requests were processed and then cut: their
	// connection closed without an answer (Step.Cut, Options.CutRate), an
	// unknown outcome for the client.
	Cut int `json:"cut,omitempty"`
	// Orphaned is how many first requests were orphaned ([Options.Orphan]).
	Orphaned int `json:"orphaned"`
	// Expired is how many stored keys were trimmed after their window or
	// lock expired.
	Expired int `json:"expired"`
	// Lookups is how many requests the lookup route answered
	// (Options.Lookup; also counted in Requests).
	Lookups int `json:"lookups,omitempty"`
	// Operations is how many long-running operations were accepted
	// (Options.Async or Options.Webhooks), Polls how many requests their
	// monitors, results and resources got, Cancels how many asked to
	// cancel one.
	Operations int `json:"operations,omitempty"`
	Polls      int `json:"polls,omitempty"`
	Cancels    int `json:"cancels,omitempty"`
	// Webhooks is how many webhook deliveries were attempted, retries
	// included (Options.Webhooks); WebhooksDelivered how many were
	// answered 2xx, WebhooksRejected how many 4xx. WebhooksPending is how
	// many copies of events are not yet answered 2xx and still to be sent
	// or retried; after Server.Close, how many were abandoned.
	Webhooks          int `json:"webhooks,omitempty"`
	WebhooksDelivered int `json:"webhooks_delivered,omitempty"`
	WebhooksRejected  int `json:"webhooks_rejected,omitempty"`
	WebhooksPending   int `json:"webhooks_pending,omitempty"`
	// Unauthorized is how many requests were refused for want of the
	// credential the Options require (also counted in Requests).
	// TokenRequests is how many requests the token endpoint got, refused
	// ones included (Options.OAuthClients; not counted in Requests).
	Unauthorized  int `json:"unauthorized,omitempty"`
	TokenRequests int `json:"token_requests,omitempty"`
}

// entry is what the server stores for a key.
type entry struct {
	method, uri string // the operation the key is bound to
	hash        string
	created     time.Time
	done        bool
	status      int
	ctype       string
	body        []byte
	rec         int         // index in Server.records, -1 if none
	header      http.Header // headers of the stored response (an accepted operation's monitor)
}

// Server is the reference idempotent server, an http.Handler safe for
// concurrent use. Any POST, PUT, PATCH or DELETE path is the operation;
// GET /stats answers the Stats as JSON and GET /healthz answers 200; with
// Options.Lookup, GET PATH?LOOKUP=VALUE lists the records found.
type Server struct {
	// URL is the base URL when the server was started with StartServer.
	URL string

	opts      Options
	closed    chan struct{}
	closeOnce sync.Once
	mu        sync.Mutex
	entries   map[string]*entry
	seen      map[uint64]struct{} // the keys seen (a hash of each), for DistinctKeys
	script    []Step
	stats     Stats
	records   []Record
	found     []found // the records Options.Lookup can find
	log       []RequestLog
	winAt     time.Time
	winN      int
	swept     time.Time
	ops       map[string]*operation
	wh        *sender          // nil without Options.Webhooks
	tokens    map[string]token // the live OAuth tokens issued
	revoked   map[string]bool  // the OAuth clients revoked
	// clock is the server's clock (now): Options.Now, or time.Now until
	// Register gives it the activity's; fixed says Options.Now was set.
	clock atomic.Pointer[func() time.Time]
	fixed bool
	key   keyplace.Place // where the key is read (Dialect.KeyIn)
}

// NewServer returns the reference server as an http.Handler. It panics if
// opts are invalid (Options.Validate).
func NewServer(opts Options) *Server {
	if err := opts.Validate(); err != nil {
		panic(err)
	}
	opts.Dialect = opts.Dialect.normalized()
	if opts.Window <= 0 {
		opts.Window = defaultWindow
	}
	fixed := opts.Now != nil
	if !fixed {
		opts.Now = time.Now
	}
	if opts.InFlightRetryAfter <= 0 {
		opts.InFlightRetryAfter = 1
	}
	if opts.FailureStatus == 0 {
		opts.FailureStatus = http.StatusServiceUnavailable
	}
	if opts.CapacityStatus == 0 {
		opts.CapacityStatus = http.StatusTooManyRequests
	}
	if opts.CapacityWindow <= 0 {
		opts.CapacityWindow = time.Second
	}
	if opts.Rand == nil {
		opts.Rand = rand.Float64
	}
	s := &Server{opts: opts, entries: map[string]*entry{}, seen: map[uint64]struct{}{}, closed: make(chan struct{}), fixed: fixed, key: opts.Dialect.place()}
	s.clock.Store(&opts.Now)
	if w := opts.Webhooks; w != nil && opts.Async == nil {
		s.wh = newSender(*w)
	}
	return s
}

// StartServer starts a reference server on a loopback httptest server, sets
// its URL and stops it when the test ends. With Options.TLSCertificate it
// serves TLS (Server.TLSConfig) and the URL is https.
func StartServer(tb testing.TB, opts Options) *Server {
	tb.Helper()
	s := NewServer(opts)
	hs := httptest.NewUnstartedServer(s)
	if c := s.TLSConfig(); c != nil {
		hs.TLS = c
		hs.StartTLS()
	} else {
		hs.Start()
	}
	tb.Cleanup(hs.Close)
	tb.Cleanup(s.Close) // runs first: orphaned requests must not hold up hs.Close
	s.URL = hs.URL
	return s
}

// now reads the server's clock.
func (s *Server) now() time.Time { return (*s.clock.Load())() }

// follow makes the server read now, the clock of the activity Register
// registers, unless Options.Now was set.
func (s *Server) follow(now func() time.Time) {
	if !s.fixed {
		s.clock.Store(&now)
	}
}

// Close drops the connections of the requests held for orphaned keys, so
// that httptest.Server.Close or http.Server.Shutdown need not wait for them;
// later orphaned requests are dropped at once. It stops the operations'
// webhooks (Options.Webhooks): the timers, the pending retries and the
// deliveries under way, and returns once their goroutines have ended. The
// server keeps answering everything else. StartServer calls it when the
// test ends.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		close(s.closed)
		if s.wh != nil {
			s.closeWebhooks()
		}
	})
}

// Script appends scripted answers, consumed one per request in arrival order.
func (s *Server) Script(steps ...Step) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = append(s.script, steps...)
}

// Stats returns a snapshot of the counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// Records returns the work done, in order (the first 131072 records of a
// long-running server).
func (s *Server) Records() []Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Record(nil), s.records...)
}

// Log returns every request received, in order (the first 131072).
func (s *Server) Log() []RequestLog {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]RequestLog(nil), s.log...)
}

// ServeHTTP implements http.Handler. The request is read, then decided on
// under the lock (counted, logged, looked up and, for a new key, claimed);
// the work, if due, runs outside the lock, and the answer is written (or
// the connection cut) outside it.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && s.serveInfo(w, r.URL.Path) {
		return
	}
	if s.opts.OAuthClients != nil && r.URL.Path == tokenPath {
		s.serveToken(w, r)
		return
	}
	if s.guarded() && !s.authorize(w, r) {
		return
	}
	if s.opts.Async != nil && s.serveOperation(w, r) {
		return
	}
	if s.wh != nil && s.serveResource(w, r) {
		return
	}
	c := s.read(r)
	d := s.decide(c)
	cut := d.cut
	switch d.verdict {
	case orphaned:
		s.hold(r)
		return
	case workWithoutKey, workNewKey:
		d = s.process(c, d.entry)
	}
	if cut {
		hangUp(w)
		return
	}
	s.answer(c, d).write(w, s.opts.Dialect)
}

// hangUp closes the connection of w without an answer (Step.Cut): the
// client sees EOF. Where the connection cannot be hijacked (HTTP/2), the
// handler is aborted: the stream is reset.
func hangUp(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	_ = conn.Close()
}

// serveInfo answers GET /stats and GET /healthz; it reports whether path
// is one of them.
func (s *Server) serveInfo(w http.ResponseWriter, path string) bool {
	switch path {
	case "/stats":
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(s.Stats())
	case "/healthz":
		_, _ = io.WriteString(w, "ok\n")
	default:
		return false
	}
	return true
}

// call is a request as the server reads it before taking the lock.
type call struct {
	r       *http.Request
	key     string // the key as read, or the header as received when invalid
	keyErr  error  // the key header is not a valid key (Dialect.KeyString)
	now     time.Time
	body    []byte
	readErr error
	hash    string // hex SHA-256 of body, set once the request is valid
	logged  int    // index of the request in s.log, -1 if not logged
}

// read reads the body (up to one byte past maxBody) and the key of r.
func (s *Server) read(r *http.Request) *call {
	now := s.now()
	body, readErr := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	key, keyErr := s.readKey(r, body)
	return &call{r: r, key: key, keyErr: keyErr, now: now, body: body, readErr: readErr, logged: -1}
}

// readKey reads the key of r, whose body is body, where the dialect says
// (Dialect.KeyIn): "" is a missing key; an invalid key header
// (Dialect.KeyString) is the header as received with errInvalidKey.
func (s *Server) readKey(r *http.Request, body []byte) (string, error) {
	switch s.key.In {
	case keyplace.Body:
		if len(body) > maxBody {
			return "", nil // too large: refused before the key is looked at
		}
		key, _ := keyplace.BodyKey(body, s.key.Name)
		return key, nil
	case keyplace.Query:
		return r.URL.Query().Get(s.key.Name), nil
	}
	d := s.opts.Dialect
	return d.headerKey(r.Header.Get(d.KeyHeader))
}

// verdict is what the server decided to do with a request.
type verdict int

const (
	failed         verdict = iota // a scripted, random or over-capacity failure
	badMethod                     // not POST, PUT, PATCH or DELETE
	missingKey                    // no key where the dialect wants one
	invalidKey                    // a malformed key
	tooLarge                      // the body is unreadable or over 1 MiB
	misuse                        // the key was used for another operation or payload
	inFlight                      // the key's first request is still being processed
	replay                        // the key's stored response is sent again
	workWithoutKey                // the dialect's key is optional: the work, no idempotency
	workNewKey                    // a new key: its entry is claimed, the work is due
	orphaned                      // a new key whose work is abandoned (Options.Orphan)
	worked                        // the work was done: its response is the answer
	listed                        // a lookup (Options.Lookup): the records found
)

// decision is a verdict with what its answer needs.
type decision struct {
	verdict verdict
	cut     bool   // the connection is cut instead of answering (Step.Cut)
	status  int    // the status answered, when answered
	step    Step   // failed: the failure
	ctype   string // replay, worked, listed: the response
	body    []byte
	header  http.Header
	entry   *entry // workNewKey: the entry claimed
}

// decide counts and logs c and decides what to do with it, under the lock.
func (s *Server) decide(c *call) decision {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.Requests++
	if c.key != "" && c.keyErr == nil {
		s.see(c.key)
	}
	if len(s.log) < maxLog {
		c.logged = len(s.log)
		s.log = append(s.log, RequestLog{Time: c.now, IdempotencyKey: c.key, Authorization: c.r.Header.Get("Authorization") != ""})
	}
	d := s.judge(c)
	if d.answered() {
		s.logAnswer(c, d.status, d.verdict == replay)
	}
	if d.cut {
		s.stats.Cut++
		if c.logged >= 0 {
			s.log[c.logged].Cut = true
		}
	}
	return d
}

// answered reports whether d is answered at once: neither the work nor an
// orphaned request, whose status is logged when it ends, or never.
func (d decision) answered() bool {
	return d.verdict != workWithoutKey && d.verdict != workNewKey && d.verdict != orphaned
}

// see counts key in DistinctKeys the first time it is seen; a hash of it
// is kept (8 bytes), not the key. s.mu is held.
func (s *Server) see(key string) {
	sum := sha256.Sum256([]byte(key))
	h := binary.LittleEndian.Uint64(sum[:])
	if _, ok := s.seen[h]; !ok {
		s.seen[h] = struct{}{}
		s.stats.DistinctKeys++
	}
}

// judge decides what to do with c: a failure in front of the key logic,
// or what handle decides, its answer cut if a step says so (an orphaned
// request is never answered anyway). s.mu is held.
func (s *Server) judge(c *call) decision {
	step, fail := s.nextStep(c.now)
	if fail {
		s.stats.Failures++
		return decision{verdict: failed, status: step.Status, step: step}
	}
	d := s.handle(c)
	d.cut = step.Cut && d.verdict != orphaned
	return d
}

// handle decides what to do with c past the failures: a lookup, a
// rejection, the work without a key (or with a key ignored), or what the
// key's entry calls for. s.mu is held.
func (s *Server) handle(c *call) decision {
	if s.opts.Lookup != "" && c.r.Method == http.MethodGet && c.r.URL.Query().Has(s.opts.Lookup) {
		return s.list(c.r)
	}
	if d, ok := s.reject(c); ok {
		return d
	}
	sum := sha256.Sum256(c.body)
	c.hash = hex.EncodeToString(sum[:])
	switch {
	case s.opts.Dialect.IgnoreKeys:
		// A server that knows nothing of keys: the work every time.
		return decision{verdict: workWithoutKey}
	case c.key == "":
		// The dialect's key is optional: no idempotency, the work every time.
		s.stats.MissingKey++
		return decision{verdict: workWithoutKey}
	}
	return s.lookup(c)
}

// reject reports whether c cannot be processed, and how it is answered: a
// method that is no operation, a missing or invalid key (unless the
// dialect ignores keys), an unreadable or too large body (before the key
// when the key is in the body). s.mu is held.
func (s *Server) reject(c *call) (decision, bool) {
	d := s.opts.Dialect
	unreadable := c.readErr != nil || len(c.body) > maxBody
	keyed := !d.IgnoreKeys
	switch {
	case c.r.Method != http.MethodPost && c.r.Method != http.MethodPut && c.r.Method != http.MethodPatch && c.r.Method != http.MethodDelete:
		return decision{verdict: badMethod, status: http.StatusMethodNotAllowed}, true
	case unreadable && s.key.In == keyplace.Body:
		return decision{verdict: tooLarge, status: http.StatusRequestEntityTooLarge}, true
	case c.keyErr != nil && keyed:
		s.stats.MissingKey++
		return decision{verdict: invalidKey, status: d.MissingKeyStatus}, true
	case c.key == "" && !d.KeyOptional && keyed:
		s.stats.MissingKey++
		return decision{verdict: missingKey, status: d.MissingKeyStatus}, true
	case unreadable:
		return decision{verdict: tooLarge, status: http.StatusRequestEntityTooLarge}, true
	}
	return decision{}, false
}

// lookup decides by the entry of c's key: misuse, in flight or replay, or,
// for a key new (or new again after it expired), claim it. s.mu is held.
func (s *Server) lookup(c *call) decision {
	s.sweep(c.now)
	uri := c.r.URL.RequestURI()
	e := s.entries[c.key]
	if e != nil && s.expired(e, c.now) {
		s.drop(c.key, e)
		e = nil
	}
	d := s.opts.Dialect
	switch {
	case e == nil:
		return s.claim(c, uri)
	case e.method != c.r.Method || e.uri != uri || e.hash != c.hash:
		// Another operation or payload: never the first one's response.
		s.stats.Mismatches++
		return decision{verdict: misuse, status: d.MisuseStatus}
	case !e.done:
		s.stats.InFlight++
		return decision{verdict: inFlight, status: d.InFlightStatus}
	default:
		s.stats.Replays++
		return decision{verdict: replay, status: e.status, ctype: e.ctype, body: e.body, header: e.header}
	}
}

// claim stores a new entry for c's key, not done: the lock on the key that
// its work, or its orphaning, holds. s.mu is held.
func (s *Server) claim(c *call, uri string) decision {
	e := &entry{method: c.r.Method, uri: uri, hash: c.hash, created: c.now, rec: -1}
	s.entries[c.key] = e
	if s.opts.Orphan != nil && s.opts.Orphan(c.key) {
		s.stats.Orphaned++
		return decision{verdict: orphaned}
	}
	return decision{verdict: workNewKey, entry: e}
}

// process does the work of c outside the lock, then, under it, stores its
// outcome in e (the entry claimed for a new key; nil without a key) and
// logs the status.
func (s *Server) process(c *call, e *entry) decision {
	st, b, rec := s.work(c.r, c.body, c.key, c.hash, c.now)
	const ct = "application/json" // what work, accept and startOperation answer
	var h http.Header
	switch {
	case st < 200 || st > 299:
	case s.async(c.r):
		st, b, h = s.accept(c.r, b, c.now)
	case s.wh != nil:
		st, b, h = s.startOperation(c.r, c.body, c.now)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e != nil {
		s.complete(c.key, e, st, ct, b, rec)
		e.header = h
	}
	s.logAnswer(c, st, false)
	return decision{verdict: worked, status: st, ctype: ct, body: b, header: h}
}

// complete ends the work of key's entry e with its response. s.mu is held.
func (s *Server) complete(key string, e *entry, st int, ct string, b []byte, rec int) {
	current := s.entries[key] == e
	switch {
	case st >= 200 && st <= 299:
		e.done, e.status, e.ctype, e.body, e.rec = true, st, ct, b, rec
		if !current {
			// The lock or window expired while the work ran: nothing keeps it.
			s.trimRecord(rec)
		}
	case current:
		// A rejected request did no work: forget the key so a fixed request
		// may use it. Only this request's entry: after an expiry the key may
		// belong to a newer request.
		delete(s.entries, key)
	}
}

// logAnswer sets the status answered to c, and whether it was a replay, in
// its log entry. s.mu is held.
func (s *Server) logAnswer(c *call, status int, replayed bool) {
	if c.logged < 0 {
		return
	}
	s.log[c.logged].Status = status
	if replayed {
		s.log[c.logged].Replayed = true
	}
}

// response is an answer ready to be written.
type response struct {
	status      int
	ctype       string
	body        []byte
	retryAfter  string // the Retry-After header, if set
	shouldRetry string // the dialect's ShouldRetryHeader, if set and the dialect has one
	replayed    bool   // the dialect's ReplayHeader, if it has one
	header      http.Header
}

// answer makes the response of decision d to c, outside the lock.
func (s *Server) answer(c *call, d decision) response {
	dl := s.opts.Dialect
	switch d.verdict {
	case failed:
		return failure(d.step)
	case badMethod:
		return jsonError(d.status, "use POST, PUT, PATCH or DELETE")
	case missingKey:
		return withBody(d.status, dl.missingKeyBody)
	case invalidKey:
		return withBody(d.status, dl.invalidKeyBody)
	case tooLarge:
		return jsonError(d.status, "body unreadable or larger than 1 MiB")
	case misuse:
		ct, b := dl.misuseBody(c.key)
		return response{status: d.status, ctype: ct, body: b, shouldRetry: "false"}
	case inFlight:
		a := withBody(d.status, dl.inFlightBody)
		a.shouldRetry = "true"
		if dl.InFlightRetryAfter {
			a.retryAfter = strconv.Itoa(s.opts.InFlightRetryAfter)
		}
		return a
	}
	// replay, worked, listed: the stored or the fresh response.
	return response{status: d.status, ctype: d.ctype, body: d.body, replayed: d.verdict == replay, header: d.header}
}

// failure is the answer of a scripted, random or over-capacity failure:
// it should be retried when the status is 429 or 5xx.
func failure(step Step) response {
	a := jsonError(step.Status, http.StatusText(step.Status))
	a.retryAfter = step.RetryAfter
	if step.Status == http.StatusTooManyRequests || step.Status >= 500 {
		a.shouldRetry = "true"
	}
	return a
}

// withBody is the answer status with the dialect's body made by body.
func withBody(status int, body func() (ctype string, b []byte)) response {
	ct, b := body()
	return response{status: status, ctype: ct, body: b}
}

// jsonError is the answer status with {"error":msg}, as json.Encoder writes it.
func jsonError(status int, msg string) response {
	b, _ := json.Marshal(map[string]string{"error": msg})
	return response{status: status, ctype: "application/json", body: append(b, '\n')}
}

// write writes a with the headers dialect d sends.
func (a response) write(w http.ResponseWriter, d Dialect) {
	for k, vs := range a.header {
		w.Header()[k] = vs
	}
	if a.retryAfter != "" {
		w.Header().Set("Retry-After", a.retryAfter)
	}
	if a.shouldRetry != "" && d.ShouldRetryHeader != "" {
		w.Header().Set(d.ShouldRetryHeader, a.shouldRetry)
	}
	if a.replayed && d.ReplayHeader != "" {
		w.Header().Set(d.ReplayHeader, "true")
	}
	write(w, a.status, a.ctype, a.body)
}

// hold keeps an orphaned request unanswered until its client gives up or the
// server is closed; then the connection is dropped, as by a crashed worker.
func (s *Server) hold(r *http.Request) {
	select {
	case <-r.Context().Done():
		// The client is gone; nothing to answer.
	case <-s.closed:
		panic(http.ErrAbortHandler)
	}
}

// nextStep pops a scripted step, or draws a capacity or random failure,
// or a random cut; fail says the step is a failure, answered in front of
// the key logic. s.mu is held.
func (s *Server) nextStep(now time.Time) (step Step, fail bool) {
	if len(s.script) > 0 {
		step := s.script[0]
		s.script = s.script[1:]
		switch {
		case step.Cut:
			return Step{Cut: true}, false
		case step.Status != 0 && (step.Status < 200 || step.Status > 299):
			return step, true
		}
		return Step{}, false
	}
	if s.opts.Capacity > 0 {
		if now.Sub(s.winAt) >= s.opts.CapacityWindow {
			s.winAt, s.winN = now, 0
		}
		s.winN++
		if s.winN > s.opts.Capacity {
			return Step{Status: s.opts.CapacityStatus}, true
		}
	}
	if s.opts.FailureRate > 0 && s.opts.Rand() < s.opts.FailureRate {
		return Step{Status: s.opts.FailureStatus, RetryAfter: s.opts.FailureRetryAfter}, true
	}
	if s.opts.CutRate > 0 && s.opts.Rand() < s.opts.CutRate {
		return Step{Cut: true}, false
	}
	return Step{}, false
}

// work does the work of a new key (or of a request without a key when the
// dialect allows it), outside the lock: it creates the record and answers
// 201 with it, or calls Options.Work; the answer b is JSON. A non-2xx
// answer creates no record. rec is the index of the record in s.records,
// -1 if none is kept.
func (s *Server) work(r *http.Request, body []byte, key, hash string, now time.Time) (st int, b []byte, rec int) {
	if s.opts.ProcessingTime > 0 {
		time.Sleep(s.opts.ProcessingTime)
	}
	if len(body) > 0 && !json.Valid(body) {
		b, _ := json.Marshal(map[string]string{"error": "request body is not valid JSON"})
		return http.StatusBadRequest, b, -1
	}
	record := Record{IdempotencyKey: key, BodySHA256: hash, Method: r.Method, Path: r.URL.Path, Created: now}
	if len(body) > 0 {
		record.Request = json.RawMessage(bytes.Clone(body))
	}
	st = http.StatusCreated
	if s.opts.Work != nil && !s.async(r) && s.wh == nil {
		if st, b = s.opts.Work(r, body); st < 200 || st > 299 {
			return st, b, -1
		}
	}
	rec, n := s.keep(&record)
	if b == nil {
		b, _ = json.Marshal(record)
	}
	if s.opts.Lookup != "" {
		s.index(n, r.URL.Path, body, b)
	}
	return st, b, rec
}

// keep counts the work of record, names it and keeps it in s.records,
// without the request body when there is no key to expire with (unless
// the dialect ignores keys); it returns its index, -1 if not kept, and
// its number n (rec_n).
func (s *Server) keep(record *Record) (i, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.Records++
	n = s.stats.Records
	record.ID = fmt.Sprintf("rec_%d", n)
	if len(s.records) >= maxLog {
		return -1, n
	}
	kept := *record
	if kept.IdempotencyKey == "" && !s.opts.Dialect.IgnoreKeys {
		kept.Request = nil // no key to expire with
	}
	s.records = append(s.records, kept)
	return len(s.records) - 1, n
}

// found is a record that Options.Lookup can find.
type found struct {
	n      int    // the record's number (rec_n): the order made
	path   string // the path of the request that made it
	ref    string // the string at Options.Lookup in its body
	answer []byte // the work's answer, as JSON
}

// index keeps the n-th record, made at path by a request with body, with
// b, the work's answer, for Options.Lookup if the body has a string at its
// path (the first maxLog such records).
func (s *Server) index(n int, path string, body, b []byte) {
	ref, ok := keyplace.BodyKey(body, s.opts.Lookup)
	if !ok {
		return
	}
	if b = bytes.TrimSpace(b); !json.Valid(b) {
		b, _ = json.Marshal(string(b))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.found) < maxLog {
		s.found = append(s.found, found{n: n, path: path, ref: ref, answer: b})
	}
}

// list answers the lookup r (Options.Lookup): the answers of the records
// made at r's path whose body had the value r asks for, in the order
// made. s.mu is held.
func (s *Server) list(r *http.Request) decision {
	s.stats.Lookups++
	ref := r.URL.Query().Get(s.opts.Lookup)
	var hits []found
	for _, f := range s.found {
		if f.path == r.URL.Path && f.ref == ref {
			hits = append(hits, f)
		}
	}
	// s.found is in the order indexed, which concurrent work may swap.
	slices.SortFunc(hits, func(a, b found) int { return a.n - b.n })
	b := []byte{'['}
	for i, f := range hits {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, f.answer...)
	}
	b = append(b, "]\n"...)
	return decision{verdict: listed, status: http.StatusOK, ctype: "application/json", body: b}
}

// expired reports whether e is past its window or, not done, past its lock.
func (s *Server) expired(e *entry, now time.Time) bool {
	age := now.Sub(e.created)
	return age >= s.opts.Window || !e.done && s.opts.LockTimeout > 0 && age >= s.opts.LockTimeout
}

// drop forgets the expired entry e of key, and the request body of its
// record. s.mu is held.
func (s *Server) drop(key string, e *entry) {
	if s.entries[key] == e {
		delete(s.entries, key)
	}
	s.stats.Expired++
	if e.done {
		s.trimRecord(e.rec)
	}
}

// trimRecord drops the request body of record i. s.mu is held.
func (s *Server) trimRecord(i int) {
	if i >= 0 && i < len(s.records) {
		s.records[i].Request = nil
	}
}

// sweep drops expired keys, done or not, at most once per Window/10 (or
// LockTimeout/10 if shorter). s.mu is held.
func (s *Server) sweep(now time.Time) {
	every := s.opts.Window
	if s.opts.LockTimeout > 0 && s.opts.LockTimeout < every {
		every = s.opts.LockTimeout
	}
	if now.Sub(s.swept) < every/10 {
		return
	}
	s.swept = now
	for k, e := range s.entries {
		if s.expired(e, now) {
			s.drop(k, e)
		}
	}
}

// write answers status with a body of content type ct.
func write(w http.ResponseWriter, status int, ct string, b []byte) {
	w.Header().Set("Content-Type", ct)
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
