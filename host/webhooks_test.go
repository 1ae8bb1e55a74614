package host

import (
	"cmp"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/internal/named"
	"github.com/idemhttp/temporal-idempotent-http/internal/signature"
	"github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/webhooks"
)

// verifierOf is the verifier the worker builds from its args and
// WEBHOOK_SECRETS (and no other variable).
func verifierOf(t *testing.T, args []string, secrets string) (webhooks.Verifier, error) {
	t.Helper()
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	cfg, err := parseWith(fs, args, func(k string) string { return map[string]string{"WEBHOOK_SECRETS": secrets}[k] })
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Webhooks.verifier()
}

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
		secrets string // WEBHOOK_SECRETS; default "older secret," and the secret; "-": unset
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
		{
			name:    "hmac flags with another scheme, callbacks only (no WEBHOOK_SECRETS)",
			args:    []string{"--webhook-scheme", "standard-webhooks", "--webhook-hmac-prefix", "sha256="},
			secrets: "-",
			wantErr: "--webhook-hmac-* are for --webhook-scheme hmac",
		},
		{
			name:    "an unknown scheme, callbacks only",
			args:    []string{"--webhook-scheme", "svix"},
			secrets: "-",
			wantErr: `--webhook-scheme "svix"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			secrets := cmp.Or(tt.secrets, "older secret,"+secret)
			if secrets == "-" {
				secrets = ""
			}
			v, err := verifierOf(t, tt.args, secrets)
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

// TestWebhookVerifierTakesProviderEvents: what the reference API signs as
// a provider (cmd/demoapi --webhook-scheme S with WEBHOOK_SECRET), the
// worker verifies with --webhook-scheme S and the same value in
// WEBHOOK_SECRETS and no other flag, as docker-compose.webhooks.yml runs
// them; the forged copy it also sends does not verify.
func TestWebhookVerifierTakesProviderEvents(t *testing.T) {
	for _, tt := range []struct {
		scheme string
		secret string
	}{
		{"standard-webhooks", "whsec_" + base64.StdEncoding.EncodeToString([]byte("a 24-byte signing secret"))},
		{"stripe", "whsec_stripe_style_secret_0123456789"},
		{"hmac", "a plain signing secret without commas"},
	} {
		t.Run(string(tt.scheme), func(t *testing.T) {
			type delivery struct {
				h    http.Header
				body []byte
			}
			got := make(chan delivery, 4)
			receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				got <- delivery{r.Header.Clone(), body}
			}))
			defer receiver.Close()
			api := testsuite.StartServer(t, testsuite.Options{Webhooks: &testsuite.Webhooks{
				URL: receiver.URL, Scheme: tt.scheme, Secret: tt.secret, Forged: 1,
			}})
			req, _ := http.NewRequest(http.MethodPost, api.URL+"/payments", strings.NewReader(`{"amount":4200}`))
			req.Header.Set("Idempotency-Key", "compose-"+string(tt.scheme))
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()

			v, err := verifierOf(t, []string{"--webhook-scheme", string(tt.scheme)}, tt.secret)
			if err != nil {
				t.Fatal(err)
			}
			verified, refused := 0, 0
			for range 2 { // the event and its forged copy
				select {
				case d := <-got:
					if _, err := v.Verify(d.h, d.body, time.Now()); err != nil {
						refused++
						if !errors.Is(err, webhooks.ErrSignature) {
							t.Errorf("the forged copy: %v, want ErrSignature", err)
						}
					} else {
						verified++
					}
				case <-time.After(30 * time.Second): // a hang guard
					t.Fatal("no delivery from the reference API")
				}
			}
			if verified != 1 || refused != 1 {
				t.Errorf("verified %d, refused %d of the event and its forged copy, want 1 and 1", verified, refused)
			}
		})
	}
}

// TestWebhookSchemes: every scheme of internal/signature is one
// --webhook-scheme accepts, named in its help, and builds that scheme's
// verifier; another name is refused with the list.
func TestWebhookSchemes(t *testing.T) {
	secret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("0123456789abcdef"))
	for _, name := range signature.Names() {
		v, err := verifierOf(t, []string{"--webhook-scheme", strings.ToUpper(name)}, secret)
		if err != nil || v == nil || v.Scheme() != name {
			t.Errorf("--webhook-scheme %s: verifier %v, %v", name, v, err)
		}
	}
	_, err := verifierOf(t, []string{"--webhook-scheme", "nosuch"}, secret)
	if want := "want " + named.List(signature.Names()...); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("--webhook-scheme nosuch: %v, want an error with %q", err, want)
	}
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	if _, err := parseWith(fs, nil, func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	if usage, want := fs.Lookup("webhook-scheme").Usage, named.List(signature.Names()...)+" ("; !strings.Contains(usage, want) {
		t.Errorf("--webhook-scheme's help %q does not list %q", usage, want)
	}
}
