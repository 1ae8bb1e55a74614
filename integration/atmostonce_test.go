package integration_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// temporalCLI runs the Temporal CLI against the dev server and returns
// what it printed.
func temporalCLI(ctx context.Context, t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, bins.Temporal, append(args, "--address", dev.HostPort, "--namespace", dev.Namespace)...)
	cmd.Env = append(os.Environ(), dev.Env()...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("temporal %s: %v\n%s%s", strings.Join(args, " "), err, stdout.Bytes(), stderr.Bytes())
	}
	return stdout.String()
}

// pausedQuery is the list query docs/unknown-outcomes.md gives: a call
// AtMostOnce by its Request is scheduled as IdempotentHTTPRequestV2, one
// AtMostOnce by its origin's convention as IdempotentHTTPRequest.
const pausedQuery = `TemporalPauseInfo IN ("property:activityType=IdempotentHTTPRequest", "property:activityType=IdempotentHTTPRequestV2") AND ExecutionStatus="Running"`

// pausedCalls lists, with the CLI, the running workflows whose HTTP call
// is paused for a decision (docs/unknown-outcomes.md gives the command).
func pausedCalls(ctx context.Context, t *testing.T) string {
	return temporalCLI(ctx, t, "workflow", "list", "--query", pausedQuery)
}

// TestAtMostOnceWaitsForADecision (#41 item 3) on a real server, through
// the worker binary: an AtMostOnce call to an API without keys whose
// answer was lost pauses its activity; `temporal workflow list` shows it
// waiting, `workflow describe` says why; a person's decision by the CLI
// ends it: unpause sends again, complete with the API's answer is the
// result (Reconciled "operator"), complete with gave_up fails the call
// with GaveUp. The API makes no record the person did not choose.
func TestAtMostOnceWaitsForADecision(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		// first is what the first request gets: cut after the work, or a
		// gateway's 503 before it.
		first    testsuite.Step
		decide   func(ctx context.Context, t *testing.T, wid, activityID, record string)
		records  int
		errType  string
		operator bool
	}{
		{"send again", testsuite.Fail(503), func(ctx context.Context, t *testing.T, wid, id, _ string) {
			temporalCLI(ctx, t, "activity", "unpause", "--workflow-id", wid, "--activity-id", id)
		}, 1, "", false},
		{"it went through", testsuite.CutAfterWork(), func(ctx context.Context, t *testing.T, wid, id, record string) {
			temporalCLI(ctx, t, "activity", "complete", "--workflow-id", wid, "--activity-id", id, "--result", `{"status":201,"body":`+record+`}`)
		}, 1, "", true},
		{"give up", testsuite.CutAfterWork(), func(ctx context.Context, t *testing.T, wid, id, _ string) {
			temporalCLI(ctx, t, "activity", "complete", "--workflow-id", wid, "--activity-id", id, "--result", `{"gave_up":"refunded by hand"}`)
		}, 1, workflows.ErrTypeGaveUp, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := testsuite.StartServer(t, testsuite.Options{Dialect: testsuite.PlainDialect(), Lookup: "client_reference"})
			srv.Script(tt.first)
			tq := uniqueName(t, "tq")
			startWorker(t, workerOptions{TaskQueue: tq, Origins: []string{srv.URL}})
			wid := uniqueName(t, "payment")
			ctx := ctxT(t, 2*time.Minute)
			// A run timeout bounds the activity's schedule-to-close: an
			// hour, the least a call at most once waits for a person.
			run, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: wid, TaskQueue: tq, WorkflowExecutionTimeout: 2 * time.Hour},
				workflows.WorkflowName, workflows.Request{
					Operation: "charge", URL: srv.URL + "/payments", Body: json.RawMessage(`{"amount":4200}`),
					KeyIn: "body:client_reference", Reconcile: workflows.Reconcile{AtMostOnce: true},
					Retry: workflows.RetryOptions{InitialInterval: 100 * time.Millisecond},
				})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = tc.TerminateWorkflow(context.Background(), wid, "", "test over") })
			// The call pauses: listed by the CLI, its reason in describe.
			var activityID string
			deadline := time.Now().Add(45 * time.Second)
			for {
				if strings.Contains(pausedCalls(ctx, t), wid) {
					desc, err := tc.DescribeWorkflowExecution(ctx, wid, "")
					if err != nil {
						t.Fatal(err)
					}
					if pa := desc.GetPendingActivities(); len(pa) == 1 {
						activityID = pa[0].GetActivityId()
						break
					}
				}
				if time.Now().After(deadline) {
					t.Fatalf("the call was not listed as paused in 45 s; API stats %+v\nworkflow list:\n%s", srv.Stats(), temporalCLI(ctx, t, "workflow", "list"))
				}
				time.Sleep(300 * time.Millisecond)
			}
			desc := temporalCLI(ctx, t, "workflow", "describe", "--workflow-id", wid, "--output", "json")
			if !strings.Contains(desc, "at most once") || !strings.Contains(desc, "temporal activity unpause") {
				t.Errorf("workflow describe does not say why the call waits:\n%s", desc)
			}
			sentBefore := srv.Stats().Requests
			time.Sleep(2 * time.Second)
			if n := srv.Stats().Requests; n != sentBefore {
				t.Fatalf("the paused call sent %d more requests while waiting", n-sentBefore)
			}
			record := "{}"
			if recs := srv.Records(); len(recs) > 0 {
				b, _ := json.Marshal(recs[0])
				record = string(b)
			}
			tt.decide(ctx, t, wid, activityID, record)
			var resp workflows.Response
			err = run.Get(ctx, &resp)
			if got := srv.Stats().Records; got != tt.records {
				t.Errorf("the API made %d records; want %d", got, tt.records)
			}
			if tt.errType != "" {
				var appErr *temporal.ApplicationError
				if !errors.As(err, &appErr) || appErr.Type() != tt.errType {
					t.Fatalf("the call ended with %v; want %s", err, tt.errType)
				}
				return
			}
			if err != nil {
				t.Fatalf("the call failed: %v", err)
			}
			if tt.operator && (resp.Reconciled != "operator" || resp.IdempotencyKey != keyOf(wid, "charge")) {
				t.Errorf("result %+v: want Reconciled operator with the call's key", resp)
			}
			if !tt.operator && (resp.Status != 201 || resp.Reconciled != "") {
				t.Errorf("result %+v: want the API's 201 to the request sent again", resp)
			}
			t.Logf("%s: %d requests, result %d %s", tt.name, srv.Stats().Requests, resp.Status, resp.Reconciled)
		})
	}
}

