package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/internal/idemkey"
	"github.com/idemhttp/temporal-idempotent-http/internal/input"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// TwoRefundsInput is the input of twoRefunds.
type TwoRefundsInput struct {
	URL     string        `json:"url"`
	Keys    []string      `json:"keys"`
	Timeout time.Duration `json:"timeout"`
}

// twoRefunds refunds once per key with operation "refund", awaiting each
// refund's webhook, and says how each ended. The replay test in package
// workflows (webhookkey_test.go) registers the same code under the same
// name: change both together.
func twoRefunds(ctx workflow.Context, in TwoRefundsInput) ([]string, error) {
	var out []string
	for _, key := range in.Keys {
		resp, err := workflows.Call(ctx, workflows.Request{Operation: "refund", IdempotencyKey: key, URL: in.URL, Body: []byte(`{"amount":100}`),
			Webhook: &workflows.WebhookOptions{Succeeded: []string{"refund.succeeded"}, Failed: []string{"refund.failed"}, Timeout: in.Timeout}})
		f, isFailure := workflows.AsFailure(err)
		switch {
		case err == nil && resp.Outcome != nil && resp.Outcome.Notification != nil:
			out = append(out, string(resp.Outcome.State)+" by "+resp.Outcome.Notification.ID)
		case err == nil:
			out = append(out, "succeeded")
		case isFailure:
			out = append(out, f.Type)
		default:
			return nil, err
		}
	}
	return out, nil
}

// recordTwoKeys records webhook_two_keys_history_v2.json: a run that
// refunds twice with operation "refund", each call with its own key,
// whose events name their call's key (as CallbackURL and WebhookMetadata
// given the key make them): the first call ends by its event; then, while
// the second waits, the first call's late event naming its key is refused
// by the validator (not in history), one naming no key is taken but ends
// nothing, and the second call's own event ends it failed. The history
// holds the "webhook-events-match-the-call-by-key" version marker.
// webhook_two_keys_history.json, the run recorded with the code before
// (a scratch recorder at 9ebb7c4; events naming no key: the first call's
// late event ended the second), stays as it is.
func recordTwoKeys(ctx context.Context, c client.Client, out string) error {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, `{"id":"re_1","status":"pending"}`)
	}))
	defer api.Close()
	acts, err := activities.New(activities.Config{AllowedOrigins: []string{api.URL}})
	if err != nil {
		return err
	}
	w := worker.New(c, "histgen-refunds", worker.Options{})
	acts.Register(w)
	w.RegisterWorkflowWithOptions(twoRefunds, workflow.RegisterOptions{Name: "HistgenTwoRefunds"})
	if err := w.Start(); err != nil {
		return err
	}
	defer w.Stop()
	const wid = "histgen-two-refunds-order-7"
	keys := []string{"refund-order-7-first", "refund-order-7-second"}
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: wid, TaskQueue: "histgen-refunds"}, "HistgenTwoRefunds",
		TwoRefundsInput{URL: api.URL + "/refunds", Keys: keys, Timeout: time.Minute})
	if err != nil {
		return err
	}
	// deliver sends the event as the receiver does and says whether the
	// workflow took it.
	deliver := func(id, typ, key string) (bool, error) {
		n := &workflows.Notification{ID: id, Type: typ, Operation: "refund", KeyDigest: idemkey.Digest(key), Scheme: "stripe",
			Received: time.Now().UTC(), Body: json.RawMessage(`{"id":"` + id + `","type":"` + typ + `"}`)}
		uid := "webhook/stripe/refund/" + id
		if n.KeyDigest != "" {
			uid = "webhook/stripe/refund/" + n.KeyDigest + "/" + id
		}
		h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{UpdateID: uid, WorkflowID: wid, UpdateName: input.WebhookUpdate("refund"),
			Args: []any{n}, WaitForStage: client.WorkflowUpdateStageCompleted})
		if err != nil {
			return false, err
		}
		var took string
		err = h.Get(ctx, &took)
		fmt.Printf("%s: %q %v\n", id, took, err)
		return err == nil, nil
	}
	var took []bool
	for _, d := range []struct {
		id, typ, key string
		wait         time.Duration
	}{
		{"evt_1", "refund.succeeded", keys[0], 2 * time.Second},
		{"evt_1_late", "refund.succeeded", keys[0], 2 * time.Second}, // the first call's, while the second waits
		{"evt_1_unnamed", "refund.succeeded", "", 0},
		{"evt_2", "refund.failed", keys[1], 0},
	} {
		time.Sleep(d.wait)
		ok, err := deliver(d.id, d.typ, d.key)
		if err != nil {
			return err
		}
		took = append(took, ok)
	}
	var got []string
	if err := run.Get(ctx, &got); err != nil {
		return err
	}
	if want := []string{"succeeded by evt_1", workflows.ErrTypeOperationFailed}; !slices.Equal(got, want) || !slices.Equal(took, []bool{true, false, true, true}) {
		return fmt.Errorf("two refunds: got %v, took %v; want %v, took [true false true true]", got, took, want)
	}
	return record(ctx, c, run, filepath.Join(out, "webhook_two_keys_history_v2.json"))
}
