// Package cluster_test runs the repository's real binaries, two worker
// processes and the reference API, against a production-shaped Temporal
// service (temporal-server on PostgreSQL, from harness/cluster; processes,
// builds and waits from harness/itest), and checks
// what issue 5 promises: idempotency holds across processes and machines,
// when a worker dies in the middle of a request, and under load shared by
// several workers.
package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/idemhttp/temporal-idempotent-http/harness/cluster"
	"github.com/idemhttp/temporal-idempotent-http/harness/itest"
	"github.com/idemhttp/temporal-idempotent-http/internal/idemkey"
	"github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// taskQueue is the queue both worker processes poll.
const taskQueue = "idempotent-http-cluster"

// Scenario sizes and timings.
const (
	loadWorkflows   = 200
	loadFailureRate = 0.3
	// killProcessing is how long the API works on the request that is in
	// flight when its worker is killed; killAttemptTimeout is the activity's
	// StartToCloseTimeout there, after which Temporal gives the attempt to
	// the other worker. The work must be done by then, so the retry is
	// answered from the stored response.
	killProcessing     = 3 * time.Second
	killAttemptTimeout = 5 * time.Second
)

// stack is the cluster, the client, the built binaries and the worker
// processes by identity.
type stack struct {
	c         *cluster.Cluster
	cl        client.Client
	workerBin string
	apiBin    string
	allow     string // ALLOW_ORIGINS of the workers: every API of the test
	apiPorts  []int
	// root is the top-level test: workers live as long as it does, even
	// when a subtest restarts one.
	root *testing.T

	mu sync.Mutex
	// workers are the running worker processes by identity; a restarted
	// worker gets a new identity, since the server keeps listing a dead
	// poller for a while.
	workers map[string]*itest.Process
}

