// Package interop runs the third-party servers of the interop suite
// (../../interop) as child processes of a test: small payments APIs in
// interop/node, each built on an npm idempotency middleware, and two mock
// APIs of long-running operations (AutorestLRO, SpectorLRO). It installs
// their npm packages (scripts/install-interop.sh), starts one, returns its
// base URL, and drives the payments APIs' harness: processing delay, a handler that hangs,
// scripted transient failures in front of the middleware, and counters.
//
// Nothing here is idempotency logic: that is the middleware's own.
package interop

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/harness/itest"
)

// The servers, by the name of their entry file in interop/node.
const (
	// ExpressIdempotency is Express with express-idempotency (Ville de Montréal).
	ExpressIdempotency = "express-idempotency"
	// NodeIdempotency is NestJS with @node-idempotency/nestjs.
	NodeIdempotency = "node-idempotency"
)

// Servers are all the third-party idempotency servers (payments APIs with
// the harness: Tenant, Control, Stats).
var Servers = []string{ExpressIdempotency, NodeIdempotency}

// The long-running-operation servers: Microsoft's mock APIs, started as
// published (interop/LRO-SERVERS.md says what each route answers). They
// have no harness: Tenant, Control and Stats are not for them; URL is their
// base URL.
const (
	// AutorestLRO is the AutoRest test server
	// (@microsoft.azure/autorest.testserver): /lro/… and /http/redirect/….
	AutorestLRO = "autorest-lro"
	// SpectorLRO is Spector (@typespec/spector) serving
	// @azure-tools/azure-http-specs: Azure.Core and ARM operations.
	SpectorLRO = "spector-lro"
)

// DefaultKeyHeader is the header both middlewares read the key from by default.
const DefaultKeyHeader = "Idempotency-Key"

// NodeDir returns interop/node in this repository.
func NodeDir() (string, error) {
	root, err := itest.RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "interop", "node"), nil
}

// installHint says how to install by hand.
const installHint = "run scripts/install-interop.sh (it needs node and npm: apt-get install -y nodejs npm)"

var (
	installOnce sync.Once
	installErr  error
)

// Install runs scripts/install-interop.sh once per process: it installs the
// pinned npm packages into interop/node/node_modules when they are missing
// or stale (seconds when they are up to date; under a minute from the
// registry). logf, if not nil, gets the script's output.
func Install(ctx context.Context, logf func(format string, args ...any)) error {
	installOnce.Do(func() { installErr = install(ctx, logf) })
	return installErr
}

func install(ctx context.Context, logf func(format string, args ...any)) error {
	root, err := itest.RepoRoot()
	if err != nil {
		return err
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		return fmt.Errorf("interop: bash is needed to run scripts/install-interop.sh: %w", err)
	}
	cmd := exec.CommandContext(ctx, bash, filepath.Join(root, "scripts", "install-interop.sh"))
	cmd.Dir = root
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err = cmd.Run()
	if logf != nil {
		logf("interop: scripts/install-interop.sh (%s): %s", time.Since(start).Round(10*time.Millisecond), strings.TrimSpace(out.String()))
	}
	if err != nil {
		return fmt.Errorf("interop: scripts/install-interop.sh failed: %w\n%s\n%s", err, out.Bytes(), installHint)
	}
	if _, err := exec.LookPath("node"); err != nil {
		return fmt.Errorf("interop: node is not on PATH after the install: %w; %s", err, installHint)
	}
	dir := filepath.Join(root, "interop", "node", "node_modules")
	if _, err := os.Stat(dir); err != nil {
		return fmt.Errorf("interop: %s is missing after the install: %w; %s", dir, err, installHint)
	}
	return nil
}

// Options configures a server.
type Options struct {
	// KeyHeader is the header the server's middleware reads the key from
	// (default Idempotency-Key): another one makes a client that sends
	// Idempotency-Key look keyless to it.
	KeyHeader string
	// Env is added to the server's environment (NODE_ENV=production is set
	// unless Env sets it), e.g. "ENFORCE_KEY=false" for node-idempotency's
	// default pass-through of requests without a key.
	Env []string
}

// Server is a running third-party server, or one tenant of it ([Server.Tenant]).
type Server struct {
	// Name is its name (ExpressIdempotency, NodeIdempotency).
	Name string
	// URL is its base URL, "http://127.0.0.1:port" (with "/t/<tenant>" for a
	// tenant); the API is POST URL+"/payments".
	URL string
	// Proc is the node process.
	Proc *itest.Process

	hc *http.Client
}

var listening = regexp.MustCompile(`listening on (http://127\.0\.0\.1:\d+)`)

