package integration_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/idemhttp/temporal-idempotent-http/harness/actions"
	"github.com/idemhttp/temporal-idempotent-http/harness/itest"
	"github.com/idemhttp/temporal-idempotent-http/host"
	"github.com/idemhttp/temporal-idempotent-http/internal/governor"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// actionsIdle is how long TestActions watches the idle worker: the
// counts do not depend on it (none is expected), the test's time does.
const actionsIdle = 20 * time.Second

// TestActions counts Temporal actions on a dev server of its own (its
// metrics on a known port; the shared one's counter would hold the other
// tests'), by the server's own `action` counter, with what does not
// depend on timing:
//
//   - a first-try call (201) through the ready workflow, on a worker
//     wired as package host wires one on its defaults (the shared rate
//     on), costs no more actions than the same POST by a plain activity
//     in a minimal workflow, and the same kinds: a workflow started and
//     an activity scheduled each. The shared rate costs nothing: its
//     reporter sends no report for a queue that was neither throttled
//     nor failed and has no limit, so no governor starts (a governor's
//     actions, were there one, would be counted from its history);
//   - the same worker idle (no request) for actionsIdle right after
//     those calls, its reporter watching the queue, costs 0 actions.
//
// The bench's actions section (bench/results/actions) measures the rest
// (retries, polls, webhooks, lookups, the shared rate under load).
func TestActions(t *testing.T) {
	t.Parallel()
	const calls = 5
	ctx := ctxT(t, 2*time.Minute)
	port, err := itest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	d := itest.StartDevServerT(t, itest.DevServerOptions{CLI: bins.Temporal, ExtraArgs: actions.ServerArgs(port)})
	metrics := actions.MetricsURL(port)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"id":"rec_1","status":"created"}`)
	}))
	t.Cleanup(api.Close)
	quiet := sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))

	// The baseline: a plain activity in a minimal workflow.
	pc, err := d.Dial(client.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pc.Close)
	plainTQ := uniqueName(t, "plain")
	pw := worker.New(pc, plainTQ, worker.Options{})
	pw.RegisterWorkflowWithOptions(actionsPlainWorkflow, workflow.RegisterOptions{Name: "ActionsPlainPOST"})
	pw.RegisterActivityWithOptions(actionsPlainPost, activity.RegisterOptions{Name: "ActionsPlainPOSTActivity"})
	if err := pw.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pw.Stop)

	// The ready workflow's worker, wired by package host on its defaults.
	tq := uniqueName(t, "host")
	h, err := host.Load([]string{"--allow-origin", api.URL, "--task-queue", tq, "--identity", tq, "--log-level", "error"})
	if err != nil {
		t.Fatal(err)
	}
	opts := h.ClientOptions()
	opts.HostPort, opts.Logger = d.HostPort, quiet
	hc, err := client.Dial(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hc.Close)
	if err := h.Start(hc); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	t.Cleanup(h.Close)
	hw := worker.New(hc, h.TaskQueue(), h.WorkerOptions())
	h.Register(hw)
	if err := hw.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hw.Stop)

	c := d.Client()
	settle := func() actions.Counts {
		t.Helper()
		n, err := actions.Settle(ctx, metrics, d.Namespace, 1500*time.Millisecond, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	run := func(name, queue, wf string, arg func(id string) any) actions.Counts {
		t.Helper()
		before := settle()
		for i := range calls {
			id := uniqueName(t, fmt.Sprintf("%s-%d", name, i))
			r, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, wf, arg(id))
			if err == nil {
				err = r.Get(ctx, nil)
			}
			if err != nil {
				t.Fatalf("%s call %d: %v", name, i, err)
			}
		}
		return settle().Sub(before)
	}
	url := api.URL + "/charges"
	plain := run("plain", plainTQ, "ActionsPlainPOST", func(string) any { return url })
	// The reporter reads its queues' limits at its first tick (1 s after
	// Start); it reports a queue whose limit it has not read yet (which
	// may be limited).
	time.Sleep(time.Until(started.Add(governor.DefaultReportInterval + 500*time.Millisecond)))
	ours := run("ours", tq, workflows.WorkflowName, func(id string) any {
		return workflows.Request{Operation: "charge", URL: url, Body: []byte(`{"amount":42}`)}
	})
	originQueue, err := workflows.OriginTaskQueue(tq, api.URL)
	if err != nil {
		t.Fatal(err)
	}
	// The shared rate reports nothing while its queue is untroubled and
	// unlimited: no governor is started.
	gov, err := actions.FromWorkflow(ctx, c, governor.WorkflowID(originQueue), actions.Window{})
	var notFound *serviceerror.NotFound
	switch {
	case errors.As(err, &notFound):
	case err != nil:
		t.Fatalf("the governor's history: %v", err)
	default:
		t.Errorf("the shared rate started a governor for calls that were never throttled nor failed: its actions %s", gov.Server)
	}
	own := ours.Total() - gov.Server.Total()
	t.Logf("plain: %s; ours: %s, the governor's %s (Cloud: %s)", plain, ours, gov.Server, gov.Cloud)
	if want := (actions.Counts{actions.TypeStart: calls, actions.TypeScheduled: calls}); plain.String() != want.String() {
		t.Errorf("the plain activity's calls cost %s; want %s", plain, want)
	}
	if own > plain.Total() {
		t.Errorf("%d first-try calls through the ready workflow cost %g actions of their own (%s, less the governor's %s); the plain activity's %g",
			calls, own, ours, gov.Server, plain.Total())
	}
	if kinds := ours.Tally().Add(gov.Server.Scale(-1)); kinds.String() != plain.Tally().String() {
		t.Errorf("the ready workflow's own actions by kind %s; the plain activity's %s", kinds, plain.Tally())
	}

	// Idle: the shared rate's worker right after its calls.
	before := settle()
	select {
	case <-time.After(actionsIdle):
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	if idle := settle().Sub(before); idle.Total() != 0 {
		t.Errorf("the idle worker (the shared rate on) cost %g actions in %s: %s; want 0", idle.Total(), actionsIdle, idle)
	}
}

// actionsPlainWorkflow is TestActions' baseline: one plain activity POSTs
// to url, retried by Temporal.
func actionsPlainWorkflow(ctx workflow.Context, url string) (int, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: 200 * time.Millisecond, MaximumAttempts: 5},
	})
	var status int
	err := workflow.ExecuteActivity(ctx, "ActionsPlainPOSTActivity", url).Get(ctx, &status)
	return status, err
}

// actionsPlainPost POSTs to url with net/http; anything but a 2xx is an
// error.
func actionsPlainPost(ctx context.Context, url string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader([]byte(`{"amount":42}`)))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, fmt.Errorf("status %d", resp.StatusCode)
	}
	return resp.StatusCode, nil
}
