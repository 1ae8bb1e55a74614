package activities_test

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	sdktestsuite "go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/internal/input"
	"github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

const token = "tok_live_9f8e7d6c5b4a"

// recorder is an httptest server that records what it receives.
type recorder struct {
	*httptest.Server
	mu       sync.Mutex
	requests []*http.Request
	bodies   [][]byte
	handler  http.HandlerFunc
}

func newRecorder(t *testing.T, h http.HandlerFunc) *recorder {
	r := &recorder{handler: h}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.requests = append(r.requests, req.Clone(req.Context()))
		r.bodies = append(r.bodies, b)
		r.mu.Unlock()
		r.handler(w, req)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.requests)
}

func (r *recorder) last() (*http.Request, []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests[len(r.requests)-1], r.bodies[len(r.bodies)-1]
}

func status(code int, body string, headers ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		for i := 0; i+1 < len(headers); i += 2 {
			w.Header().Set(headers[i], headers[i+1])
		}
		w.WriteHeader(code)
		_, _ = io.WriteString(w, body)
	}
}

// run executes one attempt of the activity in Temporal's activity test
// environment and returns the result, the captured logs and the error.
func run(t *testing.T, cfg activities.Config, req input.Input) (*workflows.Response, string, error) {
	t.Helper()
	return runAfter(t, cfg, req, nil)
}

func appError(t *testing.T, err error) *temporal.ApplicationError {
	t.Helper()
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "want an ApplicationError, got %T: %v", err, err)
	return appErr
}

func req(url string) input.Input {
	return input.Input{Operation: "charge", URL: url, Body: json.RawMessage(`{"amount":42}`), IdempotencyKey: "key-1"}
}

// pieces returns the 8-byte pieces of secrets (every run of
// 8 consecutive bytes, the shortest credential Config accepts) that occur in s.
func pieces(s string, secrets ...string) []string {
	var found []string
	for _, sec := range secrets {
		for i := 0; i+8 <= len(sec); i++ {
			if strings.Contains(s, sec[i:i+8]) {
				found = append(found, sec[i:i+8])
			}
		}
	}
	return found
}

// jsonText returns every string, key and number of the JSON document b,
// decoded (escapes resolved), one per line; "" when b is not one JSON
// document (escapes mean nothing in other text).
func jsonText(b []byte) string {
	if !json.Valid(b) {
		return ""
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return ""
	}
	var sb strings.Builder
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			sb.WriteString(v + "\n")
		case json.Number:
			sb.WriteString(v.String() + "\n")
		case []any:
			for _, e := range v {
				walk(e)
			}
		case map[string]any:
			for k, e := range v {
				sb.WriteString(k + "\n")
				walk(e)
			}
		}
	}
	walk(v)
	return sb.String()
}

// exposed returns, by place, every text the activity let out of one attempt:
// the error message, the Failure (every field), the result (as
// encoded, and its body, raw body and headers decoded) and each log line
// (as written and decoded).
func exposed(err error, resp *workflows.Response, logs string) map[string]string {
	out := map[string]string{}
	if err != nil {
		out["error"] = err.Error()
		if d, ok := workflows.AsFailure(err); ok {
			enc, _ := json.Marshal(d)
			out["details"] = fmt.Sprintf("%+v", d) + "\n" + string(enc) + "\n" + jsonText(enc) + jsonText([]byte(d.Body))
		}
	}
	if resp != nil {
		enc, _ := json.Marshal(resp)
		out["result"] = string(enc) + "\n" + jsonText(enc) + jsonText(resp.Body) + string(resp.Body) + "\n" + string(resp.RawBody) + fmt.Sprint(resp.Headers)
	}
	for i, line := range strings.Split(logs, "\n") {
		if line != "" {
			out[fmt.Sprintf("log line %d", i+1)] = line + "\n" + jsonText([]byte(line))
		}
	}
	return out
}

// assertNoPiece fails when a piece of a secret is in any exposed text.
func assertNoPiece(t *testing.T, err error, resp *workflows.Response, logs string, secrets ...string) {
	t.Helper()
	for where, text := range exposed(err, resp, logs) {
		if p := pieces(text, secrets...); len(p) > 0 {
			t.Errorf("%s holds pieces %q of a credential:\n%s", where, p, text)
		}
	}
}

