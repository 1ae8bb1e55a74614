package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"flag"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/webhooks"
)

// TestWebhookVerifierFlags: --webhook-scheme and --webhook-hmac-* build
// the verifier they name, with WEBHOOK_SECRETS; a delivery signed as that
// provider signs verifies, and hmac flags given to another scheme are an
// error rather than ignored.
func TestWebhookVerifierFlags(t *testing.T) {
	const secret = "It's a Secret to Everybody"
	body := []byte(`{"id":"evt_1","type":"payment.succeeded","note":"Ünïcödé"}`)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	sum := mac.Sum(nil)
	now := time.Unix(1_800_000_000, 0)
	tests := []struct {
		name    string
		args    []string
		h       http.Header
		want    webhooks.Event
		wantErr string // from building the verifier
	}{
		{
			name: "hmac defaults: X-Signature, hex, ID and type from the body",
			args: []string{"--webhook-scheme", "hmac"},
			h:    http.Header{"X-Signature": {hex.EncodeToString(sum)}},
			want: webhooks.Event{ID: "evt_1", Type: "payment.succeeded"},
		},
		{
			name: "GitHub",
			args: []string{"--webhook-scheme", "hmac", "--webhook-hmac-header", "X-Hub-Signature-256", "--webhook-hmac-prefix", "sha256=",
				"--webhook-hmac-id-header", "X-GitHub-Delivery", "--webhook-hmac-type-header", "X-GitHub-Event"},
			h:    http.Header{"X-Hub-Signature-256": {"sha256=" + hex.EncodeToString(sum)}, "X-Github-Delivery": {"72d3162e"}, "X-Github-Event": {"check_run"}},
			want: webhooks.Event{ID: "72d3162e", Type: "check_run"},
		},
		{
			name: "Shopify",
			args: []string{"--webhook-scheme", "hmac", "--webhook-hmac-header", "X-Shopify-Hmac-Sha256", "--webhook-hmac-encoding", "base64",
				"--webhook-hmac-id-header", "X-Shopify-Webhook-Id", "--webhook-hmac-type-header", "X-Shopify-Topic"},
			h:    http.Header{"X-Shopify-Hmac-Sha256": {base64.StdEncoding.EncodeToString(sum)}, "X-Shopify-Webhook-Id": {"b54557e4"}, "X-Shopify-Topic": {"orders/paid"}},
			want: webhooks.Event{ID: "b54557e4", Type: "orders/paid"},
		},
		{
			name:    "an unknown encoding",
			args:    []string{"--webhook-scheme", "hmac", "--webhook-hmac-encoding", "base32"},
			wantErr: `Encoding "base32"`,
		},
		{
			name:    "hmac flags with another scheme",
			args:    []string{"--webhook-scheme", "stripe", "--webhook-hmac-type-header", "X-Event"},
			wantErr: "--webhook-hmac-* are for --webhook-scheme hmac",
		},
		{
			name:    "an unknown scheme",
			args:    []string{"--webhook-scheme", "paypal"},
			wantErr: `--webhook-scheme "paypal"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c webhookConfig
			fs := flag.NewFlagSet("worker", flag.ContinueOnError)
			webhookFlags(fs, &c)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			c.readSecrets(func(k string) string { return map[string]string{"WEBHOOK_SECRETS": "older secret," + secret}[k] })
			v, err := c.verifier()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("verifier: %v, want an error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			ev, err := v.Verify(tt.h, body, now)
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if ev.ID != tt.want.ID || ev.Type != tt.want.Type {
				t.Errorf("event %+v, want ID %q type %q", ev, tt.want.ID, tt.want.Type)
			}
			// A changed body does not verify.
			if _, err := v.Verify(tt.h, append([]byte(" "), body...), now); err == nil {
				t.Error("a changed body verified")
			}
		})
	}
}
