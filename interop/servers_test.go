package interop_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/harness/interop"
	"github.com/idemhttp/temporal-idempotent-http/harness/serverflag"
	"github.com/idemhttp/temporal-idempotent-http/testsuite"
)

// setup is what a scenario needs of a server before it starts.
type setup struct {
	// Delay is the processing time of the first processed request.
	Delay time.Duration
	// Hang: the handler never answers (the key's lock is orphaned).
	Hang bool
	// ReleaseAfter409: the first processed request takes until the server
	// has answered this many requests 409 (in flight), a processing time
	// counted in duplicates for Temporal's test environment, which skips
	// retry waits.
	ReleaseAfter409 int
}

// target is one running server under test, whatever its kind.
type target interface {
	// PaymentsURL is the URL the workflow calls.
	PaymentsURL() string
	// Script queues transient failures in front of the idempotency logic:
	// "503,429:1".
	Script(t *testing.T, script string)
	// Counts returns the requests received, the records created and the
	// statuses answered in order ("503 429 201"; "-" for no answer).
	Counts(t *testing.T) (requests, records int, statuses string)
}

// server is one column of the table: a kind of server, how to start one,
// the worker's convention for it, and what it does without a key.
type server struct {
	name string
	// conv is the worker's convention for this server's origin.
	conv activities.Convention
	// marksReplay: the server marks a stored response (Idempotent-Replayed).
	marksReplay bool
	// keyOptional: a request without the key (as the server reads it) is
	// processed, unprotected, every time; otherwise it is answered 400.
	keyOptional bool
	// boot readies the server kind for a suite run (an npm server is
	// started once and shared through tenants) and returns how to get a
	// target of one test's own.
	boot func(t *testing.T) func(t *testing.T, s setup) target
}

// servers are the table's columns: the npm middlewares first, then the
// reference server in each dialect.
var servers = []server{
	{name: interop.ExpressIdempotency, conv: activities.IETFConvention(), keyOptional: true, boot: bootNode(interop.ExpressIdempotency)},
	{name: interop.NodeIdempotency, conv: activities.IETFConvention(), marksReplay: true, boot: bootNode(interop.NodeIdempotency)},
	{name: "reference/ietf", conv: activities.IETFConvention(), marksReplay: true, boot: bootReference(testsuite.IETFDialect())},
	{name: "reference/stripe", conv: activities.StripeConvention(), marksReplay: true, keyOptional: true, boot: bootReference(testsuite.StripeDialect())},
	{name: "reference/express", conv: activities.IETFConvention(), keyOptional: true, boot: bootReference(testsuite.ExpressDialect())},
}

// nodeTarget is an npm server (harness/interop).
type nodeTarget struct{ s *interop.Server }

// bootNode starts the npm server once for the suite run; each test gets a
// tenant of its own (its own knobs and counters; the middleware and its key
// store are shared, as between the clients of a real API).
func bootNode(name string) func(t *testing.T) func(t *testing.T, s setup) target {
	return func(t *testing.T) func(t *testing.T, s setup) target {
		base := interop.Start(t, name, interop.Options{})
		return func(t *testing.T, s setup) target {
			return startTenant(t, base.Tenant(uniqueName(t, "t")), s)
		}
	}
}

// startTenant applies s to a tenant of an npm server.
func startTenant(t *testing.T, srv *interop.Server, s setup) target {
	if s.Delay > 0 {
		srv.ControlT(t, interop.Control{Delay: s.Delay, DelayCount: 1})
	}
	if s.Hang {
		srv.ControlT(t, interop.Control{Hang: true})
	}
	if s.ReleaseAfter409 > 0 {
		srv.ControlT(t, interop.Control{ReleaseAfter409: s.ReleaseAfter409})
	}
	return nodeTarget{srv}
}

func (n nodeTarget) PaymentsURL() string { return n.s.PaymentsURL() }

