package integration_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/internal/itest"
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
}

// startWorker runs the worker binary against the dev server and returns once
// it polls its task queue. It is stopped when the test ends.
func startWorker(t testing.TB, o workerOptions) *itest.Process {
	t.Helper()
	if o.Identity == "" {
		o.Identity = uniqueName(t, "worker")
	}
	env := append(dev.Env(), "API_TOKEN="+o.Token, "ALLOW_ORIGINS=", "TASK_QUEUE=")
	p := itest.StartT(t, itest.Spec{
		Name: "worker " + o.Identity, Path: bins.Worker, Env: env,
		Args: []string{"--task-queue", o.TaskQueue, "--allow-origin", strings.Join(o.Origins, ","), "--identity", o.Identity},
	})
	if err := itest.WaitForPollers(ctxT(t, 30*time.Second), tc, o.TaskQueue, o.Identity); err != nil {
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
			t.Logf("in-process worker %s log:\n%s", identity, logs.String())
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
	run, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: workflowID, TaskQueue: taskQueue,
		// A guard: nothing here should run for long.
		WorkflowExecutionTimeout: 5 * time.Minute,
		StaticSummary:            workflows.Summary("POST", req.URL, req.Operation),
	}, workflows.WorkflowName, req)
	if err != nil {
		t.Fatalf("starting workflow %s: %v", workflowID, err)
	}
	return run
}

// call runs the ready workflow with req to its end.
func call(t testing.TB, ctx context.Context, taskQueue, workflowID string, req workflows.Request) (client.WorkflowRun, *activities.Response, error) {
	t.Helper()
	run := start(t, ctx, taskQueue, workflowID, req)
	var resp activities.Response
	if err := run.Get(ctx, &resp); err != nil {
		return run, nil, err
	}
	return run, &resp, nil
}

// keyOf is the key the ready workflow derives for operation in workflowID.
func keyOf(workflowID, operation string) string {
	return workflows.DeriveKey(dev.Namespace, workflowID, operation)
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
