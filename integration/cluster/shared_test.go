package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/idemhttp/temporal-idempotent-http/harness/cluster"
	"github.com/idemhttp/temporal-idempotent-http/harness/itest"
	"github.com/idemhttp/temporal-idempotent-http/internal/governor"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// The shared-rate scenario: sharedWorkflows requests against an API that
// accepts sharedCapacity per second and answers 429 beyond, from two
// worker processes with --shared-rate.
const (
	sharedTaskQueue = "idempotent-http-shared"
	sharedWorkflows = 40
	sharedCapacity  = 5
	// maxRequestsPerSuccess is a loose bound on requests sent per workflow
	// (1 is none wasted): a sanity bound against a flood, the benchmarks
	// measure the targets. Seven runs took 1.25-1.60.
	maxRequestsPerSuccess = 2.0
	// maxRateFactor bounds the limit learned against the capacity: the
	// accepted rate it comes from may be measured over a span of one or
	// two of the API's windows, and an API counting per fixed window
	// accepts up to twice its capacity in a second across a window's edge
	// (one of seven runs learned 5.99/s for 5/s; the governor cuts again
	// when the API then accepts less than 0.9 of it).
	maxRateFactor = 2
)

// TestSharedRateOnCluster: two worker processes with --shared-rate send 40
// requests to an API taking 5 per second. The requests run on the origin's
// own task queue, the governor learns one rate from both workers' reports
// and the server enforces it: every workflow succeeds, one record each,
// and the limit in force is the governor's, near the API's capacity.
func TestSharedRateOnCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	binDir := t.TempDir()
	if err := itest.BuildCommands(ctx, binDir, "./worker", "./cmd/demoapi"); err != nil {
		t.Fatal(err)
	}
	workerBin, apiBin := filepath.Join(binDir, "worker"), filepath.Join(binDir, "demoapi")

	// Needs no server: the worker refuses the flags before it dials.
	t.Run("refuses-fixed-queue-rate", func(t *testing.T) { sharedRateConflict(ctx, t, workerBin) })
	t.Run("two-workers-one-rate", func(t *testing.T) { sharedRateTwoWorkers(ctx, t, workerBin, apiBin) })
}

// sharedRateConflict: --shared-rate and --task-queue-activities-per-second
// together make the worker exit with an error naming both.
func sharedRateConflict(ctx context.Context, t *testing.T, workerBin string) {
	p := itest.StartT(t, itest.Spec{
		Name: "worker-conflict",
		Path: workerBin,
		Args: []string{"--shared-rate", "--task-queue-activities-per-second", "5",
			"--task-queue", sharedTaskQueue, "--allow-origin", "http://127.0.0.1:1"},
		// Nothing listens there: a worker that went on to dial fails fast
		// rather than finding some server.
		Env: []string{"TEMPORAL_ADDRESS=127.0.0.1:1"},
	})
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err := p.Wait(wctx)
	if !p.Exited() {
		t.Fatalf("worker with both flags still running after 30 s: %v", err)
	}
	out := p.Output()
	if p.ExitCode() == 0 {
		t.Errorf("worker with --shared-rate and --task-queue-activities-per-second: %s, want a non-zero status; output:\n%s", p.State(), out)
	}
	for _, flag := range []string{"--shared-rate", "--task-queue-activities-per-second"} {
		if !strings.Contains(out, flag) {
			t.Errorf("worker's error does not name %s; output:\n%s", flag, out)
		}
	}
}

