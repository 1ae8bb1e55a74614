package integration_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/harness/itest"
	"github.com/idemhttp/temporal-idempotent-http/internal/idemkey"
	"github.com/idemhttp/temporal-idempotent-http/internal/input"
	"github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// ctxT returns a context that ends after d or when the test ends.
func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// uniqueName returns a name no other test or run uses, readable in the Web
// UI: "<test name>-<what>-<random>", for task queues and workflow IDs.
func uniqueName(t testing.TB, what string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return unsafeChars.ReplaceAllString(t.Name(), "_") + "-" + what + "-" + hex.EncodeToString(b)
}

// workerOptions configure a worker binary.
type workerOptions struct {
	TaskQueue string
	// Origins are allowed (--allow-origin).
	Origins []string
	// Token, if set, is the worker's API_TOKEN.
	Token string
	// Identity is --identity (default: a unique one).
	Identity string
	// Server, if set, is the Temporal server the worker connects to
	// (default: the shared dev server).
	Server *temporalServer
}

// temporalServer is a Temporal server other than the shared dev server:
// the environment that points a process at it and a client of it.
type temporalServer struct {
	Env    []string
	Client client.Client
}

// startWorker runs the worker binary against the dev server (or o.Server)
// and returns once it polls its task queue. It is stopped when the test
// ends.
func startWorker(t testing.TB, o workerOptions) *itest.Process {
	t.Helper()
	return startWorkerWith(t, o, nil)
}

// startWorkerWith is startWorker with more environment and arguments.
func startWorkerWith(t testing.TB, o workerOptions, env []string, args ...string) *itest.Process {
	t.Helper()
	if o.Identity == "" {
		o.Identity = uniqueName(t, "worker")
	}
	server := &temporalServer{Env: dev.Env(), Client: tc}
	if o.Server != nil {
		server = o.Server
	}
	env = slices.Concat(server.Env, []string{"API_TOKEN=" + o.Token, "API_TOKEN_ORIGIN=", "ORIGINS_FILE=", "ALLOW_ORIGINS=", "TASK_QUEUE=", "METRICS_ADDR="}, env)
	p := itest.StartT(t, itest.Spec{
		Name: "worker " + o.Identity, Path: bins.Worker, Env: env,
		Args: append([]string{"--task-queue", o.TaskQueue, "--allow-origin", strings.Join(o.Origins, ","), "--identity", o.Identity}, args...),
	})
	if err := itest.WaitForPollers(ctxT(t, 30*time.Second), server.Client, o.TaskQueue, o.Identity); err != nil {
		t.Fatalf("%v\nworker %s; output:\n%s", err, p.State(), p.Tail(8<<10))
	}
	return p
}

// startInProcessWorker runs the activity and the ready workflow in the test
// process (under the race detector with -race), allowed to call origins, and
// returns once it polls. It is stopped when the test ends.
func startInProcessWorker(t testing.TB, taskQueue string, origins ...string) {
	t.Helper()
	acts, err := activities.New(activities.Config{AllowedOrigins: origins})
	if err != nil {
		t.Fatal(err)
	}
	identity := uniqueName(t, "in-process")
	// The worker's log goes to the test log if the test fails.
	var logs syncBuffer
	c, err := client.NewClientFromExisting(tc, client.Options{
		Logger: sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))),
	})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, c, acts, taskQueue, identity, &logs)
}

