// Package testsuite holds a reference idempotent HTTP server and helpers for
// testing workflows that use this module, with Temporal's own
// go.temporal.io/sdk/testsuite or against a real server.
//
// The reference server does what a server must do for idempotency keys to
// protect anything (after the IETF draft "The Idempotency-Key HTTP Header
// Field"):
//
//   - A request without an Idempotency-Key header is rejected with 400.
//   - The first request with a key is processed (the "work": one record is
//     created) and the server stores the key, the SHA-256 of the request body
//     and the response.
//   - A repeated key with the same body gets the stored response, with the
//     header Idempotent-Replayed: true, and no new work.
//   - A repeated key with a different body is rejected with 422.
//   - A repeated key while the first request is still being processed is
//     answered 409 with Retry-After.
//   - A key expires Window (default 24 h) after it was first seen; after that
//     the same key is new again.
//
// Transient failures can be scripted ([Server.Script]) or drawn at random
// ([Options.FailureRate]); they happen in front of the key logic, as a load
// balancer or an overloaded upstream would answer, and are never stored.
package testsuite

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// DefaultWindow is how long the reference server remembers a key.
const DefaultWindow = 24 * time.Hour

const (
	maxBody = 1 << 20
	// maxLog bounds the request log of a long-running server; counters go on.
	maxLog = 1 << 17
)

// Options configures a Server. The zero value is a well-behaved idempotent
// server with a 24 h window and no failures.
type Options struct {
	// Window is how long a key is remembered after its first request (default 24 h).
	Window time.Duration
	// Now is the clock used for expiry and request times (default time.Now).
	Now func() time.Time
	// ProcessingTime is how long the work of a new key takes. The work runs to
	// the end even if the client goes away, like a real server's.
	ProcessingTime time.Duration
	// InFlightRetryAfter is the Retry-After, in seconds, of the 409 sent for a
	// key still being processed (default 1).
	InFlightRetryAfter int
	// FailureRate is the fraction of requests, in [0, 1], answered with
	// FailureStatus before the key is looked at.
	FailureRate float64
	// FailureStatus is the status of random failures (default 503).
	FailureStatus int
	// FailureRetryAfter, if set, is sent as Retry-After with random failures.
	FailureRetryAfter string
	// Capacity, if positive, is how many requests the server accepts per
	// CapacityWindow (default 1 s); the rest are answered 503 without
	// Retry-After. It models a struggling API for contention benchmarks.
	Capacity       int
	CapacityWindow time.Duration
	// Rand returns a uniform number in [0, 1) for FailureRate (default math/rand/v2).
	Rand func() float64
	// Work, if set, is the work for a new key instead of the default (which
	// answers 201 with the record). It is called once per new key; a 2xx
	// answer creates a record, a nil respBody answers with the record.
	Work func(r *http.Request, body []byte) (status int, respBody []byte)
}

// Step is one scripted answer. Status 0 or any 2xx lets the request through
// to normal processing; any other status is answered as is, with RetryAfter
// as the Retry-After header when set.
type Step struct {
	Status     int
	RetryAfter string
}

// Fail is a Step answering status, with an optional Retry-After value.
func Fail(status int, retryAfter ...string) Step {
	s := Step{Status: status}
	if len(retryAfter) > 0 {
		s.RetryAfter = retryAfter[0]
	}
	return s
}

// ParseScript parses a comma-separated script such as "503,429:1,201": each
// item a status, optionally ":" and a Retry-After value.
func ParseScript(s string) ([]Step, error) {
	var steps []Step
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		code, ra, _ := strings.Cut(item, ":")
		n, err := strconv.Atoi(code)
		if err != nil || n < 100 || n > 599 {
			return nil, fmt.Errorf("script item %q: want STATUS or STATUS:RETRY-AFTER with a status 100-599, e.g. 503 or 429:1", item)
		}
		steps = append(steps, Step{Status: n, RetryAfter: ra})
	}
	return steps, nil
}

// Record is one unit of work done by the server: one per distinct key.
type Record struct {
	ID             string          `json:"id"`
	IdempotencyKey string          `json:"idempotency_key"`
	BodySHA256     string          `json:"body_sha256"`
	Request        json.RawMessage `json:"request,omitempty"`
	Method         string          `json:"method"`
	Path           string          `json:"path"`
	Created        time.Time       `json:"created"`
}

