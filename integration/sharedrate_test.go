package integration_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/idemhttp/temporal-idempotent-http/harness/itest"
	"github.com/idemhttp/temporal-idempotent-http/internal/governor"
	"github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// TestSharedRateByDefault: the worker binary with its default flags runs
// a plain starter request (no --origin-queue) on the origin's own task
// queue and starts the origin's governor on the governors' queue
// (TASK-QUEUE@governor), saying at start that the shared rate is on;
// with --shared-rate=false the request runs on the workflow's queue and
// no governor is started.
func TestSharedRateByDefault(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		onOrigin bool // the activity runs on the origin's queue, a governor is started
	}{
		{"default flags", nil, true},
		{"--shared-rate=false", []string{"--shared-rate=false"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := testsuite.StartServer(t, testsuite.Options{})
			tq := uniqueName(t, "tq")
			wp := startWorkerWith(t, workerOptions{TaskQueue: tq, Origins: []string{srv.URL}}, nil, tt.args...)
			ctx := ctxT(t, 2*time.Minute)
			wid := uniqueName(t, "payment")
			res := runStarter(t, ctx, tq, "--url", srv.URL+"/payments", "--body", `{"amount":4200}`, "--workflow-id", wid)
			if res.Code != 0 {
				t.Fatalf("the starter exited %d; want 0; worker:\n%s", res.Code, wp.Tail(8<<10))
			}
			originQueue, err := workflows.OriginTaskQueue(tq, srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			want := tq
			if tt.onOrigin {
				want = originQueue
			}
			var queues []string
			for _, ev := range history(t, ctx, wid, "") {
				if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
					queues = append(queues, a.GetTaskQueue().GetName())
				}
			}
			if len(queues) != 1 || queues[0] != want {
				t.Errorf("the HTTP activity was scheduled on %q, want once on %q", queues, want)
			}

			starts := logRecords(wp.Output(), "worker starting")
			if len(starts) != 1 || starts[0]["shared_rate"] != tt.onOrigin {
				t.Errorf("start lines %v: want one with shared_rate %v", starts, tt.onOrigin)
			}
			if strings.Contains(wp.Output(), "shared rate off") {
				t.Errorf("the dev server lets the worker write the task-queue config; the worker says it may not:\n%s", wp.Tail(8<<10))
			}

			gid := governor.WorkflowID(originQueue)
			if !tt.onOrigin {
				// The report of the request would have started it within
				// a second or two.
				time.Sleep(3 * time.Second)
				if _, err := tc.DescribeWorkflowExecution(ctx, gid, ""); err == nil {
					t.Errorf("governor %s started with --shared-rate=false", gid)
				}
				return
			}
			err = itest.Eventually(ctxT(t, 30*time.Second), 200*time.Millisecond, func() error {
				d, err := tc.DescribeWorkflowExecution(context.Background(), gid, "")
				if err != nil {
					return err
				}
				if got := d.GetWorkflowExecutionInfo().GetTaskQueue(); got != governor.TaskQueue(tq) {
					return fmt.Errorf("governor %s runs on %q, want %q", gid, got, governor.TaskQueue(tq))
				}
				return nil
			})
			if err != nil {
				t.Errorf("%v; worker:\n%s", err, wp.Tail(8<<10))
			}
		})
	}
}

// TestSharedRatePacesAfterIdle: with a rate limit of 4/s in force on the
// origin's queue and the queue idle, 8 workflows started at once reach
// the API spread at the worker's share (4/s: the only worker), not in
// the bursts matching releases after an idle moment (one task per
// partition at once: 4 on the dev server). Bounded with margins: at
// most 2 of the requests arrive within 100 ms of the one before (paced,
// 250 ms apart; matching's burst alone puts 3 or more of each 4 that
// close).
func TestSharedRatePacesAfterIdle(t *testing.T) {
	t.Parallel()
	const (
		n     = 8
		limit = 4
		close = 100 * time.Millisecond
	)
	srv := testsuite.StartServer(t, testsuite.Options{})
	tq := uniqueName(t, "tq")
	originQueue, err := workflows.OriginTaskQueue(tq, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t, 2*time.Minute)
	// An operator's limit: the governor leaves it alone, the worker paces
	// by it.
	if _, err := tc.WorkflowService().UpdateTaskQueueConfig(ctx, &workflowservice.UpdateTaskQueueConfigRequest{
		Namespace: dev.Namespace, Identity: "operator", TaskQueue: originQueue, TaskQueueType: enumspb.TASK_QUEUE_TYPE_ACTIVITY,
		UpdateQueueRateLimit: &workflowservice.UpdateTaskQueueConfigRequest_RateLimitUpdate{
			RateLimit: &taskqueuepb.RateLimit{RequestsPerSecond: limit}, Reason: "TestSharedRatePacesAfterIdle",
		},
	}); err != nil {
		t.Fatal(err)
	}
	wp := startWorker(t, workerOptions{TaskQueue: tq, Origins: []string{srv.URL}})
	// The worker reads the limit every second; the queue idles meanwhile.
	time.Sleep(3 * time.Second)

	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			_, _, errs[i] = call(t, ctx, tq, uniqueName(t, fmt.Sprint("order-", i)), workflows.Request{
				Operation: "charge", URL: srv.URL + "/charges", Body: json.RawMessage(fmt.Sprintf(`{"order":%d}`, i)),
			})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("workflow %d: %v; worker:\n%s", i, err, wp.Tail(8<<10))
		}
	}
	var arrivals []time.Time
	for _, r := range srv.Log() {
		arrivals = append(arrivals, r.Time)
	}
	slices.SortFunc(arrivals, time.Time.Compare)
	if len(arrivals) != n {
		t.Fatalf("%d requests, want %d", len(arrivals), n)
	}
	var gaps []string
	var closeOnes int
	for i := 1; i < n; i++ {
		gap := arrivals[i].Sub(arrivals[i-1])
		gaps = append(gaps, gap.Round(time.Millisecond).String())
		if gap < close {
			closeOnes++
		}
	}
	t.Logf("gaps between arrivals: %v", gaps)
	if closeOnes > 2 {
		t.Errorf("%d of %d requests arrived within %s of the one before (gaps %v): want them spread at %d/s", closeOnes, n-1, close, gaps, limit)
	}
}