func hexSHA256(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// runAfter is run for an attempt that follows earlier ones: details are
// the heartbeat details the earlier attempts left (what the activity keeps
// across attempts, as JSON field names).
func runAfter(t *testing.T, cfg activities.Config, r input.Input, details map[string]any) (*workflows.Response, string, error) {
	t.Helper()
	var logs bytes.Buffer
	var s sdktestsuite.WorkflowTestSuite
	s.SetLogger(log.NewStructuredLogger(slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	env := s.NewTestActivityEnvironment()
	if details != nil {
		env.SetHeartbeatDetails(details)
	}
	a, err := activities.New(cfg)
	require.NoError(t, err)
	a.Register(env)
	val, err := env.ExecuteActivity(input.ActivityName, r)
	if err != nil {
		return nil, logs.String(), err
	}
	var resp workflows.Response
	require.NoError(t, val.Get(&resp))
	return &resp, logs.String(), nil
}

// cutBody answers status with a Content-Length of the whole body and
// sends only its first half before closing the connection.
func cutBody(status int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		fmt.Fprintf(buf, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
			status, http.StatusText(status), len(body), body[:len(body)/2])
		_ = buf.Flush()
		_ = conn.Close()
	}
}

// cutAfterCoded answers status with body complete in a content coding
// (a whole zlib, raw DEFLATE or gzip stream), but a Content-Length 10 bytes
// longer than it sends before closing the connection: the message is cut,
// though the coded stream needs no more bytes.
func cutAfterCoded(status int, coding string, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		var enc bytes.Buffer
		var zw io.WriteCloser
		name := coding
		switch coding {
		case "zlib":
			zw, name = zlib.NewWriter(&enc), "deflate"
		case "raw deflate":
			zw, _ = flate.NewWriter(&enc, flate.DefaultCompression)
			name = "deflate"
		default:
			zw = gzip.NewWriter(&enc)
		}
		_, _ = zw.Write([]byte(body))
		_ = zw.Close()
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		fmt.Fprintf(buf, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Encoding: %s\r\nContent-Length: %d\r\n\r\n",
			status, http.StatusText(status), name, enc.Len()+10)
		_, _ = buf.Write(enc.Bytes())
		_ = buf.Flush()
		_ = conn.Close()
	}
}

// rawResponse answers with a hand-written status line, headers and body,
// then closes the connection (close-delimited when headers carry no
// Content-Length).
func rawResponse(status int, headers string, body []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		fmt.Fprintf(buf, "HTTP/1.1 %d %s\r\n%s\r\n", status, http.StatusText(status), headers)
		_, _ = buf.Write(body)
		_ = buf.Flush()
		_ = conn.Close()
	}
}

// syncBuffer is a bytes.Buffer safe for the logger's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) take() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.b.String()
	s.b.Reset()
	return out
}

// fuzzAnswer is what the fuzz server answers to the current input.
type fuzzAnswer struct {
	status   int
	headers  string // "Name: value" lines
	body     []byte
	echoAt   int
	echoMode byte
}

// qsecret stands in a query value of the URLs the fuzz server sends
// ("$QV" in a Location or Content-Location header, and the 307 of a path
// under /hop/): none of its pieces may reach any output.
const qsecret = "qsv_3c4d5e6f7a8b9c0d"

// qvInPath reports whether the fuzz server's headers put "$QV" in the
// path of a header value that is a clean URL up to it ("Location: $QV",
// "Location: /r/$QV"): qsecret is then a path segment, shown as paths are
// (a monitor's host/path), not a query value. After a '?' or '#', or after
// any byte a clean URL does not have (space, control, non-ASCII, '%'), it
// is one, or may be: redact.URL refuses to show what does not parse
// cleanly.
func qvInPath(headers string) bool {
	clean := func(r rune) bool {
		return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-._~/:@!&'()*+,;=", r)
	}
	for line := range strings.SplitSeq(headers, "\n") {
		name, value, ok := strings.Cut(line, ":")
		if !ok || strings.Contains(name, "$QV") {
			continue
		}
		before, _, ok := strings.Cut(value, "$QV")
		if ok && strings.IndexFunc(strings.TrimLeft(before, " \t"), func(r rune) bool { return !clean(r) }) < 0 {
			return true
		}
	}
	return false
}

