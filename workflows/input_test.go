package workflows_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/internal/backoff"
	"github.com/idemhttp/temporal-idempotent-http/internal/defaults"
	"github.com/idemhttp/temporal-idempotent-http/internal/idemkey"
	"github.com/idemhttp/temporal-idempotent-http/internal/input"
	idemtest "github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// TestRetryDefaultsAreTheActivitys: a request without retry options
// schedules the activity with the backoff defaults the activity itself
// applies (backoff.Backoff.WithDefaults) in its input (prepare builds
// Temporal's retry policy from the same values; the test environment does
// not hand it to the activity), and set fields pass through.
func TestRetryDefaultsAreTheActivitys(t *testing.T) {
	set := workflows.RetryOptions{InitialInterval: time.Second, BackoffCoefficient: 1.5, MaximumInterval: time.Minute, MaximumAttempts: 3, Jitter: workflows.JitterEqual}
	for _, tt := range []struct {
		name     string
		retry    workflows.RetryOptions
		want     backoff.Backoff
		attempts int32
	}{
		{"zero", workflows.RetryOptions{}, backoff.Backoff{}.WithDefaults(), defaults.MaximumAttempts},
		{"set", set, backoff.Backoff{InitialInterval: time.Second, BackoffCoefficient: 1.5, MaximumInterval: time.Minute, Jitter: "equal"}, 3},
		// Temporal refuses a MaximumInterval below InitialInterval: the
		// default maximum (10 s) is raised to a longer initial interval.
		{"initial above the default maximum", workflows.RetryOptions{InitialInterval: 30 * time.Second}, backoff.Backoff{InitialInterval: 30 * time.Second, BackoffCoefficient: backoff.DefaultBackoffCoefficient, MaximumInterval: 30 * time.Second, Jitter: "full"}, defaults.MaximumAttempts},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := idemtest.StartServer(t, idemtest.Options{})
			env := idemtest.Register(t, nil, srv, activities.Config{})
			var in input.Input
			env.SetOnActivityStartedListener(func(_ *activity.Info, _ context.Context, args converter.EncodedValues) {
				require.NoError(t, args.Get(&in))
			})
			req := charge(srv)
			req.Retry = tt.retry
			env.ExecuteWorkflow(workflows.WorkflowName, req)
			require.NoError(t, env.GetWorkflowError())

			assert.Equal(t, tt.want, in.Backoff, "the activity input's backoff")
			assert.Equal(t, tt.attempts, in.MaximumAttempts)
		})
	}
}

// TestReadyWorkflowDetails: the ready workflow, which validates its input
// once (in prepare, as Call does), shows the call and its key as its current
// details.
func TestReadyWorkflowDetails(t *testing.T) {
	srv := idemtest.StartServer(t, idemtest.Options{})
	env := idemtest.Register(t, nil, srv, activities.Config{})
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: "order-1"})
	env.ExecuteWorkflow(workflows.WorkflowName, charge(srv))
	require.NoError(t, env.GetWorkflowError())
	v, err := env.QueryWorkflow("__temporal_workflow_metadata")
	require.NoError(t, err)
	var meta sdkpb.WorkflowMetadata
	require.NoError(t, v.Get(&meta))
	key := idemkey.Derive(testNamespace, "order-1", "charge")
	want := input.Summary("POST", srv.URL+"/payments", "charge") + " with idempotency key " + key
	assert.Equal(t, want, meta.GetCurrentDetails())
}

// TestRequestDecodesPlainJSONBody: workflow input written before bodies
// travelled in their exact form (a history, or input typed by hand) has
// the body as plain JSON; it still decodes, to that JSON's text.
func TestRequestDecodesPlainJSONBody(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"url":"https://x.example/p","body":{"amount":42}}`, `{"amount":42}`},
		{`{"url":"https://x.example/p","body":[1,2]}`, `[1,2]`},
		{`{"url":"https://x.example/p","body":"{\"a\":\"<\"}"}`, `{"a":"<"}`},
		{`{"url":"https://x.example/p","body":null}`, ``},
		{`{"url":"https://x.example/p"}`, ``},
	}
	for _, tt := range tests {
		var r workflows.Request
		require.NoError(t, json.Unmarshal([]byte(tt.in), &r), tt.in)
		assert.Equal(t, tt.want, string(r.Body), tt.in)
		assert.Equal(t, "https://x.example/p", r.URL)
	}
}
