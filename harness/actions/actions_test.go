package actions

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// exposition is a dev server's /metrics, trimmed: the action counter of
// two namespaces and of the history service, and a metric whose name
// begins like it.
const exposition = `# HELP action action counter
# TYPE action counter
action{action_type="grpc_StartWorkflowExecution",namespace="default",operation="StartWorkflowExecution",service_name="frontend"} 3
action{action_type="command_ScheduleActivityTask",namespace="default",operation="RespondWorkflowTaskCompleted",service_name="frontend"} 3
action{action_type="activity_retry",namespace="default",operation="PollActivityTaskQueue",service_name="frontend"} 1e+00
action{action_type="message_UpdateWorkflowExecution_Acceptance",namespace="default",operation="RespondWorkflowTaskCompleted",service_name="frontend"} 2
action{action_type="grpc_StartWorkflowExecution",namespace="temporal_system",operation="StartWorkflowExecution",service_name="frontend"} 2
action{action_type="grpc_StartWorkflowExecution",namespace="default",operation="StartWorkflowExecution",service_name="history"} 7
action{action_type="grpc_SignalWorkflowExecution",namespace="odd \"ns\", here",operation="SignalWorkflowExecution",service_name="frontend"} 5
action_other{action_type="grpc_StartWorkflowExecution",namespace="default",service_name="frontend"} 9
`

// TestParse: only the frontend's action counter of the namespace asked
// for, by type, escaped label values read as written.
func TestParse(t *testing.T) {
	c, err := Parse(strings.NewReader(exposition), "default")
	if err != nil {
		t.Fatal(err)
	}
	want := Counts{TypeStart: 3, TypeScheduled: 3, TypeRetry: 1, TypeUpdateAccepted: 2}
	if c.String() != want.String() {
		t.Errorf("Parse = %s; want %s", c, want)
	}
	odd, err := Parse(strings.NewReader(exposition), `odd "ns", here`)
	if err != nil {
		t.Fatal(err)
	}
	if odd[TypeSignal] != 5 || len(odd) != 1 {
		t.Errorf("escaped namespace: %s; want %s 5", odd, TypeSignal)
	}
	if _, err := Parse(strings.NewReader(`action{action_type="x 3`+"\n"), "default"); err == nil {
		t.Error("a sample without its closing brace parsed")
	}
	if got := c.Tally().String(); got != "workflow 3, activity 3, retry 1, update 2" {
		t.Errorf("Tally = %q", got)
	}
}

// TestCountsSub: a difference keeps the types that moved, new ones
// included.
func TestCountsSub(t *testing.T) {
	before := Counts{TypeStart: 3, TypeScheduled: 3}
	after := Counts{TypeStart: 5, TypeScheduled: 3, TypeHeartbeat: 2}
	d := after.Sub(before)
	if d.String() != (Counts{TypeStart: 2, TypeHeartbeat: 2}).String() || d.Total() != 4 {
		t.Errorf("Sub = %s (total %g)", d, d.Total())
	}
	if s := before.Add(d); s.String() != after.String() {
		t.Errorf("Add = %s; want %s", s, after)
	}
}

// TestSettle: Settle returns once the counter stops moving, with its
// value then.
func TestSettle(t *testing.T) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v := min(n.Add(1), 4) // moves for the first four scrapes
		fmt.Fprintf(w, "action{action_type=%q,namespace=\"default\",service_name=\"frontend\"} %d\n", TypeStart, v)
	}))
	defer srv.Close()
	c, err := Settle(context.Background(), srv.URL, "default", 500*time.Millisecond, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if c[TypeStart] != 4 {
		t.Errorf("Settle = %s; want %s 4", c, TypeStart)
	}
}

// history builds events one second apart from t0, numbering them.
func history(t0 time.Time, events ...*historypb.HistoryEvent) []*historypb.HistoryEvent {
	for i, e := range events {
		e.EventId = int64(i + 1)
		e.EventTime = timestamppb.New(t0.Add(time.Duration(i) * time.Second))
	}
	return events
}

func ev(t enumspb.EventType) *historypb.HistoryEvent { return &historypb.HistoryEvent{EventType: t} }

func started(continued string) *historypb.HistoryEvent {
	return &historypb.HistoryEvent{EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, Attributes: &historypb.HistoryEvent_WorkflowExecutionStartedEventAttributes{
		WorkflowExecutionStartedEventAttributes: &historypb.WorkflowExecutionStartedEventAttributes{ContinuedExecutionRunId: continued}}}
}

func activityStarted(attempt int32) *historypb.HistoryEvent {
	return &historypb.HistoryEvent{EventType: enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED, Attributes: &historypb.HistoryEvent_ActivityTaskStartedEventAttributes{
		ActivityTaskStartedEventAttributes: &historypb.ActivityTaskStartedEventAttributes{Attempt: attempt}}}
}

