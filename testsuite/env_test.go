package testsuite_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktestsuite "go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// OpenAccount is a user's workflow under test.
func OpenAccount(ctx workflow.Context, apiURL string) (int, error) {
	resp, err := workflows.Post(ctx, "open-account", apiURL+"/accounts", map[string]string{"owner": "ada"})
	if err != nil {
		return 0, err
	}
	return int(resp.Attempt), nil
}

// TestRegister is the few lines a user writes to test a workflow against the
// reference server.
func TestRegister(t *testing.T) {
	srv := testsuite.StartServer(t, testsuite.Options{})
	srv.Script(testsuite.Fail(502), testsuite.Fail(503))
	env := new(sdktestsuite.WorkflowTestSuite).NewTestWorkflowEnvironment()
	testsuite.Register(t, env, srv, activities.Config{})
	env.RegisterWorkflow(OpenAccount)

	env.ExecuteWorkflow(OpenAccount, srv.URL)
	require.NoError(t, env.GetWorkflowError())
	var attempts int
	require.NoError(t, env.GetWorkflowResult(&attempts))
	assert.Equal(t, 3, attempts)
	assert.Equal(t, 1, srv.Stats().Records)
	var body map[string]string
	require.NoError(t, json.Unmarshal(srv.Records()[0].Request, &body))
	assert.Equal(t, "ada", body["owner"])
}
