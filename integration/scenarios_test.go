package integration_test

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/idemhttp/temporal-idempotent-http/harness/itest"
	"github.com/idemhttp/temporal-idempotent-http/internal/input"
	"github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// metadataQuery is the SDK's built-in query for a workflow's metadata,
// current details included (what the Web UI shows).
const metadataQuery = "__temporal_workflow_metadata"

// TestSeedScenario is the README's scenario end to end on a real server,
// through the worker binary and the ready workflow: the API answers 503, then
// 429 with Retry-After: 1, then processes the request. The reference server
// runs in the test process (the handler demoapi serves with --script
// 503,429:1,201), so its request log, with arrival times, can be read.
func TestSeedScenario(t *testing.T) {
	t.Parallel()
	srv := testsuite.StartServer(t, testsuite.Options{})
	srv.Script(testsuite.Fail(503), testsuite.Fail(429, "1"))
	tq := uniqueName(t, "tq")
	startWorker(t, workerOptions{TaskQueue: tq, Origins: []string{srv.URL}})
	wid := uniqueName(t, "payment")
	_, resp, err := call(t, ctxT(t, 2*time.Minute), tq, wid, workflows.Request{Operation: "charge", URL: srv.URL + "/payments", Body: body})
	if err != nil {
		t.Fatalf("workflow failed: %v", err)
	}
	key := keyOf(wid, "charge")
	if resp.Status != 201 || resp.Attempt != 3 || resp.Replayed || resp.IdempotencyKey != key {
		t.Errorf("result: status %d, attempt %d, replayed %v, key %s; want 201 on attempt 3, not replayed, key %s", resp.Status, resp.Attempt, resp.Replayed, resp.IdempotencyKey, key)
	}
	checkStats(t, srv.Stats(), testsuite.Stats{Requests: 3, DistinctKeys: 1, Records: 1, Replays: 0, InFlight: 0, Failures: 2})
	if recs := srv.Records(); len(recs) != 1 || recs[0].IdempotencyKey != key {
		t.Errorf("records %+v, want one with key %s", recs, key)
	}
	log := srv.Log()
	if len(log) != 3 {
		t.Fatalf("request log %+v, want 3 requests", log)
	}
	for i, want := range []int{503, 429, 201} {
		if log[i].Status != want || log[i].IdempotencyKey != key {
			t.Errorf("request %d: status %d key %s, want %d with key %s", i+1, log[i].Status, log[i].IdempotencyKey, want, key)
		}
	}
	if gap := log[2].Time.Sub(log[1].Time); gap < time.Second {
		t.Errorf("the 3rd request came %s after the 429 with Retry-After: 1; want at least 1s", gap)
	} else {
		t.Logf("gaps between requests: %s, %s (Retry-After: 1 honoured)", log[1].Time.Sub(log[0].Time), gap)
	}
}

// TestClientErrorFailsAtOnce: a 400 fails the workflow after exactly one
// request, with the non-retryable ApplicationError in the workflow's failure.
func TestClientErrorFailsAtOnce(t *testing.T) {
	t.Parallel()
	srv := testsuite.StartServer(t, testsuite.Options{})
	srv.Script(testsuite.Fail(400))
	tq := uniqueName(t, "tq")
	startInProcessWorker(t, tq, srv.URL)
	wid := uniqueName(t, "payment")
	ctx := ctxT(t, 2*time.Minute)
	run, _, err := call(t, ctx, tq, wid, workflows.Request{Operation: "charge", URL: srv.URL + "/payments", Body: body, Retry: workflows.RetryOptions{MaximumAttempts: 10}})
	if err == nil {
		t.Fatal("workflow succeeded; want it failed by the 400")
	}
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || appErr.Type() != workflows.ErrTypeHTTPClientError || !appErr.NonRetryable() {
		t.Fatalf("error %v; want a non-retryable ApplicationError of type %s", err, workflows.ErrTypeHTTPClientError)
	}
	if d, ok := workflows.AsFailure(err); !ok || d.Status != 400 || d.Attempt != 1 || d.IdempotencyKey != keyOf(wid, "charge") {
		t.Errorf("failure details %+v (found: %v); want status 400 on attempt 1 with the workflow's key", d, ok)
	}
	checkStats(t, srv.Stats(), testsuite.Stats{Requests: 1, DistinctKeys: 1, Records: 0, Replays: -1, InFlight: -1, Failures: 1})

	// The same, as the server recorded it: the workflow's failure event.
	it := tc.GetWorkflowHistory(ctx, wid, run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT)
	ev, err := it.Next()
	if err != nil {
		t.Fatal(err)
	}
	attrs := ev.GetWorkflowExecutionFailedEventAttributes()
	if attrs == nil {
		t.Fatalf("close event %v, want WorkflowExecutionFailed", ev.GetEventType())
	}
	var found bool
	for f := attrs.GetFailure(); f != nil; f = f.GetCause() {
		if info := f.GetApplicationFailureInfo(); info != nil {
			found = info.GetType() == workflows.ErrTypeHTTPClientError && info.GetNonRetryable() && strings.Contains(f.GetMessage(), "400")
			break
		}
	}
	if !found {
		t.Errorf("workflow failure in history: %v; want a non-retryable %s about the 400 in its causes", attrs.GetFailure(), workflows.ErrTypeHTTPClientError)
	}
}