func marker(task int64) *historypb.HistoryEvent {
	return &historypb.HistoryEvent{EventType: enumspb.EVENT_TYPE_MARKER_RECORDED, Attributes: &historypb.HistoryEvent_MarkerRecordedEventAttributes{
		MarkerRecordedEventAttributes: &historypb.MarkerRecordedEventAttributes{MarkerName: "Version", WorkflowTaskCompletedEventId: task}}}
}

func upsert(keys ...string) *historypb.HistoryEvent {
	fields := map[string]*commonpb.Payload{}
	for _, k := range keys {
		fields[k] = &commonpb.Payload{Data: []byte(`"x"`)}
	}
	return &historypb.HistoryEvent{EventType: enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES, Attributes: &historypb.HistoryEvent_UpsertWorkflowSearchAttributesEventAttributes{
		UpsertWorkflowSearchAttributesEventAttributes: &historypb.UpsertWorkflowSearchAttributesEventAttributes{SearchAttributes: &commonpb.SearchAttributes{IndexedFields: fields}}}}
}

// TestFromHistory: the server's count and Cloud's of typical histories.
func TestFromHistory(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	wftCompleted := ev(enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED)
	for _, tc := range []struct {
		name          string
		events        []*historypb.HistoryEvent
		w             Window
		server, cloud string
		attempts      int
	}{
		{"one activity at once", history(t0, started(""), ev(enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED), ev(enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED),
			activityStarted(1), ev(enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED), ev(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED)),
			Window{}, "workflow 1, activity 1", "workflow 1, activity 1", 1},
		{"four attempts and a timer", history(t0, started(""), ev(enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED), activityStarted(4), ev(enumspb.EVENT_TYPE_TIMER_STARTED)),
			Window{}, "workflow 1, activity 1, retry 3, timer 1", "workflow 1, activity 1, retry 3, timer 1", 4},
		{"signal-with-start, then signals", history(t0, started(""), ev(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED), ev(enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED),
			ev(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED), ev(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED)),
			Window{}, "signal 3", "signal 3", 0},
		{"versions: three markers in one task and their upserts", history(t0, started(""), wftCompleted, marker(2), marker(2), marker(2),
			upsert(changeVersion), upsert(changeVersion), upsert(changeVersion), upsert("CustomKeyword")),
			Window{}, "workflow 1, marker 1, upsert 4", "workflow 1, marker 1, upsert 1", 0},
		{"markers in two tasks", history(t0, started(""), marker(2), marker(5), marker(5)),
			Window{}, "workflow 1, marker 2", "workflow 1, marker 2", 0},
		{"a run continued as new counts its continue-as-new, not its start", history(t0, started("run-1"),
			ev(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED), ev(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW)),
			Window{}, "workflow 1, signal 1", "workflow 1, signal 1", 0},
		{"an update accepted", history(t0, started(""), ev(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED), ev(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED)),
			Window{}, "workflow 1, update 1", "workflow 1, update 1", 0},
		{"a window: the signals from the third second on", history(t0, started(""), ev(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED),
			ev(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED), ev(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED)),
			Window{From: t0.Add(2 * time.Second)}, "signal 2", "signal 2", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := FromHistory(tc.events, tc.w)
			if got := r.Server.String(); got != tc.server {
				t.Errorf("server %q; want %q", got, tc.server)
			}
			if got := r.Cloud.String(); got != tc.cloud {
				t.Errorf("cloud %q; want %q", got, tc.cloud)
			}
			if r.Attempts != tc.attempts {
				t.Errorf("attempts %d; want %d", r.Attempts, tc.attempts)
			}
		})
	}
}

// TestCategory: every type this package names has its category.
func TestCategory(t *testing.T) {
	for typ, want := range map[string]Category{
		TypeStart: Workflow, TypeSignalWithStart: Signal, TypeHeartbeat: Heartbeat, TypeRetry: Retry, TypeScheduled: Activity,
		TypeTimer: Timer, TypeBatchMarkers: Marker, "message_UpdateWorkflowExecution:Acceptance": Update, TypeChildExtra: Workflow, TypeUpsert: Upsert, TypeUpdateRejected: Update,
		TypeQuery: Query, TypeContinueAsNew: Workflow, "grpc_CreateSchedule": Other,
	} {
		if got := CategoryOf(typ); got != want {
			t.Errorf("CategoryOf(%s) = %s; want %s", typ, got, want)
		}
	}
	if Num(1.5) != "1.5" || Num(2) != "2" || Num(0.333) != "0.33" {
		t.Errorf("Num: %s %s %s", Num(1.5), Num(2), Num(0.333))
	}
}
