package webhooks_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktestsuite "go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/idemhttp/temporal-idempotent-http/internal/idemkey"
	"github.com/idemhttp/temporal-idempotent-http/internal/input"
	"github.com/idemhttp/temporal-idempotent-http/webhooks"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// TestReceiverNamesTheCallOfAnOperation: a delivery names the call of its
// operation it is for, by the digest of the call's idempotency key, so
// that the workflow can refuse another call's event: from the callback
// URL of a call (workflows.CallbackURL with a key, through the worker's
// local activity), or from the event's metadata (workflows.WebhookMetadata
// with a key, at Config.KeyDigestField). A URL's digest is under its
// token, and a signed event that names another call than its URL is
// refused; URLs and metadata made without a key still deliver, naming no
// call, with the update IDs they had; two calls' identical events are
// two updates.
func TestReceiverNamesTheCallOfAnOperation(t *testing.T) {
	const key1, key2 = "refund-order-7-first", "refund-order-7-second"
	d1, d2 := idemkey.Digest(key1), idemkey.Digest(key2)
	cb := &webhooks.Callbacks{BaseURL: "https://hooks.example.com/cb", Secrets: []string{strings.Repeat("k", 32)}, Namespace: "default-test-namespace"}
	v, err := webhooks.HMACVerifier(webhooks.HMACOptions{Secrets: []string{secret}})
	require.NoError(t, err)

	// The callback URLs a workflow gets from its worker, for each key.
	env := new(sdktestsuite.WorkflowTestSuite).NewTestWorkflowEnvironment()
	cb.Register(env)
	wf := func(ctx workflow.Context) ([]string, error) {
		var urls []string
		for _, key := range []string{key1, key2, ""} {
			u, err := workflows.CallbackURL(ctx, "refund", key)
			if err != nil {
				return nil, err
			}
			urls = append(urls, u)
		}
		return urls, nil
	}
	env.RegisterWorkflow(wf)
	env.ExecuteWorkflow(wf)
	require.NoError(t, env.GetWorkflowError())
	var urls []string
	require.NoError(t, env.GetWorkflowResult(&urls))
	require.Len(t, urls, 3)
	wid := "default-test-workflow-id"
	assert.True(t, strings.HasPrefix(urls[0], "https://hooks.example.com/cb/"+wid+"/refund/"+d1+"/"), urls[0])
	assert.True(t, strings.HasPrefix(urls[1], "https://hooks.example.com/cb/"+wid+"/refund/"+d2+"/"), urls[1])
	keyless, err := cb.URL(wid, "refund", "")
	require.NoError(t, err)
	assert.Equal(t, keyless, urls[2], "a URL made without a key is the URL of before")
	assert.Equal(t, 3, strings.Count(strings.TrimPrefix(keyless, "https://hooks.example.com/cb"), "/"), "…/{workflow}/{operation}/{token}")
	path := func(u string) string { return strings.TrimPrefix(u, "https://hooks.example.com") }
	// The first call's URL with the second's digest, the first's token.
	swapped := strings.Replace(path(urls[0]), "/"+d1+"/", "/"+d2+"/", 1)

	metadata := func(key string) string {
		m := `"workflow_id":"` + wid + `","operation":"refund"`
		if key != "" {
			m += `,"key_digest":"` + idemkey.Digest(key) + `"`
		}
		return `{"id":"evt_1","type":"refund.succeeded","data":{"object":{"id":"re_1","metadata":{` + m + `}}}}`
	}
	for _, tc := range []struct {
		name       string
		callbacks  bool   // a callback endpoint (else a fixed one)
		verify     bool   // with the verifier (a fixed endpoint always)
		field      string // Config.KeyDigestField
		path, body string
		wantStatus int
		// wantDigest and wantUpdate are the delivered notification's
		// KeyDigest and update ID, when delivered.
		wantDigest, wantUpdate string
	}{
		{name: "the first call's URL", callbacks: true, path: path(urls[0]), body: `{"id":"evt_1","type":"refund.succeeded"}`,
			wantStatus: 200, wantDigest: d1},
		{name: "the second call's URL", callbacks: true, path: path(urls[1]), body: `{"id":"evt_1","type":"refund.succeeded"}`,
			wantStatus: 200, wantDigest: d2},
		{name: "a URL made without a key", callbacks: true, path: path(urls[2]), body: `{"id":"evt_1","type":"refund.succeeded"}`,
			wantStatus: 200, wantUpdate: "webhook/callback/refund/sha256:"},
		{name: "another call's digest under a call's token", callbacks: true, path: swapped, body: `{"id":"evt_1","type":"refund.succeeded"}`,
			wantStatus: 401},
		{name: "a signed event naming its URL's call", callbacks: true, verify: true, path: path(urls[0]), body: metadata(key1),
			wantStatus: 200, wantDigest: d1, wantUpdate: "webhook/hmac/refund/" + d1 + "/evt_1"},
		{name: "a signed event naming another call than its URL", callbacks: true, verify: true, path: path(urls[0]), body: metadata(key2),
			wantStatus: 401},
		{name: "a signed event naming its call, to a URL made without a key", callbacks: true, verify: true, path: path(urls[2]), body: metadata(key2),
			wantStatus: 200, wantDigest: d2},
		{name: "a fixed endpoint's event naming its call", path: "/webhooks", body: metadata(key1),
			wantStatus: 200, wantDigest: d1, wantUpdate: "webhook/hmac/refund/" + d1 + "/evt_1"},
		{name: "a fixed endpoint's event naming no call", path: "/webhooks", body: metadata(""),
			wantStatus: 200, wantUpdate: "webhook/hmac/refund/evt_1"},
		{name: "a fixed endpoint's event, the digest elsewhere", field: "data.object.call", path: "/webhooks",
			body:       `{"id":"evt_1","type":"refund.succeeded","data":{"object":{"call":"` + d2 + `","metadata":{"workflow_id":"` + wid + `","operation":"refund"}}}}`,
			wantStatus: 200, wantDigest: d2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := &updates{}
			cfg := webhooks.Config{Client: u, Verifier: v, KeyDigestField: tc.field}
			if tc.callbacks {
				cfg.Callbacks = cb
				if !tc.verify {
					cfg.Verifier = nil
				}
			}
			sig := ""
			if cfg.Verifier != nil {
				sig = sign(secret, tc.body)
			}
			w := post(t, newReceiver(t, cfg), tc.path, tc.body, sig)
			require.Equal(t, tc.wantStatus, w.Code, w.Body.String())
			if tc.wantStatus != 200 {
				assert.Zero(t, u.count(), "refused before Temporal")
				return
			}
			require.Equal(t, 1, u.count())
			o := u.calls[0]
			assert.Equal(t, wid, o.WorkflowID)
			assert.Equal(t, input.WebhookUpdate("refund"), o.UpdateName)
			n := o.Args[0].(*workflows.Notification)
			assert.Equal(t, tc.wantDigest, n.KeyDigest)
			if tc.wantDigest != "" {
				assert.Contains(t, o.UpdateID, "/refund/"+tc.wantDigest+"/", "the call's digest is in the update ID")
			}
			if tc.wantUpdate != "" {
				assert.True(t, strings.HasPrefix(o.UpdateID, tc.wantUpdate), "update ID %q, want %q…", o.UpdateID, tc.wantUpdate)
			}
		})
	}

	t.Run("two calls' identical events are two updates", func(t *testing.T) {
		u := &updates{}
		rc := newReceiver(t, webhooks.Config{Client: u, Callbacks: cb})
		for _, p := range []string{path(urls[0]), path(urls[1])} {
			assert.Contains(t, post(t, rc, p, `{"type":"refund.succeeded"}`, "").Body.String(), `"delivered"`)
		}
		require.Equal(t, 2, u.count())
		assert.NotEqual(t, u.calls[0].UpdateID, u.calls[1].UpdateID)
	})
	t.Run("the digest is one path segment", func(t *testing.T) {
		assert.Equal(t, url.PathEscape(d1), d1)
		assert.Len(t, d1, 16)
		assert.NotEqual(t, d1, d2)
	})
}
