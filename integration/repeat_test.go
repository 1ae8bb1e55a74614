package integration_test

import (
	"errors"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/harness/itest"
	"github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// startRepeatWorker starts the reference server and an in-process worker
// with the HTTP activity, the ready workflow and wf, on a task queue of its
// own, stopped when the test ends.
func startRepeatWorker(t *testing.T, wf any) (*testsuite.Server, string) {
	t.Helper()
	srv := testsuite.StartServer(t, testsuite.Options{})
	tq := uniqueName(t, "tq")
	acts, err := activities.New(activities.Config{AllowedOrigins: []string{srv.URL}})
	if err != nil {
		t.Fatal(err)
	}
	w := worker.New(tc, tq, worker.Options{})
	acts.Register(w)
	workflows.Register(w)
	w.RegisterWorkflow(wf)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	return srv, tq
}

// chargeTwice posts the same operation twice, a workflow timer apart, and
// returns the error type of the second call.
func chargeTwice(ctx workflow.Context, url string) (string, error) {
	if _, err := workflows.Post(ctx, "charge", url, map[string]int{"amount": 1}); err != nil {
		return "", err
	}
	if err := workflow.Sleep(ctx, 2*time.Second); err != nil {
		return "", err
	}
	_, err := workflows.Post(ctx, "charge", url, map[string]int{"amount": 1})
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return appErr.Type(), nil
	}
	return "no error", err
}

// TestRepeatedKeyOnARealServer: on a real server (where the history length
// tells a repeat from a replay), a second call with the same operation in one
// run fails as InvalidRequest without a request, and the run replays without
// non-determinism after its cached state is dropped in between.
func TestRepeatedKeyOnARealServer(t *testing.T) {
	srv, tq := startRepeatWorker(t, chargeTwice)
	ctx := ctxT(t, time.Minute)
	run, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: uniqueName(t, "wf"), TaskQueue: tq}, chargeTwice, srv.URL+"/payments")
	if err != nil {
		t.Fatal(err)
	}
	// Once the first charge is done, drop every cached workflow state: the
	// next workflow task replays the run from its start.
	if err := itest.Eventually(ctx, 50*time.Millisecond, func() error {
		if srv.Stats().Records != 1 {
			return errors.New("the first charge is not done")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	worker.PurgeStickyWorkflowCache()
	var got string
	if err := run.Get(ctx, &got); err != nil {
		t.Fatalf("the run failed (non-determinism?): %v", err)
	}
	if got != workflows.ErrTypeInvalidRequest {
		t.Errorf("the second call ended with %q, want %q", got, workflows.ErrTypeInvalidRequest)
	}
	if st := srv.Stats(); st.Requests != 1 || st.Records != 1 {
		t.Errorf("the server saw %d requests and made %d records, want 1 and 1", st.Requests, st.Records)
	}
}

// childTwiceThenAgain starts two ExecuteChild calls with one operation in
// the same workflow task, then a third after both ended, and returns the
// error type of each ("ok" for a success).
func childTwiceThenAgain(ctx workflow.Context, url string) ([]string, error) {
	req := workflows.Request{Operation: "charge", URL: url, Body: []byte(`{"amount":1}`)}
	kind := func(err error) string {
		var appErr *temporal.ApplicationError
		switch {
		case err == nil:
			return "ok"
		case errors.As(err, &appErr):
			return appErr.Type()
		}
		return "other error"
	}
	out := make([]string, 3)
	wg := workflow.NewWaitGroup(ctx)
	for i := range 2 {
		wg.Add(1)
		workflow.Go(ctx, func(ctx workflow.Context) {
			defer wg.Done()
			_, err := workflows.ExecuteChild(ctx, req)
			out[i] = kind(err)
		})
	}
	wg.Wait(ctx)
	_, err := workflows.ExecuteChild(ctx, req)
	out[2] = kind(err)
	return out, nil
}

// TestRepeatedChildOnARealServer (hardening, third round, item 4, from a
// review): two ExecuteChild calls with one operation started side by side
// see the same history length; the second fails to start (its child ID is
// taken). Its failure must not erase the first call's record: a third call,
// later, is refused as a repeat. Before, it ran a second child that got the
// stored answer (Replayed) and reported the charge done twice.
func TestRepeatedChildOnARealServer(t *testing.T) {
	srv, tq := startRepeatWorker(t, childTwiceThenAgain)
	ctx := ctxT(t, time.Minute)
	run, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: uniqueName(t, "wf"), TaskQueue: tq}, childTwiceThenAgain, srv.URL+"/payments")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	if err := run.Get(ctx, &got); err != nil {
		t.Fatalf("the run failed: %v", err)
	}
	if got[2] != workflows.ErrTypeInvalidRequest {
		t.Errorf("the calls ended %q; want the third refused as %s", got, workflows.ErrTypeInvalidRequest)
	}
	if n := countOK(got[:2]); n != 1 {
		t.Errorf("the calls side by side ended %q; want exactly one success", got[:2])
	}
	if st := srv.Stats(); st.Requests != 1 || st.Records != 1 {
		t.Errorf("the server saw %d requests and made %d records, want 1 and 1", st.Requests, st.Records)
	}
}

func countOK(kinds []string) int {
	n := 0
	for _, k := range kinds {
		if k == "ok" {
			n++
		}
	}
	return n
}