// runWorker runs acts and the ready workflow on taskQueue as identity, on
// client c, and returns once it polls. The worker and c are stopped when
// the test ends; logs, the client's log, goes to the test log if the test
// failed.
func runWorker(t testing.TB, c client.Client, acts *activities.Activities, taskQueue, identity string, logs *syncBuffer) {
	t.Helper()
	w := worker.New(c, taskQueue, worker.Options{Identity: identity})
	acts.Register(w)
	workflows.Register(w)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		w.Stop()
		c.Close()
		if t.Failed() {
			t.Logf("worker %s log:\n%s", identity, logs.String())
		}
	})
	if err := itest.WaitForPollers(ctxT(t, 30*time.Second), tc, taskQueue, identity); err != nil {
		t.Fatal(err)
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startDemoAPI runs the demoapi binary on a free port with args and returns
// it with its base URL once /healthz answers. It is stopped when the test ends.
func startDemoAPI(t testing.TB, args ...string) (*itest.Process, string) {
	t.Helper()
	port, err := itest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + itest.HostPort(port)
	p := itest.StartT(t, itest.Spec{
		Name: "demoapi", Path: bins.DemoAPI, Env: []string{"API_TOKEN="},
		Args: append([]string{"--addr", itest.HostPort(port)}, args...),
	})
	if err := itest.WaitHTTP(ctxT(t, 30*time.Second), base+"/healthz"); err != nil {
		t.Fatalf("%v\ndemoapi %s; output:\n%s", err, p.State(), p.Tail(8<<10))
	}
	return p, base
}

// apiStats returns GET base/stats.
func apiStats(t testing.TB, base string) testsuite.Stats {
	t.Helper()
	resp, err := http.Get(base + "/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st testsuite.Stats
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s/stats: %s", base, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatalf("GET %s/stats: %v", base, err)
	}
	return st
}

// start starts the ready workflow with req under workflowID on taskQueue.
func start(t testing.TB, ctx context.Context, taskQueue, workflowID string, req workflows.Request) client.WorkflowRun {
	t.Helper()
	return startOn(t, ctx, tc, taskQueue, workflowID, req)
}

// startOn is start on the Temporal server of c.
func startOn(t testing.TB, ctx context.Context, c client.Client, taskQueue, workflowID string, req workflows.Request) client.WorkflowRun {
	t.Helper()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: workflowID, TaskQueue: taskQueue,
		// A guard: nothing here should run for long.
		WorkflowExecutionTimeout: 5 * time.Minute,
		StaticSummary:            input.Summary("POST", req.URL, req.Operation),
	}, workflows.WorkflowName, req)
	if err != nil {
		t.Fatalf("starting workflow %s: %v", workflowID, err)
	}
	return run
}

// call runs the ready workflow with req to its end.
func call(t testing.TB, ctx context.Context, taskQueue, workflowID string, req workflows.Request) (client.WorkflowRun, *workflows.Response, error) {
	t.Helper()
	run := start(t, ctx, taskQueue, workflowID, req)
	var resp workflows.Response
	if err := run.Get(ctx, &resp); err != nil {
		return run, nil, err
	}
	return run, &resp, nil
}

// keyOf is the key the ready workflow derives for operation in workflowID.
func keyOf(workflowID, operation string) string {
	return idemkey.Derive(dev.Namespace, workflowID, operation)
}

// checkStats compares the counters the test cares about (a negative want
// field is not checked).
func checkStats(t testing.TB, got testsuite.Stats, want testsuite.Stats) {
	t.Helper()
	type field struct {
		name      string
		got, want int
	}
	for _, f := range []field{
		{"requests", got.Requests, want.Requests},
		{"distinct keys", got.DistinctKeys, want.DistinctKeys},
		{"records", got.Records, want.Records},
		{"replays", got.Replays, want.Replays},
		{"in-flight 409s", got.InFlight, want.InFlight},
		{"failures", got.Failures, want.Failures},
	} {
		if f.want >= 0 && f.got != f.want {
			t.Errorf("reference API: %s = %d, want %d (all stats: %+v)", f.name, f.got, f.want, got)
		}
	}
}

// anyStats is a Stats that checks nothing; set the fields to check.
func anyStats() testsuite.Stats {
	return testsuite.Stats{Requests: -1, DistinctKeys: -1, Records: -1, Replays: -1, InFlight: -1, Failures: -1}
}

// starterRun is how one run of the starter binary ended.
type starterRun struct {
	Stdout, Stderr string
	// Code is the exit status.
	Code int
	Took time.Duration
}

