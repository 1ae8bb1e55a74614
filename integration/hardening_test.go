package integration_test

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
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

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// These tests check, on the dev server and through the worker and starter
// binaries, the hardening of secrets, URLs, results and request bodies, and
// the waits for keys in flight with default options.

// starterOutput is what the starter prints on success (cmd/starter's Output).
type starterOutput struct {
	WorkflowID     string          `json:"workflow_id"`
	RunID          string          `json:"run_id"`
	IdempotencyKey string          `json:"idempotency_key"`
	Status         int             `json:"status"`
	Attempts       int32           `json:"attempts"`
	Replayed       bool            `json:"replayed"`
	Body           json.RawMessage `json:"body,omitempty"`
	BodyOmitted    bool            `json:"body_omitted,omitempty"`
}

func parseStarterOutput(t testing.TB, res starterRun) starterOutput {
	t.Helper()
	var out starterOutput
	if err := json.Unmarshal([]byte(res.Stdout), &out); err != nil {
		t.Fatalf("starter stdout %q: %v", res.Stdout, err)
	}
	return out
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func messages(events []*historypb.HistoryEvent) []proto.Message {
	ms := make([]proto.Message, len(events))
	for i, ev := range events {
		ms[i] = ev
	}
	return ms
}

// echoBody is an error body that echoes the Authorization header auth so
// that token, inside it, straddles byte 1024 of the body, where error
// snippets are cut; as text or as JSON.
func echoBody(auth, token string, asJSON bool) []byte {
	prefix, mid, tail := "upstream failed ", "; the request had Authorization: ", "; nothing was charged; "+strings.Repeat("y", 300)
	if asJSON {
		prefix, mid, tail = `{"error":"invalid_request","detail":"`, ` the request had Authorization: `, `","more":"`+strings.Repeat("y", 300)+`"}`
	}
	at := max(strings.Index(auth, token), 0)
	pad := 1024 - len(token)/2 - len(prefix) - len(mid) - at
	return []byte(prefix + strings.Repeat("x", pad) + mid + auth + tail)
}

// TestHardeningRedactionAfterTruncation: the worker binary sends its
// API_TOKEN to an API that answers 500 four times, then 400 on the fifth
// (the last, by default) attempt, each time with a body echoing the
// Authorization header so that the token straddles byte 1024, where error
// snippets are cut. No 8-byte piece of the token reaches the pending
// activity's last failure, the workflow's history (every payload decoded)
// or the worker's log; the redacted snippet does.
func TestHardeningRedactionAfterTruncation(t *testing.T) {
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

// TestHardeningUserInfoInURL: a URL with a password in its user info is
// refused before it reaches Temporal: the starter exits non-zero without
// starting a workflow or printing the password; the ready workflow started
// with it by a client fails with InvalidRequest before scheduling the
// activity (so the package writes the password to no activity input), and
// neither its failure nor the worker's log holds the password.
func TestHardeningUserInfoInURL(t *testing.T) {
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

// TestHardeningResultOverPayloadLimit: a 201 whose JSON body is one string
// of '<' just under MaxResponseBytes (1 MiB), which JSON encodes 6 times
// longer, past Temporal's 2 MiB payload limit: the workflow succeeds on
// the first attempt with the body omitted as too large, its size and
// SHA-256 those of the server's body; the same workflow ID run again gets
// the same from the stored response. The work is done once.
func TestHardeningResultOverPayloadLimit(t *testing.T) {
	t.Parallel()
	const open, end = `{"html":"`, `"}`
	size := activities.DefaultMaxResponseBytes - 64
	big := []byte(open + strings.Repeat("<", size-len(open)-len(end)) + end)
	sum := sha256.Sum256(big)
	wantSHA := hex.EncodeToString(sum[:])
	var works atomic.Int32
	srv := testsuite.StartServer(t, testsuite.Options{Work: func(*http.Request, []byte) (int, []byte) {
		works.Add(1)
		return http.StatusCreated, big
	}})
	tq := uniqueName(t, "tq")
	startWorker(t, workerOptions{TaskQueue: tq, Origins: []string{srv.URL}})
	wid := uniqueName(t, "report")
	ctx := ctxT(t, 2*time.Minute)
	req := workflows.Request{Operation: "render", URL: srv.URL + "/reports", Body: body}
	for _, rerun := range []bool{false, true} {
		began := time.Now()
		run, resp, err := call(t, ctx, tq, wid, req)
		if err != nil {
			t.Fatalf("run (again: %v) failed: %v", rerun, err)
		}
		if resp.Status != 201 || resp.Attempt != 1 || resp.Replayed != rerun {
			t.Errorf("run (again: %v): status %d on attempt %d, replayed %v; want 201 on attempt 1, replayed %v", rerun, resp.Status, resp.Attempt, resp.Replayed, rerun)
		}
		if !resp.BodyOmitted || resp.OmittedReason != "too large" || resp.Body != nil || resp.RawBody != nil {
			t.Errorf("run (again: %v): body omitted %v (%q), %d body bytes kept; want it omitted as \"too large\"", rerun, resp.BodyOmitted, resp.OmittedReason, len(resp.Body)+len(resp.RawBody))
		}
		if resp.BodyBytes != int64(len(big)) || resp.BodySHA256 != wantSHA {
			t.Errorf("run (again: %v): body_bytes %d, body_sha256 %s; want the server's %d, %s", rerun, resp.BodyBytes, resp.BodySHA256, len(big), wantSHA)
		}
		var completed int
		for _, ev := range history(t, ctx, wid, run.GetRunID()) {
			if a := ev.GetActivityTaskCompletedEventAttributes(); a != nil {
				completed++
				if n := proto.Size(a.GetResult()); n > 64<<10 {
					t.Errorf("the activity's result in history is %d bytes", n)
				}
			}
		}
		if completed != 1 {
			t.Errorf("%d ActivityTaskCompleted events; want 1", completed)
		}
		t.Logf("run (again: %v) took %s", rerun, time.Since(began).Round(time.Millisecond))
	}
	if n := works.Load(); n != 1 {
		t.Errorf("the server did the work %d times; want once", n)
	}
	checkStats(t, srv.Stats(), testsuite.Stats{Requests: 2, DistinctKeys: 1, Records: 1, Replays: 1, InFlight: 0, Failures: 0})
}

// TestHardeningExactBodyBytes: a body with spaces and <, > and & goes from
// the starter's --body to the API byte for byte, and the worker logs its
// SHA-256 on success.
func TestHardeningExactBodyBytes(t *testing.T) {
	t.Parallel()
	const exact = `{ "note" : "<b>&amp;</b>" ,  "amount": 4200 }`
	sum := sha256.Sum256([]byte(exact))
	wantSHA := hex.EncodeToString(sum[:])
	srv := testsuite.StartServer(t, testsuite.Options{})
	tq := uniqueName(t, "tq")
	wp := startWorker(t, workerOptions{TaskQueue: tq, Origins: []string{srv.URL}})
	wid := uniqueName(t, "payment")
	ctx := ctxT(t, 2*time.Minute)
	res := runStarter(t, ctx, tq, "--url", srv.URL+"/payments", "--body", exact, "--workflow-id", wid)
	if res.Code != 0 {
		t.Fatalf("the starter exited %d; want 0", res.Code)
	}
	key := keyOf(wid, "call")
	if out := parseStarterOutput(t, res); out.Status != 201 || out.IdempotencyKey != key {
		t.Errorf("starter output %+v: want 201 with key %s", out, key)
	}
	recs := srv.Records()
	if len(recs) != 1 {
		t.Fatalf("records %+v; want one", recs)
	}
	if got := string(recs[0].Request); got != exact {
		t.Errorf("the API received\n%s\nwant\n%s", got, exact)
	}
	if recs[0].BodySHA256 != wantSHA || recs[0].IdempotencyKey != key {
		t.Errorf("record: body_sha256 %s, key %s; want %s, %s", recs[0].BodySHA256, recs[0].IdempotencyKey, wantSHA, key)
	}
	if err := wp.WaitOutput(ctx, "HTTP request succeeded"); err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, rec := range logRecords(wp.Output(), "HTTP request succeeded") {
		if rec["key"] != key {
			continue
		}
		found = true
		if rec["body_sha256"] != wantSHA {
			t.Errorf("the worker logged body_sha256 %v; want %s", rec["body_sha256"], wantSHA)
		}
	}
	if !found {
		t.Errorf("no success line with key %s in the worker's log:\n%s", key, wp.Tail(8<<10))
	}
}

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

// TestHardeningStuckKeyStarter: the API orphans the key (its first request
// is never answered and the key stays locked); the starter, with a 20 s
// schedule-to-close, exits 1 naming IdempotencyKeyLocked, and the activity
// ended before its 20 s deadline.
func TestHardeningStuckKeyStarter(t *testing.T) {
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

// TestHardeningCutBodyRetried (hardening, third round, item 1): the API
// creates the record and stores its 201, but the connection breaks off
// halfway through the body. Through the worker binary and the starter, the
// workflow retries with the same key and succeeds with the whole stored
// body (attempt 2, replayed); the work is done once. Before, it succeeded
// on attempt 1 with the body omitted ("incomplete").
func TestHardeningCutBodyRetried(t *testing.T) {
	t.Parallel()
	full := []byte(`{"id":"pay_1","amount":4200,"status":"succeeded","note":"` + strings.Repeat("n", 2000) + `"}`)
	api := testsuite.NewServer(testsuite.Options{Work: func(*http.Request, []byte) (int, []byte) {
		return http.StatusCreated, full
	}})
	var first atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !first.CompareAndSwap(false, true) {
			api.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, r)
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		defer conn.Close()
		body := rec.Body.Bytes()
		fmt.Fprintf(buf, "HTTP/1.1 %d %s\r\n", rec.Code, http.StatusText(rec.Code))
		h := rec.Header().Clone()
		h.Set("Content-Length", fmt.Sprint(len(body)))
		_ = h.Write(buf)
		_, _ = buf.WriteString("\r\n")
		_, _ = buf.Write(body[:len(body)/2])
		_ = buf.Flush()
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(api.Close)
	tq := uniqueName(t, "tq")
	startWorker(t, workerOptions{TaskQueue: tq, Origins: []string{srv.URL}})
	wid := uniqueName(t, "cut")
	res := runStarter(t, ctxT(t, 2*time.Minute), tq, "--url", srv.URL+"/payments", "--body", `{"amount":4200}`, "--workflow-id", wid)
	if res.Code != 0 {
		t.Fatalf("starter exited with %d; want a success", res.Code)
	}
	out := parseStarterOutput(t, res)
	if out.Status != 201 || out.Attempts != 2 || !out.Replayed || out.BodyOmitted {
		t.Errorf("status %d on attempt %d, replayed %v, body omitted %v; want 201 on attempt 2, replayed, with its body", out.Status, out.Attempts, out.Replayed, out.BodyOmitted)
	}
	if string(out.Body) != string(full) {
		t.Errorf("body is %d bytes; want the whole stored body of %d bytes", len(out.Body), len(full))
	}
	checkStats(t, api.Stats(), testsuite.Stats{Requests: 2, DistinctKeys: 1, Records: 1, Replays: 1, InFlight: 0, Failures: 0})
}
