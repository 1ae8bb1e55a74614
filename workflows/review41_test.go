package workflows_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/workflow"

	"github.com/idemhttp/temporal-idempotent-http/internal/input"
	"github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// TestReview41OperatorResultMustBeAnAnswer: decided() takes any
// completion of a paused AtMostOnce call that is not {"gave_up": "…"}
// with text as "it went through": an empty object, null, a give-up with
// an empty reason, or a misspelt give-up are all returned as a success
// (Status 0, no body, Reconciled "operator"): the workflow goes on as if
// paid. And a completion that carries an idempotency_key (copied from
// another call's Response) bypasses decided() altogether: returned with
// the other call's key and no Reconciled mark.
func TestReview41OperatorResultMustBeAnAnswer(t *testing.T) {
	for _, tt := range []struct{ name, result string }{
		{"empty object", `{}`},
		{"null", `null`},
		{"give up without a reason", `{"gave_up":""}`},
		{"give up misspelt", `{"gaveup":"refunded"}`},
		{"another call's response", `{"status":201,"idempotency_key":"k-of-another-call","body":{"id":"pay_other"}}`},
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
			if err != nil {
				return // refused: fine
			}
			var resp workflows.Response
			_ = env.GetWorkflowResult(&resp)
			ok := resp.Status >= 200 && resp.Status <= 299 && resp.Reconciled == "operator" && resp.IdempotencyKey != "k-of-another-call"
			assert.True(t, ok, "operator completion %s returned as a success: %+v", tt.result, resp)
		})
	}
}

// TestReview41AtMostOnceRequestTimeoutWinsOverContext: prepare checks the
// workflow context's ScheduleToCloseTimeout before the request's: a call
// that sets Request.ScheduleToCloseTimeout to 48h, under a context whose
// activity options say 10 minutes (for its other activities), is refused
// with "set Request.ScheduleToCloseTimeout to 0 (no bound) or at least
// 1h0m0s", which it has done. (And a context bound of 48h is silently
// dropped for an unbounded wait.)
func TestReview41AtMostOnceRequestTimeoutWinsOverContext(t *testing.T) {
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
