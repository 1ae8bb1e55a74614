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
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/idemhttp/temporal-idempotent-http/harness/itest"
	"github.com/idemhttp/temporal-idempotent-http/internal/governor"
)

// record makes TestReplayHistory record historyFile first, on a dev
// server with the governor as it is now:
//
//	go test ./internal/governor -run TestReplayHistory -args -record
var record = flag.Bool("record", false, "record testdata/governor_history.json on a dev server before replaying it")

// recordStep makes TestReplayHistory record a run of recordStepHistory
// into this file of testdata first, with the governor as it is now:
//
//	go test ./internal/governor -run TestReplayHistory -args -record-step governor_history_step_spans.json
var recordStep = flag.String("record-step", "", "record a governor's run with a worker's clock stepped an hour into this file of testdata on a dev server before replaying")

const historyFile = "testdata/governor_history.json"

// TestReplayHistory: a governor's recorded runs replay with today's code,
// so a governor running when the worker is upgraded keeps going.
func TestReplayHistory(t *testing.T) {
	if *record {
		recordHistory(t)
	}
	if *recordStep != "" {
		recordStepHistory(t, filepath.Join("testdata", *recordStep))
	}
	common := []enumspb.EventType{
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED,
		enumspb.EVENT_TYPE_TIMER_STARTED,
		enumspb.EVENT_TYPE_TIMER_FIRED,
		enumspb.EVENT_TYPE_MARKER_RECORDED, // SetRate, a local activity
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW,
	}
	for _, c := range []struct {
		file string
		// versions are the changes (workflow.GetVersion) the run was
		// recorded with.
		versions []string
		events   []enumspb.EventType
		// cut, if set, holds of the first rate written (0.5: the floor).
		cut func(rate float64) bool
	}{
		// Recorded with the code of 183619c (RulesV0): a gathered cut, a
		// raise after the calm, a raise timer cancelled by a throttle's
		// cut timer.
		{historyFile, []string{"observation-arrival"}, append(common, enumspb.EVENT_TYPE_TIMER_CANCELED), nil},
		// recordStepHistory with the code of 9ebb7c4 (RulesV1, before
		// report-spans): the herd's reports carry Span, which that
		// governor ignores; the one an hour long on its worker's wall
		// clock cut to the floor (then saturated raises: 0.75, 1.125,
		// 1.6875/s). Today's code must decide the same on replay.
		{"testdata/governor_history_step_v1.json", []string{"observation-arrival", "rules-v1"}, common,
			func(r float64) bool { return r == governor.DefaultFloor }},
		// recordStepHistory with report-spans: the cut is from what the
		// herd's reports show (66/s at once, corrected to 92/s).
		{"testdata/governor_history_step_spans.json", []string{"observation-arrival", "rules-v1", "report-spans"}, common,
			func(r float64) bool { return r > 10*governor.DefaultFloor }},
	} {
		t.Run(filepath.Base(c.file), func(t *testing.T) {
			b, err := os.ReadFile(c.file)
			require.NoError(t, err)
			hist := &historypb.History{}
			require.NoError(t, protojson.Unmarshal(b, hist))
			var seen []enumspb.EventType
			var versions []string
			var rates []float64
			dc := converter.GetDefaultDataConverter()
			for _, ev := range hist.GetEvents() {
				seen = append(seen, ev.GetEventType())
				switch m := ev.GetMarkerRecordedEventAttributes(); m.GetMarkerName() {
				case "Version":
					var id string
					require.NoError(t, dc.FromPayloads(m.GetDetails()["change-id"], &id))
					versions = append(versions, id)
				case "LocalActivity":
					var res governor.SetRateResult
					require.NoError(t, dc.FromPayloads(m.GetDetails()["result"], &res))
					rates = append(rates, res.InForce)
				}
			}
			for _, want := range c.events {
				require.Contains(t, seen, want, "the recorded run covers %s", want)
			}
			require.Equal(t, c.versions, versions, "the changes the run was recorded with")
			if c.cut != nil {
				require.NotEmpty(t, rates)
				require.True(t, c.cut(rates[0]), "the recorded run's first write: %v", rates)
			}

			r := worker.NewWorkflowReplayer()
			r.RegisterWorkflowWithOptions(governor.Workflow, workflow.RegisterOptions{Name: governor.WorkflowName})
			require.NoError(t, r.ReplayWorkflowHistory(itest.QuietLogger(), hist))
		})
	}
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
	const tq = "governor-history"
	ctx, c := recordingGovernor(t, tq)

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
	awaitContinuedAsNew(ctx, t, c, run)
	writeHistory(ctx, t, c, run, historyFile)
}

