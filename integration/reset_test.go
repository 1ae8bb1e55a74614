package integration_test

import (
	"testing"
	"time"

	"github.com/google/uuid"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// TestResetKeepsKey resets a completed workflow to its first workflow task,
// as an operator does after a bad deploy: the new run executes the call
// again, with the same key (it is derived from the workflow ID, not the run
// ID), so the server replays its stored response and the work stays done once.
func TestResetKeepsKey(t *testing.T) {
	t.Parallel()
	srv := testsuite.StartServer(t, testsuite.Options{})
	tq := uniqueName(t, "tq")
	startInProcessWorker(t, tq, srv.URL)
	wid := uniqueName(t, "order")
	ctx := ctxT(t, 2*time.Minute)
	req := workflows.Request{Operation: "charge", URL: srv.URL + "/payments", Body: body}

	run1, resp1, err := call(t, ctx, tq, wid, req)
	if err != nil {
		t.Fatalf("first run: %v", err)
	}
	var firstTask int64
	it := tc.GetWorkflowHistory(ctx, wid, run1.GetRunID(), false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() && firstTask == 0 {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if ev.GetEventType() == enums.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
			firstTask = ev.GetEventId()
		}
	}
	if firstTask == 0 {
		t.Fatal("no completed workflow task in the first run's history")
	}
	reset, err := tc.ResetWorkflowExecution(ctx, &workflowservice.ResetWorkflowExecutionRequest{
		Namespace:                 dev.Namespace,
		WorkflowExecution:         &commonpb.WorkflowExecution{WorkflowId: wid, RunId: run1.GetRunID()},
		Reason:                    "integration test: reset to the first workflow task",
		WorkflowTaskFinishEventId: firstTask,
		RequestId:                 uuid.NewString(),
	})
	if err != nil {
		t.Fatalf("reset: %v", err)
	}
	var resp2 workflows.Response
	if err := tc.GetWorkflow(ctx, wid, reset.GetRunId()).Get(ctx, &resp2); err != nil {
		t.Fatalf("reset run: %v", err)
	}
	if reset.GetRunId() == run1.GetRunID() {
		t.Fatal("the reset run has the first run's ID")
	}
	if resp2.IdempotencyKey != resp1.IdempotencyKey || resp2.IdempotencyKey != keyOf(wid, "charge") {
		t.Errorf("keys: first run %s, reset run %s; want both %s", resp1.IdempotencyKey, resp2.IdempotencyKey, keyOf(wid, "charge"))
	}
	if !resp2.Replayed {
		t.Errorf("the reset run got new work (replayed false); want the stored response")
	}
	checkStats(t, srv.Stats(), testsuite.Stats{Requests: 2, DistinctKeys: 1, Records: 1, Replays: 1, InFlight: -1, Failures: -1, Mismatches: -1, MissingKey: -1})
}
