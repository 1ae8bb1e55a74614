package governor_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/idemhttp/temporal-idempotent-http/internal/governor"
	"github.com/idemhttp/temporal-idempotent-http/internal/testing/itest"
)

// record makes TestReplayHistory record its history first, on a dev
// server with the governor as it is now:
//
//	go test ./internal/governor -run TestReplayHistory -args -record
var record = flag.Bool("record", false, "record testdata/governor_history.json on a dev server before replaying it")

const historyFile = "testdata/governor_history.json"

// TestReplayHistory: a governor's recorded run replays with today's code,
// so a governor running when the worker is upgraded keeps going. The run
// (recorded with the code of 183619c) has a gathered cut, a raise after
// the calm, a raise timer cancelled by a throttle's cut timer, and ends by
// continuing as new after Config.MaxSignals signals.
func TestReplayHistory(t *testing.T) {
	if *record {
		recordHistory(t)
	}
	b, err := os.ReadFile(historyFile)
	require.NoError(t, err)
	hist := &historypb.History{}
	require.NoError(t, protojson.Unmarshal(b, hist))
	var seen []enumspb.EventType
	for _, ev := range hist.GetEvents() {
		seen = append(seen, ev.GetEventType())
	}
	for _, want := range []enumspb.EventType{
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED,
		enumspb.EVENT_TYPE_TIMER_STARTED,
		enumspb.EVENT_TYPE_TIMER_FIRED,
		enumspb.EVENT_TYPE_TIMER_CANCELED,
		enumspb.EVENT_TYPE_MARKER_RECORDED, // SetRate, a local activity
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW,
	} {
		require.Contains(t, seen, want, "the recorded run covers %s", want)
	}

	r := worker.NewWorkflowReplayer()
	r.RegisterWorkflowWithOptions(governor.Workflow, workflow.RegisterOptions{Name: governor.WorkflowName})
	require.NoError(t, r.ReplayWorkflowHistory(itest.QuietLogger(), hist))
}

// rateSetter stands in for Activities.SetRate while recording: the rate
// is written and in force. It is registered by its function's name,
// SetRate, not as SetRateName as a worker registers it, because a
// WorkflowReplayer cannot register activities: the workflow's reference
// to the local activity resolves to that name on replay, and the history's
// markers name it so.
type rateSetter struct{}

func (rateSetter) SetRate(_ context.Context, req governor.SetRateRequest) (governor.SetRateResult, error) {
	return governor.SetRateResult{Written: true, Limited: true, InForce: float64(float32(req.Rate)), Owner: governor.Identity}, nil
}

// recordHistory runs a governor on a dev server through the events
// TestReplayHistory checks and writes its history to historyFile.
func recordHistory(t *testing.T) {
	dev := startDevServer(t)
	c := dev.Client()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	const tq = "governor-history"
	w := worker.New(c, tq, worker.Options{})
	w.RegisterWorkflowWithOptions(governor.Workflow, workflow.RegisterOptions{Name: governor.WorkflowName})
	w.RegisterActivity(rateSetter{}.SetRate)
	require.NoError(t, w.Start())
	defer w.Stop()

	in := governor.Input{TaskQueue: "api.example.com", Namespace: "ns", Config: governor.Config{
		Gather: 200 * time.Millisecond, CutInterval: time.Second, Calm: time.Second, MinGap: 5 * time.Second,
		Raise: 0.5, MaxSignals: 5,
	}}
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: governor.WorkflowID(in.TaskQueue), TaskQueue: tq}, governor.WorkflowName, in)
	require.NoError(t, err)
	signal := func(requests, accepted, throttles int) {
		now := time.Now()
		require.NoError(t, c.SignalWorkflow(ctx, run.GetID(), run.GetRunID(), governor.SignalName, governor.Observation{
			Worker: "worker-1", Requests: requests, Accepted: accepted, Throttles: throttles, From: now.Add(-time.Second), To: now,
		}))
	}
	signal(10, 10, 0)
	signal(10, 8, 1)            // a cut after Gather: a timer, then SetRate
	time.Sleep(4 * time.Second) // the calm passes: a raise timer, then SetRate
	signal(12, 10, 0)
	signal(12, 3, 1) // the cut's timer replaces the raise timer (MinGap 5 s)
	time.Sleep(2 * time.Second)
	signal(12, 10, 0) // the fifth signal: continue as new
	require.NoError(t, itest.Eventually(ctx, 100*time.Millisecond, func() error {
		d, err := c.DescribeWorkflowExecution(ctx, run.GetID(), run.GetRunID())
		if err != nil {
			return err
		}
		if s := d.GetWorkflowExecutionInfo().GetStatus(); s != enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW {
			return fmt.Errorf("the first run is %s, not continued as new", s)
		}
		return nil
	}))

	hist := &historypb.History{}
	it := c.GetWorkflowHistory(ctx, run.GetID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		hist.Events = append(hist.Events, ev)
	}
	b, err := protojson.MarshalOptions{Indent: "  "}.Marshal(hist)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Dir(historyFile), 0o755))
	require.NoError(t, os.WriteFile(historyFile, append(b, '\n'), 0o644))
	t.Logf("wrote %s: %d events", historyFile, len(hist.Events))
}