// RequestLog is one request the server received.
type RequestLog struct {
	Time           time.Time `json:"time"`
	IdempotencyKey string    `json:"idempotency_key"`
	Status         int       `json:"status"`
	Replayed       bool      `json:"replayed,omitempty"`
	Authorization  bool      `json:"authorization,omitempty"`
}

// Stats counts what the server did.
type Stats struct {
	// Requests is every request received (GET /stats and /healthz excluded).
	Requests int `json:"requests"`
	// DistinctKeys is how many different keys were seen (expired keys seen again count again).
	DistinctKeys int `json:"distinct_keys"`
	// Records is how many times the work was done.
	Records int `json:"records"`
	// Replays is how many stored responses were sent again.
	Replays int `json:"replays"`
	// Mismatches is how many requests reused a key with a different body (422).
	Mismatches int `json:"mismatches"`
	// InFlight is how many requests arrived while their key was being processed (409).
	InFlight int `json:"in_flight"`
	// MissingKey is how many requests had no key (400).
	MissingKey int `json:"missing_key"`
	// Failures is how many scripted, random or over-capacity failures were sent.
	Failures int `json:"failures"`
}

type entry struct {
	hash    string
	created time.Time
	done    bool
	status  int
	ctype   string
	body    []byte
}

// Server is the reference idempotent server, an http.Handler safe for
// concurrent use. Any POST, PUT, PATCH or DELETE path is the operation;
// GET /stats answers the Stats as JSON and GET /healthz answers 200.
type Server struct {
	// URL is the base URL when the server was started with StartServer.
	URL string

	opts    Options
	mu      sync.Mutex
	entries map[string]*entry
	script  []Step
	stats   Stats
	records []Record
	log     []RequestLog
	winAt   time.Time
	winN    int
	swept   time.Time
}

// NewServer returns the reference server as an http.Handler.
func NewServer(opts Options) *Server {
	if opts.Window <= 0 {
		opts.Window = DefaultWindow
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.InFlightRetryAfter <= 0 {
		opts.InFlightRetryAfter = 1
	}
	if opts.FailureStatus == 0 {
		opts.FailureStatus = http.StatusServiceUnavailable
	}
	if opts.CapacityWindow <= 0 {
		opts.CapacityWindow = time.Second
	}
	if opts.Rand == nil {
		opts.Rand = rand.Float64
	}
	return &Server{opts: opts, entries: map[string]*entry{}}
}

// StartServer starts a reference server on a loopback httptest server, sets
// its URL and stops it when the test ends.
func StartServer(tb testing.TB, opts Options) *Server {
	tb.Helper()
	s := NewServer(opts)
	hs := httptest.NewServer(s)
	tb.Cleanup(hs.Close)
	s.URL = hs.URL
	return s
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

// Records returns the work done, in order.
func (s *Server) Records() []Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Record(nil), s.records...)
}

