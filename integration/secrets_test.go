package integration_test

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/protobuf/proto"

	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// TestRedactionAfterTruncation: the worker binary sends its
// API_TOKEN to an API that answers 500 four times, then 400 on the fifth
// (the last, by default) attempt, each time with a body echoing the
// Authorization header so that the token straddles byte 1024, where error
// snippets are cut. No 8-byte piece of the token reaches the pending
// activity's last failure, the workflow's history (every payload decoded)
// or the worker's log; the redacted snippet does.
func TestRedactionAfterTruncation(t *testing.T) {
	t.Parallel()
	token := "tok_" + randomHex(16)
	for _, asJSON := range []bool{false, true} {
		b := echoBody("Bearer "+token, token, asJSON)
		if i := bytes.Index(b, []byte(token)); i < 0 || i >= 1024 || i+len(token) <= 1024 {
			t.Fatalf("the token is at %d..%d of the body: it must straddle byte 1024", i, i+len(token))
		}
	}
	const failing = 4 // 500s before the 400
	var (
		mu                  sync.Mutex
		requests, withToken int
	)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		mu.Lock()
		requests++
		n := requests
		if auth == "Bearer "+token {
			withToken++
		}
		mu.Unlock()
		if n <= failing {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write(echoBody(auth, token, false))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write(echoBody(auth, token, true))
	}))
	t.Cleanup(api.Close)
	tq := uniqueName(t, "tq")
	wp := startWorker(t, workerOptions{TaskQueue: tq, Origins: []string{api.URL}, Token: token})
	wid := uniqueName(t, "charge")
	ctx := ctxT(t, 2*time.Minute)
	began := time.Now()
	run := start(t, ctx, tq, wid, workflows.Request{Operation: "charge", URL: api.URL + "/charges", Body: body})

	// While the activity retries, its last failure (a 500, with the body
	// snippet in its details) is held by the server and shown in the Web UI.
	var retrying proto.Message
	for retrying == nil {
		desc, err := tc.DescribeWorkflowExecution(ctx, wid, run.GetRunID())
		if err != nil {
			t.Fatal(err)
		}
		if st := desc.GetWorkflowExecutionInfo().GetStatus(); st != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			t.Fatalf("the workflow ended (%v) before a retry after a 500 was seen", st)
		}
		if pa := desc.GetPendingActivities(); len(pa) == 1 && pa[0].GetAttempt() >= 2 && strings.Contains(pa[0].GetLastFailure().GetMessage(), "500") {
			retrying = desc
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	retryingDump := dump(t, retrying)
	checkNoSecret(t, "the pending activity's last failure (a 500)", retryingDump, token)
	if !bytes.Contains(retryingDump, []byte("upstream failed")) || !bytes.Contains(retryingDump, []byte("[REDACTED]")) {
		t.Errorf("the pending activity's last failure does not hold the redacted body snippet: the search above proves nothing:\n%s", retryingDump)
	}

	err := run.Get(ctx, nil)
	took := time.Since(began)
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || appErr.Type() != workflows.ErrTypeHTTPClientError {
		t.Fatalf("workflow error %v; want a %s for the 400", err, workflows.ErrTypeHTTPClientError)
	}
	d, _ := workflows.AsFailure(err)
	if d.Status != 400 || d.Attempt != failing+1 {
		t.Errorf("details: status %d on attempt %d; want 400 on attempt %d", d.Status, d.Attempt, failing+1)
	}
	if len(d.Body) > 1024 || !strings.Contains(d.Body, "[REDACTED]") || strings.Contains(d.Body, token[:8]) {
		t.Errorf("details body (%d bytes) %q: want at most 1024 bytes with the token redacted", len(d.Body), d.Body)
	}
	if !strings.Contains(appErr.Error(), "(response: ") {
		t.Errorf("error message %q does not hold the response snippet", appErr.Error())
	}

	hist := dump(t, messages(history(t, ctx, wid, run.GetRunID()))...)
	checkNoSecret(t, "the workflow's history", hist, token)
	if !bytes.Contains(hist, []byte("invalid_request")) || !bytes.Contains(hist, []byte("[REDACTED]")) {
		t.Errorf("the history does not hold the 400's redacted body snippet: the search above proves nothing")
	}

	if err := wp.Stop(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	logs := wp.Output()
	checkNoSecret(t, "the worker's log", []byte(logs), token)
	if len(logRecords(logs, "HTTP request failed, not retrying")) != 1 || len(logRecords(logs, "HTTP attempt failed, Temporal will retry")) != failing {
		t.Errorf("the worker's log does not hold one line per failed attempt: the search above proves nothing:\n%s", logs)
	}
	mu.Lock()
	defer mu.Unlock()
	if requests != failing+1 || withToken != requests {
		t.Errorf("the API got %d requests, %d with the token; want %d, all with it", requests, withToken, failing+1)
	}
	t.Logf("failed after %s: %v", took.Round(time.Millisecond), appErr)
}

// TestUserInfoInURLRefused: a URL with a password in its user info is
// refused before it reaches Temporal: the starter exits non-zero without
// starting a workflow or printing the password; the ready workflow started
// with it by a client fails with InvalidRequest before scheduling the
// activity (so the package writes the password to no activity input), and
// neither its failure nor the worker's log holds the password.
func TestUserInfoInURLRefused(t *testing.T) {
	t.Parallel()
	const password = "hunter2secret"
	var hits atomic.Int32
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(api.Close)
	badURL := "http://user:" + password + "@" + strings.TrimPrefix(api.URL, "http://") + "/payments"
	tq := uniqueName(t, "tq")
	wp := startWorker(t, workerOptions{TaskQueue: tq, Origins: []string{api.URL}})
	ctx := ctxT(t, 2*time.Minute)

	t.Run("starter", func(t *testing.T) {
		wid := uniqueName(t, "payment")
		res := runStarter(t, ctx, tq, "--url", badURL, "--workflow-id", wid, "--body", string(body))
		out := res.Stdout + res.Stderr
		if res.Code == 0 {
			t.Errorf("the starter exited 0; want a failure")
		}
		if strings.Contains(out, password) {
			t.Errorf("the starter printed the password:\n%s", out)
		}
		if !strings.Contains(out, "user info") {
			t.Errorf("the starter's message does not say what is wrong (user info):\n%s", out)
		}
		_, err := tc.DescribeWorkflowExecution(ctx, wid, "")
		var nf *serviceerror.NotFound
		if !errors.As(err, &nf) {
			t.Errorf("describing workflow %s: %v; want NotFound (no workflow started)", wid, err)
		}
		list, err := tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: fmt.Sprintf("WorkflowId = '%s'", wid)})
		if err != nil {
			t.Fatal(err)
		}
		if n := len(list.GetExecutions()); n != 0 {
			t.Errorf("%d workflows with ID %s; want none", n, wid)
		}
	})

	t.Run("client", func(t *testing.T) {
		wid := uniqueName(t, "payment")
		run, resp, err := call(t, ctx, tq, wid, workflows.Request{Operation: "charge", URL: badURL, Body: body})
		if err == nil {
			t.Fatalf("workflow succeeded (%+v); want InvalidRequest", resp)
		}
		var appErr *temporal.ApplicationError
		if !errors.As(err, &appErr) || appErr.Type() != workflows.ErrTypeInvalidRequest {
			t.Fatalf("workflow error %v; want %s", err, workflows.ErrTypeInvalidRequest)
		}
		if msg := err.Error(); strings.Contains(msg, password) || !strings.Contains(msg, "user info") {
			t.Errorf("error %q: want it to name the user info without the password", msg)
		}
		events := history(t, ctx, wid, run.GetRunID())
		var closed *historypb.HistoryEvent
		for _, ev := range events {
			switch ev.GetEventType() {
			case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
				t.Errorf("an activity was scheduled (event %d): its input holds the URL", ev.GetEventId())
			case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED:
				closed = ev
			}
		}
		if closed == nil {
			t.Fatalf("no WorkflowExecutionFailed event in %d events", len(events))
		}
		// The input (the client's own doing) holds the password; what the
		// package wrote, the failure, does not.
		fail := dump(t, closed)
		if bytes.Contains(fail, []byte(password)) {
			t.Errorf("the workflow's failure in history holds the password: %s", fail)
		}
		if !bytes.Contains(fail, []byte(workflows.ErrTypeInvalidRequest)) {
			t.Errorf("the workflow's failure in history is not %s: %s", workflows.ErrTypeInvalidRequest, fail)
		}
	})

	if err := wp.Stop(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if logs := wp.Output(); strings.Contains(logs, password) {
		t.Errorf("the worker's log holds the password:\n%s", logs)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the API got %d requests; want none", n)
	}
}
