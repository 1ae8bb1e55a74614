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
	// The first lookup answers; the entry is booked, then the connection cut.
	api.Script(testsuite.Step{}, testsuite.CutAfterWork())
	env := testsuite.NewEnv(t)
	testsuite.Register(t, env, api, activities.Config{})
	env.RegisterWorkflow(ledger.Book)

	env.ExecuteWorkflow(ledger.Book, ledger.Entry{Account: "acc-1", Cents: 4200, APIURL: api.URL})
	var id string
	require.NoError(t, env.GetWorkflowResult(&id))
	require.Equal(t, "rec_1", id)
	require.Equal(t, 1, api.Stats().Records) // booked once
	require.Equal(t, 2, api.Stats().Lookups) // before the POST, and after the cut: found
}

// README: end