// runStarter runs the starter binary against the dev server with
// --task-queue taskQueue and args, and waits for it to exit.
func runStarter(t testing.TB, ctx context.Context, taskQueue string, args ...string) starterRun {
	t.Helper()
	cmd := exec.CommandContext(ctx, bins.Starter, append([]string{"--task-queue", taskQueue}, args...)...)
	cmd.Env = append(append(os.Environ(), dev.Env()...), "TASK_QUEUE=", "TEMPORAL_UI_URL=")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	began := time.Now()
	err := cmd.Run()
	r := starterRun{Stdout: stdout.String(), Stderr: stderr.String(), Took: time.Since(began)}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("running the starter: %v\nstdout:\n%s\nstderr:\n%s", err, r.Stdout, r.Stderr)
	}
	if ctx.Err() != nil {
		t.Fatalf("the starter did not exit in time: %v\nstdout:\n%s\nstderr:\n%s", ctx.Err(), r.Stdout, r.Stderr)
	}
	r.Code = cmd.ProcessState.ExitCode()
	t.Logf("starter exited with status %d after %s\nstdout: %s\nstderr: %s", r.Code, r.Took.Round(time.Millisecond),
		strings.TrimSpace(r.Stdout), strings.TrimSpace(r.Stderr))
	return r
}

// history returns every event of a workflow run.
func history(t testing.TB, ctx context.Context, workflowID, runID string) []*historypb.HistoryEvent {
	t.Helper()
	return historyOn(t, ctx, tc, workflowID, runID)
}

// historyOn is history on the Temporal server of c.
func historyOn(t testing.TB, ctx context.Context, c client.Client, workflowID, runID string) []*historypb.HistoryEvent {
	t.Helper()
	it := c.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var events []*historypb.HistoryEvent
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatalf("history of %s: %v", workflowID, err)
		}
		events = append(events, ev)
	}
	return events
}

// dump returns everything msgs say, for a search for secrets: each message
// in protojson (failure messages, metadata; payloads base64-encoded there),
// then the data of every payload in it decoded, as stored and, for a JSON
// payload, every string it holds unescaped.
func dump(t testing.TB, msgs ...proto.Message) []byte {
	t.Helper()
	var b bytes.Buffer
	for _, m := range msgs {
		j, err := protojson.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(j)
		b.WriteByte('\n')
		eachPayload(m.ProtoReflect(), func(p *commonpb.Payload) {
			b.Write(p.GetData())
			b.WriteByte('\n')
			var v any
			if json.Unmarshal(p.GetData(), &v) == nil {
				eachString(v, func(s string) {
					b.WriteString(s)
					b.WriteByte('\n')
				})
			}
		})
	}
	return b.Bytes()
}

// eachPayload calls f with every Payload in m, at any depth.
func eachPayload(m protoreflect.Message, f func(*commonpb.Payload)) {
	if p, ok := m.Interface().(*commonpb.Payload); ok {
		f(p)
		return
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsMap():
			if fd.MapValue().Message() != nil {
				v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
					eachPayload(mv.Message(), f)
					return true
				})
			}
		case fd.IsList():
			if fd.Message() != nil {
				for i := range v.List().Len() {
					eachPayload(v.List().Get(i).Message(), f)
				}
			}
		case fd.Message() != nil:
			eachPayload(v.Message(), f)
		}
		return true
	})
}

// eachString calls f with every string (keys included) in a decoded JSON value.
func eachString(v any, f func(string)) {
	switch v := v.(type) {
	case string:
		f(v)
	case []any:
		for _, e := range v {
			eachString(e, f)
		}
	case map[string]any:
		for k, e := range v {
			f(k)
			eachString(e, f)
		}
	}
}

// secretPiece returns the first 8-byte piece of secret found in text and
// where, or "" and -1.
func secretPiece(text []byte, secret string) (string, int) {
	for i := 0; i+8 <= len(secret); i++ {
		if j := bytes.Index(text, []byte(secret[i:i+8])); j >= 0 {
			return secret[i : i+8], j
		}
	}
	return "", -1
}

// checkNoSecret fails t if text (what is named by where) holds an 8-byte
// piece of secret.
func checkNoSecret(t testing.TB, where string, text []byte, secret string) {
	t.Helper()
	if piece, i := secretPiece(text, secret); i >= 0 {
		t.Errorf("%s holds %q, a piece of the secret: ...%q...", where, piece, text[max(0, i-120):min(len(text), i+60)])
	}
}

// logRecords returns the JSON log records (one a line, as the worker and
// the starter write them) in out whose message is msg.
func logRecords(out, msg string) []map[string]any {
	var recs []map[string]any
	for line := range strings.SplitSeq(out, "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == msg {
			recs = append(recs, rec)
		}
	}
	return recs
}

