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
	"github.com/idemhttp/temporal-idempotent-http/internal/itest"
	"github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

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
	srv := testsuite.StartServer(t, testsuite.Options{})
	tq := uniqueName(t, "tq")
	acts, err := activities.New(activities.Config{AllowedOrigins: []string{srv.URL}})
	if err != nil {
		t.Fatal(err)
	}
	w := worker.New(tc, tq, worker.Options{})
	acts.Register(w)
	w.RegisterWorkflow(chargeTwice)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
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
	if got != activities.ErrTypeInvalidRequest {
		t.Errorf("the second call ended with %q, want %q", got, activities.ErrTypeInvalidRequest)
	}
	if st := srv.Stats(); st.Requests != 1 || st.Records != 1 {
		t.Errorf("the server saw %d requests and made %d records, want 1 and 1", st.Requests, st.Records)
	}
}
