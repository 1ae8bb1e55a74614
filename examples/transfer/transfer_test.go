package transfer_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemhttp/temporal-idempotent-http/examples/transfer"
	"github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// README: test

func TestSend(t *testing.T) {
	t.Setenv("BANK_API_TOKEN", "bk_test_9a8b7c6d5e4f")
	env := testsuite.NewEnv(t)
	api := testsuite.StartServer(t, testsuite.Options{Now: env.Now, Async: &testsuite.Async{
		Style: testsuite.AsyncOperationLocation, Duration: 30 * time.Hour, RetryAfter: 600,
	}}) // settles in 30 h, past the first day's deadline
	require.NoError(t, transfer.Register(env, api.URL))

	env.ExecuteWorkflow(transfer.Send, transfer.Transfer{ID: "t-1", Cents: 990000, IBAN: "DE89370400440532013000", APIURL: api.URL})
	var s transfer.Settlement
	require.NoError(t, env.GetWorkflowResult(&s))
	require.Equal(t, "rec_1", s.TransferID)
	require.Equal(t, 1, api.Stats().Records)    // sent once
	require.Equal(t, 1, api.Stats().Operations) // followed on, never sent again
}

// README: end

// TestSendRejected: a failed operation is the bank's answer, with its reason.
func TestSendRejected(t *testing.T) {
	t.Setenv("BANK_API_TOKEN", "bk_test_9a8b7c6d5e4f")
	env := testsuite.NewEnv(t)
	api := testsuite.StartServer(t, testsuite.Options{Now: env.Now, Async: &testsuite.Async{
		Style: testsuite.AsyncOperationLocation, Duration: time.Hour, RetryAfter: 60, State: workflows.StateFailed,
	}})
	require.NoError(t, transfer.Register(env, api.URL))
	env.ExecuteWorkflow(transfer.Send, transfer.Transfer{ID: "t-2", Cents: 1, IBAN: "DE89370400440532013000", APIURL: api.URL})
	var s transfer.Settlement
	require.NoError(t, env.GetWorkflowResult(&s))
	require.Contains(t, s.Rejected, "OperationFailed")
	require.Empty(t, s.TransferID)
	require.InDelta(t, 61, api.Stats().Polls, 2) // every minute for an hour
}

// TestSendSettledAtOnce: an API that settles at once (201) is the result,
// with no polls.
func TestSendSettledAtOnce(t *testing.T) {
	t.Setenv("BANK_API_TOKEN", "bk_test_9a8b7c6d5e4f")
	env := testsuite.NewEnv(t)
	api := testsuite.StartServer(t, testsuite.Options{Now: env.Now})
	require.NoError(t, transfer.Register(env, api.URL))
	env.ExecuteWorkflow(transfer.Send, transfer.Transfer{ID: "t-3", Cents: 5, IBAN: "DE89370400440532013000", APIURL: api.URL})
	var s transfer.Settlement
	require.NoError(t, env.GetWorkflowResult(&s))
	require.Equal(t, "rec_1", s.TransferID)
	require.Zero(t, s.Polls)
}
