package integration_test

import (
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"

	"github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// TestInFlightDefaultOptions: the reference API (demoapi) takes 14 s, longer
// than the default 10 s per attempt; the starter's workflow, with default
// options, gives up on the first request, then meets the key in flight
// (a 409 without Retry-After in each dialect here), waits it out and gets
// the stored response. The work is done once.
func TestInFlightDefaultOptions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		// replayed: the dialect marks replays.
		replayed bool
	}{
		{"stripe", []string{"--dialect", "stripe"}, true},
		{"express", []string{"--dialect", "express"}, false},
		{"ietf without Retry-After", []string{"--dialect", "ietf", "--in-flight-retry-after=false"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, api := startDemoAPI(t, append([]string{"--processing-time", "14s"}, tt.args...)...)
			tq := uniqueName(t, "tq")
			startWorker(t, workerOptions{TaskQueue: tq, Origins: []string{api}})
			wid := uniqueName(t, "payment")
			res := runStarter(t, ctxT(t, 2*time.Minute), tq, "--url", api+"/payments", "--body", string(body), "--workflow-id", wid)
			st := apiStats(t, api)
			if res.Code != 0 {
				t.Fatalf("the starter exited %d; want 0 (API stats %+v)", res.Code, st)
			}
			out := parseStarterOutput(t, res)
			key := keyOf(wid, "call")
			if out.Status != 201 || out.IdempotencyKey != key || out.Attempts < 2 || out.Replayed != tt.replayed {
				t.Errorf("starter output %+v: want 201 with key %s on a retry, replayed %v", out, key, tt.replayed)
			}
			checkStats(t, st, testsuite.Stats{Requests: -1, DistinctKeys: 1, Records: 1, Replays: 1, InFlight: -1, Failures: 0})
			if st.InFlight < 1 || st.Mismatches != 0 {
				t.Errorf("API stats %+v: want at least one in-flight answer and no misuse", st)
			}
			t.Logf("%s: %d requests (%d answered in flight), result on attempt %d after %s", tt.name, st.Requests, st.InFlight, out.Attempts, res.Took.Round(time.Millisecond))
		})
	}
}

// TestStuckKeyStarterFailsBeforeDeadline: the API orphans the key (its
// first request is never answered and the key stays locked); the starter,
// with a 20 s schedule-to-close, exits 1 naming IdempotencyKeyLocked, and
// the activity ended before its 20 s deadline.
func TestStuckKeyStarterFailsBeforeDeadline(t *testing.T) {
	t.Parallel()
	_, api := startDemoAPI(t, "--orphan-prefix", "orphan-")
	tq := uniqueName(t, "tq")
	startWorker(t, workerOptions{TaskQueue: tq, Origins: []string{api}})
	wid := uniqueName(t, "payment")
	key := "orphan-" + randomHex(8)
	ctx := ctxT(t, 2*time.Minute)
	res := runStarter(t, ctx, tq, "--url", api+"/payments", "--body", string(body), "--workflow-id", wid,
		"--key", key, "--schedule-to-close", "20s")
	if res.Code != 1 {
		t.Errorf("the starter exited %d; want 1", res.Code)
	}
	if !strings.Contains(res.Stderr, "type="+workflows.ErrTypeIdempotencyKeyLocked) {
		t.Errorf("the starter's stderr does not name %s:\n%s", workflows.ErrTypeIdempotencyKeyLocked, res.Stderr)
	}
	desc, err := tc.DescribeWorkflowExecution(ctx, wid, "")
	if err != nil {
		t.Fatal(err)
	}
	events := history(t, ctx, wid, desc.GetWorkflowExecutionInfo().GetExecution().GetRunId())
	var scheduled, closed *historypb.HistoryEvent
	for _, ev := range events {
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			if scheduled == nil {
				scheduled = ev
			}
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED:
			closed = ev
		}
	}
	if scheduled == nil || closed == nil {
		t.Fatalf("history of %d events: want an ActivityTaskScheduled and a WorkflowExecutionFailed", len(events))
	}
	took := closed.GetEventTime().AsTime().Sub(scheduled.GetEventTime().AsTime())
	if took >= 20*time.Second {
		t.Errorf("the workflow failed %s after the activity was scheduled; want before the 20s schedule-to-close", took)
	}
	var errType string
	for f := closed.GetWorkflowExecutionFailedEventAttributes().GetFailure(); f != nil; f = f.GetCause() {
		if info := f.GetApplicationFailureInfo(); info != nil {
			errType = info.GetType()
			break
		}
	}
	if errType != workflows.ErrTypeIdempotencyKeyLocked {
		t.Errorf("the workflow's failure is %q; want %s", errType, workflows.ErrTypeIdempotencyKeyLocked)
	}
	st := apiStats(t, api)
	if st.Orphaned != 1 || st.Records != 0 || st.InFlight < 1 || st.DistinctKeys != 1 {
		t.Errorf("API stats %+v: want one orphaned key, in-flight answers, no record", st)
	}
	t.Logf("failed %s after scheduling (starter %s); API %+v", took.Round(time.Millisecond), res.Took.Round(time.Millisecond), st)
}