// Log returns every request received, in order.
func (s *Server) Log() []RequestLog {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]RequestLog(nil), s.log...)
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		switch r.URL.Path {
		case "/stats":
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(s.Stats())
			return
		case "/healthz":
			_, _ = io.WriteString(w, "ok\n")
			return
		}
	}
	key := r.Header.Get("Idempotency-Key")
	now := s.opts.Now()
	body, readErr := io.ReadAll(io.LimitReader(r.Body, maxBody+1))

	s.mu.Lock()
	s.stats.Requests++
	logged := -1
	if len(s.log) < maxLog {
		logged = len(s.log)
		s.log = append(s.log, RequestLog{Time: now, IdempotencyKey: key, Authorization: r.Header.Get("Authorization") != ""})
	}
	status := func(code int) {
		if logged >= 0 {
			s.log[logged].Status = code
		}
	}
	if step, ok := s.nextFailure(now); ok {
		s.stats.Failures++
		status(step.Status)
		s.mu.Unlock()
		if step.RetryAfter != "" {
			w.Header().Set("Retry-After", step.RetryAfter)
		}
		writeJSON(w, step.Status, map[string]string{"error": http.StatusText(step.Status)})
		return
	}
	switch {
	case r.Method != http.MethodPost && r.Method != http.MethodPut && r.Method != http.MethodPatch && r.Method != http.MethodDelete:
		status(http.StatusMethodNotAllowed)
		s.mu.Unlock()
		writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": "use POST, PUT, PATCH or DELETE"})
		return
	case key == "":
		s.stats.MissingKey++
		status(http.StatusBadRequest)
		s.mu.Unlock()
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "missing Idempotency-Key header"})
		return
	case readErr != nil || len(body) > maxBody:
		status(http.StatusRequestEntityTooLarge)
		s.mu.Unlock()
		writeJSON(w, http.StatusRequestEntityTooLarge, map[string]string{"error": "body unreadable or larger than 1 MiB"})
		return
	}
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:])
	e := s.entries[key]
	if e != nil && now.Sub(e.created) >= s.opts.Window {
		delete(s.entries, key)
		e = nil
	}
	if e != nil {
		switch {
		case e.hash != hash:
			s.stats.Mismatches++
			status(http.StatusUnprocessableEntity)
			s.mu.Unlock()
			writeJSON(w, http.StatusUnprocessableEntity, map[string]string{"error": "Idempotency-Key reused with a different request body"})
		case !e.done:
			s.stats.InFlight++
			status(http.StatusConflict)
			s.mu.Unlock()
			w.Header().Set("Retry-After", strconv.Itoa(s.opts.InFlightRetryAfter))
			writeJSON(w, http.StatusConflict, map[string]string{"error": "a request with this Idempotency-Key is still being processed"})
		default:
			s.stats.Replays++
			status(e.status)
			if logged >= 0 {
				s.log[logged].Replayed = true
			}
			st, ct, b := e.status, e.ctype, e.body
			s.mu.Unlock()
			w.Header().Set("Idempotent-Replayed", "true")
			w.Header().Set("Content-Type", ct)
			w.WriteHeader(st)
			_, _ = w.Write(b)
		}
		return
	}
	e = &entry{hash: hash, created: now}
	s.entries[key] = e
	s.stats.DistinctKeys++
	s.sweep(now)
	s.mu.Unlock()

	st, ct, b := s.work(r, body, key, hash, now)

	s.mu.Lock()
	if st >= 200 && st <= 299 {
		e.done, e.status, e.ctype, e.body = true, st, ct, b
	} else {
		// A rejected request did no work: forget the key so a fixed request may use it.
		delete(s.entries, key)
	}
	status(st)
	s.mu.Unlock()
	w.Header().Set("Content-Type", ct)
	w.WriteHeader(st)
	_, _ = w.Write(b)
}

// nextFailure pops a scripted step, or draws a random or capacity failure.
// s.mu is held.
func (s *Server) nextFailure(now time.Time) (Step, bool) {
	if len(s.script) > 0 {
		step := s.script[0]
		s.script = s.script[1:]
		if step.Status != 0 && (step.Status < 200 || step.Status > 299) {
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
			return Step{Status: http.StatusServiceUnavailable}, true
		}
	}
	if s.opts.FailureRate > 0 && s.opts.Rand() < s.opts.FailureRate {
		return Step{Status: s.opts.FailureStatus, RetryAfter: s.opts.FailureRetryAfter}, true
	}
	return Step{}, false
}

// work does the work of a new key, outside the lock: it creates the record
// and answers 201 with it, or calls Options.Work. A non-2xx answer creates no record.
func (s *Server) work(r *http.Request, body []byte, key, hash string, now time.Time) (int, string, []byte) {
	if s.opts.ProcessingTime > 0 {
		time.Sleep(s.opts.ProcessingTime)
	}
	if len(body) > 0 && !json.Valid(body) {
		b, _ := json.Marshal(map[string]string{"error": "request body is not valid JSON"})
		return http.StatusBadRequest, "application/json", b
	}
	rec := Record{IdempotencyKey: key, BodySHA256: hash, Method: r.Method, Path: r.URL.Path, Created: now}
	if len(body) > 0 {
		rec.Request = json.RawMessage(body)
	}
	st, b := http.StatusCreated, []byte(nil)
	if s.opts.Work != nil {
		if st, b = s.opts.Work(r, body); st < 200 || st > 299 {
			return st, "application/json", b
		}
	}
	s.mu.Lock()
	rec.ID = fmt.Sprintf("rec_%d", len(s.records)+1)
	s.records = append(s.records, rec)
	s.stats.Records++
	s.mu.Unlock()
	if b == nil {
		b, _ = json.Marshal(rec)
	}
	return st, "application/json", b
}

// sweep drops expired keys, at most once per Window/10. s.mu is held.
func (s *Server) sweep(now time.Time) {
	if now.Sub(s.swept) < s.opts.Window/10 {
		return
	}
	s.swept = now
	for k, e := range s.entries {
		if e.done && now.Sub(e.created) >= s.opts.Window {
			delete(s.entries, k)
		}
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
