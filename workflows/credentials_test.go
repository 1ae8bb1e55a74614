package workflows_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// TestCredentialHeadersRefusedBeforeScheduling (hardening issue, class 4):
// a header whose name looks like a credential, in any spelling, is refused
// by workflows.Call before the activity is scheduled, so its value never
// reaches Temporal's history; ordinary headers go through to the server.
func TestCredentialHeadersRefusedBeforeScheduling(t *testing.T) {
	srv := newRawServer(t, answer(201, `{}`))
	tests := []struct {
		name    string
		refused bool
	}{
		{"Authorization", true},
		{"authorization", true},
		{"Proxy-Authorization", true},
		{"Cookie", true},
		{"X-Api-Key", true},
		{"x-api-key", true},
		{"X-API-KEY", true},
		{"Api-Key", true},
		{"Apikey", true},
		{"X-Auth-Token", true},
		{"X-Access-Token", true},
		{"X-Amz-Security-Token", true},
		{"Ocp-Apim-Subscription-Key", true},
		{"X-Client-Secret", true},
		{"X-Csrf-Token", true},
		{"X-Session-Id", true},
		{"Private-Token", true},
		{"X_Api_Key", true},
		{"X-Correlation-Id", false},
		{"Accept-Language", false},
		{"X-Request-Id", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env, _, started := loggedEnv(t, activities.Config{AllowedOrigins: []string{srv.URL}})
			before, _ := srv.requests()
			var got *workflows.Response
			env.ExecuteWorkflow(func(ctx workflow.Context) error {
				var err error
				got, err = workflows.Call(ctx, workflows.Request{
					Operation: "charge", URL: srv.URL + "/payments", Body: json.RawMessage(`{"amount":1}`),
					Headers: map[string]string{tt.name: "secret-value-0123456789"},
				})
				return err
			})
			err := env.GetWorkflowError()
			after, _ := srv.requests()
			if !tt.refused {
				require.NoError(t, err)
				assert.Equal(t, 201, got.Status)
				assert.Equal(t, 1, *started)
				assert.Len(t, after, len(before)+1)
				return
			}
			var appErr *temporal.ApplicationError
			require.True(t, errors.As(err, &appErr), "got %v", err)
			assert.Equal(t, workflows.ErrTypeInvalidRequest, appErr.Type())
			assert.True(t, appErr.NonRetryable())
			assert.Contains(t, appErr.Message(), "looks like a credential")
			assert.NotContains(t, appErr.Message(), "secret-value-0123456789", "the value is not repeated")
			assert.Zero(t, *started, "no activity scheduled")
			assert.Len(t, after, len(before), "nothing sent")
		})
	}
}