// TestWorkerCrashMidRequest kills (SIGKILL) the worker binary while the API
// is processing its request; a new worker picks up the retry once the killed
// attempt's StartToClose timeout fires, with the same key, so the work is
// done once.
func TestWorkerCrashMidRequest(t *testing.T) {
	t.Parallel()
	_, api := startDemoAPI(t, "--processing-time", "6s")
	tq := uniqueName(t, "tq")
	doomedID := uniqueName(t, "doomed")
	doomed := startWorker(t, workerOptions{TaskQueue: tq, Origins: []string{api}, Identity: doomedID})
	wid := uniqueName(t, "order")
	ctx := ctxT(t, 3*time.Minute)
	run := start(t, ctx, tq, wid, workflows.Request{
		Operation: "create-order", URL: api + "/orders", Body: body,
		StartToCloseTimeout: 3 * time.Second, Retry: workflows.RetryOptions{MaximumAttempts: 10},
	})

	// The doomed worker runs the activity and the API is working on it.
	err := itest.Eventually(ctx, 20*time.Millisecond, func() error {
		if st := apiStats(t, api); st.DistinctKeys != 1 {
			return fmt.Errorf("API has not received the request: %+v", st)
		}
		desc, err := tc.DescribeWorkflowExecution(ctx, wid, run.GetRunID())
		if err != nil {
			return err
		}
		if pa := desc.GetPendingActivities(); len(pa) != 1 || pa[0].GetState() != enumspb.PENDING_ACTIVITY_STATE_STARTED || pa[0].GetLastWorkerIdentity() != doomedID {
			return fmt.Errorf("pending activities %v: want one started by %s", pa, doomedID)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := doomed.Kill(); err != nil {
		t.Fatal(err)
	}
	if st := apiStats(t, api); st.Records != 0 {
		t.Fatalf("the API finished before the worker was killed (%+v): raise --processing-time", st)
	}
	t.Logf("worker %s killed (%s) with the request in progress", doomedID, doomed.State())

	survivorID := uniqueName(t, "survivor")
	startWorker(t, workerOptions{TaskQueue: tq, Origins: []string{api}, Identity: survivorID})
	var resp workflows.Response
	if err := run.Get(ctx, &resp); err != nil {
		t.Fatalf("workflow failed after the worker crash: %v", err)
	}
	key := keyOf(wid, "create-order")
	if resp.Status != 201 || resp.IdempotencyKey != key || resp.Attempt < 2 || !resp.Replayed {
		t.Errorf("result: status %d, key %s, attempt %d, replayed %v; want 201 with key %s on a retry, replayed (the killed attempt's request did the work)",
			resp.Status, resp.IdempotencyKey, resp.Attempt, resp.Replayed, key)
	}
	st := apiStats(t, api)
	checkStats(t, st, testsuite.Stats{Requests: -1, DistinctKeys: 1, Records: 1, Replays: 1, InFlight: -1, Failures: 0})
	t.Logf("API after the crash: %+v; result on attempt %d, replayed %v", st, resp.Attempt, resp.Replayed)

	// The activity was completed by the new worker.
	it := tc.GetWorkflowHistory(ctx, wid, run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var startedBy string
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := ev.GetActivityTaskStartedEventAttributes(); a != nil {
			startedBy = a.GetIdentity()
		}
	}
	if startedBy != survivorID {
		t.Errorf("the activity's last attempt ran on %q, want the new worker %q", startedBy, survivorID)
	}
}

// TestDuplicateInFlight: each attempt times out before the API finishes, so
// the retry arrives while the first request is still being processed; the
// API answers 409 with Retry-After, the activity waits that long, and the
// stored response comes back. The work is done once.
func TestDuplicateInFlight(t *testing.T) {
	t.Parallel()
	srv := testsuite.StartServer(t, testsuite.Options{ProcessingTime: 4 * time.Second})
	tq := uniqueName(t, "tq")
	startInProcessWorker(t, tq, srv.URL)
	wid := uniqueName(t, "transfer")
	_, resp, err := call(t, ctxT(t, 2*time.Minute), tq, wid, workflows.Request{
		Operation: "transfer", URL: srv.URL + "/transfers", Body: body,
		StartToCloseTimeout: 2 * time.Second, Retry: workflows.RetryOptions{MaximumAttempts: 10},
	})
	if err != nil {
		t.Fatalf("workflow failed: %v", err)
	}
	key := keyOf(wid, "transfer")
	if resp.Status != 201 || !resp.Replayed || resp.IdempotencyKey != key {
		t.Errorf("result: status %d, replayed %v, key %s; want the stored 201 replayed, key %s", resp.Status, resp.Replayed, resp.IdempotencyKey, key)
	}
	st := srv.Stats()
	checkStats(t, st, testsuite.Stats{Requests: -1, DistinctKeys: 1, Records: 1, Replays: 1, InFlight: -1, Failures: 0})
	if st.InFlight < 1 {
		t.Errorf("no 409 for the request in flight: %+v", st)
	}
	log := srv.Log()
	for i, r := range log {
		if r.IdempotencyKey != key {
			t.Errorf("request %d carried key %s, want %s", i+1, r.IdempotencyKey, key)
		}
		if r.Status == 409 && i+1 < len(log) {
			if gap := log[i+1].Time.Sub(r.Time); gap < time.Second {
				t.Errorf("request %d came %s after a 409 with Retry-After: 1; want at least 1s", i+2, gap)
			}
		}
	}
	t.Logf("%d requests (%d answered 409) for one record; result on attempt %d", st.Requests, st.InFlight, resp.Attempt)
}

// TestRerunSameWorkflowID runs a business workflow ID again, after it
// completed and after it failed: the new run derives the same key, so the API
// answers with its stored response and the work runs once.
func TestRerunSameWorkflowID(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// processing is the API's processing time.
		processing time.Duration
		// first is the first run's request options; failFirst says it must fail.
		first     func(*workflows.Request)
		failFirst bool
	}{
		{name: "after completion", first: func(*workflows.Request) {}},
		{
			// The first run gives up (one attempt, shorter than the API's
			// processing) after the API has started the work, as when a
			// response is lost: the work is done but the workflow failed.
			// Schedule-to-close ends the run before the API's work does:
			// on a loaded machine the activity's report of its one attempt
			// can lose the race with the server's start-to-close timeout,
			// and the server then retries the timed-out attempt, which
			// must not live to see the stored response (it did, once, in
			// CI, with only start-to-close set: the first run succeeded).
			name: "after failure", processing: 2 * time.Second, failFirst: true,
			first: func(r *workflows.Request) {
				r.StartToCloseTimeout = time.Second
				r.ScheduleToCloseTimeout = 1500 * time.Millisecond
				r.Retry.MaximumAttempts = 1
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := testsuite.StartServer(t, testsuite.Options{ProcessingTime: tt.processing})
			tq := uniqueName(t, "tq")
			startInProcessWorker(t, tq, srv.URL)
			wid := uniqueName(t, "invoice")
			key := keyOf(wid, "invoice")
			ctx := ctxT(t, 2*time.Minute)
			req := workflows.Request{Operation: "invoice", URL: srv.URL + "/invoices", Body: body}
			firstReq := req
			tt.first(&firstReq)

			run1, resp1, err := call(t, ctx, tq, wid, firstReq)
			switch {
			case tt.failFirst && err == nil:
				t.Fatalf("first run succeeded (%+v); want it failed", resp1)
			case tt.failFirst:
				t.Logf("first run failed as intended: %v", err)
				// The API finishes the work it started.
				if err := itest.Eventually(ctx, 50*time.Millisecond, func() error {
					if srv.Stats().Records != 1 {
						return errors.New("the API has not finished the first run's work")
					}
					return nil
				}); err != nil {
					t.Fatal(err)
				}
			case err != nil:
				t.Fatalf("first run failed: %v", err)
			case resp1.Replayed || resp1.IdempotencyKey != key:
				t.Fatalf("first run: replayed %v, key %s; want new work with key %s", resp1.Replayed, resp1.IdempotencyKey, key)
			}

			run2, resp2, err := call(t, ctx, tq, wid, req)
			if err != nil {
				t.Fatalf("second run failed: %v", err)
			}
			if run2.GetRunID() == run1.GetRunID() {
				t.Fatalf("second run has the first run's ID %s", run1.GetRunID())
			}
			if resp2.Status != 201 || !resp2.Replayed || resp2.IdempotencyKey != key {
				t.Errorf("second run: status %d, replayed %v, key %s; want the stored 201, replayed, key %s", resp2.Status, resp2.Replayed, resp2.IdempotencyKey, key)
			}
			checkStats(t, srv.Stats(), testsuite.Stats{Requests: -1, DistinctKeys: 1, Records: 1, Replays: -1, InFlight: -1, Failures: 0})
			if recs := srv.Records(); len(recs) != 1 || recs[0].IdempotencyKey != key {
				t.Errorf("records %+v, want one with key %s", recs, key)
			}
		})
	}
}

// TestDeadlineFailsFast: the API asks to come back in an hour; with 30 s
// left before schedule-to-close, the activity fails at once with
// ErrTypeRetryWouldExceedDeadline instead of waiting out the deadline.
func TestDeadlineFailsFast(t *testing.T) {
	t.Parallel()
	srv := testsuite.StartServer(t, testsuite.Options{FailureRate: 1, FailureRetryAfter: "3600"})
	tq := uniqueName(t, "tq")
	startInProcessWorker(t, tq, srv.URL)
	wid := uniqueName(t, "payout")
	began := time.Now()
	_, _, err := call(t, ctxT(t, 2*time.Minute), tq, wid, workflows.Request{
		Operation: "payout", URL: srv.URL + "/payouts", Body: body,
		ScheduleToCloseTimeout: 30 * time.Second, Retry: workflows.RetryOptions{MaximumAttempts: 10},
	})
	took := time.Since(began)
	if err == nil {
		t.Fatal("workflow succeeded against an API that always answers 503")
	}
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || appErr.Type() != workflows.ErrTypeRetryWouldExceedDeadline || !appErr.NonRetryable() {
		t.Fatalf("error %v; want a non-retryable %s", err, workflows.ErrTypeRetryWouldExceedDeadline)
	}
	if msg := appErr.Error(); !strings.Contains(msg, "schedule-to-close") || !strings.Contains(msg, "503") {
		t.Errorf("message %q should name the 503 and the schedule-to-close deadline", msg)
	}
	if d, ok := workflows.AsFailure(err); !ok || d.RetryAfter != time.Hour {
		t.Errorf("details %+v: want RetryAfter 1h", d)
	}
	if took > 15*time.Second {
		t.Errorf("the workflow took %s to fail; want well under its 30s schedule-to-close", took)
	}
	checkStats(t, srv.Stats(), testsuite.Stats{Requests: 1, DistinctKeys: 1, Records: 0, Replays: 0, InFlight: 0, Failures: 1})
	t.Logf("failed after %s: %v", took.Round(time.Millisecond), appErr)
}

// TestNoSecretsInHistory: the worker binary sends API_TOKEN to an API that
// requires it, and the token appears nowhere in the workflow's history nor
// in the worker's logs. Without the token the API answers 401 (so the
// success really needed it).
func TestNoSecretsInHistory(t *testing.T) {
	t.Parallel()
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	token := "tok_" + hex.EncodeToString(b)
	_, api := startDemoAPI(t, "--require-token", token)
	tests := []struct {
		name        string
		workerToken string
		wantErrType string // "" for success
	}{
		{"with the token", token, ""},
		{"without the token", "", workflows.ErrTypeHTTPClientError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tq := uniqueName(t, "tq")
			w := startWorker(t, workerOptions{TaskQueue: tq, Origins: []string{api}, Token: tt.workerToken})
			wid := uniqueName(t, "secret")
			ctx := ctxT(t, 2*time.Minute)
			run, resp, err := call(t, ctx, tq, wid, workflows.Request{Operation: "charge", URL: api + "/charges", Body: body})
			if tt.wantErrType == "" {
				if err != nil {
					t.Fatalf("workflow failed: %v", err)
				}
				if resp.Status != 201 {
					t.Fatalf("status %d, want 201", resp.Status)
				}
			} else {
				var appErr *temporal.ApplicationError
				if d, _ := workflows.AsFailure(err); !errors.As(err, &appErr) || appErr.Type() != tt.wantErrType || d.Status != 401 {
					t.Fatalf("error %v (details %+v); want a %s for the API's 401", err, d, tt.wantErrType)
				}
			}
			// Every event as JSON (failure messages, headers, metadata) and
			// in its wire form, where payloads are their raw bytes (JSON
			// shows them as base64).
			var jsonAll, wireAll bytes.Buffer
			it := tc.GetWorkflowHistory(ctx, wid, run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
			events := 0
			for it.HasNext() {
				ev, err := it.Next()
				if err != nil {
					t.Fatal(err)
				}
				j, err := protojson.Marshal(ev)
				if err != nil {
					t.Fatal(err)
				}
				w, err := proto.Marshal(ev)
				if err != nil {
					t.Fatal(err)
				}
				events++
				jsonAll.Write(j)
				jsonAll.WriteByte('\n')
				wireAll.Write(w)
			}
			for _, h := range []*bytes.Buffer{&jsonAll, &wireAll} {
				if i := bytes.Index(h.Bytes(), []byte(token)); i >= 0 {
					t.Errorf("the API token is in the workflow's history: ...%q...", h.Bytes()[max(0, i-200):min(h.Len(), i+len(token)+50)])
				}
			}
			if !bytes.Contains(wireAll.Bytes(), []byte(keyOf(wid, "charge"))) {
				t.Errorf("the history (%d events) does not even hold the key: the search above proves nothing", events)
			}
			if err := w.Stop(10 * time.Second); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(w.Output(), token) {
				t.Errorf("the API token is in the worker's output")
			}
		})
	}
}

// TestInspectable: while the activity retries, DescribeWorkflowExecution
// shows the pending activity's attempt and last failure; the activity's
// summary (its user metadata) is in history, the workflow's in its
// execution config, and the current details name the key.
func TestInspectable(t *testing.T) {
	t.Parallel()
	srv := testsuite.StartServer(t, testsuite.Options{})
	srv.Script(testsuite.Fail(503, "1"), testsuite.Fail(503, "1"), testsuite.Fail(503, "1"))
	tq := uniqueName(t, "tq")
	startInProcessWorker(t, tq, srv.URL)
	wid := uniqueName(t, "refund")
	ctx := ctxT(t, 2*time.Minute)
	url := srv.URL + "/refunds"
	run := start(t, ctx, tq, wid, workflows.Request{Operation: "refund", URL: url, Body: body, Retry: workflows.RetryOptions{MaximumAttempts: 10}})
	key := keyOf(wid, "refund")
	wantSummary := input.Summary("POST", url, "refund")

	err := itest.Eventually(ctx, 50*time.Millisecond, func() error {
		desc, err := tc.DescribeWorkflowExecution(ctx, wid, run.GetRunID())
		if err != nil {
			return err
		}
		pa := desc.GetPendingActivities()
		if len(pa) != 1 || pa[0].GetAttempt() < 2 || pa[0].GetLastFailure() == nil {
			return fmt.Errorf("pending activities %v: want one retrying with a last failure", pa)
		}
		a := pa[0]
		if a.GetActivityType().GetName() != input.ActivityName {
			t.Errorf("pending activity type %s, want %s", a.GetActivityType().GetName(), input.ActivityName)
		}
		if msg := a.GetLastFailure().GetMessage(); !strings.Contains(msg, "503") {
			t.Errorf("last failure %q should say 503", msg)
		}
		if typ := a.GetLastFailure().GetApplicationFailureInfo().GetType(); typ != workflows.ErrTypeHTTPRetryableStatus {
			t.Errorf("last failure type %q, want %s", typ, workflows.ErrTypeHTTPRetryableStatus)
		}
		if got := decode(t, desc.GetExecutionConfig().GetUserMetadata().GetSummary()); got != wantSummary {
			t.Errorf("workflow summary %q, want %q", got, wantSummary)
		}
		t.Logf("while retrying: attempt %d, last failure %q", a.GetAttempt(), a.GetLastFailure().GetMessage())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	v, err := tc.QueryWorkflow(ctx, wid, run.GetRunID(), metadataQuery)
	if err != nil {
		t.Fatal(err)
	}
	var meta sdkpb.WorkflowMetadata
	if err := v.Get(&meta); err != nil {
		t.Fatal(err)
	}
	if d := meta.GetCurrentDetails(); !strings.Contains(d, key) || !strings.Contains(d, wantSummary) {
		t.Errorf("current details %q should hold the summary %q and the key %s", d, wantSummary, key)
	}

	var resp workflows.Response
	if err := run.Get(ctx, &resp); err != nil {
		t.Fatalf("workflow failed: %v", err)
	}
	if resp.Attempt != 4 {
		t.Errorf("succeeded on attempt %d, want 4 (after three 503s)", resp.Attempt)
	}
	it := tc.GetWorkflowHistory(ctx, wid, run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var scheduled *historypb.HistoryEvent
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if ev.GetEventType() == enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED {
			scheduled = ev
		}
	}
	if scheduled == nil {
		t.Fatal("no ActivityTaskScheduled event")
	}
	if got := decode(t, scheduled.GetUserMetadata().GetSummary()); got != wantSummary {
		t.Errorf("activity summary %q, want %q", got, wantSummary)
	}
}
