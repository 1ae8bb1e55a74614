package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/testsuite"
)

// refChildEnv, set to a testsuite.Async in JSON, makes the bench command a
// reference server of its own process (ServeReferenceChild): the
// longrunning section measures the worker's process, so the server its
// operations poll runs outside it.
const refChildEnv = "IDEMHTTP_BENCH_REFERENCE_ASYNC"

// ReferenceChild reports whether this process was started by the
// longrunning section as its reference server; cmd/bench then calls
// ServeReferenceChild instead of measuring.
func ReferenceChild() bool { return os.Getenv(refChildEnv) != "" }

// ServeReferenceChild serves a testsuite.Server with the Async of
// refChildEnv on the listener it inherits as file descriptor 3, wrapped in
// an opClock (GET /bench/clock answers its snapshot; GET /bench/records
// the records per key, withRecordsPerKey), until standard input
// closes (the bench process is done with it, or ended).
func ServeReferenceChild() error {
	var a testsuite.Async
	if err := json.Unmarshal([]byte(os.Getenv(refChildEnv)), &a); err != nil {
		return fmt.Errorf("%s: %w", refChildEnv, err)
	}
	l, err := net.FileListener(os.NewFile(3, "listener"))
	if err != nil {
		return fmt.Errorf("the inherited listener: %w", err)
	}
	clock := newOpClock()
	srv := testsuite.NewServer(testsuite.Options{Async: &a})
	hs := &http.Server{Handler: withRecordsPerKey(srv, clock.wrap(srv)), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(l) }()
	_, _ = io.Copy(io.Discard, os.Stdin)
	return hs.Close()
}

// opClock timestamps, as the reference server receives them, each
// operation's start request and every GET of its monitor, on one
// monotonic clock.
type opClock struct {
	mu    sync.Mutex
	t0    time.Time
	snap  ClockSnapshot
	since func() time.Duration
}

// ClockSnapshot is what an opClock recorded: per monitor URL, when the
// request that was accepted with it arrived, and when each GET of it did,
// as durations since the clock started.
type ClockSnapshot struct {
	Accepted map[string]time.Duration   `json:"accepted"`
	Polls    map[string][]time.Duration `json:"polls"`
}

func newOpClock() *opClock {
	c := &opClock{t0: time.Now(), snap: ClockSnapshot{Accepted: map[string]time.Duration{}, Polls: map[string][]time.Duration{}}}
	c.since = func() time.Duration { return time.Since(c.t0) }
	return c
}

// wrap records h's requests: a GET of /operations/… as a poll of that
// monitor, a POST answered with a Location as its acceptance (the first
// time only: a replay names the same monitor). GET /bench/clock answers
// the snapshot.
func (c *opClock) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Path == "/bench/clock" {
			c.mu.Lock()
			b, err := json.Marshal(c.snap)
			c.mu.Unlock()
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(b)
			return
		}
		c.mu.Lock()
		at := c.since()
		if r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/operations/") {
			m := "http://" + r.Host + r.URL.Path
			c.snap.Polls[m] = append(c.snap.Polls[m], at)
		}
		c.mu.Unlock()
		h.ServeHTTP(w, r)
		if r.Method == http.MethodPost {
			if loc := w.Header().Get("Location"); loc != "" {
				c.mu.Lock()
				if _, ok := c.snap.Accepted[loc]; !ok {
					c.snap.Accepted[loc] = at
				}
				c.mu.Unlock()
			}
		}
	})
}

// recordsPath answers how many times the reference server did each key's
// work: the child runs in a process of its own, so the bench cannot call
// Server.Records.
const recordsPath = "/bench/records"

// withRecordsPerKey answers GET recordsPath with srv's records counted per
// idempotency key (JSON: key → count) and hands every other request to next.
func withRecordsPerKey(srv *testsuite.Server, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != recordsPath {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(recordsPerKey(srv.Records()))
	})
}

// recordsPerKey counts records by their idempotency key.
func recordsPerKey(records []testsuite.Record) map[string]int {
	n := make(map[string]int, len(records))
	for _, rec := range records {
		n[rec.IdempotencyKey]++
	}
	return n
}

// refServer is a reference server child process (ServeReferenceChild).
type refServer struct {
	URL string
	// began is when the child was started: its opClock's durations are
	// since a moment a few milliseconds later.
	began time.Time
	l     *net.TCPListener
	cmd   *exec.Cmd
	stdin io.WriteCloser
	log   *os.File
	http  *http.Client
}

// listenRef opens a reference server's loopback listener, so that its URL
// is known (and allowed by the worker) before the server starts.
func listenRef() (*refServer, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	return &refServer{URL: "http://" + l.Addr().String(), l: l.(*net.TCPListener), http: &http.Client{Timeout: 30 * time.Second}}, nil
}

// start starts this executable as the reference server playing a on r's
// listener, its standard error to logDir/name-refserver.log, and waits
// until it answers.
func (r *refServer) start(ctx context.Context, a testsuite.Async, logDir, name string) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cfg, err := json.Marshal(a)
	if err != nil {
		return err
	}
	lf, err := r.l.File()
	if err != nil {
		return err
	}
	defer lf.Close()
	if r.log, err = os.Create(filepath.Join(logDir, name+"-refserver.log")); err != nil {
		return err
	}
	r.cmd = exec.Command(exe)
	r.cmd.Env = append(os.Environ(), refChildEnv+"="+string(cfg))
	r.cmd.Stderr, r.cmd.ExtraFiles = r.log, []*os.File{lf}
	if r.stdin, err = r.cmd.StdinPipe(); err != nil {
		return err
	}
	r.began = time.Now()
	if err := r.cmd.Start(); err != nil {
		return fmt.Errorf("starting the reference server: %w", err)
	}
	// The child serves the listener from now on.
	_ = r.l.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := r.Stats(ctx)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("the reference server does not answer (see %s): %w", r.log.Name(), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// get decodes the JSON answer to GET path.
func (r *refServer) get(ctx context.Context, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.URL+path, nil)
	if err != nil {
		return err
	}
	resp, err := r.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// Stats are the reference server's counters.
func (r *refServer) Stats(ctx context.Context) (testsuite.Stats, error) {
	var st testsuite.Stats
	return st, r.get(ctx, "/stats", &st)
}

// Clock is the reference server's opClock snapshot.
func (r *refServer) Clock(ctx context.Context) (ClockSnapshot, error) {
	var s ClockSnapshot
	return s, r.get(ctx, "/bench/clock", &s)
}

// RecordsPerKey is how many times the reference server did each key's
// work (withRecordsPerKey).
func (r *refServer) RecordsPerKey(ctx context.Context) (map[string]int, error) {
	var n map[string]int
	return n, r.get(ctx, recordsPath, &n)
}

// Close ends the child (closing its standard input; killing it if it has
// not exited 5 s later), its listener if it never started, and its log.
func (r *refServer) Close() error {
	if r.cmd == nil || r.cmd.Process == nil {
		return r.l.Close()
	}
	_ = r.stdin.Close()
	done := make(chan error, 1)
	go func() { done <- r.cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(5 * time.Second):
		_ = r.cmd.Process.Kill()
		err = <-done
	}
	if err != nil {
		err = fmt.Errorf("reference server: %w", err)
	}
	return errors.Join(err, r.log.Close())
}
