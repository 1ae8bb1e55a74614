// Package payment is the README's example, compiled and tested: a business
// workflow that charges an order once, however often Temporal retries,
// replays or re-runs it, and tells a declined card apart from a failure;
// and the registration of it and the HTTP activity on a worker.
package payment

import (
	"net/http"
	"os"

	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// Order is the workflow's input.
type Order struct {
	ID     string `json:"id"`
	Cents  int    `json:"cents"`
	Card   string `json:"card"`
	APIURL string `json:"api_url"`
}

// Receipt is the workflow's result.
type Receipt struct {
	PaymentID string
	Declined  bool
}

// README: workflow

// Charge charges the order once. The idempotency key is derived from the
// workflow ID and "charge": the same on every retry, replay and re-run.
func Charge(ctx workflow.Context, order Order) (Receipt, error) {
	charge := map[string]any{"order": order.ID, "amount": order.Cents, "card": order.Card}
	resp, err := workflows.Post(ctx, "charge", order.APIURL+"/payments", charge)
	if f, ok := workflows.AsFailure(err); ok && f.Status == http.StatusPaymentRequired {
		return Receipt{Declined: true}, nil // a business outcome, not a failure
	}
	if err != nil {
		return Receipt{}, err // workflows.AsFailure(err) says what happened
	}
	var payment struct {
		ID string `json:"id"`
	}
	if err := resp.Decode(&payment); err != nil {
		return Receipt{}, err
	}
	return Receipt{PaymentID: payment.ID}, nil
}

// README: end

// README: worker

// Register registers Charge and the HTTP activity on a worker:
//
//	w := worker.New(c, "payments", worker.Options{})
//	if err := payment.Register(w, "https://pay.example.com"); err != nil { … }
//	err = w.Run(worker.InterruptCh())
//
// The API token stays on the worker: it is sent to its own origin only and
// never reaches workflow input, history or logs.
func Register(w worker.Registry, apiOrigin string) error {
	acts, err := activities.New(activities.Config{
		AllowedOrigins: []string{apiOrigin},
		Credentials: map[string]activities.Credential{
			apiOrigin: {Header: http.Header{"Authorization": {"Bearer " + os.Getenv("PAY_API_TOKEN")}}},
		},
	})
	if err != nil {
		return err
	}
	acts.Register(w)
	w.RegisterWorkflow(Charge)
	return nil
}

// README: end
