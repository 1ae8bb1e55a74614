package webhooks_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"go.temporal.io/sdk/client"

	"github.com/idemhttp/temporal-idempotent-http/internal/idemkey"
	"github.com/idemhttp/temporal-idempotent-http/internal/redact"
	"github.com/idemhttp/temporal-idempotent-http/webhooks"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// FuzzReceiver drives the receiver with generated deliveries, signed or
// not, to a fixed endpoint and to callback paths, and checks its
// invariants: it answers one of its documented statuses; only a delivery
// whose signature (computed here, independently) is valid, or whose
// callback token is, reaches Temporal, routed to the workflow its body or
// path names; no secret or token key is in an answer; what reaches the
// workflow is JSON without the value of a credential-named field; and a
// delivery whose signed bytes the provider did not produce for this
// operation never changes its outcome: a notification that may end an
// operation alone (neither TypeUnsigned nor OperationUnsigned) has the
// type its signed body says and is named for its workflow and operation
// by its signed body, and a copy of the delivery with its unsigned
// headers (the HMAC scheme's TypeHeader, IDHeader) altered is the same
// event (the same update ID), whose altered type decides nothing alone.
func FuzzReceiver(f *testing.F) {
	f.Add(event("evt_1", "order-1", "charge"), true, "/webhooks", false, false, "", "")
	f.Add(event("evt_1", "order-1", "charge"), false, "/webhooks", false, false, "", "")
	f.Add(`{"id":"e","type":"t","data":{"object":{"metadata":{"workflow_id":"w","operation":"o"},"token":"pi_secret_123"}}}`, true, "/webhooks", false, false, "", "")
	f.Add(`{"id":"e","data":{"object":{"metadata":{"workflow_id":"","operation":"o"}}}}`, true, "/webhooks", false, false, "", "")
	f.Add(`not json`, true, "/webhooks", false, false, "", "")
	f.Add(`{"id":"e","data":{"object":{"metadata":{"workflow_id":"w","operation":"o"},"client\u005fsecret":"pi_secret_123"}}}`, true, "/webhooks", false, false, "", "")
	f.Add(`{"id":"e","type":"t","data":{"object":{"metadata":{"workflow_id":"w","operation":"o"},"accessToken":"pi_secret_123","nested":[{"clientSecret":{"v":1,"password":"pi_secret_123"}},{"api_keys":[["pi_secret_123"]]}]}}}`, true, "/webhooks", false, false, "", "")
	f.Add(`{"id":"e","type":"t","data":{"object":{"metadata":{"workflow_id":"w","operation":"o"},"card":{"network_token":{"used":false},"incremental_authorization":{"status":"unavailable"},"cvc":"123"}}}}`, true, "/webhooks", false, false, "", "")
	f.Add(`{"id":"evt_2"}`, false, "/callbacks/order-1/charge/AAAA", true, false, "", "")
	f.Add(`{"id":"evt_2"}`, false, "/callbacks/order%2F1/charge/"+validToken(), true, false, "", "")
	// GitHub's set-up: the type and ID in unsigned headers.
	f.Add(event("evt_1", "order-1", "charge"), true, "/webhooks", false, true, "operation.processing", "d-1")
	// Another order's signed event posted to order/1's callback URL.
	f.Add(`{"id":"evt_3","type":"charge.succeeded"}`, true, "/callbacks/order%2F1/charge/"+validToken(), true, false, "", "")
	f.Add(event("evt_4", "order-2", "charge"), true, "/callbacks/order%2F1/charge/"+validToken(), true, true, "charge.succeeded", "d-4")
	f.Add(event("evt_5", "order/1", "charge"), true, "/callbacks/order%2F1/charge/"+validToken(), true, true, "charge.succeeded", "d-5")
	// A call's URL (its key's digest in the path), and another call's
	// event posted to it.
	f.Add(`{"id":"evt_6","type":"charge.succeeded"}`, false, validKeyedPath(), true, false, "", "")
	f.Add(`{"id":"evt_7","type":"charge.succeeded","data":{"object":{"metadata":{"key_digest":"AAAAAAAAAAAAAAAA"}}}}`, true, validKeyedPath(), true, false, "", "")
	const secretSentinel = "pi_secret_123"
	f.Fuzz(func(t *testing.T, body string, signed bool, path string, callbacks, headers bool, typ, id string) {
		u := &updates{}
		cfg := webhooks.Config{Client: u, MaxBodyBytes: 4096}
		if callbacks {
			cfg.Callbacks = fuzzCallbacks
		}
		// A fixed endpoint always verifies; a callback endpoint does when
		// the delivery is signed (else its token alone authenticates).
		if !callbacks || signed {
			o := webhooks.HMACOptions{Secrets: []string{secret}}
			if headers {
				o.TypeHeader, o.IDHeader = "X-Type", "X-Id"
			}
			v, err := webhooks.HMACVerifier(o)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Verifier = v
		}
		rc, err := webhooks.NewReceiver(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(path, "/") {
			path = "/" + path
		}
		r, err := http.NewRequest(http.MethodPost, "http://h.example"+path, strings.NewReader(body))
		if err != nil {
			return // not a URL a server would take
		}
		sig := ""
		if signed {
			sig = sign(secret, body)
			r.Header.Set("X-Signature", sig)
		}
		if headers {
			r.Header.Set("X-Type", typ)
			r.Header.Set("X-Id", id)
		}
		w := httptest.NewRecorder()
		rc.ServeHTTP(w, r)
		if !slices.Contains([]int{200, 400, 401, 405, 413, 503}, w.Code) {
			t.Fatalf("status %d is not one the receiver documents", w.Code)
		}
		for _, s := range []string{secret, fuzzKey} {
			if strings.Contains(w.Body.String(), s) {
				t.Fatalf("the answer holds a secret: %s", w.Body.String())
			}
		}
		if len(u.calls) == 0 {
			return
		}
		if w.Code != 200 {
			t.Fatalf("reached Temporal, then answered %d", w.Code)
		}
		o := u.calls[0]
		n := o.Args[0].(*workflows.Notification)
		checkSignedDecides(t, cfg, body, o, n)
		if headers && cfg.Verifier != nil {
			// The same delivery, its unsigned headers altered.
			r2, _ := http.NewRequest(http.MethodPost, "http://h.example"+path, strings.NewReader(body))
			r2.Header.Set("X-Signature", sig)
			r2.Header.Set("X-Type", typ+".altered")
			r2.Header.Set("X-Id", id+"-altered")
			rc2, err := webhooks.NewReceiver(cfg) // no memo of the first
			if err != nil {
				t.Fatal(err)
			}
			rc2.ServeHTTP(httptest.NewRecorder(), r2)
			if len(u.calls) != 2 {
				t.Fatalf("the altered copy did not reach Temporal as the same event (%d updates)", len(u.calls))
			}
			o2 := u.calls[1]
			n2 := o2.Args[0].(*workflows.Notification)
			if o2.UpdateID != o.UpdateID || n2.ID != n.ID {
				t.Fatalf("an altered copy is a new event: update %q, not %q", o2.UpdateID, o.UpdateID)
			}
			checkSignedDecides(t, cfg, body, o2, n2)
		}
		if callbacks {
			wf, op, digest, ok := tokenOwner(r.URL.EscapedPath())
			if !ok || wf != o.WorkflowID || op != n.Operation {
				t.Fatalf("callback path %q reached workflow %q operation %q without its token", path, o.WorkflowID, n.Operation)
			}
			if digest != "" && n.KeyDigest != digest {
				t.Fatalf("callback path %q of key digest %q reached the workflow naming %q", path, digest, n.KeyDigest)
			}
		} else {
			if !signed || len(body) > 4096 {
				t.Fatalf("an unsigned or oversized delivery reached Temporal")
			}
			var ev struct {
				Data struct {
					Object struct {
						Metadata struct {
							WorkflowID string `json:"workflow_id"`
							Operation  string `json:"operation"`
						} `json:"metadata"`
					} `json:"object"`
				} `json:"data"`
			}
			if json.Unmarshal([]byte(body), &ev) != nil || ev.Data.Object.Metadata.WorkflowID != o.WorkflowID || ev.Data.Object.Metadata.Operation != n.Operation {
				t.Fatalf("routed to %q/%q, not the body's metadata", o.WorkflowID, n.Operation)
			}
		}
		if len(n.Body) > 0 {
			if !json.Valid(n.Body) {
				t.Fatalf("the notification's body is not JSON: %q", n.Body)
			}
			if strings.Contains(string(n.Body), secretSentinel) && !strings.Contains(body, `"`+secretSentinel) {
				t.Fatalf("the notification's body grew a secret")
			}
			var doc any
			_ = json.Unmarshal(n.Body, &doc)
			checkRedacted(t, doc, false)
		}
	})
}

// checkSignedDecides fails when n, delivered as o by a receiver with cfg,
// may end its operation alone but its type or its workflow and operation
// are not what the signed body says (a token-only callback's event, which
// nothing signs, is the README's documented exception).
func checkSignedDecides(t *testing.T, cfg webhooks.Config, body string, o client.UpdateWorkflowOptions, n *workflows.Notification) {
	t.Helper()
	if cfg.Verifier == nil || n.TypeUnsigned && n.OperationUnsigned {
		return
	}
	// Read as the receiver reads: exact names, a JSON document whole.
	var doc any
	named := json.Unmarshal([]byte(body), &doc) == nil
	at := func(path ...string) string {
		v := doc
		for _, name := range path {
			m, ok := v.(map[string]any)
			if !ok {
				return ""
			}
			v = m[name]
		}
		s, _ := v.(string)
		return s
	}
	ev := struct{ Type string }{at("type")}
	m := struct{ WorkflowID, Operation string }{at("data", "object", "metadata", "workflow_id"), at("data", "object", "metadata", "operation")}
	if !n.TypeUnsigned && (!named || n.Type != ev.Type) {
		t.Fatalf("type %q may decide, but the signed body's type is %q", n.Type, ev.Type)
	}
	if !n.OperationUnsigned && (!named || m.WorkflowID != o.WorkflowID || m.Operation != n.Operation) {
		t.Fatalf("routed to %q/%q and may decide, but the signed body names %q/%q", o.WorkflowID, n.Operation, m.WorkflowID, m.Operation)
	}
}

// fuzzKey is FuzzReceiver's callback token key.
var fuzzKey = strings.Repeat("k", 32)

var fuzzCallbacks = &webhooks.Callbacks{BaseURL: "https://h.example/callbacks", Secrets: []string{fuzzKey}}

// fuzzCallKey is the idempotency key of the one call whose callback URL
// names it (validKeyedPath).
const fuzzCallKey = "charge-order-1-key"

// validToken is the token of order/1's charge, made without a key.
func validToken() string {
	u, _ := fuzzCallbacks.URL("order/1", "charge", "")
	return u[strings.LastIndex(u, "/")+1:]
}

// validKeyedPath is the path of the callback URL of order/1's charge
// with key fuzzCallKey.
func validKeyedPath() string {
	u, _ := fuzzCallbacks.URL("order/1", "charge", fuzzCallKey)
	return strings.TrimPrefix(u, "https://h.example")
}

// tokenOwner reports the workflow, operation and key digest whose valid
// callback URL has escapedPath's last four segments (made with key
// fuzzCallKey), or last three (made without a key), by rebuilding the
// URL.
func tokenOwner(escapedPath string) (wf, op, digest string, ok bool) {
	parts := strings.Split(strings.TrimSuffix(escapedPath, "/"), "/")
	owner := func(parts []string, key string) (string, string, bool) {
		wf, err1 := url.PathUnescape(parts[0])
		op, err2 := url.PathUnescape(parts[1])
		if err1 != nil || err2 != nil {
			return "", "", false
		}
		u, err := fuzzCallbacks.URL(wf, op, key)
		return wf, op, err == nil && strings.HasSuffix(u, "/"+strings.Join(parts[2:], "/"))
	}
	if len(parts) >= 4 {
		if wf, op, ok := owner(parts[len(parts)-4:], fuzzCallKey); ok {
			return wf, op, idemkey.Digest(fuzzCallKey), true
		}
	}
	if len(parts) < 3 {
		return "", "", "", false
	}
	wf, op, ok = owner(parts[len(parts)-3:], "")
	return wf, op, "", ok
}

// checkRedacted fails when a string or number that is the value of a
// member named like a credential (redact.IsCredential), or in an array
// that is, is other than "[redacted]"; named says v is such a value.
func checkRedacted(t *testing.T, v any, named bool) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			checkRedacted(t, e, redact.IsCredential(k))
		}
	case []any:
		for _, e := range x {
			checkRedacted(t, e, named)
		}
	case string, float64:
		if named && x != "[redacted]" {
			t.Fatalf("a credential-named value reached the workflow: %v", x)
		}
	}
}
