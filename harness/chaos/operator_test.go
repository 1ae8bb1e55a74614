package chaos

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/idemhttp/temporal-idempotent-http/internal/input"
)

// execution is one execution of `temporal workflow list --output json`,
// as the CLI prints it (protojson of WorkflowExecutionInfo).
func execution(t *testing.T, id string) string {
	t.Helper()
	b, err := protojson.Marshal(&workflowpb.WorkflowExecutionInfo{Execution: &commonpb.WorkflowExecution{WorkflowId: id, RunId: "r-" + id}})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestListedIDs reads both of the CLI's JSON forms: an array (--output
// json) and one execution per line (jsonl), and an empty list.
func TestListedIDs(t *testing.T) {
	a, b := execution(t, "wf-a"), execution(t, "wf-b")
	for _, tc := range []struct {
		name string
		out  string
		want []string
	}{
		{"array", "[\n" + a + ",\n" + b + "\n]\n", []string{"wf-a", "wf-b"}},
		{"lines", a + "\n" + b + "\n", []string{"wf-a", "wf-b"}},
		{"empty array", "[]\n", []string{}},
		{"nothing", "", []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := listedIDs([]byte(tc.out))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("listedIDs = %q, want %q", got, tc.want)
			}
		})
	}
	if _, err := listedIDs([]byte("[{")); err == nil {
		t.Errorf("listedIDs of broken JSON: no error")
	}
}

// TestPausedActivity reads `temporal workflow describe --output json`
// (protojson of DescribeWorkflowExecutionResponse): the HTTP activity's
// ID and whether it is paused; other activities are not it.
func TestPausedActivity(t *testing.T) {
	describe := func(acts ...*workflowpb.PendingActivityInfo) []byte {
		b, err := protojson.Marshal(&workflowservice.DescribeWorkflowExecutionResponse{PendingActivities: acts})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	http := func(id string, paused bool) *workflowpb.PendingActivityInfo {
		return &workflowpb.PendingActivityInfo{ActivityId: id, ActivityType: &commonpb.ActivityType{Name: input.ActivityNameV2}, Paused: paused}
	}
	other := &workflowpb.PendingActivityInfo{ActivityId: "1", ActivityType: &commonpb.ActivityType{Name: "Other"}, Paused: true}
	for _, tc := range []struct {
		name   string
		out    []byte
		id     string
		paused bool
	}{
		{"paused", describe(http("5", true)), "5", true},
		{"running", describe(http("5", false)), "5", false},
		{"another activity paused", describe(other, http("7", false)), "7", false},
		{"none pending", describe(), "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, paused, err := pausedActivity(tc.out)
			if err != nil {
				t.Fatal(err)
			}
			if id != tc.id || paused != tc.paused {
				t.Errorf("pausedActivity = %q, %v; want %q, %v", id, paused, tc.id, tc.paused)
			}
		})
	}
	if _, _, err := pausedActivity([]byte("not json")); err == nil {
		t.Errorf("pausedActivity of broken JSON: no error")
	}
}

// TestOperatorDefaults: the operator waits longer than the API works on
// a request, and at least 2 s.
func TestOperatorDefaults(t *testing.T) {
	for _, tc := range []struct {
		in         OperatorOptions
		processing time.Duration
		want       OperatorOptions
	}{
		{OperatorOptions{}, 500 * time.Millisecond, OperatorOptions{Every: 3 * time.Second, After: 2 * time.Second, Parallel: 4}},
		{OperatorOptions{}, 2 * time.Second, OperatorOptions{Every: 3 * time.Second, After: 8 * time.Second, Parallel: 4}},
		{OperatorOptions{Every: time.Second, After: time.Minute, Parallel: 1}, time.Second, OperatorOptions{Every: time.Second, After: time.Minute, Parallel: 1}},
	} {
		if got := tc.in.withDefaults(tc.processing); got != tc.want {
			t.Errorf("%+v.withDefaults(%s) = %+v, want %+v", tc.in, tc.processing, got, tc.want)
		}
	}
}

// TestOperatorFinish: the calls that waited and no list showed, the
// duplicates never unpaused, and the server's log lines counted from the
// campaign's start.
func TestOperatorFinish(t *testing.T) {
	dir := t.TempDir()
	logPath := filepath.Join(dir, "server.log")
	line := `{"level":"error","msg":"` + startedPausedLog + `. Activity ID: 5, Stamp: 0, event ID: 0"}` + "\n"
	if err := os.WriteFile(logPath, []byte(line+"{}\n"+line), 0o644); err != nil {
		t.Fatal(err)
	}
	if n := countLines(logPath, startedPausedLog); n != 2 {
		t.Fatalf("countLines = %d, want 2", n)
	}
	if n := countLines(filepath.Join(dir, "none.log"), startedPausedLog); n != 0 {
		t.Errorf("countLines of no file = %d, want 0", n)
	}
	o := &operator{listed: map[string]bool{"wf-a": true, "wf-b": true}, unpaused: map[string]bool{"wf-b": true},
		serverLog: func() string { return logPath }, serverLog0: 1}
	r := &OperatorReport{}
	o.finish(r, map[string]bool{"wf-a": true, "wf-b": true, "wf-c": true}, 4, 1, Verdict{Duplicated: []string{"wf-a", "wf-b"}})
	if r.Waited != 3 || r.Pauses != 4 || r.NotSent != 1 || !slices.Equal(r.Unlisted, []string{"wf-c"}) || !slices.Equal(r.Undecided, []string{"wf-a"}) || r.StartedPaused != 1 {
		t.Errorf("report %+v: want 3 waited, 4 pauses, 1 not sent, wf-c unlisted, wf-a undecided, 1 started paused", r)
	}
}