func sharedRateTwoWorkers(ctx context.Context, t *testing.T, workerBin, apiBin string) {
	c := cluster.StartForTest(t, cluster.Options{DynamicConfig: cluster.OnePartitionPerQueue})
	cl, err := client.Dial(client.Options{HostPort: c.FrontendHostPort(), Namespace: c.Namespace(), Logger: itest.QuietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)

	port, err := itest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := itest.HostPort(port)
	api := "http://" + addr
	itest.StartT(t, itest.Spec{
		Name: "demoapi-shared",
		Path: apiBin,
		Args: []string{"--addr", addr, "--capacity", strconv.Itoa(sharedCapacity), "--capacity-window", "1s"},
		Dir:  c.WorkDir(),
	})
	hctx, hcancel := context.WithTimeout(ctx, 30*time.Second)
	defer hcancel()
	if err := itest.WaitHTTP(hctx, api+"/healthz"); err != nil {
		t.Fatal(err)
	}
	originQueue, err := workflows.OriginTaskQueue(sharedTaskQueue, api)
	if err != nil {
		t.Fatal(err)
	}

	workers := []string{"shared-a", "shared-b"}
	for _, id := range workers {
		p := itest.StartT(t, itest.Spec{
			Name: id,
			Path: workerBin,
			Args: []string{"--shared-rate", "--task-queue", sharedTaskQueue, "--allow-origin", api, "--identity", id},
			Dir:  c.WorkDir(),
			Env:  c.ClientEnv(),
		})
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		err := itest.WaitForPollers(wctx, cl, sharedTaskQueue, id)
		if err == nil {
			err = itest.WaitForActivityPollers(wctx, cl, originQueue, id)
		}
		cancel()
		if err != nil {
			t.Fatalf("%v; %s %s:\n%s", err, id, p.State(), p.Tail(8<<10))
		}
	}

	req := workflows.Request{
		Operation: "charge", URL: api + "/charges", OriginQueue: true,
		Retry:                  workflows.RetryOptions{InitialInterval: time.Second, MaximumInterval: 10 * time.Second, MaximumAttempts: 100},
		ScheduleToCloseTimeout: 3 * time.Minute,
	}
	ids := make([]string, sharedWorkflows)
	errs := make([]error, sharedWorkflows)
	resps := make([]workflows.Response, sharedWorkflows)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range sharedWorkflows {
		ids[i] = fmt.Sprintf("shared-%02d", i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := req
			r.Body = json.RawMessage(fmt.Sprintf(`{"charge":%d}`, i))
			// ExecuteWorkflow does not start eagerly unless asked.
			run, err := cl.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: ids[i], TaskQueue: sharedTaskQueue}, workflows.WorkflowName, r)
			if err == nil {
				err = run.Get(ctx, &resps[i])
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	t.Logf("%d workflows in %s", sharedWorkflows, time.Since(start).Round(time.Millisecond))

	for i, err := range errs {
		if err != nil {
			t.Errorf("workflow %s: %v", ids[i], err)
		} else if resps[i].Status != http.StatusCreated {
			t.Errorf("workflow %s: status %d, want 201", ids[i], resps[i].Status)
		}
	}
	st := apiStats(ctx, t, api)
	t.Logf("API stats: %+v", st)
	if st.Records != sharedWorkflows || st.DistinctKeys != sharedWorkflows {
		t.Errorf("API: %d records for %d distinct keys, want %d and %d", st.Records, st.DistinctKeys, sharedWorkflows, sharedWorkflows)
	}

	// The histories: where the attempts were scheduled, who completed
	// them, and when the first was scheduled and the last completed.
	var first, last time.Time
	perWorker := map[string]int{}
	elsewhere := map[string][]string{} // task queue other than the origin's → workflows
	for _, id := range ids {
		h := sharedHistory(ctx, t, cl, id)
		for _, q := range h.queues {
			if q != originQueue {
				elsewhere[q] = append(elsewhere[q], id)
			}
		}
		if len(h.queues) == 0 {
			t.Errorf("workflow %s: no activity scheduled", id)
		}
		for who, n := range h.completedBy {
			perWorker[who] += n
		}
		if !h.firstScheduled.IsZero() && (first.IsZero() || h.firstScheduled.Before(first)) {
			first = h.firstScheduled
		}
		if h.lastCompleted.After(last) {
			last = h.lastCompleted
		}
	}
	for q, wfs := range elsewhere {
		t.Errorf("%d workflows (%s, …) scheduled the activity on task queue %q, want the origin queue %q", len(wfs), wfs[0], q, originQueue)
	}
	t.Logf("completed activities per worker: %v", perWorker)
	for _, w := range workers {
		if perWorker[w] == 0 {
			t.Errorf("%s completed no activity (per worker: %v): both workers poll the origin queue", w, perWorker)
		}
	}

	// The limit in force on the origin queue, who set it, and the
	// governor's own view. The governor keeps deciding after the load
	// ends (it raises a rate that is no longer refused), so the two are
	// read as a pair: the governor, the queue, the governor again, until
	// the governor did not change its rate between its two reads.
	var (
		rate  float32
		owner string
		qrl   *taskqueuepb.RateLimitConfig
		gs    governor.State
	)
	for try := 0; ; try++ {
		before := governorState(ctx, t, cl, originQueue)
		desc, err := cl.WorkflowService().DescribeTaskQueue(ctx, &workflowservice.DescribeTaskQueueRequest{
			Namespace:     c.Namespace(),
			TaskQueue:     &taskqueuepb.TaskQueue{Name: originQueue, Kind: enumspb.TASK_QUEUE_KIND_NORMAL},
			TaskQueueType: enumspb.TASK_QUEUE_TYPE_ACTIVITY,
			ReportConfig:  true,
		})
		if err != nil {
			t.Fatalf("DescribeTaskQueue %s: %v", originQueue, err)
		}
		qrl = desc.GetConfig().GetQueueRateLimit()
		rate = qrl.GetRateLimit().GetRequestsPerSecond()
		owner = qrl.GetMetadata().GetUpdateIdentity()
		gs = governorState(ctx, t, cl, originQueue)
		if gs.Rate == before.Rate && gs.InForce == before.InForce || try == 20 {
			break
		}
		t.Logf("governor moved from %.3f/s to %.3f/s while the queue was read: reading again", before.Rate, gs.Rate)
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("queue rate limit of %s: %v/s set by %q (%q)", originQueue, rate, owner, qrl.GetMetadata().GetReason())
	if qrl.GetRateLimit() == nil {
		t.Errorf("origin queue %s has no queue rate limit (config %v)", originQueue, qrl)
	}
	if owner != governor.Identity {
		t.Errorf("queue rate limit set by %q, want %q", owner, governor.Identity)
	}
	if rate <= 0 || rate > maxRateFactor*sharedCapacity {
		t.Errorf("queue rate limit %v/s, want in (0, %d]: at most twice the API's capacity", rate, maxRateFactor*sharedCapacity)
	}
	t.Logf("governor: status %s, rate %.3f/s, in force %.3f/s, measured %.3f/s, accepted %.3f/s",
		gs.Status, gs.Rate, gs.InForce, gs.Measured, gs.Accepted)
	if gs.Status != governor.StatusLimited {
		t.Errorf("governor status %q, want %q", gs.Status, governor.StatusLimited)
	}
	if float32(gs.Rate) != rate {
		t.Errorf("governor's rate %v, server's limit %v: want the same", gs.Rate, rate)
	}

	perSuccess := float64(st.Requests) / sharedWorkflows
	ideal := time.Duration(sharedWorkflows) * time.Second / sharedCapacity
	span := last.Sub(first)
	t.Logf("requests per success %.3f (%d requests, %d throttled); first schedule to last success %s = %.2f × the ideal %s; rate in force %v/s",
		perSuccess, st.Requests, st.Failures, span.Round(time.Millisecond), span.Seconds()/ideal.Seconds(), ideal, rate)
	if perSuccess > maxRequestsPerSuccess {
		t.Errorf("%.3f requests per success (%d for %d), want at most %.1f", perSuccess, st.Requests, sharedWorkflows, maxRequestsPerSuccess)
	}
}

// governorState queries the governor of queue for its state.
func governorState(ctx context.Context, t *testing.T, cl client.Client, queue string) governor.State {
	t.Helper()
	val, err := cl.QueryWorkflow(ctx, governor.WorkflowID(queue), "", governor.QueryName)
	if err != nil {
		t.Fatalf("query %s of %s: %v", governor.QueryName, governor.WorkflowID(queue), err)
	}
	var gs governor.State
	if err := val.Get(&gs); err != nil {
		t.Fatal(err)
	}
	return gs
}

// history is what sharedHistory reads from a workflow's history.
type history struct {
	queues         []string       // task queue of each ActivityTaskScheduled
	completedBy    map[string]int // identity of the ActivityTaskStarted before a completion
	firstScheduled time.Time
	lastCompleted  time.Time
}

func sharedHistory(ctx context.Context, t *testing.T, cl client.Client, id string) history {
	t.Helper()
	h := history{completedBy: map[string]int{}}
	started := map[int64]string{} // event ID → identity
	iter := cl.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for iter.HasNext() {
		ev, err := iter.Next()
		if err != nil {
			t.Fatalf("history of %s: %v", id, err)
		}
		at := ev.GetEventTime().AsTime()
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
			h.queues = append(h.queues, a.GetTaskQueue().GetName())
			if h.firstScheduled.IsZero() || at.Before(h.firstScheduled) {
				h.firstScheduled = at
			}
		}
		if a := ev.GetActivityTaskStartedEventAttributes(); a != nil {
			started[ev.GetEventId()] = a.GetIdentity()
		}
		if a := ev.GetActivityTaskCompletedEventAttributes(); a != nil {
			h.completedBy[started[a.GetStartedEventId()]]++
			if at.After(h.lastCompleted) {
				h.lastCompleted = at
			}
		}
	}
	return h
}
