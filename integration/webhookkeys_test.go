package integration_test

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/harness/itest"
	"github.com/idemhttp/temporal-idempotent-http/internal/idemkey"
	"github.com/idemhttp/temporal-idempotent-http/internal/signature"
	"github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/webhooks"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// refundOutcome is how one call of keyedRefundsWorkflow ended: the
// notification that ended it and the call it named.
type refundOutcome struct {
	Event     string `json:"event"`
	KeyDigest string `json:"key_digest"`
}

// keyedRefundsWorkflow refunds once per key, one after the other, with
// the operation "refund": each call's start request carries its own
// callback URL and metadata, both naming the call's key.
func keyedRefundsWorkflow(ctx workflow.Context, url string, keys []string) ([]refundOutcome, error) {
	var out []refundOutcome
	for _, key := range keys {
		u, err := workflows.CallbackURL(ctx, "refund", key)
		if err != nil {
			return nil, err
		}
		body, err := json.Marshal(map[string]any{"amount": 100, "callback_url": u, "metadata": workflows.WebhookMetadata(ctx, "refund", key)})
		if err != nil {
			return nil, err
		}
		resp, err := workflows.Call(ctx, workflows.Request{Operation: "refund", IdempotencyKey: key, URL: url, Body: body, Webhook: hookOptions(nil)})
		if err != nil {
			return nil, err
		}
		n := resp.Outcome.Notification
		if n == nil {
			return nil, fmt.Errorf("call %s: no notification in %+v", key, resp.Outcome)
		}
		out = append(out, refundOutcome{Event: n.ID, KeyDigest: n.KeyDigest})
	}
	return out, nil
}

// TestWebhookCallsOfOneOperationByKey: a workflow refunds twice with one
// operation, each call with its own key, its callback URL and metadata
// naming it. The reference server delivers each refund's signed (Stripe)
// events to its call's URL. While the second call waits, a late event of
// the first (a new ID, a terminal type, signed, naming the first key)
// comes to the first call's URL: the receiver hands it to the workflow,
// whose validator refuses it (answered 200, logged, never in history),
// and each call ends by its own refund's event.
func TestWebhookCallsOfOneOperationByKey(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t, 90*time.Second)
	secret := hookSecret("stripe")
	v, err := webhooks.StripeVerifier(secret)
	if err != nil {
		t.Fatal(err)
	}
	srv := testsuite.StartServer(t, testsuite.Options{Webhooks: &testsuite.Webhooks{
		Scheme: "stripe", Secret: secret, Duration: 4 * time.Second, RetryFor: time.Minute,
	}})
	var logs syncBuffer
	hs := httptest.NewUnstartedServer(nil)
	hs.Start()
	t.Cleanup(hs.Close)
	cb := &webhooks.Callbacks{BaseURL: hs.URL + "/callbacks", Secrets: []string{randomHex(32)}, Namespace: dev.Namespace}
	rc, err := webhooks.NewReceiver(webhooks.Config{Client: tc, Verifier: v, Callbacks: cb,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	if err != nil {
		t.Fatal(err)
	}
	hs.Config.Handler = rc

	tq := uniqueName(t, "tq")
	acts, err := activities.New(activities.Config{AllowedOrigins: []string{srv.URL}})
	if err != nil {
		t.Fatal(err)
	}
	identity := uniqueName(t, "in-process")
	w := worker.New(tc, tq, worker.Options{Identity: identity})
	acts.Register(w)
	cb.Register(w)
	w.RegisterWorkflowWithOptions(keyedRefundsWorkflow, workflow.RegisterOptions{Name: "itest-keyed-refunds"})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		w.Stop()
		if t.Failed() {
			t.Logf("receiver log:\n%s", logs.String())
		}
	})
	if err := itest.WaitForPollers(ctxT(t, 30*time.Second), tc, tq, identity); err != nil {
		t.Fatal(err)
	}

	wid := uniqueName(t, "order-7")
	keys := []string{"refund-" + wid + "-1", "refund-" + wid + "-2"}
	run, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: wid, TaskQueue: tq, WorkflowExecutionTimeout: 2 * time.Minute},
		"itest-keyed-refunds", srv.URL+"/refunds", keys)
	if err != nil {
		t.Fatal(err)
	}
	// The second refund started: the first call has ended.
	if err := itest.Eventually(ctx, 20*time.Millisecond, func() error {
		if n := srv.Stats().Operations; n < 2 {
			return fmt.Errorf("%d refunds started", n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	first, err := cb.URL(wid, "refund", keys[0])
	if err != nil {
		t.Fatal(err)
	}
	late := "evt_late_" + randomHex(8)
	body := fmt.Sprintf(`{"id":%q,"type":%q,"created":%d,"data":{"object":{"id":"op_1","status":"failed","metadata":{"workflow_id":%q,"operation":"refund","key_digest":%q}}}}`,
		late, hookFailed, time.Now().Unix(), wid, idemkey.Digest(keys[0]))
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, first, strings.NewReader(body))
	req.Header.Set(signature.StripeSignature, signature.Stripe(time.Now().Unix(), []byte(body), secret))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(answer), `"ignored"`) {
		t.Errorf("the first call's late event: %d %s, want 200 ignored (refused by the workflow)", resp.StatusCode, answer)
	}

	var got []refundOutcome
	if err := run.Get(ctx, &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("outcomes %+v, want two", got)
	}
	for i, o := range got {
		if o.KeyDigest != idemkey.Digest(keys[i]) || o.Event == late {
			t.Errorf("call %d ended by %+v, want its own refund's event, naming key digest %s", i+1, o, idemkey.Digest(keys[i]))
		}
	}
	for _, id := range readHookHistory(t, ctx, wid, run.GetRunID()).updates {
		if strings.HasSuffix(id, "/"+late) {
			t.Errorf("the late event reached history (update %s)", id)
		}
	}
	if !strings.Contains(logs.String(), "names another call of operation refund") {
		t.Errorf("the receiver's log does not say why the workflow refused the late event")
	}
}
