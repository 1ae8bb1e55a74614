package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// recordCancelNoTime records follow_cancel_no_time_history_v2.json: a
// call with FollowOptions{CancelOperation: true} to a Google-style
// operation, in a workflow with a 15 s run timeout, cancelled 8 s in,
// while it polls: less than FollowOptions' 10 s margin is left before the
// run's deadline, so the workflow records the
// "follow-cancel-within-workflow-deadline" version marker, sends no cancel
// request and ends cancelled. follow_cancel_no_time_history.json, the
// same recorded with the code before (a scratch recorder at 9ebb7c4: the
// cancel request scheduled with the run's whole timeout), and
// follow_cancel_deadline_history.json (a 60 s run cancelled 5 s in, its
// cancel request's schedule-to-close timeout 60 s, where today's code
// asks for 45 s) stay as they are.
func recordCancelNoTime(ctx context.Context, c client.Client, out string) error {
	var cancels atomic.Int32
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/transfers":
			fmt.Fprint(w, `{"name":"operations/1","done":false}`)
		case r.Method == http.MethodPost && r.URL.Path == "/v1/operations/1:cancel":
			cancels.Add(1)
			fmt.Fprint(w, `{}`)
		default:
			w.Header().Set("Retry-After", "1")
			fmt.Fprint(w, `{"name":"operations/1","done":false}`)
		}
	}))
	defer api.Close()
	conv := activities.IETFConvention()
	conv.LongRunning = activities.GoogleOperation(api.URL + "/v1/")
	acts, err := activities.New(activities.Config{AllowedOrigins: []string{api.URL}, Conventions: map[string]activities.Convention{api.URL: conv}})
	if err != nil {
		return err
	}
	w := worker.New(c, "histgen-cancel", worker.Options{})
	acts.Register(w)
	workflows.Register(w)
	if err := w.Start(); err != nil {
		return err
	}
	defer w.Stop()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "histgen-cancel-no-time-order-5", TaskQueue: "histgen-cancel", WorkflowRunTimeout: 15 * time.Second},
		workflows.WorkflowName, workflows.Request{Operation: "transfer", URL: api.URL + "/transfers", Body: json.RawMessage(`{"amount":100}`),
			Follow: &workflows.FollowOptions{CancelOperation: true}})
	if err != nil {
		return err
	}
	time.Sleep(8 * time.Second)
	if err := c.CancelWorkflow(ctx, run.GetID(), run.GetRunID()); err != nil {
		return err
	}
	var ce *temporal.CanceledError
	if err := run.Get(ctx, nil); !errors.As(err, &ce) || cancels.Load() != 0 {
		return fmt.Errorf("the cancelled call: want it cancelled without a cancel request, got %v and %d requests", err, cancels.Load())
	}
	return record(ctx, c, run, filepath.Join(out, "follow_cancel_no_time_history_v2.json"))
}
