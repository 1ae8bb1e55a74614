package integration_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/internal/governor"
	"github.com/idemhttp/temporal-idempotent-http/internal/testing/itest"
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