// writeHistory writes run's history to file.
func writeHistory(ctx context.Context, t *testing.T, c client.Client, run client.WorkflowRun, file string) {
	hist := &historypb.History{}
	it := c.GetWorkflowHistory(ctx, run.GetID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		hist.Events = append(hist.Events, ev)
	}
	b, err := protojson.MarshalOptions{Indent: "  "}.Marshal(hist)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Dir(file), 0o755))
	require.NoError(t, os.WriteFile(file, append(b, '\n'), 0o644))
	t.Logf("wrote %s: %d events", file, len(hist.Events))
}

// stepReport is a worker's report as one sends it since Span: the fields
// of governor.Observation in JSON, declared here so that this recorder
// builds with a governor from before Span too, which decodes the reports
// without it.
type stepReport struct {
	Worker    string        `json:"worker"`
	Requests  int           `json:"requests"`
	Throttles int           `json:"throttles"`
	Accepted  int           `json:"accepted,omitempty"`
	From      time.Time     `json:"from"`
	To        time.Time     `json:"to"`
	Span      time.Duration `json:"span,omitempty"`
}

// recordStepHistory runs a governor on a dev server and writes its history
// to file: three workers report 30 accepted answers a second each; at 3 s
// each reports a throttle at once, reaching back 1.5 s, and worker a's
// wall clock has stepped an hour forward within that report (To − From
// is an hour and 1.5 s, its Span 1.5 s); the workers go on as before
// until the run continues as new after its MaxSignals signals, 10 s
// later.
func recordStepHistory(t *testing.T, file string) {
	const tq = "governor-step-history"
	ctx, c := recordingGovernor(t, tq)

	workers := []string{"a", "b", "c"}
	const steady, after = 3, 10 // rounds of reports before the throttle, after it
	in := governor.Input{TaskQueue: "idempotent-http@https://api.example.com", Namespace: "ns",
		Config: governor.Config{MaxSignals: len(workers) * (steady + 1 + after)}}
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: governor.WorkflowID(in.TaskQueue), TaskQueue: tq}, governor.WorkflowName, in)
	require.NoError(t, err)
	signal := func(r stepReport) {
		require.NoError(t, c.SignalWorkflow(ctx, run.GetID(), run.GetRunID(), governor.SignalName, r))
	}
	round := func() {
		now := time.Now()
		for _, wk := range workers {
			signal(stepReport{Worker: wk, Requests: 30, Accepted: 30, From: now.Add(-time.Second), To: now, Span: time.Second})
		}
	}
	for range steady {
		round()
		time.Sleep(time.Second)
	}
	now := time.Now()
	for _, wk := range workers {
		r := stepReport{Worker: wk, Requests: 45, Accepted: 44, Throttles: 1, From: now.Add(-1500 * time.Millisecond), To: now, Span: 1500 * time.Millisecond}
		if wk == "a" {
			r.To = r.To.Add(time.Hour)
		}
		signal(r)
	}
	for range after {
		time.Sleep(time.Second)
		round()
	}
	awaitContinuedAsNew(ctx, t, c, run)
	writeHistory(ctx, t, c, run, file)
}

// awaitContinuedAsNew waits until run, the first run of a recording, has
// continued as new.
func awaitContinuedAsNew(ctx context.Context, t *testing.T, c client.Client, run client.WorkflowRun) {
	t.Helper()
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
}

// recordingGovernor starts a dev server and a worker of the governor on
// task queue tq (its rate writes recorded by rateSetter) for a recording,
// stopped when the test ends; ctx bounds the recording.
func recordingGovernor(t *testing.T, tq string) (context.Context, client.Client) {
	t.Helper()
	dev := startDevServer(t)
	c := dev.Client()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	w := worker.New(c, tq, worker.Options{})
	w.RegisterWorkflowWithOptions(governor.Workflow, workflow.RegisterOptions{Name: governor.WorkflowName})
	w.RegisterActivity(rateSetter{}.SetRate)
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	return ctx, c
}
