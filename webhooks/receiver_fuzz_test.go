package webhooks_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/idemhttp/temporal-idempotent-http/internal/request"
	"github.com/idemhttp/temporal-idempotent-http/webhooks"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// FuzzReceiver drives the receiver with generated deliveries, signed or
// not, to a fixed endpoint and to callback paths, and checks its
// invariants: it answers one of its documented statuses; only a delivery
// whose signature (computed here, independently) is valid, or whose
// callback token is, reaches Temporal, routed to the workflow its body or
// path names; no secret or token key is in an answer; and what reaches
// the workflow is JSON without the value of a credential-named field.
func FuzzReceiver(f *testing.F) {
	f.Add(event("evt_1", "order-1", "charge"), true, "/webhooks", false)
	f.Add(event("evt_1", "order-1", "charge"), false, "/webhooks", false)
	f.Add(`{"id":"e","type":"t","data":{"object":{"metadata":{"workflow_id":"w","operation":"o"},"token":"pi_secret_123"}}}`, true, "/webhooks", false)
	f.Add(`{"id":"e","data":{"object":{"metadata":{"workflow_id":"","operation":"o"}}}}`, true, "/webhooks", false)
	f.Add(`not json`, true, "/webhooks", false)
	f.Add(`{"id":"e","data":{"object":{"metadata":{"workflow_id":"w","operation":"o"},"client\u005fsecret":"pi_secret_123"}}}`, true, "/webhooks", false)
	f.Add(`{"id":"e","type":"t","data":{"object":{"metadata":{"workflow_id":"w","operation":"o"},"accessToken":"pi_secret_123","nested":[{"clientSecret":{"v":"pi_secret_123"}}]}}}`, true, "/webhooks", false)
	f.Add(`{"id":"evt_2"}`, false, "/callbacks/order-1/charge/AAAA", true)
	f.Add(`{"id":"evt_2"}`, false, "/callbacks/order%2F1/charge/"+validToken(), true)
	const secretSentinel = "pi_secret_123"
	f.Fuzz(func(t *testing.T, body string, signed bool, path string, callbacks bool) {
		u := &updates{}
		cfg := webhooks.Config{Client: u, MaxBodyBytes: 4096}
		if callbacks {
			cfg.Callbacks = fuzzCallbacks
		} else {
			v, err := webhooks.HMAC(webhooks.HMACOptions{Secrets: []string{secret}})
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
		if callbacks {
			wf, op, ok := tokenOwner(r.URL.EscapedPath())
			if !ok || wf != o.WorkflowID || op != n.Operation {
				t.Fatalf("callback path %q reached workflow %q operation %q without its token", path, o.WorkflowID, n.Operation)
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
			checkRedacted(t, doc)
		}
	})
}

// fuzzKey is FuzzReceiver's callback token key.
var fuzzKey = strings.Repeat("k", 32)

var fuzzCallbacks = &webhooks.Callbacks{BaseURL: "https://h.example/callbacks", Secrets: []string{fuzzKey}}

// validToken is the token of order/1's charge.
func validToken() string {
	u, _ := fuzzCallbacks.URL("order/1", "charge")
	return u[strings.LastIndex(u, "/")+1:]
}

// tokenOwner reports the workflow and operation whose valid callback URL
// has escapedPath's last three segments, by rebuilding the URL.
func tokenOwner(escapedPath string) (string, string, bool) {
	parts := strings.Split(strings.TrimSuffix(escapedPath, "/"), "/")
	if len(parts) < 3 {
		return "", "", false
	}
	parts = parts[len(parts)-3:]
	wf, err1 := url.PathUnescape(parts[0])
	op, err2 := url.PathUnescape(parts[1])
	if err1 != nil || err2 != nil {
		return "", "", false
	}
	u, err := fuzzCallbacks.URL(wf, op)
	return wf, op, err == nil && strings.HasSuffix(u, "/"+parts[2])
}

// checkRedacted fails when a field named like a credential
// (request.IsCredential) has a value other than "[redacted]".
func checkRedacted(t *testing.T, v any) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if request.IsCredential(k) {
				if e != "[redacted]" {
					t.Fatalf("field %q reached the workflow: %v", k, e)
				}
				continue
			}
			checkRedacted(t, e)
		}
	case []any:
		for _, e := range x {
			checkRedacted(t, e)
		}
	}
}