// cut reports whether the answer breaks off its body: it announces more
// bytes than it sends, then closes the connection (statuses that carry no
// body cannot be cut).
func (a fuzzAnswer) cut() bool {
	return a.echoMode&0x20 != 0 && a.status != http.StatusNoContent && a.status != http.StatusNotModified
}

// coding is the content coding the answer's body is sent in, asked for or
// not: none, gzip when the request accepts it, deflate, or br (bytes that
// are not decodable here).
func (a fuzzAnswer) coding(r *http.Request) string {
	switch a.echoMode >> 6 {
	case 1:
		if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			return "gzip"
		}
	case 2:
		return "deflate"
	case 3:
		return "br"
	}
	return ""
}

func encodeAs(coding string, b []byte) []byte {
	var buf bytes.Buffer
	switch coding {
	case "gzip":
		w := gzip.NewWriter(&buf)
		_, _ = w.Write(b)
		_ = w.Close()
	case "deflate":
		w := zlib.NewWriter(&buf)
		_, _ = w.Write(b)
		_ = w.Close()
	case "br":
		buf.WriteByte(0x1b)
		buf.Write(b)
	default:
		return b
	}
	return buf.Bytes()
}

func (a fuzzAnswer) write(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/hop/") {
		w.Header().Set("Location", "/hopped?X-Amz-Signature="+qsecret)
		w.WriteHeader(http.StatusTemporaryRedirect)
		return
	}
	e := echo(r, a.echoMode, a.echoAt)
	for line := range strings.SplitSeq(a.headers, "\n") {
		name, value, ok := strings.Cut(line, ":")
		if !ok || name == "" {
			continue
		}
		name = strings.TrimSpace(name)
		qv := ""
		if c := http.CanonicalHeaderKey(name); c == "Location" || c == "Content-Location" {
			qv = qsecret
		}
		value = strings.TrimSpace(strings.NewReplacer("$ECHO", e, "$QV", qv).Replace(value))
		w.Header().Add(name, value)
	}
	if a.echoMode&0x08 != 0 {
		w.Header().Set("X-Request-Id", e)
	}
	if a.echoMode&0x10 != 0 {
		w.Header().Set("Location", "/next?token="+e)
	}
	at := a.echoAt % (len(a.body) + 1)
	body := make([]byte, 0, len(a.body)+len(e))
	body = append(append(append(body, a.body[:at]...), e...), a.body[at:]...)
	if c := a.coding(r); c != "" {
		w.Header().Set("Content-Encoding", c)
		body = encodeAs(c, body)
	}
	if !a.cut() {
		w.WriteHeader(a.status)
		_, _ = w.Write(body)
		return
	}
	conn, buf, err := w.(http.Hijacker).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	fmt.Fprintf(buf, "HTTP/1.1 %d %s\r\n", a.status, http.StatusText(a.status))
	h := w.Header().Clone()
	h.Set("Content-Length", fmt.Sprint(len(body)+10))
	_ = h.Write(buf)
	_, _ = buf.WriteString("\r\n")
	_, _ = buf.Write(body)
	_ = buf.Flush()
}

// fakeClock is a Config.Now that moves only when told to.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// sharedRate is a Config.SharedRate with a fixed limit (and the
// worker's share of it) on one queue, and the workers polling it,
// recording what it is told.
type sharedRate struct {
	queue        string
	limit, share float64
	workers      int // polling queue (0: 1)

	mu      sync.Mutex
	records []string
}

func (s *sharedRate) Limit(q string) (limit, share float64, ok bool) {
	return s.limit, s.share, q == s.queue && s.limit > 0
}

func (s *sharedRate) Workers(q string) int {
	if q != s.queue {
		return 1
	}
	return max(s.workers, 1)
}

func (s *sharedRate) Record(q string, throttled, failed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.records = append(s.records, fmt.Sprintf("%s throttled=%v failed=%v", q, throttled, failed))
}

// counting is a client.MetricsHandler that sums counters and collects
// timer values by name and this package's labels, and keeps every label
// value it was given.
type counting struct {
	mu     *sync.Mutex
	tags   map[string]string
	counts map[string]int64
	timers map[string][]time.Duration
	values map[string]bool
	gauges map[string]float64
}

func newCounting() *counting {
	return &counting{mu: &sync.Mutex{}, tags: map[string]string{}, counts: map[string]int64{},
		timers: map[string][]time.Duration{}, values: map[string]bool{}, gauges: map[string]float64{}}
}

