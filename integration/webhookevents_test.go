package integration_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/idemhttp/temporal-idempotent-http/harness/interop"
	"github.com/idemhttp/temporal-idempotent-http/harness/itest"
	"github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// octokitSign signs body as GitHub does, with GitHub's own library
// (@octokit/webhooks-methods' sign, installed by scripts/install-interop.sh):
// the X-Hub-Signature-256 value.
func octokitSign(t *testing.T, ctx context.Context, secret, body string) string {
	t.Helper()
	dir, err := interop.NodeDir()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, "node", "--input-type=module", "-e", `
import { sign } from '@octokit/webhooks-methods';
let b = '';
process.stdin.on('data', d => b += d);
process.stdin.on('end', async () => console.log(await sign(process.argv[1], b)));`, secret)
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(body)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node, @octokit/webhooks-methods sign: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// TestWebhookGitHubUnsignedHeaders runs the worker binary's receiver set
// up as the README says for GitHub (--webhook-scheme hmac,
// X-Hub-Signature-256, type in X-GitHub-Event, ID in X-GitHub-Delivery,
// neither of which GitHub's signature covers), with deliveries signed by
// GitHub's own library. The operations' resource ends failed. An altered
// copy of a genuine progress delivery (X-GitHub-Event changed to the
// succeeded type, a new X-GitHub-Delivery) never makes an operation
// succeed: sent before the genuine one, its unsigned type only starts the
// poll at once and the resource's state is the outcome; sent 40 times
// after it, it is the same event, taken once (no slot filled). The
// genuine terminal delivery ends the other operation the same way, by
// the resource's confirmation.
func TestWebhookGitHubUnsignedHeaders(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t, 150*time.Second)
	if err := interop.Install(ctx, t.Logf); err != nil {
		t.Fatal(err)
	}
	secret := randomHex(20)
	hooks := testsuite.Webhooks{
		// The reference server sends nothing (DropRate 1): the deliveries
		// here are GitHub-style, signed by octokit.
		URL: "http://127.0.0.1:9/webhooks", Secret: hookSecret("standard-webhooks"),
		Duration: 6 * time.Second, DropRate: 1, State: workflows.StateFailed,
	}
	srv := testsuite.StartServer(t, testsuite.Options{Webhooks: &hooks})
	port, err := itest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	tq := uniqueName(t, "tq")
	startWorkerWith(t, workerOptions{TaskQueue: tq, Origins: []string{srv.URL}}, []string{"WEBHOOK_SECRETS=" + secret},
		"--webhook-addr", itest.HostPort(port), "--webhook-scheme", "hmac",
		"--webhook-hmac-header", "X-Hub-Signature-256", "--webhook-hmac-prefix", "sha256=",
		"--webhook-hmac-type-header", "X-GitHub-Event", "--webhook-hmac-id-header", "X-GitHub-Delivery")

	// After is long: only a notification starts the poll before it.
	const after = 2 * time.Minute
	poll := &workflows.WebhookPoll{URL: srv.URL + "/resources/{id}", After: after, Succeeded: []string{"succeeded"}, Failed: []string{"failed"},
		Interval: time.Second, MaximumInterval: 2 * time.Second}
	alteredFirst := &hookCall{wid: uniqueName(t, "altered-first"), srv: srv, wantFailed: true}
	genuineFirst := &hookCall{wid: uniqueName(t, "genuine-first"), srv: srv, wantFailed: true}
	calls := []*hookCall{alteredFirst, genuineFirst}
	began := time.Now()
	for i, c := range calls {
		c.run = start(t, ctx, tq, c.wid, workflows.Request{
			Operation: hookOperation, URL: srv.URL + "/payments", Body: hookBody(c.wid, 100+i), Webhook: hookOptions(poll),
		})
	}
	if err := itest.Eventually(ctx, 20*time.Millisecond, func() error {
		if n := srv.Stats().Operations; n < len(calls) {
			return fmt.Errorf("%d operations started", n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	url := "http://" + itest.HostPort(port) + "/webhooks"
	deliver := func(body, sig, event, id string) (int, string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Hub-Signature-256", sig)
		req.Header.Set("X-GitHub-Event", event)
		req.Header.Set("X-GitHub-Delivery", id)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(b))
	}
	progress := func(wid string) string {
		return fmt.Sprintf(`{"action":"processing","data":{"object":{"metadata":{"workflow_id":%q,"operation":%q}}}}`, wid, hookOperation)
	}
	answers := map[string]int{}

	// The altered copy first: delivered (its body is genuine), but its type
	// is not signed: the resource decides.
	body := progress(alteredFirst.wid)
	sig := octokitSign(t, ctx, secret, body)
	st, a := deliver(body, sig, hookSucceeded, "d-altered-"+randomHex(4))
	answers[fmt.Sprint(st, " ", a)]++
	st, a = deliver(body, sig, hookProcessing, "d-genuine-"+randomHex(4))
	answers[fmt.Sprint(st, " ", a)]++

	// The genuine progress delivery first, then 40 altered copies.
	body = progress(genuineFirst.wid)
	sig = octokitSign(t, ctx, secret, body)
	if st, a := deliver(body, sig, hookProcessing, "d-genuine-"+randomHex(4)); st != http.StatusOK || !strings.Contains(a, "delivered") {
		t.Fatalf("the genuine delivery: %d %s, want 200 delivered", st, a)
	}
	for i := range 40 {
		st, a := deliver(body, sig, hookSucceeded, fmt.Sprintf("d-altered-%d-%s", i, randomHex(4)))
		if st != http.StatusOK || strings.Contains(a, "delivered") {
			t.Errorf("altered copy %d: %d %s, want 200 and not delivered anew", i, st, a)
		}
		answers[fmt.Sprint(st, " ", a)]++
	}
	// The provider's genuine terminal delivery, signed by the library.
	terminal := fmt.Sprintf(`{"action":"failed","data":{"object":{"status":"failed","metadata":{"workflow_id":%q,"operation":%q}}}}`, genuineFirst.wid, hookOperation)
	if st, a := deliver(terminal, octokitSign(t, ctx, secret, terminal), hookFailed, "d-terminal-"+randomHex(4)); st != http.StatusOK || !strings.Contains(a, "delivered") {
		t.Errorf("the genuine terminal delivery: %d %s, want 200 delivered", st, a)
	}

	waitHookCalls(ctx, calls)
	took := time.Since(began)
	confirmed := 0
	for _, c := range calls {
		if !checkHookOutcome(t, c, workflows.SourceWebhook) {
			continue
		}
		if c.out.Confirmed {
			confirmed++
		}
		h := readHookHistory(t, ctx, c.wid, c.run.GetRunID())
		wantUpdates := 1
		if c == genuineFirst {
			wantUpdates = 2 // the progress event and the terminal one
		}
		n := c.out.Notification
		switch {
		case !c.out.Confirmed || c.out.Polls < 1:
			t.Errorf("%s: Outcome %+v, want the resource's confirmation", c.wid, c.out)
		case n == nil || !n.TypeUnsigned:
			t.Errorf("%s: notification %+v, want its type marked unsigned", c.wid, n)
		case len(h.updates) != wantUpdates || c.out.Notifications != wantUpdates:
			t.Errorf("%s: accepted updates %v, Outcome.Notifications %d, want %d", c.wid, h.updates, c.out.Notifications, wantUpdates)
		}
		if c.out.At.After(began.Add(after)) {
			t.Errorf("%s: ended at %s, after WebhookPoll.After: the unsigned terminal type did not start the poll at once", c.wid, c.out.At)
		}
		// Each update's ID is the signed body's: no header made a new one.
		sum := sha256.Sum256([]byte(progress(c.wid)))
		if want := "webhook/hmac/" + hookOperation + "/sha256:" + hex.EncodeToString(sum[:16]); len(h.updates) == 0 || h.updates[0] != want {
			t.Errorf("%s: updates %v, want the first %s", c.wid, h.updates, want)
		}
	}
	st2 := srv.Stats()
	if st2.Records != len(calls) {
		t.Errorf("%d records, want %d", st2.Records, len(calls))
	}
	t.Logf("GitHub set-up (octokit-signed), resource ending failed after %s: altered copies answered %v; "+
		"%d of %d workflows ended failed by the resource's confirmation in %s (WebhookPoll.After %s), %d polls in all",
		hooks.Duration, answers, confirmed, len(calls), took.Round(time.Millisecond), after, st2.Polls)
}

// TestWebhookEventBetweenCalls: a call's start gets 503s after the
// provider did the work, so it fails with its outcome unknown; the
// provider's terminal event arrives (to the worker binary's receiver) while
// the workflow waits to call again; the retry call (same operation, same
// key) completes with that event's outcome instead of waiting to its
// timeout. The workflow runs on a worker in this process (it calls twice);
// the activities and the receiver are the worker binary's.
func TestWebhookEventBetweenCalls(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t, 150*time.Second)
	secret := hookSecret("standard-webhooks")
	port, err := itest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	srv := testsuite.StartServer(t, testsuite.Options{Webhooks: &testsuite.Webhooks{
		URL: "http://" + itest.HostPort(port) + "/webhooks", Secret: secret, Duration: 3 * time.Second, Deliveries: 1, RetryFor: time.Minute,
	}})
	// The start's answers are lost: the first two POSTs reach the provider
	// (which does the work) and get 503.
	var posts atomic.Int32
	lossy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, srv.URL+r.URL.RequestURI(), bytes.NewReader(body))
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		if r.Method == http.MethodPost && posts.Add(1) <= 2 {
			http.Error(w, "answer lost", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
		w.WriteHeader(resp.StatusCode)
		w.Write(out)
	}))
	t.Cleanup(lossy.Close)

	tq := uniqueName(t, "tq")
	startWorkerWith(t, workerOptions{TaskQueue: tq, Origins: []string{lossy.URL}}, []string{"WEBHOOK_SECRETS=" + secret},
		"--webhook-addr", itest.HostPort(port), "--webhook-scheme", string("standard-webhooks"))

	const between = 8 * time.Second
	wf := func(ctx workflow.Context, wid string) (*workflows.Response, error) {
		req := workflows.Request{Operation: hookOperation, Method: http.MethodPost, URL: lossy.URL + "/payments", Body: hookBody(wid, 100),
			Webhook: &workflows.WebhookOptions{Succeeded: []string{hookSucceeded}, Failed: []string{hookFailed}, Timeout: 40 * time.Second},
			Retry:   workflows.RetryOptions{MaximumAttempts: 2}, TaskQueue: tq}
		_, err := workflows.Call(ctx, req)
		if f, ok := workflows.AsFailure(err); !ok || !f.OutcomeUnknown {
			return nil, fmt.Errorf("the first call: %v, want its outcome unknown", err)
		}
		// The README's retry: wait, then the same operation again.
		if err := workflow.Sleep(ctx, between); err != nil {
			return nil, err
		}
		return workflows.Call(ctx, req)
	}
	wtq := uniqueName(t, "wf")
	identity := uniqueName(t, "in-process")
	w := worker.New(tc, wtq, worker.Options{Identity: identity})
	w.RegisterWorkflowWithOptions(wf, workflow.RegisterOptions{Name: "itest-retry-after-unknown"})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	if err := itest.WaitForPollers(ctxT(t, 30*time.Second), tc, wtq, identity); err != nil {
		t.Fatal(err)
	}

	wid := uniqueName(t, "pay")
	began := time.Now()
	run, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: wid, TaskQueue: wtq, WorkflowExecutionTimeout: 2 * time.Minute},
		"itest-retry-after-unknown", wid)
	if err != nil {
		t.Fatal(err)
	}
	var resp workflows.Response
	if err := run.Get(ctx, &resp); err != nil {
		t.Fatalf("the workflow: %v", err)
	}
	took := time.Since(began)
	out := resp.Outcome
	if out == nil || out.State != workflows.StateSucceeded || out.Source != workflows.SourceWebhook || out.Notification == nil || out.Notification.Type != hookSucceeded {
		t.Fatalf("Outcome %+v, want succeeded by the provider's webhook", out)
	}
	// In history: the first call's start failed, then the event was
	// taken, then the retry's start was scheduled.
	var order []string
	for _, ev := range history(t, ctx, wid, run.GetRunID()) {
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			order = append(order, "start")
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED:
			order = append(order, "failed")
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
			order = append(order, "event")
		}
	}
	if got := strings.Join(order, ","); got != "start,failed,event,start" {
		t.Errorf("history: %s, want start,failed,event,start (the event taken between the calls)", got)
	}
	ds := srv.Deliveries()
	st := srv.Stats()
	if st.Records != 1 || len(ds) == 0 || ds[len(ds)-1].Status != http.StatusOK {
		t.Errorf("%d records, deliveries %+v: want one record and the event answered 200", st.Records, ds)
	}
	if took > between+30*time.Second {
		t.Errorf("took %s: the retry waited for an event it had already taken", took)
	}
	t.Logf("start answers lost (2 × 503 after the work), event taken between the calls, retry completed with it: %s in all, %d POSTs, %d record",
		took.Round(time.Millisecond), posts.Load(), st.Records)
}
