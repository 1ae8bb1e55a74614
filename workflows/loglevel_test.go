package workflows_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/workflow"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// TestFailureLogLevel (issue 31): a final 4xx answer the workflow is
// expected to handle (a declined 402, a 404, a 409, a 422) is logged once
// at Warn, the activity's line with its status and error type, the
// workflow's line at Info; what needs an operator (401, 403, 407, a
// non-retryable 5xx) stays at Error on both (loglevel.CallerHandles).
func TestFailureLogLevel(t *testing.T) {
	for _, c := range []struct {
		status            int
		kv                []string
		activity, errType string
		workflow          string
	}{
		{402, nil, "WARN", workflows.ErrTypeHTTPClientError, "INFO"},
		{400, nil, "WARN", workflows.ErrTypeHTTPClientError, "INFO"},
		{404, nil, "WARN", workflows.ErrTypeHTTPClientError, "INFO"},
		{409, nil, "WARN", workflows.ErrTypeHTTPClientError, "INFO"},
		{422, nil, "WARN", workflows.ErrTypeHTTPClientError, "INFO"},
		{402, []string{"Stripe-Should-Retry", "false"}, "WARN", workflows.ErrTypeHTTPClientError, "INFO"},
		{401, nil, "ERROR", workflows.ErrTypeHTTPClientError, "ERROR"},
		{403, nil, "ERROR", workflows.ErrTypeHTTPClientError, "ERROR"},
		{407, nil, "ERROR", workflows.ErrTypeHTTPClientError, "ERROR"},
		{501, nil, "ERROR", workflows.ErrTypeHTTPNonRetryableStatus, "ERROR"},
	} {
		t.Run(fmt.Sprint(c.status, c.kv), func(t *testing.T) {
			srv := newRawServer(t, answer(c.status, `{"error":{"code":"card_declined"}}`, c.kv...))
			env, logs, _ := loggedEnv(t, activities.Config{AllowedOrigins: []string{srv.URL}})
			req := workflows.Request{Operation: "charge", URL: srv.URL + "/payments", Body: []byte(`{"amount":4200}`)}
			env.ExecuteWorkflow(func(ctx workflow.Context) error {
				_, err := workflows.Call(ctx, req)
				return err
			})
			require.Error(t, env.GetWorkflowError())
			act := logLines(t, logs, "HTTP request failed, not retrying")
			require.Len(t, act, 1, "the activity's line")
			assert.Equal(t, c.activity, act[0]["level"])
			assert.Equal(t, float64(c.status), act[0]["status"])
			assert.Equal(t, c.errType, act[0]["error_type"])
			wf := logLines(t, logs, "idempotent HTTP call failed")
			require.Len(t, wf, 1, "the workflow's line")
			assert.Equal(t, c.workflow, wf[0]["level"])
			assert.Equal(t, c.errType, wf[0]["error_type"])
		})
	}
}