// starterOutput is what the starter prints on success (cmd/starter's Output).
type starterOutput struct {
	WorkflowID     string          `json:"workflow_id"`
	RunID          string          `json:"run_id"`
	IdempotencyKey string          `json:"idempotency_key"`
	Status         int             `json:"status"`
	Attempts       int32           `json:"attempts"`
	Replayed       bool            `json:"replayed"`
	Body           json.RawMessage `json:"body,omitempty"`
	BodyOmitted    bool            `json:"body_omitted,omitempty"`
}

func parseStarterOutput(t testing.TB, res starterRun) starterOutput {
	t.Helper()
	var out starterOutput
	if err := json.Unmarshal([]byte(res.Stdout), &out); err != nil {
		t.Fatalf("starter stdout %q: %v", res.Stdout, err)
	}
	return out
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func messages(events []*historypb.HistoryEvent) []proto.Message {
	ms := make([]proto.Message, len(events))
	for i, ev := range events {
		ms[i] = ev
	}
	return ms
}

// echoBody is an error body that echoes the Authorization header auth so
// that token, inside it, straddles byte 1024 of the body, where error
// snippets are cut; as text or as JSON.
func echoBody(auth, token string, asJSON bool) []byte {
	prefix, mid, tail := "upstream failed ", "; the request had Authorization: ", "; nothing was charged; "+strings.Repeat("y", 300)
	if asJSON {
		prefix, mid, tail = `{"error":"invalid_request","detail":"`, ` the request had Authorization: `, `","more":"`+strings.Repeat("y", 300)+`"}`
	}
	at := max(strings.Index(auth, token), 0)
	pad := 1024 - len(token)/2 - len(prefix) - len(mid) - at
	return []byte(prefix + strings.Repeat("x", pad) + mid + auth + tail)
}

var body = json.RawMessage(`{"amount":42,"currency":"EUR"}`)

// decode decodes a string payload ("" for none).
func decode(t testing.TB, p *commonpb.Payload) string {
	t.Helper()
	if p == nil {
		return ""
	}
	var s string
	if err := converter.GetDefaultDataConverter().FromPayload(p, &s); err != nil {
		t.Fatalf("decoding payload: %v", err)
	}
	return s
}

// scrape returns the metric families served at url, and the text.
func scrape(t testing.TB, url string) (map[string]*dto.MetricFamily, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s, %v", url, resp.Status, err)
	}
	fams, err := itest.ParseMetrics(b)
	if err != nil {
		t.Fatalf("GET %s: not Prometheus' text format: %v\n%s", url, err, b)
	}
	return fams, string(b)
}

// labelsOf returns a metric's labels as a map.
func labelsOf(m *dto.Metric) map[string]string {
	l := map[string]string{}
	for _, lp := range m.GetLabel() {
		l[lp.GetName()] = lp.GetValue()
	}
	return l
}

// series returns the metrics of family name whose labels include want.
func series(fams map[string]*dto.MetricFamily, name string, want map[string]string) []*dto.Metric {
	var out []*dto.Metric
next:
	for _, m := range fams[name].GetMetric() {
		l := labelsOf(m)
		for k, v := range want {
			if l[k] != v {
				continue next
			}
		}
		out = append(out, m)
	}
	return out
}

// checkEachOnce checks that srv did the work of each key of want exactly
// once and of no other key (one record per key, as many distinct keys as
// want holds), and returns its stats.
func checkEachOnce(t *testing.T, srv *testsuite.Server, want map[string]bool) testsuite.Stats {
	t.Helper()
	st := srv.Stats()
	checkStats(t, st, testsuite.Stats{Requests: -1, DistinctKeys: len(want), Records: len(want), Replays: -1, InFlight: -1, Failures: -1})
	seen := map[string]bool{}
	for _, rec := range srv.Records() {
		switch {
		case seen[rec.IdempotencyKey]:
			t.Errorf("key %s has two records: the work was done twice", rec.IdempotencyKey)
		case !want[rec.IdempotencyKey]:
			t.Errorf("record with unknown key %s", rec.IdempotencyKey)
		}
		seen[rec.IdempotencyKey] = true
	}
	return st
}