func (c *counting) WithTags(tags map[string]string) client.MetricsHandler {
	merged := maps.Clone(c.tags)
	maps.Copy(merged, tags)
	c.mu.Lock()
	for _, v := range tags {
		c.values[v] = true
	}
	c.mu.Unlock()
	return &counting{mu: c.mu, tags: merged, counts: c.counts, timers: c.timers, values: c.values, gauges: c.gauges}
}

// key is name{label=value,...} with this package's labels, sorted.
func (c *counting) key(name string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(c.tags)) {
		if k == "origin" || k == "operation" || k == "outcome" || k == "error_type" || k == "reason" {
			parts = append(parts, k+"="+c.tags[k])
		}
	}
	return name + "{" + strings.Join(parts, ",") + "}"
}

func (c *counting) Counter(name string) client.MetricsCounter {
	return counter{c, c.key(name)}
}

func (c *counting) Gauge(name string) client.MetricsGauge {
	return gauge{c, c.key(name)}
}

// gaugeValues returns the last value of each gauge.
func (c *counting) gaugeValues() map[string]float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.gauges)
}

type gauge struct {
	c   *counting
	key string
}

func (g gauge) Update(v float64) {
	g.c.mu.Lock()
	defer g.c.mu.Unlock()
	g.c.gauges[g.key] = v
}

func (c *counting) Timer(name string) client.MetricsTimer {
	return timer{c, c.key(name)}
}

// snapshot returns copies of the counters and timers.
func (c *counting) snapshot() (map[string]int64, map[string][]time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.counts), maps.Clone(c.timers)
}

type counter struct {
	c   *counting
	key string
}

func (k counter) Inc(n int64) {
	k.c.mu.Lock()
	defer k.c.mu.Unlock()
	k.c.counts[k.key] += n
}

type timer struct {
	c   *counting
	key string
}

func (k timer) Record(d time.Duration) {
	k.c.mu.Lock()
	defer k.c.mu.Unlock()
	k.c.timers[k.key] = append(k.c.timers[k.key], d)
}

// followWorkflow posts to url and follows the operation with opts.
func followWorkflow(ctx workflow.Context, url string, opts workflows.FollowOptions) (*workflows.Response, error) {
	return workflows.Call(ctx, workflows.Request{Operation: "transfer", URL: url, Body: json.RawMessage(`{"amount":100}`), Follow: &opts})
}

func preset(lr func() activities.LongRunning) func(string) activities.Convention {
	return func(string) activities.Convention {
		c := activities.IETFConvention()
		c.LongRunning = lr()
		return c
	}
}

func google(base string) activities.Convention {
	c := activities.IETFConvention()
	c.LongRunning = activities.GoogleOperation(base + "/v1/")
	return c
}

// followed is what a follow against a handler gave: the result or error,
// the polls, and every request with the environment's time.
type followed struct {
	resp *workflows.Response
	err  error
	f    workflows.Failure
	n    int
	log  []string
	at   []time.Time
}

// follow runs followWorkflow against one server: POST is the start
// (start), anything else a poll (poll).
func follow(t *testing.T, conv activities.Convention, start, poll http.HandlerFunc, fo workflows.FollowOptions, cfg activities.Config) followed {
	t.Helper()
	var mu sync.Mutex
	var res followed
	env := testsuite.NewEnv(t)
	srv := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		res.log = append(res.log, r.Method+" "+r.URL.RequestURI())
		res.at = append(res.at, env.Now())
		mu.Unlock()
		if r.Method == http.MethodPost && r.URL.Path == "/transfers" {
			start(w, r)
			return
		}
		mu.Lock()
		res.n++
		mu.Unlock()
		poll(w, r)
	})
	cfg.Conventions = map[string]activities.Convention{srv.URL: conv}
	testsuite.Register(t, env, &testsuite.Server{URL: srv.URL}, cfg)
	env.RegisterWorkflow(followWorkflow)
	env.ExecuteWorkflow(followWorkflow, srv.URL+"/transfers", fo)
	if res.err = env.GetWorkflowError(); res.err == nil {
		require.NoError(t, env.GetWorkflowResult(&res.resp))
	} else {
		res.f, _ = workflows.AsFailure(res.err)
	}
	return res
}

func conv(l activities.LongRunning) activities.Convention {
	c := activities.IETFConvention()
	c.LongRunning = l
	return c
}
