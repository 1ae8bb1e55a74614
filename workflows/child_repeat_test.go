package workflows_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/internal/idemkey"
	idemtest "github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// TestRepeatRuleAcrossExecuteChild (hardening issue, item 4): the rule of
// Post and Call holds for ExecuteChild, which derives the key in the
// parent. A second call with the same operation (the same key) in one
// parent run, after the first succeeded, fails with InvalidRequest naming
// the operation before a child starts, whether the first call was a child
// or a Post, unless Repeat is set; after a failed call it is a retry and
// allowed. Before the fix the second child (same workflow ID, same key)
// succeeded with Replayed=true: the server did the work once, the parent
// believed it did it twice.
func TestRepeatRuleAcrossExecuteChild(t *testing.T) {
	via := map[string]func(workflow.Context, workflows.Request) (*workflows.Response, error){
		"Post": func(ctx workflow.Context, req workflows.Request) (*workflows.Response, error) {
			if req.Repeat { // Post has no options: a meant repeat is a Call
				return workflows.Call(ctx, req)
			}
			return workflows.Post(ctx, req.Operation, req.URL, req.Body)
		},
		"ExecuteChild": workflows.ExecuteChild,
	}
	tests := []struct {
		name          string
		first, second string // "Post" or "ExecuteChild"
		firstFails    bool   // the server answers the first request 400
		repeat        bool   // the second call sets Request.Repeat
		wantRefused   bool
		wantRequests  int
		wantChildren  int
	}{
		{name: "child twice", first: "ExecuteChild", second: "ExecuteChild", wantRefused: true, wantRequests: 1, wantChildren: 1},
		{name: "child twice with Repeat", first: "ExecuteChild", second: "ExecuteChild", repeat: true, wantRequests: 2, wantChildren: 2},
		{name: "child again after a failed child", first: "ExecuteChild", second: "ExecuteChild", firstFails: true, wantRequests: 2, wantChildren: 2},
		{name: "Post then child", first: "Post", second: "ExecuteChild", wantRefused: true, wantRequests: 1, wantChildren: 0},
		{name: "Post then child with Repeat", first: "Post", second: "ExecuteChild", repeat: true, wantRequests: 2, wantChildren: 1},
		{name: "child then Post", first: "ExecuteChild", second: "Post", wantRefused: true, wantRequests: 1, wantChildren: 1},
		{name: "child again after a failed Post", first: "Post", second: "ExecuteChild", firstFails: true, wantRequests: 2, wantChildren: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := idemtest.StartServer(t, idemtest.Options{})
			if tt.firstFails {
				srv.Script(idemtest.Fail(400))
			}
			h := newHarness(t, srv, activities.Config{}, "order-child-repeat")
			var childIDs []string
			h.env.SetOnChildWorkflowStartedListener(func(info *workflow.Info, _ workflow.Context, _ converter.EncodedValues) {
				childIDs = append(childIDs, info.WorkflowExecution.ID)
			})
			req := workflows.Request{Operation: "charge", URL: srv.URL + "/payments", Body: json.RawMessage(`{"amount":1}`)}
			parent := func(ctx workflow.Context) (*workflows.Response, error) {
				_, err := via[tt.first](ctx, req)
				if tt.firstFails != (err != nil) {
					return nil, errors.New("first call: unexpected outcome: " + errString(err))
				}
				again := req
				again.Repeat = tt.repeat
				return via[tt.second](ctx, again)
			}
			h.env.RegisterWorkflowWithOptions(parent, workflow.RegisterOptions{Name: "parent"})
			h.env.ExecuteWorkflow("parent")
			err := h.env.GetWorkflowError()

			st := srv.Stats()
			assert.Equal(t, tt.wantRequests, st.Requests, "requests the server received")
			assert.Equal(t, 1, st.Records, "the work done once")
			assert.Len(t, childIDs, tt.wantChildren, "children started")
			for _, id := range childIDs {
				assert.Equal(t, "order-child-repeat/charge", id)
			}
			if tt.wantRefused {
				var appErr *temporal.ApplicationError
				require.True(t, errors.As(err, &appErr), "the second call must fail loudly; got %v", err)
				var childErr *temporal.ChildWorkflowExecutionError
				assert.False(t, errors.As(err, &childErr), "refused in the parent, not by a child")
				assert.Equal(t, workflows.ErrTypeInvalidRequest, appErr.Type())
				assert.True(t, appErr.NonRetryable())
				assert.Contains(t, appErr.Message(), `operation "charge"`)
				assert.Contains(t, appErr.Message(), "already completed a call with the same idempotency key")
				assert.Contains(t, appErr.Message(), `"charge-2"`, "says to give the operation its own name")
				assert.Contains(t, appErr.Message(), "set Request.Repeat (workflows.Call)", "says how to mean the repeat")
				return
			}
			require.NoError(t, err)
			var resp workflows.Response
			require.NoError(t, h.env.GetWorkflowResult(&resp))
			assert.Equal(t, 201, resp.Status)
			assert.Equal(t, tt.repeat, resp.Replayed, "a meant repeat reads the stored answer; a retry does the work")
			assert.Equal(t, idemkey.Derive(testNamespace, "order-child-repeat", "charge"), resp.IdempotencyKey)
		})
	}
}

func errString(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}
