package webhooks_test

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemhttp/temporal-idempotent-http/webhooks"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// TestReceiverRedactsCredentialFields (issue 30, item 3): the value of
// every member named like a credential (redact.IsCredential, the rule
// for header names too), in camelCase, prefixed or any case, is replaced
// before the event reaches Notification.Body in history; business fields
// named close to one keep theirs.
func TestReceiverRedactsCredentialFields(t *testing.T) {
	v, err := webhooks.HMACVerifier(webhooks.HMACOptions{Secrets: []string{secret}})
	require.NoError(t, err)
	secrets := map[string]string{
		"accessToken": "at_value_0001", "clientSecret": "cs_value_0002", "secret_key": "sk_value_0003",
		"idToken": "it_value_0004", "apiKey": "ak_value_0005", "X-Api-Key": "xk_value_0006",
		"private_key": "pk_value_0007", "client_secret": "pi_secret_123", "refreshToken": "rt_value_0008",
	}
	kept := map[string]string{"idempotency_key": "ik_value_0009", "tokenized_card": "tc_value_0010", "authorization_code": "ac_value_0011"}
	var fields []string
	for k, s := range secrets {
		fields = append(fields, `"`+k+`":"`+s+`"`)
	}
	for k, s := range kept {
		fields = append(fields, `"`+k+`":"`+s+`"`)
	}
	body := `{"id":"evt_1","type":"charge.succeeded","data":{"object":{` + strings.Join(fields, ",") +
		`,"nested":[{"credentials":{"password":"st_value_0012","used":false}},{"api_keys":["st_value_0013"]}],"metadata":{"workflow_id":"order-1","operation":"charge"}}}}`
	u := &updates{}
	rc := newReceiver(t, webhooks.Config{Client: u, Verifier: v})
	w := post(t, rc, "/webhooks", body, sign(secret, body))
	require.Equal(t, 200, w.Code, w.Body.String())
	require.Equal(t, 1, u.count())
	n := u.calls[0].Args[0].(*workflows.Notification)
	got := string(n.Body)
	for k, s := range secrets {
		assert.NotContains(t, got, s, "%s reached history", k)
		assert.Contains(t, got, `"`+k+`":"[redacted]"`)
	}
	assert.NotContains(t, got, "st_value_0012", "a member named like a credential, in a credential-named object, reached history")
	assert.NotContains(t, got, "st_value_0013", "a credential-named array's value reached history")
	assert.Contains(t, got, `{"password":"[redacted]","used":false}`, "an object under a credential name is walked into")
	for k, s := range kept {
		assert.Contains(t, got, `"`+k+`":"`+s+`"`, "a business field was redacted")
	}
	assert.Equal(t, "charge.succeeded", n.Type)
}

// TestReceiverKeepsStripeObjects (seam review of issue 30, item 3): a
// Stripe payment_intent.succeeded event reaches Notification.Body byte for
// byte but its client_secret; the card's network_token,
// extended_authorization and incremental_authorization objects keep their
// shape, so the workflow can decode the body into stripe-go's types.
func TestReceiverKeepsStripeObjects(t *testing.T) {
	pi, err := os.ReadFile("../internal/redact/testdata/stripe_payment_intent.json")
	require.NoError(t, err)
	v, err := webhooks.HMACVerifier(webhooks.HMACOptions{Secrets: []string{secret}})
	require.NoError(t, err)
	body := `{"id":"evt_1","type":"payment_intent.succeeded","data":{"object":` + string(pi) + `}}`
	u := &updates{}
	rc := newReceiver(t, webhooks.Config{Client: u, Verifier: v})
	w := post(t, rc, "/webhooks", body, sign(secret, body))
	require.Equal(t, 200, w.Code, w.Body.String())
	require.Equal(t, 1, u.count())
	n := u.calls[0].Args[0].(*workflows.Notification)
	const cs = `"pi_3QxYzAB2eZvKYlo21a2b3c4d_secret_F4kE5eCrEtV4lu3x9"`
	require.Contains(t, body, cs)
	assert.Equal(t, strings.Replace(body, cs, `"[redacted]"`, 1), string(n.Body))
}