// TestAtMostOnceAfterLostWorker (#41 item 3): a worker SIGKILLed while
// its request is at the API leaves no record of the attempt; the attempt
// Temporal starts after the start-to-close timeout, on another worker,
// checks first: it pauses for a decision and sends nothing, though the
// API did the work.
func TestAtMostOnceAfterLostWorker(t *testing.T) {
	t.Parallel()
	srv := testsuite.StartServer(t, testsuite.Options{Dialect: testsuite.PlainDialect(), ProcessingTime: 3 * time.Second})
	tq := uniqueName(t, "tq")
	first := startWorker(t, workerOptions{TaskQueue: tq, Origins: []string{srv.URL}})
	wid := uniqueName(t, "payment")
	ctx := ctxT(t, 2*time.Minute)
	_, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: wid, TaskQueue: tq, WorkflowExecutionTimeout: 2 * time.Hour},
		workflows.WorkflowName, workflows.Request{
			Operation: "charge", URL: srv.URL + "/payments", Body: json.RawMessage(`{"amount":4200}`),
			Reconcile: workflows.Reconcile{AtMostOnce: true}, StartToCloseTimeout: 5 * time.Second,
		})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tc.TerminateWorkflow(context.Background(), wid, "", "test over") })
	for srv.Stats().Requests == 0 {
		if ctx.Err() != nil {
			t.Fatal("the request never reached the API")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := first.Kill(); err != nil {
		t.Fatal(err)
	}
	startWorker(t, workerOptions{TaskQueue: tq, Origins: []string{srv.URL}})
	deadline := time.Now().Add(45 * time.Second)
	for !strings.Contains(pausedCalls(ctx, t), wid) {
		if time.Now().After(deadline) {
			t.Fatalf("the call was not listed as paused in 45 s; API stats %+v", srv.Stats())
		}
		time.Sleep(300 * time.Millisecond)
	}
	time.Sleep(time.Second)
	if st := srv.Stats(); st.Requests != 1 || st.Records != 1 {
		t.Errorf("API stats %+v: want the one request, its work done, and nothing sent again", st)
	}
	desc := temporalCLI(ctx, t, "workflow", "describe", "--workflow-id", wid, "--output", "json")
	if !strings.Contains(desc, "left no record") {
		t.Errorf("workflow describe does not say the earlier attempt was lost:\n%s", desc)
	}
}
