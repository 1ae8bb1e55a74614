package ledger_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/examples/ledger"
	"github.com/idemhttp/temporal-idempotent-http/testsuite"
)

// README: test

func TestBookOnceThoughTheAnswerIsLost(t *testing.T) {
	api := testsuite.StartServer(t, testsuite.Options{
		Dialect: testsuite.PlainDialect(), // an API that ignores keys
		Lookup:  "reference",              // GET /entries?reference=… finds entries
	})
	api.Script(testsuite.CutAfterWork()) // booked, then the connection cut
	env := testsuite.NewEnv(t)
	testsuite.Register(t, env, api, activities.Config{})
	env.RegisterWorkflow(ledger.Book)

	env.ExecuteWorkflow(ledger.Book, ledger.Entry{Account: "acc-1", Cents: 4200, APIURL: api.URL})
	var id string
	require.NoError(t, env.GetWorkflowResult(&id))
	require.Equal(t, "rec_1", id)
	require.Equal(t, 1, api.Stats().Records) // booked once
	require.Equal(t, 1, api.Stats().Lookups) // found by the lookup, not posted again
}

// README: end
