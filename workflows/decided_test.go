package workflows_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/workflow"

	"github.com/idemhttp/temporal-idempotent-http/internal/input"
	"github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// TestOperatorDecision (#41 item 3): a result a person completed a paused
// AtMostOnce call with (temporal activity complete --result) is the
// call's Response marked Reconciled "operator" with the call's key;
// {"gave_up": "…"} is an ErrTypeGaveUp failure of unknown outcome. A
// completion that is no decision (found by review: an empty object,
// null, a give-up with an empty reason or misspelt, another call's
// Response with its key) is never returned as the call's success: it
// could only be one as a 2xx marked "operator" with the call's own key.
func TestOperatorDecision(t *testing.T) {
	for _, tt := range []struct {
		name, result string
		reconciled   string
		gaveUp       bool
		noDecision   bool
	}{
		{"went through", `{"status":201,"body":{"id":"pay_9"}}`, "operator", false, false},
		{"gave up", `{"gave_up":"refunded by phone"}`, "", true, false},
		{"no decision: empty object", `{}`, "", false, true},
		{"no decision: null", `null`, "", false, true},
		{"no decision: give up without a reason", `{"gave_up":""}`, "", false, true},
		{"no decision: give up misspelt", `{"gaveup":"refunded"}`, "", false, true},
		{"no decision: another call's response", `{"status":201,"idempotency_key":"k-of-another-call","body":{"id":"pay_other"}}`, "", false, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			env := testsuite.NewEnv(t)
			env.RegisterActivityWithOptions(func(context.Context, input.Input) (json.RawMessage, error) {
				return json.RawMessage(tt.result), nil
			}, activity.RegisterOptions{Name: input.ActivityNameV2})
			wf := func(ctx workflow.Context) (*workflows.Response, error) {
				return workflows.Call(ctx, workflows.Request{Operation: "charge", URL: "https://api.example.com/payments", Reconcile: workflows.Reconcile{AtMostOnce: true}})
			}
			env.RegisterWorkflow(wf)
			env.ExecuteWorkflow(wf)
			err := env.GetWorkflowError()
			if tt.noDecision {
				// Never a success: the outcome is still unknown.
				require.Error(t, err, "operator completion %s returned as a success", tt.result)
				d, ok := workflows.AsFailure(err)
				require.True(t, ok)
				assert.Equal(t, workflows.ErrTypeAwaitingDecision, d.Type)
				assert.False(t, d.Retryable)
				assert.True(t, d.OutcomeUnknown)
				return
			}
			if tt.gaveUp {
				require.Error(t, err)
				d, ok := workflows.AsFailure(err)
				require.True(t, ok)
				assert.Equal(t, workflows.ErrTypeGaveUp, d.Type)
				assert.True(t, d.OutcomeUnknown)
				assert.Contains(t, err.Error(), "refunded by phone")
				return
			}
			require.NoError(t, err)
			var resp workflows.Response
			require.NoError(t, env.GetWorkflowResult(&resp))
			assert.Equal(t, tt.reconciled, resp.Reconciled)
			assert.NotEmpty(t, resp.IdempotencyKey)
			assert.JSONEq(t, `{"id":"pay_9"}`, string(resp.Body))
		})
	}
}

// TestAtMostOnceRequestTimeoutWinsOverContext (found by review): an
// AtMostOnce call's Request.ScheduleToCloseTimeout (48h) wins over the
// workflow context's activity options (10 minutes, for its other
// activities): the call is not refused for a bound it did not set.
func TestAtMostOnceRequestTimeoutWinsOverContext(t *testing.T) {
	env := testsuite.NewEnv(t)
	env.RegisterActivityWithOptions(func(context.Context, input.Input) (*workflows.Response, error) {
		return &workflows.Response{Status: 201, IdempotencyKey: "k", Attempt: 1}, nil
	}, activity.RegisterOptions{Name: input.ActivityNameV2})
	wf := func(ctx workflow.Context) (*workflows.Response, error) {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute, ScheduleToCloseTimeout: 10 * time.Minute})
		return workflows.Call(ctx, workflows.Request{Operation: "charge", URL: "https://api.example.com/payments",
			ScheduleToCloseTimeout: 48 * time.Hour, Reconcile: workflows.Reconcile{AtMostOnce: true}})
	}
	env.RegisterWorkflow(wf)
	env.ExecuteWorkflow(wf)
	assert.NoError(t, env.GetWorkflowError())
}

// TestReconcileValidate (#41, done when): Request.Validate refuses a
// reconcile or key place that cannot work, naming the field.
func TestReconcileValidate(t *testing.T) {
	for _, tt := range []struct {
		name string
		r    workflows.Request
		want string
	}{
		{"at most once with a short deadline", workflows.Request{Reconcile: workflows.Reconcile{AtMostOnce: true}, ScheduleToCloseTimeout: time.Minute}, "cannot: leave it 0"},
		{"lookup and at most once", workflows.Request{KeyIn: "body:ref", Body: json.RawMessage(`{}`), Reconcile: workflows.Reconcile{AtMostOnce: true, Lookup: "https://api.example.com/p?ref={key}"}}, "exclude each other"},
		{"lookup on another origin", workflows.Request{KeyIn: "body:ref", Body: json.RawMessage(`{}`), Reconcile: workflows.Reconcile{Lookup: "https://other.example.com/p?ref={key}"}}, "a lookup asks the API the call went to"},
		{"lookup with the key in a header", workflows.Request{KeyIn: "header:X-Ref", Reconcile: workflows.Reconcile{Lookup: "https://api.example.com/p?ref={key}"}}, "needs the key where the API keeps it"},
		{"lookup with follow", workflows.Request{KeyIn: "body:ref", Body: json.RawMessage(`{}`), Follow: &workflows.FollowOptions{}, Reconcile: workflows.Reconcile{Lookup: "https://api.example.com/p?ref={key}"}}, "cannot be combined with Follow"},
		{"body key without a body", workflows.Request{KeyIn: "body:ref"}, "needs a JSON object body"},
		{"body key on a path the body lacks", workflows.Request{KeyIn: "body:meta.ref", Body: json.RawMessage(`{"a":1}`)}, "has no member meta"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.r.Operation, tt.r.URL = "charge", "https://api.example.com/payments"
			err := tt.r.Validate()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}