func (n nodeTarget) Script(t *testing.T, script string) {
	t.Helper()
	n.s.ControlT(t, interop.Control{Script: script})
}

func (n nodeTarget) Counts(t *testing.T) (int, int, string) {
	t.Helper()
	st := n.s.StatsT(t)
	return st.Requests, st.Records, st.Statuses()
}

// refTarget is the reference server in one dialect.
type refTarget struct{ s *testsuite.Server }

// bootReference starts a reference server in dialect d for every test.
func bootReference(d testsuite.Dialect) func(t *testing.T) func(t *testing.T, s setup) target {
	return func(*testing.T) func(t *testing.T, s setup) target { return startRef(d) }
}

func startRef(d testsuite.Dialect) func(t *testing.T, s setup) target {
	return func(t *testing.T, s setup) target {
		opts := testsuite.Options{Dialect: d}
		if s.Delay > 0 {
			opts.ProcessingTime = s.Delay
		}
		if s.Hang {
			opts.Orphan = func(string) bool { return true }
		}
		if n := s.ReleaseAfter409; n > 0 {
			return startReleasing(t, opts, n)
		}
		return refTarget{testsuite.StartServer(t, opts)}
	}
}

// startReleasing starts a reference server whose first request is
// processed until the server has answered n requests 409, and is finished
// (record and stored response in place) before the n-th 409 goes out, so
// that the next request, however soon, gets the stored response.
func startReleasing(t *testing.T, opts testsuite.Options, n int) refTarget {
	var (
		mu       sync.Mutex
		conflict int
		release  = make(chan struct{}) // closed at the n-th 409
		finished = make(chan struct{}) // closed when the first request is answered
		over     = make(chan struct{}) // closed when the test ends
	)
	opts.Work = func(*http.Request, []byte) (int, []byte) {
		select {
		case <-release:
			return http.StatusCreated, nil
		case <-over:
			return http.StatusServiceUnavailable, []byte(`{"error":"test over"}`)
		}
	}
	srv := testsuite.NewServer(opts)
	first := true
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		isFirst := first && r.Method == http.MethodPost
		if isFirst {
			first = false
		}
		mu.Unlock()
		rec := &statusRecorder{ResponseWriter: w}
		srv.ServeHTTP(rec, r)
		if isFirst {
			close(finished)
			return
		}
		if rec.status == http.StatusConflict {
			mu.Lock()
			conflict++
			now := conflict == n
			mu.Unlock()
			if now {
				close(release)
				select { // the 409 is sent when this handler returns
				case <-finished:
				case <-over:
				}
			}
		}
	}))
	t.Cleanup(hs.Close)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(over) }) // runs first
	srv.URL = hs.URL
	return refTarget{srv}
}

// statusRecorder remembers the status written.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (r refTarget) PaymentsURL() string { return r.s.URL + "/payments" }

func (r refTarget) Script(t *testing.T, script string) {
	t.Helper()
	steps, err := serverflag.ParseScript(script)
	if err != nil {
		t.Fatal(err)
	}
	r.s.Script(steps...)
}

func (r refTarget) Counts(t *testing.T) (int, int, string) {
	st := r.s.Stats()
	var parts []string
	for _, l := range r.s.Log() {
		if l.Status == 0 {
			parts = append(parts, "-")
			continue
		}
		parts = append(parts, fmt.Sprint(l.Status))
	}
	return st.Requests, st.Records, strings.Join(parts, " ")
}

// origin returns scheme://host:port of u.
func origin(t *testing.T, u string) string {
	t.Helper()
	p, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	return p.Scheme + "://" + p.Host
}

// settle waits until the server has answered every request it received
// (late answers of abandoned attempts included), at most d, and returns the
// counts then.
func settle(t *testing.T, tg target, d time.Duration) (int, int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for {
		req, rec, st := tg.Counts(t)
		if !strings.Contains(st, "-") || ctx.Err() != nil {
			return req, rec, st
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}