func TestWorkersOnCluster(t *testing.T) {
	c := cluster.StartForTest(t, cluster.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	binDir := t.TempDir()
	if err := itest.BuildCommands(ctx, binDir, "./worker", "./cmd/demoapi"); err != nil {
		t.Fatal(err)
	}
	// One API per scenario, each with its own behaviour; the workers are
	// allowed all of them from the start.
	ports, err := itest.FreePorts(3)
	if err != nil {
		t.Fatal(err)
	}
	var origins []string
	for _, p := range ports {
		origins = append(origins, "http://"+itest.HostPort(p))
	}
	cl, err := client.Dial(client.Options{HostPort: c.FrontendHostPort(), Namespace: c.Namespace(), Logger: itest.QuietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	s := &stack{
		c: c, cl: cl,
		workerBin: filepath.Join(binDir, "worker"), apiBin: filepath.Join(binDir, "demoapi"),
		allow: strings.Join(origins, ","), apiPorts: ports,
		root: t, workers: map[string]*itest.Process{},
	}
	s.startWorker(ctx, t, "worker-a")
	s.startWorker(ctx, t, "worker-b")

	t.Run("seed", func(t *testing.T) { s.seed(ctx, t) })
	t.Run("kill-worker-in-flight", func(t *testing.T) { s.killInFlight(ctx, t) })
	t.Run("load-two-workers", func(t *testing.T) { s.load(ctx, t) })
}

// seed: the API answers 503, then 429 with Retry-After 1, then does the
// work. Three requests, one key, one record.
func (s *stack) seed(ctx context.Context, t *testing.T) {
	api := s.startAPI(t, 0, "--script", "503,429:1,201")
	id := "cluster-seed"
	resp, err := s.run(ctx, id, workflows.Request{Operation: "seed", URL: api + "/payments", Body: json.RawMessage(`{"amount":42}`)})
	if err != nil {
		t.Fatalf("workflow %s: %v", id, err)
	}
	wantKey := idemkey.Derive(s.c.Namespace(), id, "seed")
	if resp.Status != http.StatusCreated || resp.Attempt != 3 || resp.Replayed || resp.IdempotencyKey != wantKey {
		t.Errorf("response: status %d, attempt %d, replayed %v, key %s; want 201, 3, false, %s",
			resp.Status, resp.Attempt, resp.Replayed, resp.IdempotencyKey, wantKey)
	}
	st := apiStats(ctx, t, api)
	want := testsuite.Stats{Requests: 3, DistinctKeys: 1, Records: 1, Failures: 2}
	if st != want {
		t.Errorf("API stats = %+v, want %+v", st, want)
	}
}

// killInFlight: the worker whose request is being processed by the API is
// killed with SIGKILL. Temporal times the attempt out and the other worker
// retries it with the same key; the API answers with the stored response.
// One key, one record.
func (s *stack) killInFlight(ctx context.Context, t *testing.T) {
	api := s.startAPI(t, 1, "--processing-time", killProcessing.String())
	id := "cluster-kill"
	req := workflows.Request{
		Operation: "charge", URL: api + "/payments", Body: json.RawMessage(`{"amount":7}`),
		StartToCloseTimeout: killAttemptTimeout,
	}
	run, err := s.cl.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: taskQueue}, workflows.WorkflowName, req)
	if err != nil {
		t.Fatal(err)
	}
	// Wait until the request is at the API, then find who sent it.
	waitFor(ctx, t, "the request to reach the API", func() error {
		if n := apiStats(ctx, t, api).Requests; n < 1 {
			return fmt.Errorf("%d requests", n)
		}
		return nil
	})
	desc, err := s.cl.DescribeWorkflowExecution(ctx, id, run.GetRunID())
	if err != nil {
		t.Fatal(err)
	}
	if len(desc.GetPendingActivities()) != 1 {
		t.Fatalf("pending activities: %v, want one", desc.GetPendingActivities())
	}
	victim := desc.GetPendingActivities()[0].GetLastWorkerIdentity()
	s.mu.Lock()
	victimProc := s.workers[victim]
	var survivor string
	for id := range s.workers {
		if id != victim {
			survivor = id
		}
	}
	s.mu.Unlock()
	if victimProc == nil || survivor == "" {
		t.Fatalf("the activity runs on %q, not on one of our workers %v", victim, s.identities())
	}
	if err := victimProc.Kill(); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	delete(s.workers, victim)
	s.mu.Unlock()
	t.Logf("killed %s (SIGKILL) while its request was being processed; %s should finish", victim, survivor)

	var resp workflows.Response
	if err := run.Get(ctx, &resp); err != nil {
		t.Fatalf("workflow %s: %v", id, err)
	}
	wantKey := idemkey.Derive(s.c.Namespace(), id, "charge")
	if resp.Status != http.StatusCreated || !resp.Replayed || resp.Attempt != 2 || resp.IdempotencyKey != wantKey {
		t.Errorf("response: status %d, replayed %v, attempt %d, key %s; want 201, true (the stored response), 2, %s",
			resp.Status, resp.Replayed, resp.Attempt, resp.IdempotencyKey, wantKey)
	}
	if got := activityIdentities(ctx, t, s.cl, id); len(got) != 1 || got[survivor] != 1 {
		t.Errorf("completed activity ran on %v, want %s", got, survivor)
	}
	st := apiStats(ctx, t, api)
	if st.DistinctKeys != 1 || st.Records != 1 || st.Replays != 1 {
		t.Errorf("API stats = %+v, want one key, one record, one replay", st)
	}
	// Two workers again for what follows: a new process, a new identity.
	s.startWorker(ctx, t, victim+"-restarted")
}

// load: 200 workflows against an API failing 30% of requests with 503, with
// both workers polling. All succeed, one record per workflow, and both
// workers completed activities.
func (s *stack) load(ctx context.Context, t *testing.T) {
	api := s.startAPI(t, 2, "--failure-rate", strconv.FormatFloat(loadFailureRate, 'f', -1, 64))
	req := workflows.Request{
		Operation: "load", URL: api + "/orders",
		// 0.3^25: no workflow runs out of attempts by bad luck.
		Retry: workflows.RetryOptions{InitialInterval: 100 * time.Millisecond, MaximumInterval: time.Second, MaximumAttempts: 25},
	}
	start := time.Now()
	ids := make([]string, loadWorkflows)
	resps := make([]workflows.Response, loadWorkflows)
	errs := make([]error, loadWorkflows)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for i := range loadWorkflows {
		ids[i] = fmt.Sprintf("cluster-load-%03d", i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			r := req
			r.Body = json.RawMessage(fmt.Sprintf(`{"order":%d}`, i))
			resp, err := s.run(ctx, ids[i], r)
			if resp != nil {
				resps[i] = *resp
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	t.Logf("%d workflows in %s", loadWorkflows, time.Since(start).Round(time.Millisecond))

	keys := map[string]bool{}
	for i, err := range errs {
		if err != nil {
			t.Errorf("workflow %s: %v", ids[i], err)
			continue
		}
		if resps[i].Status != http.StatusCreated {
			t.Errorf("workflow %s: status %d, want 201", ids[i], resps[i].Status)
		}
		keys[resps[i].IdempotencyKey] = true
	}
	if len(keys) != loadWorkflows {
		t.Errorf("%d distinct keys in %d results, want %d", len(keys), loadWorkflows, loadWorkflows)
	}
	st := apiStats(ctx, t, api)
	t.Logf("API stats: %+v", st)
	if st.Records != loadWorkflows || st.DistinctKeys != loadWorkflows {
		t.Errorf("API: %d records for %d distinct keys, want %d and %d (a duplicate would show as more records than workflows)",
			st.Records, st.DistinctKeys, loadWorkflows, loadWorkflows)
	}
	if st.Failures == 0 {
		t.Errorf("API sent no failures at --failure-rate %v: the scenario did not test retries", loadFailureRate)
	}

	// Who completed the activities: the identity of each history's
	// ActivityTaskStarted event (written for the attempt that finished).
	perWorker := map[string]int{}
	for _, id := range ids {
		for who, n := range activityIdentities(ctx, t, s.cl, id) {
			perWorker[who] += n
		}
	}
	t.Logf("completed activities per worker: %v", perWorker)
	total := 0
	for _, n := range perWorker {
		total += n
	}
	if total != loadWorkflows {
		t.Errorf("%d completed activities in the histories, want %d", total, loadWorkflows)
	}
	// Both share the load: each completed at least a tenth (an even split
	// is 100 each; a worker that barely polls would show as a handful).
	workers := s.identities()
	if len(workers) != 2 {
		t.Fatalf("workers running: %v, want two", workers)
	}
	for _, w := range workers {
		if perWorker[w] < loadWorkflows/10 {
			t.Errorf("%s completed %d activities, want at least %d of %d (per worker: %v)", w, perWorker[w], loadWorkflows/10, loadWorkflows, perWorker)
		}
	}
}

// run starts the ready workflow with id and waits for its response.
func (s *stack) run(ctx context.Context, id string, req workflows.Request) (*workflows.Response, error) {
	run, err := s.cl.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: taskQueue}, workflows.WorkflowName, req)
	if err != nil {
		return nil, err
	}
	var resp workflows.Response
	if err := run.Get(ctx, &resp); err != nil {
		return nil, err
	}
	return &resp, nil
}

// startWorker starts the worker binary as identity, polling taskQueue on
// the cluster and allowed to call every API of the test, and waits until it
// polls. The process lives until the top-level test ends (or is killed); t
// is failed if it does not start.
func (s *stack) startWorker(ctx context.Context, t *testing.T, identity string) {
	t.Helper()
	p, err := itest.Start(itest.Spec{
		Name: identity,
		Path: s.workerBin,
		Args: []string{"--task-queue", taskQueue, "--allow-origin", s.allow, "--identity", identity},
		Dir:  s.c.WorkDir(),
		Env:  s.c.ClientEnv(),
	})
	if err != nil {
		t.Fatal(err)
	}
	s.root.Cleanup(func() {
		if err := p.Stop(20 * time.Second); err != nil {
			s.root.Error(err)
		}
		if s.root.Failed() {
			s.root.Logf("%s (pid %d) %s; its output (end):\n%s", identity, p.Pid(), p.State(), p.Tail(16<<10))
		}
	})
	s.mu.Lock()
	s.workers[identity] = p
	s.mu.Unlock()
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := itest.WaitForPollers(wctx, s.cl, taskQueue, identity); err != nil {
		t.Fatalf("%v; %s %s:\n%s", err, identity, p.State(), p.Tail(8<<10))
	}
}

// identities returns the identities of the running workers, sorted.
func (s *stack) identities() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for id := range s.workers {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// startAPI starts the reference API on the test's i-th API port with args
// and returns its base URL once it answers /healthz. It stops with t.
func (s *stack) startAPI(t *testing.T, i int, args ...string) string {
	t.Helper()
	addr := itest.HostPort(s.apiPorts[i])
	itest.StartT(t, itest.Spec{
		Name: "demoapi-" + strconv.Itoa(i),
		Path: s.apiBin,
		Args: append([]string{"--addr", addr}, args...),
		Dir:  s.c.WorkDir(),
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := itest.WaitHTTP(ctx, "http://"+addr+"/healthz"); err != nil {
		t.Fatal(err)
	}
	return "http://" + addr
}

// apiStats reads the API's GET /stats.
func apiStats(ctx context.Context, t *testing.T, api string) testsuite.Stats {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, api+"/stats", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s/stats: %v", api, err)
	}
	defer resp.Body.Close()
	var st testsuite.Stats
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatalf("GET %s/stats: %v", api, err)
	}
	return st
}

// activityIdentities counts, in a workflow's history, the identities of the
// workers that started the activity attempts that finished.
func activityIdentities(ctx context.Context, t *testing.T, cl client.Client, id string) map[string]int {
	t.Helper()
	got := map[string]int{}
	iter := cl.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for iter.HasNext() {
		ev, err := iter.Next()
		if err != nil {
			t.Fatalf("history of %s: %v", id, err)
		}
		if a := ev.GetActivityTaskStartedEventAttributes(); a != nil {
			got[a.GetIdentity()]++
		}
	}
	return got
}

// waitFor polls cond every 100 ms until it returns nil; the test fails
// when ctx ends first or after a minute.
func waitFor(ctx context.Context, t *testing.T, what string, cond func() error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := itest.Eventually(ctx, 100*time.Millisecond, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}
