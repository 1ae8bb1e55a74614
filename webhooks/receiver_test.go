package webhooks_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/idemhttp/temporal-idempotent-http/internal/input"
	"github.com/idemhttp/temporal-idempotent-http/webhooks"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// TestReceiverFixedEndpoint: what the receiver answers a delivery, and
// whether it reached Temporal.
func TestReceiverFixedEndpoint(t *testing.T) {
	v, err := webhooks.HMACVerifier(webhooks.HMACOptions{Secrets: []string{"the-new-secret-of-the-provider", secret}})
	require.NoError(t, err)
	valid := event("evt_1", "order-1", "charge")
	for _, tc := range []struct {
		name            string
		method          string
		body, sig       string
		updErr          error
		reject          error
		wantStatus      int
		wantCalls       int
		wantStatusField string
	}{
		{name: "delivered", body: valid, sig: sign(secret, valid), wantStatus: 200, wantCalls: 1, wantStatusField: `"status":"delivered"`},
		{name: "forged", body: valid, sig: sign("another secret", valid), wantStatus: 401, wantCalls: 0, wantStatusField: `"status":"rejected"`},
		{name: "tampered", body: strings.Replace(valid, "order-1", "order-2", 1), sig: sign(secret, valid), wantStatus: 401},
		{name: "unsigned", body: valid, wantStatus: 401},
		{name: "not a POST", method: http.MethodGet, body: valid, sig: sign(secret, valid), wantStatus: 405},
		{name: "too large", body: valid + strings.Repeat(" ", 1<<20), sig: sign(secret, valid+strings.Repeat(" ", 1<<20)), wantStatus: 413},
		{name: "names no workflow", body: `{"id":"evt_2","type":"x"}`, sig: sign(secret, `{"id":"evt_2","type":"x"}`), wantStatus: 200, wantStatusField: `"status":"ignored"`},
		{name: "workflow ended", body: valid, sig: sign(secret, valid), updErr: serviceerror.NewNotFound("workflow execution already completed"), wantStatus: 200, wantCalls: 1, wantStatusField: `"status":"ignored"`},
		{name: "Temporal unavailable", body: valid, sig: sign(secret, valid), updErr: serviceerror.NewUnavailable("down"), wantStatus: 503, wantCalls: 1, wantStatusField: `"status":"failed"`},
		{name: "workflow refuses it", body: valid, sig: sign(secret, valid), reject: errors.New("operation charge already ended"), wantStatus: 200, wantCalls: 1, wantStatusField: `"status":"ignored"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := &updates{err: tc.updErr, reject: tc.reject}
			rc := newReceiver(t, webhooks.Config{Client: u, Verifier: v})
			r := httptest.NewRequest(tc.method, "/webhooks", strings.NewReader(tc.body))
			if tc.method == "" {
				r.Method = http.MethodPost
			}
			if tc.sig != "" {
				r.Header.Set("X-Signature", tc.sig)
			}
			w := httptest.NewRecorder()
			rc.ServeHTTP(w, r)
			assert.Equal(t, tc.wantStatus, w.Code, w.Body.String())
			assert.Equal(t, tc.wantCalls, u.count())
			assert.Contains(t, w.Body.String(), tc.wantStatusField)
			assert.NotContains(t, w.Body.String(), secret)
			if tc.wantStatus == 503 {
				assert.NotEmpty(t, w.Header().Get("Retry-After"))
			}
			if tc.wantCalls == 0 {
				return
			}
			o := u.calls[0]
			assert.Equal(t, "order-1", o.WorkflowID)
			assert.Equal(t, input.WebhookUpdate("charge"), o.UpdateName)
			assert.Equal(t, "webhook/hmac/charge/evt_1", o.UpdateID)
			assert.Equal(t, client.WorkflowUpdateStageCompleted, o.WaitForStage)
			n := o.Args[0].(*workflows.Notification)
			assert.Equal(t, "evt_1", n.ID)
			assert.Equal(t, "charge.succeeded", n.Type)
			assert.Equal(t, "hmac", n.Scheme)
			assert.NotContains(t, string(n.Body), "pi_secret_123", "a credential-named field reached the workflow")
			assert.Contains(t, string(n.Body), `"client_secret":"[redacted]"`)
		})
	}
}

// TestReceiverDuplicate: a delivery the receiver delivered already is
// answered without Temporal; one that failed is tried again.
func TestReceiverDuplicate(t *testing.T) {
	v, err := webhooks.HMACVerifier(webhooks.HMACOptions{Secrets: []string{secret}})
	require.NoError(t, err)
	u := &updates{err: serviceerror.NewUnavailable("down")}
	rc := newReceiver(t, webhooks.Config{Client: u, Verifier: v})
	body := event("evt_1", "order-1", "charge")
	assert.Equal(t, 503, post(t, rc, "/webhooks", body, sign(secret, body)).Code)
	u.mu.Lock()
	u.err = nil
	u.mu.Unlock()
	assert.Equal(t, 200, post(t, rc, "/webhooks", body, sign(secret, body)).Code)
	w := post(t, rc, "/webhooks", body, sign(secret, body))
	assert.Equal(t, 200, w.Code)
	assert.Contains(t, w.Body.String(), `"status":"duplicate"`)
	assert.Equal(t, 2, u.count(), "the failed delivery and the first successful one")
}

// TestReceiverLargeEvent: an event larger than MaxEventBytes reaches the
// workflow without its body.
func TestReceiverLargeEvent(t *testing.T) {
	v, err := webhooks.HMACVerifier(webhooks.HMACOptions{Secrets: []string{secret}})
	require.NoError(t, err)
	u := &updates{}
	rc := newReceiver(t, webhooks.Config{Client: u, Verifier: v, MaxEventBytes: 100})
	body := event("evt_1", "order-1", "charge")
	require.Equal(t, 200, post(t, rc, "/webhooks", body, sign(secret, body)).Code)
	n := u.calls[0].Args[0].(*workflows.Notification)
	assert.True(t, n.BodyOmitted)
	assert.Empty(t, n.Body)
}

// TestReceiverCallbacks: a callback URL's token routes the delivery; a
// token of another operation, workflow, namespace or key is refused
// before Temporal; rotation keeps the old key's URLs valid.
func TestReceiverCallbacks(t *testing.T) {
	oldKey, newKey := strings.Repeat("o", 32), strings.Repeat("n", 32)
	old := &webhooks.Callbacks{BaseURL: "https://hooks.example.com/callbacks", Secrets: []string{oldKey}}
	rotated := &webhooks.Callbacks{BaseURL: "https://hooks.example.com/callbacks", Secrets: []string{newKey, oldKey}}
	otherNS := &webhooks.Callbacks{BaseURL: "https://hooks.example.com/callbacks", Secrets: []string{oldKey}, Namespace: "payments"}
	oldURL, err := old.URL("order/1", "charge", "")
	require.NoError(t, err)
	newURL, err := rotated.URL("order/1", "charge", "")
	require.NoError(t, err)
	nsURL, err := otherNS.URL("order/1", "charge", "")
	require.NoError(t, err)
	assert.NotEqual(t, oldURL, newURL)
	assert.True(t, strings.HasPrefix(oldURL, "https://hooks.example.com/callbacks/order%2F1/charge/"), oldURL)
	refundURL, _ := rotated.URL("order/1", "refund", "")
	swapped := strings.Replace(refundURL, "/refund/", "/charge/", 1)
	body := `{"id":"evt_1","type":"charge.succeeded"}`
	for _, tc := range []struct {
		name       string
		url        string
		wantStatus int
		wantCalls  int
	}{
		{"new key", newURL, 200, 1},
		{"old key, rotated", oldURL, 200, 1},
		{"another operation's token", swapped, 401, 0},
		{"another namespace's token", nsURL, 401, 0},
		{"no token", "https://hooks.example.com/callbacks/order%2F1/charge", 401, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := &updates{}
			rc := newReceiver(t, webhooks.Config{Client: u, Callbacks: rotated})
			w := post(t, rc, strings.TrimPrefix(tc.url, "https://hooks.example.com"), body, "")
			assert.Equal(t, tc.wantStatus, w.Code, w.Body.String())
			assert.Equal(t, tc.wantCalls, u.count())
			if tc.wantCalls == 1 {
				assert.Equal(t, "order/1", u.calls[0].WorkflowID)
				assert.Equal(t, input.WebhookUpdate("charge"), u.calls[0].UpdateName)
				assert.Equal(t, "callback", u.calls[0].Args[0].(*workflows.Notification).Scheme)
			}
		})
	}
}

// TestNewReceiverRefuses: a configuration that would take unverified
// events, or could not work, is an error that says what to set.
func TestNewReceiverRefuses(t *testing.T) {
	v, err := webhooks.HMACVerifier(webhooks.HMACOptions{Secrets: []string{secret}})
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		cfg  webhooks.Config
		want string
	}{
		{"no client", webhooks.Config{Verifier: v}, "Config.Client"},
		{"no verifier", webhooks.Config{Client: &updates{}}, "must verify signatures"},
		{"short callback key", webhooks.Config{Client: &updates{}, Callbacks: &webhooks.Callbacks{BaseURL: "https://h.example/cb", Secrets: []string{"short"}}}, "at least 32"},
		{"callback base with query", webhooks.Config{Client: &updates{}, Callbacks: &webhooks.Callbacks{BaseURL: "https://h.example/cb?x=1", Secrets: []string{strings.Repeat("k", 32)}}}, "BaseURL"},
		{"negative limit", webhooks.Config{Client: &updates{}, Verifier: v, MaxBodyBytes: -1}, "0 (the default) or more"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := webhooks.NewReceiver(tc.cfg)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// TestReceiverRoutesEachDeliveryToItsOperation: a delivery reaches each
// operation whose callback it came to, a resource's events stay distinct,
// an event naming another operation than its callback is not taken for
// it, answers say nothing of the outcome, and an event the workflow
// refused is offered again; the defects an adversarial review found, each
// a case that failed before its fix.
func TestReceiverRoutesEachDeliveryToItsOperation(t *testing.T) {
	key := strings.Repeat("k", 32)
	cb := &webhooks.Callbacks{BaseURL: "https://hooks.example.com/cb", Secrets: []string{key}}
	path := func(wf, op string) string {
		u, err := cb.URL(wf, op, "")
		require.NoError(t, err)
		return strings.TrimPrefix(u, "https://hooks.example.com")
	}
	t.Run("the same body to two operations' callbacks reaches both", func(t *testing.T) {
		u := &updates{}
		rc := newReceiver(t, webhooks.Config{Client: u, Callbacks: cb})
		body := `{"id":"pay_1","type":"succeeded"}`
		for _, op := range []string{"capture", "refund"} {
			w := post(t, rc, path("order-1", op), body, "")
			assert.Contains(t, w.Body.String(), `"delivered"`, op)
		}
		require.Equal(t, 2, u.count())
		assert.NotEqual(t, u.calls[0].UpdateID, u.calls[1].UpdateID)
	})
	t.Run("a resource's events with its ID are distinct events", func(t *testing.T) {
		u := &updates{}
		rc := newReceiver(t, webhooks.Config{Client: u, Callbacks: cb})
		for _, body := range []string{`{"id":"pay_1","type":"processing"}`, `{"id":"pay_1","type":"succeeded"}`} {
			assert.Contains(t, post(t, rc, path("order-1", "capture"), body, "").Body.String(), `"delivered"`)
		}
		assert.Equal(t, 2, u.count())
	})
	t.Run("a signed event naming another operation than its callback", func(t *testing.T) {
		v, err := webhooks.HMACVerifier(webhooks.HMACOptions{Secrets: []string{secret}})
		require.NoError(t, err)
		u := &updates{}
		rc := newReceiver(t, webhooks.Config{Client: u, Callbacks: cb, Verifier: v})
		body := event("evt_1", "order-1", "capture")
		assert.Equal(t, 401, post(t, rc, path("order-1", "refund"), body, sign(secret, body)).Code)
		assert.Equal(t, 200, post(t, rc, path("order-1", "capture"), body, sign(secret, body)).Code)
		assert.Equal(t, 1, u.count())
	})
	t.Run("answers say nothing of the outcome", func(t *testing.T) {
		u := &updates{reject: errors.New("operation capture already ended (failed, from poll)")}
		rc := newReceiver(t, webhooks.Config{Client: u, Callbacks: cb})
		w := post(t, rc, path("order-1", "capture"), `{"type":"x"}`, "")
		assert.JSONEq(t, `{"status":"ignored"}`, w.Body.String())
		u2 := &updates{}
		w = post(t, newReceiver(t, webhooks.Config{Client: u2, Callbacks: cb}), path("order-1", "capture"), `{"type":"x"}`, "")
		assert.JSONEq(t, `{"status":"delivered"}`, w.Body.String())
	})
	t.Run("an event the workflow refused is offered again", func(t *testing.T) {
		u := &updates{reject: errors.New("unknown update")}
		rc := newReceiver(t, webhooks.Config{Client: u, Callbacks: cb})
		for range 2 {
			assert.Contains(t, post(t, rc, path("order-1", "capture"), `{"type":"x"}`, "").Body.String(), `"ignored"`)
		}
		assert.Equal(t, 2, u.count(), "not answered from the memo")
	})
}

// TestReceiverUnsignedHeaders: with HMACOptions.TypeHeader and IDHeader
// (GitHub's, Shopify's set-ups) the signature covers the body only: an
// altered copy of a genuine delivery (its type header changed, a new ID
// header) is the same event (the same update ID, so Temporal takes it
// once and it fills no new slot), and the notification says its type is
// unsigned (the workflow lets the resource decide).
func TestReceiverUnsignedHeaders(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		opts                 webhooks.HMACOptions
		wantTypeUnsigned     bool
		wantSameEventHeaders bool // altered headers leave the update ID
	}{
		{"GitHub", webhooks.HMACOptions{Secrets: []string{secret}, Header: "X-Hub-Signature-256", Prefix: "sha256=", IDHeader: "X-GitHub-Delivery", TypeHeader: "X-GitHub-Event"}, true, true},
		{"Shopify", webhooks.HMACOptions{Secrets: []string{secret}, Header: "X-Shopify-Hmac-Sha256", Encoding: "base64", IDHeader: "X-Shopify-Webhook-Id", TypeHeader: "X-Shopify-Topic"}, true, true},
		{"type from the signed body", webhooks.HMACOptions{Secrets: []string{secret}, Header: "X-Hub-Signature-256", Prefix: "sha256=", IDHeader: "X-GitHub-Delivery", TypeField: "type"}, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := webhooks.HMACVerifier(tc.opts)
			require.NoError(t, err)
			u := &updates{}
			rc := newReceiver(t, webhooks.Config{Client: u, Verifier: v})
			body := `{"id":"op_1","type":"operation.processing","data":{"object":{"metadata":{"workflow_id":"order-1","operation":"charge"}}}}`
			m := hmac.New(sha256.New, []byte(secret))
			m.Write([]byte(body))
			sig := tc.opts.Prefix + hex.EncodeToString(m.Sum(nil))
			if tc.opts.Encoding == "base64" {
				sig = base64.StdEncoding.EncodeToString(m.Sum(nil))
			}
			send := func(id, typ string) {
				r := httptest.NewRequest(http.MethodPost, "/webhooks", strings.NewReader(body))
				r.Header.Set(tc.opts.Header, sig)
				r.Header.Set(tc.opts.IDHeader, id)
				if tc.opts.TypeHeader != "" {
					r.Header.Set(tc.opts.TypeHeader, typ)
				}
				w := httptest.NewRecorder()
				rc.ServeHTTP(w, r)
				require.Equal(t, 200, w.Code, w.Body.String())
			}
			send("d-genuine", "operation.processing")
			for i := range 40 {
				send(fmt.Sprintf("d-forged-%d", i), "operation.succeeded")
			}
			ids := map[string]bool{}
			u.mu.Lock()
			defer u.mu.Unlock()
			for _, c := range u.calls {
				ids[c.UpdateID] = true
				n := c.Args[0].(*workflows.Notification)
				assert.Equal(t, tc.wantTypeUnsigned, n.TypeUnsigned, "type %q", n.Type)
				assert.False(t, n.OperationUnsigned)
				assert.NotContains(t, n.ID, "d-", "the event's identity is its signed content, not an unsigned header")
			}
			assert.Len(t, ids, 1, "one genuine delivery is one event, whatever its unsigned headers say")
		})
	}
}

// TestReceiverCallbackBinding: on a callback endpoint with a verifier,
// order A's genuine signed event posted to order B's callback URL never
// decides B's outcome: one that names another workflow is refused, one
// that names none reaches B marked OperationUnsigned (the resource
// decides), and only B's own signed metadata makes it decisive.
func TestReceiverCallbackBinding(t *testing.T) {
	v, err := webhooks.HMACVerifier(webhooks.HMACOptions{Secrets: []string{secret}})
	require.NoError(t, err)
	cb := &webhooks.Callbacks{BaseURL: "https://hooks.example.com/cb", Secrets: []string{strings.Repeat("k", 32)}}
	pathB, err := cb.URL("order-B", "charge", "")
	require.NoError(t, err)
	pathB = strings.TrimPrefix(pathB, "https://hooks.example.com")
	for _, tc := range []struct {
		name         string
		body         string
		wantStatus   int
		wantCalls    int
		wantUnsigned bool
	}{
		{name: "A's event naming A", body: event("evt_A", "order-A", "charge"), wantStatus: 401},
		{name: "A's event naming no workflow", body: `{"id":"evt_A","type":"charge.succeeded","data":{"object":{"id":"pay_A"}}}`, wantStatus: 200, wantCalls: 1, wantUnsigned: true},
		{name: "A's event naming only the operation", body: `{"id":"evt_A","type":"charge.succeeded","data":{"object":{"metadata":{"operation":"charge"}}}}`, wantStatus: 200, wantCalls: 1, wantUnsigned: true},
		{name: "B's own event", body: event("evt_B", "order-B", "charge"), wantStatus: 200, wantCalls: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := &updates{}
			rc := newReceiver(t, webhooks.Config{Client: u, Callbacks: cb, Verifier: v})
			w := post(t, rc, pathB, tc.body, sign(secret, tc.body))
			assert.Equal(t, tc.wantStatus, w.Code, w.Body.String())
			require.Equal(t, tc.wantCalls, u.count())
			if tc.wantCalls == 1 {
				n := u.calls[0].Args[0].(*workflows.Notification)
				assert.Equal(t, "order-B", u.calls[0].WorkflowID)
				assert.Equal(t, tc.wantUnsigned, n.OperationUnsigned)
				assert.False(t, n.TypeUnsigned)
			}
		})
	}
}
