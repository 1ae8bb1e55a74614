package actions

import (
	"context"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
)

// changeVersion is the search attribute workflow.GetVersion upserts,
// which Temporal Cloud does not bill.
const changeVersion = "TemporalChangeVersion"

// Run is the actions of one workflow run read from its history: as the
// server's counter counts them and as Temporal Cloud bills them, without
// what a history does not hold (heartbeats, queries, rejected updates:
// take those from the counter).
type Run struct {
	Server, Cloud Tally
	// Attempts counts the activity attempts (retries included); Markers
	// the markers and MarkerTasks the workflow tasks that recorded some;
	// VersionUpserts the upserts of TemporalChangeVersion alone (counted
	// by the server, free on Cloud).
	Attempts, Markers, MarkerTasks, VersionUpserts int
}

// Add returns r + o.
func (r Run) Add(o Run) Run {
	return Run{Server: r.Server.Add(o.Server), Cloud: r.Cloud.Add(o.Cloud), Attempts: r.Attempts + o.Attempts,
		Markers: r.Markers + o.Markers, MarkerTasks: r.MarkerTasks + o.MarkerTasks, VersionUpserts: r.VersionUpserts + o.VersionUpserts}
}

// Window bounds the events FromHistory counts: those whose time is in
// [From, To]; a zero bound is open.
type Window struct{ From, To time.Time }

func (w Window) holds(t time.Time) bool {
	return (w.From.IsZero() || !t.Before(w.From)) && (w.To.IsZero() || !t.After(w.To))
}

// FromHistory counts the actions of the run whose history is events,
// those within w:
//
//   - a start: one (server: grpc_StartWorkflowExecution); started by a
//     signal-with-start (the history's second event is its signal), one
//     for both (grpc_SignalWithStartWorkflowExecution); a run started by
//     continue-as-new or as a child, none here: the run that continued
//     or the parent counts it (its command);
//   - an activity: one when scheduled and one per attempt after the first
//     (the attempt of its started event; the server counts each when a
//     worker is handed it, activity_retry);
//   - a timer, a signal, a signal to another workflow, an accepted
//     update, a continue-as-new, a properties change, a Nexus operation
//     or its cancel request: one each;
//   - a child workflow: two (the server's START_CHILD_WORKFLOW_EXECUTION
//     and its _Extra; the child's own start is this);
//   - markers: one per workflow task that recorded any (the server's
//     command_BatchMarkers; Cloud's rule);
//   - an upsert: one, but Cloud bills none for an upsert of
//     TemporalChangeVersion alone (workflow.GetVersion's).
func FromHistory(events []*historypb.HistoryEvent, w Window) Run {
	r := Run{Server: Tally{}, Cloud: Tally{}}
	both := func(c Category, n float64) {
		r.Server[c] += n
		r.Cloud[c] += n
	}
	markerTasks := map[int64]bool{}
	for i, e := range events {
		if !w.holds(e.GetEventTime().AsTime()) {
			continue
		}
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
			a := e.GetWorkflowExecutionStartedEventAttributes()
			if a.GetContinuedExecutionRunId() != "" || a.GetParentWorkflowExecution() != nil {
				continue
			}
			if len(events) > i+1 && events[i+1].GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED {
				both(Signal, 1) // a signal-with-start: its signal is the next event
				continue
			}
			both(Workflow, 1)
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
			if i == 1 && events[0].GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED {
				s := events[0].GetWorkflowExecutionStartedEventAttributes()
				if s.GetContinuedExecutionRunId() == "" && s.GetParentWorkflowExecution() == nil {
					continue // counted with its start
				}
			}
			both(Signal, 1)
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			both(Activity, 1)
			r.Attempts++
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			if n := e.GetActivityTaskStartedEventAttributes().GetAttempt(); n > 1 {
				both(Retry, float64(n-1))
				r.Attempts += int(n - 1)
			}
		case enumspb.EVENT_TYPE_TIMER_STARTED:
			both(Timer, 1)
		case enumspb.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED:
			both(Signal, 1)
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
			both(Update, 1)
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
			both(Workflow, 1)
		case enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
			both(Workflow, 2)
		case enumspb.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED,
			enumspb.EVENT_TYPE_NEXUS_OPERATION_SCHEDULED, enumspb.EVENT_TYPE_NEXUS_OPERATION_CANCEL_REQUESTED:
			both(Other, 1)
		case enumspb.EVENT_TYPE_MARKER_RECORDED:
			r.Markers++
			if t := e.GetMarkerRecordedEventAttributes().GetWorkflowTaskCompletedEventId(); !markerTasks[t] {
				markerTasks[t] = true
				r.MarkerTasks++
				both(Marker, 1)
			}
		case enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
			r.Server[Upsert]++
			fields := e.GetUpsertWorkflowSearchAttributesEventAttributes().GetSearchAttributes().GetIndexedFields()
			if _, ok := fields[changeVersion]; ok && len(fields) == 1 {
				r.VersionUpserts++
				continue
			}
			r.Cloud[Upsert]++
		}
	}
	r.Server, r.Cloud = r.Server.clean(), r.Cloud.clean()
	return r
}

// History returns the events of a workflow run (runID "" for the
// latest).
func History(ctx context.Context, c client.Client, workflowID, runID string) ([]*historypb.HistoryEvent, error) {
	it := c.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var events []*historypb.HistoryEvent
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return nil, fmt.Errorf("actions: the history of %s: %w", workflowID, err)
		}
		events = append(events, e)
	}
	return events, nil
}

// FromWorkflow counts the actions within w of workflow workflowID: its
// latest run and, back along its continue-as-new chain, every earlier
// run that has events within w.
func FromWorkflow(ctx context.Context, c client.Client, workflowID string, w Window) (Run, error) {
	var total Run
	runID := ""
	for range 1000 {
		events, err := History(ctx, c, workflowID, runID)
		if err != nil {
			return total, err
		}
		total = total.Add(FromHistory(events, w))
		if len(events) == 0 {
			break
		}
		prev := events[0].GetWorkflowExecutionStartedEventAttributes().GetContinuedExecutionRunId()
		if prev == "" || !w.From.IsZero() && events[0].GetEventTime().AsTime().Before(w.From) {
			break
		}
		runID = prev
	}
	return total, nil
}