// Start installs the npm packages if needed (see [Install]), starts server
// name on a free loopback port for the test and waits until it answers. It
// fails tb with what to run when node or the packages cannot be had. The
// server is stopped when tb ends, and its output logged if tb failed.
func Start(tb testing.TB, name string, opts Options) *Server {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := Install(ctx, tb.Logf); err != nil {
		tb.Fatal(err)
	}
	s, err := start(ctx, tb, name, opts)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func start(ctx context.Context, tb testing.TB, name string, opts Options) (*Server, error) {
	dir, err := NodeDir()
	if err != nil {
		return nil, err
	}
	entry := filepath.Join(dir, name+".js")
	if _, err := os.Stat(entry); err != nil {
		return nil, fmt.Errorf("interop: no server %q: %w", name, err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, fmt.Errorf("interop: node is not on PATH: %w; %s", err, installHint)
	}
	env := []string{"NODE_ENV=production", "PORT=0", "KEY_HEADER=" + cmpOr(opts.KeyHeader, DefaultKeyHeader)}
	env = append(env, opts.Env...)
	p := itest.StartT(tb, itest.Spec{Name: name, Path: node, Args: []string{entry}, Dir: dir, Env: env})
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := p.WaitOutput(wctx, "listening on http://"); err != nil {
		return nil, err
	}
	m := listening.FindStringSubmatch(p.Output())
	if m == nil {
		return nil, fmt.Errorf("interop: %s wrote no address; output:\n%s", name, p.Tail(4<<10))
	}
	s := &Server{Name: name, URL: m[1], Proc: p, hc: &http.Client{Timeout: 10 * time.Second}}
	if err := itest.WaitHTTP(wctx, s.URL+"/__health"); err != nil {
		return nil, err
	}
	return s, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Tenant returns a view of s for one tenant: its URL is URL+"/t/"+name, so
// its payments, control and stats are the tenant's own (the harness strips
// the prefix before the middleware sees the request). Tests that share one
// server each take a tenant of their own; the middleware's key store is
// shared, which is safe with distinct keys. name is [A-Za-z0-9_.-], at
// most 200 characters.
func (s *Server) Tenant(name string) *Server {
	t := *s
	t.URL = s.URL + "/t/" + name
	return &t
}

// PaymentsURL is the API the tests call.
func (s *Server) PaymentsURL() string { return s.URL + "/payments" }

// Control is one change to the harness (POST /__control). Zero fields change nothing.
type Control struct {
	// Reset forgets the counters, records and settings first (not the
	// middleware's stored keys).
	Reset bool `json:"reset,omitempty"`
	// Delay is the processing time of a request the handler gets.
	Delay time.Duration `json:"-"`
	// DelayCount limits Delay to the next DelayCount processed requests (0: all).
	DelayCount int `json:"delay_count,omitempty"`
	// Hang makes the handler never answer (an orphaned lock); Unhang stops that.
	Hang   bool `json:"-"`
	Unhang bool `json:"-"`
	// ReleaseAfter409 makes the next processed request take until the
	// tenant has answered this many requests 409: a processing time counted
	// in duplicates, for a client whose clock skips ahead (Temporal's test
	// environment skips retry waits).
	ReleaseAfter409 int `json:"-"`
	// Script queues transient failures answered in front of the middleware:
	// "503,429:1" is 503, then 429 with Retry-After: 1.
	Script string `json:"script,omitempty"`
}

// MarshalJSON encodes c as the harness reads it.
func (c Control) MarshalJSON() ([]byte, error) {
	m := map[string]any{}
	if c.Reset {
		m["reset"] = true
	}
	if c.Delay > 0 {
		m["delay_ms"] = c.Delay.Milliseconds()
		m["delay_count"] = c.DelayCount
	}
	if c.Hang {
		m["hang"] = true
	}
	if c.Unhang {
		m["hang"] = false
	}
	if c.ReleaseAfter409 > 0 {
		m["release_after_409"] = c.ReleaseAfter409
	}
	if c.Script != "" {
		m["script"] = c.Script
	}
	return json.Marshal(m)
}

// Control applies c.
func (s *Server) Control(ctx context.Context, c Control) error {
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/__control", bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.hc.Do(req)
	if err != nil {
		return fmt.Errorf("interop: %s control: %w", s.Name, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("interop: %s control %s: %s %s", s.Name, b, resp.Status, body)
	}
	return nil
}

// ControlT is Control that fails tb on error.
func (s *Server) ControlT(tb testing.TB, c Control) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Control(ctx, c); err != nil {
		tb.Fatal(err)
	}
}

// Stats counts what the server saw (GET /__stats).
type Stats struct {
	// Requests is every request to the API (control and stats excluded).
	Requests int `json:"requests"`
	// HandlerCalls is how many requests reached the payment handler.
	HandlerCalls int `json:"handler_calls"`
	// Records is how many payments were created.
	Records int `json:"records"`
	// DistinctKeys is how many different keys were seen.
	DistinctKeys int `json:"distinct_keys"`
	// Hanging is how many handler calls hang.
	Hanging int `json:"hanging"`
	// ByStatus counts answers by status code.
	ByStatus map[string]int `json:"by_status"`
	// Log is the last 500 requests.
	Log []LogEntry `json:"log"`
}

// LogEntry is one request.
type LogEntry struct {
	Key      string `json:"key"`
	Method   string `json:"method"`
	Path     string `json:"path"`
	Status   int    `json:"status"`
	Ms       int    `json:"ms"`
	Scripted bool   `json:"scripted,omitempty"`
	// Late: the answer was written after the client had gone (an attempt
	// that timed out).
	Late bool `json:"late,omitempty"`
}

// Statuses returns the answers in order, e.g. "503 429 201": "201*" is an
// answer written after the client had gone, "-" a request not answered (yet).
func (st Stats) Statuses() string {
	var parts []string
	for _, e := range st.Log {
		if e.Status == 0 {
			parts = append(parts, "-")
			continue
		}
		s := fmt.Sprint(e.Status)
		if e.Late {
			s += "*"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " ")
}

// Stats returns the counters.
func (s *Server) Stats(ctx context.Context) (Stats, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/__stats", nil)
	if err != nil {
		return Stats{}, err
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return Stats{}, fmt.Errorf("interop: %s stats: %w", s.Name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Stats{}, fmt.Errorf("interop: %s stats: %s", s.Name, resp.Status)
	}
	var st Stats
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return Stats{}, fmt.Errorf("interop: %s stats: %w", s.Name, err)
	}
	return st, nil
}

// StatsT is Stats that fails tb on error.
func (s *Server) StatsT(tb testing.TB) Stats {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := s.Stats(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	return st
}
