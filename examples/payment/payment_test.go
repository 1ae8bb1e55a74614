package payment_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemhttp/temporal-idempotent-http/examples/payment"
	"github.com/idemhttp/temporal-idempotent-http/testsuite"
)

// README: test

func TestCharge(t *testing.T) {
	t.Setenv("PAY_API_TOKEN", "sk_test_4eC39HqLyjWDarjtT1zdp7dc")
	api := testsuite.StartServer(t, testsuite.Options{}) // the reference idempotent server
	api.Script(testsuite.Fail(503), testsuite.Fail(429, "1"))
	env := testsuite.NewEnv(t) // Temporal's test environment, quiet, on its skipped clock
	require.NoError(t, payment.Register(env, api.URL))

	env.ExecuteWorkflow(payment.Charge, payment.Order{ID: "o-1", Cents: 4200, APIURL: api.URL})
	var receipt payment.Receipt
	require.NoError(t, env.GetWorkflowResult(&receipt))
	require.NotEmpty(t, receipt.PaymentID)
	require.Equal(t, 3, api.Stats().Requests) // 503, 429, 201: one key
	require.Equal(t, 1, api.Stats().Records)  // charged once
}

// README: end

// README: declined

// TestChargeDeclined: a 402 is a declined card, a result, not a failure.
func TestChargeDeclined(t *testing.T) {
	t.Setenv("PAY_API_TOKEN", "sk_test_4eC39HqLyjWDarjtT1zdp7dc")
	api := testsuite.StartServer(t, testsuite.Options{Work: func(_ *http.Request, body []byte) (int, []byte) {
		var in struct{ Card string }
		_ = json.Unmarshal(body, &in)
		if in.Card == "4000000000000002" {
			return http.StatusPaymentRequired, []byte(`{"error":{"code":"card_declined"}}`)
		}
		return http.StatusCreated, nil
	}})
	env := testsuite.NewEnv(t) // Temporal's test environment, logging at Info to the test
	require.NoError(t, payment.Register(env, api.URL))

	env.ExecuteWorkflow(payment.Charge, payment.Order{ID: "o-2", Cents: 4200, Card: "4000000000000002", APIURL: api.URL})
	var receipt payment.Receipt
	require.NoError(t, env.GetWorkflowResult(&receipt))
	require.True(t, receipt.Declined)
	require.Equal(t, 1, api.Stats().Requests)
	require.Equal(t, 0, api.Stats().Records) // a decline makes no record
}

// README: end

// TestRegisterNeedsTheToken: a worker without its token fails at start, not
// at the first payment.
func TestRegisterNeedsTheToken(t *testing.T) {
	t.Setenv("PAY_API_TOKEN", "")
	env := testsuite.NewEnv(t)
	require.ErrorContains(t, payment.Register(env, "https://pay.example.com"), "is the token missing?")
}
