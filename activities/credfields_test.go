package activities_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// TestAnswerCredentialFieldsRedacted (issue 30, item 3): in an answer's
// JSON, the value of every member named like a credential
// (redact.IsCredential, the rule for header names and webhook events) is
// replaced, in the result of a 2xx and in the error and Failure of a 4xx,
// though the worker never configured that value; business fields named
// close to one are kept.
func TestAnswerCredentialFieldsRedacted(t *testing.T) {
	const body = `{"id":"pi_1","client_secret":"pi_1_secret_v01","data":{"accessToken":"at_v02_value","apiKey":12345678},` +
		`"list":[{"refreshToken":"rt_v03_value"}],"idempotency_key":"key-1","tokenized_card":"tc_v04","authorization_code":"ac_v05","keep":"me"}`
	values := []string{"pi_1_secret_v01", "at_v02_value", "12345678", "rt_v03_value"}
	kept := []string{`"idempotency_key":"key-1"`, `"tokenized_card":"tc_v04"`, `"authorization_code":"ac_v05"`, `"keep":"me"`}
	for _, code := range []int{201, 400} {
		srv := newRecorder(t, status(code, body, "Content-Type", "application/json"))
		resp, logs, err := run(t, activities.Config{AllowedOrigins: []string{srv.URL}}, req(srv.URL))
		assertNoPiece(t, err, resp, logs, values...)
		if code == 400 {
			require.Error(t, err)
			d, ok := workflows.AsFailure(err)
			require.True(t, ok)
			assert.Contains(t, d.Body, `"client_secret":"[REDACTED]"`)
			for _, k := range kept {
				assert.Contains(t, d.Body, k)
			}
			continue
		}
		require.NoError(t, err)
		require.True(t, json.Valid(resp.Body), "valid JSON: %s", resp.Body)
		assert.True(t, resp.BodyRedacted)
		assert.Equal(t, hexSHA256([]byte(body)), resp.BodySHA256)
		for _, k := range []string{"client_secret", "accessToken", "apiKey", "refreshToken"} {
			assert.Contains(t, string(resp.Body), `"`+k+`":"[REDACTED]"`)
		}
		for _, k := range kept {
			assert.Contains(t, string(resp.Body), k, "a business field is kept")
		}
	}
}

// TestAnswerKeepsStripeObjects (seam review of issue 30, item 3): a Stripe
// PaymentIntent with its latest Charge, the answer to a 2xx, is the result
// byte for byte but its client_secret: the card's network_token,
// extended_authorization and incremental_authorization are objects, kept
// in shape so the result still decodes into stripe-go's types.
func TestAnswerKeepsStripeObjects(t *testing.T) {
	pi, err := os.ReadFile("../internal/redact/testdata/stripe_payment_intent.json")
	require.NoError(t, err)
	const cs = `"pi_3QxYzAB2eZvKYlo21a2b3c4d_secret_F4kE5eCrEtV4lu3x9"`
	require.Contains(t, string(pi), cs)
	srv := newRecorder(t, status(200, string(pi), "Content-Type", "application/json"))
	resp, _, err := run(t, activities.Config{AllowedOrigins: []string{srv.URL}}, req(srv.URL))
	require.NoError(t, err)
	assert.True(t, resp.BodyRedacted)
	assert.Equal(t, strings.Replace(string(pi), cs, `"[REDACTED]"`, 1), string(resp.Body))
}
