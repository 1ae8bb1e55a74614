// Package capture is the webhook example of docs/webhooks.md, compiled and tested: a
// card payment that the provider confirms later by a signed webhook, with
// polling as the fallback; and the receiver that verifies the provider's
// webhooks (Stripe's and Standard Webhooks') and hands each to its
// workflow.
package capture

import (
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/webhooks"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// Payment is the workflow's input.
type Payment struct {
	Order  string `json:"order"`
	Cents  int    `json:"cents"`
	APIURL string `json:"api_url"`
}

// Receipt is the workflow's result.
type Receipt struct {
	PaymentID string
	Declined  bool
	Source    workflows.Source // "webhook" or "poll": who said how it ended
	At        time.Time        // when the workflow learned it
}

// README: workflow

// Capture charges the card once and waits for the provider's webhook of
// the outcome, which can take minutes or days. When none has come after 10
// minutes, it also reads the payment until it ends; whichever says so
// first wins, and a late or repeated webhook changes nothing.
func Capture(ctx workflow.Context, p Payment) (Receipt, error) {
	body, err := json.Marshal(map[string]any{"order": p.Order, "amount": p.Cents,
		"metadata": workflows.WebhookMetadata(ctx, "capture", "")}) // the provider copies it into its events
	if err != nil {
		return Receipt{}, err
	}
	resp, err := workflows.Call(ctx, workflows.Request{
		Operation: "capture", URL: p.APIURL + "/payments", Body: body,
		Webhook: &workflows.WebhookOptions{
			Succeeded: []string{"operation.succeeded"},
			Failed:    []string{"operation.failed"},
			Timeout:   72 * time.Hour,
			Poll: &workflows.WebhookPoll{URL: p.APIURL + "/resources/{id}", After: 10 * time.Minute,
				Succeeded: []string{"succeeded"}, Failed: []string{"failed"}},
		},
	})
	if f, ok := workflows.AsFailure(err); ok && f.Type == workflows.ErrTypeOperationFailed {
		return Receipt{Declined: true, Source: f.Outcome.Source, At: f.Outcome.At}, nil // a business outcome
	}
	if err != nil {
		return Receipt{}, err
	}
	var payment struct {
		ID string `json:"id"`
	}
	if err := resp.Decode(&payment); err != nil {
		return Receipt{}, err
	}
	return Receipt{PaymentID: payment.ID, Source: resp.Outcome.Source, At: resp.Outcome.At}, nil
}

// README: end

// README: receiver

// Receivers serves the provider's webhooks: Stripe's on /webhooks/stripe,
// Standard Webhooks' (Svix, and the APIs that follow the spec) on
// /webhooks/standard. Each verified event goes to the workflow its
// metadata names, once; a forged or stale one never reaches Temporal.
func Receivers(c client.Client) (http.Handler, error) {
	stripe, err := webhooks.StripeVerifier(os.Getenv("STRIPE_WEBHOOK_SECRET"))
	if err != nil {
		return nil, err
	}
	// Several secrets, newest first, while one is rotated out.
	standard, err := webhooks.StandardWebhooksVerifier(strings.Split(os.Getenv("WEBHOOK_SECRETS"), ",")...)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	for path, v := range map[string]webhooks.Verifier{"/webhooks/stripe": stripe, "/webhooks/standard": standard} {
		r, err := webhooks.NewReceiver(webhooks.Config{Client: c, Verifier: v})
		if err != nil {
			return nil, err
		}
		mux.Handle("POST "+path, r)
	}
	return mux, nil
}

// README: end

// Register registers Capture and the activities on a worker that may call
// the payment API at apiOrigin.
func Register(w worker.Registry, apiOrigin string) error {
	acts, err := activities.New(activities.Config{AllowedOrigins: []string{apiOrigin}})
	if err != nil {
		return err
	}
	acts.Register(w)
	w.RegisterWorkflow(Capture)
	return nil
}
