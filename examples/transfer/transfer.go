// Package transfer is the long-running example of docs/long-running.md, compiled and
// tested: a bank transfer that the API accepts with 202 and settles later,
// followed durably to its end under one idempotency key; and the worker
// registration that tells the activity how the API reports it.
package transfer

import (
	"encoding/json"
	"net/http"
	"os"
	"time"

	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// Transfer is the workflow's input.
type Transfer struct {
	ID     string `json:"id"`
	Cents  int    `json:"cents"`
	IBAN   string `json:"iban"`
	APIURL string `json:"api_url"`
}

// Settlement is the workflow's result.
type Settlement struct {
	TransferID string
	Rejected   string // the bank's reason, when it rejected the transfer
	Polls      int
}

// README: workflow

// Send sends the transfer once and follows it until the bank settles or
// rejects it: polls wait on Temporal's timers, so a worker restart or a
// deploy loses nothing, and a transfer still pending after a day is
// followed on, never sent again.
func Send(ctx workflow.Context, t Transfer) (Settlement, error) {
	body, err := json.Marshal(map[string]any{"transfer": t.ID, "amount": t.Cents, "iban": t.IBAN})
	if err != nil {
		return Settlement{}, err
	}
	follow := workflows.FollowOptions{Timeout: 24 * time.Hour}
	resp, err := workflows.Call(ctx, workflows.Request{
		Operation: "transfer", URL: t.APIURL + "/transfers", Body: body, Follow: &follow,
	})
	for err != nil {
		f, ok := workflows.AsFailure(err)
		switch {
		case ok && f.Type == workflows.ErrTypeOperationFailed:
			return Settlement{Rejected: f.Body}, nil // the bank said no: a business outcome
		case ok && f.Type == workflows.ErrTypeOperationStillRunning:
			resp, err = workflows.FollowAccepted(ctx, *f.Accepted, follow) // still pending: follow on
		default:
			return Settlement{}, err
		}
	}
	var settled struct {
		ID string `json:"id"`
	}
	if err := resp.Decode(&settled); err != nil {
		return Settlement{}, err
	}
	s := Settlement{TransferID: settled.ID}
	if resp.Accepted != nil { // nil when the bank settled at once (201)
		s.Polls = resp.Accepted.Polls
	}
	return s, nil
}

// README: end

// README: worker

// Register registers Send and the activities on a worker for a bank API
// that reports transfers as Azure-style operations (Operation-Location and
// a status document); the default is RFC 9110's 202 with Location.
func Register(w worker.Registry, apiOrigin string) error {
	conv := activities.IETFConvention()
	conv.LongRunning = activities.OperationLocation()
	acts, err := activities.New(activities.Config{
		AllowedOrigins: []string{apiOrigin},
		Conventions:    map[string]activities.Convention{apiOrigin: conv},
		Credentials: map[string]activities.Credential{
			apiOrigin: {Header: http.Header{"Authorization": {"Bearer " + os.Getenv("BANK_API_TOKEN")}}},
		},
	})
	if err != nil {
		return err
	}
	acts.Register(w)
	w.RegisterWorkflow(Send)
	return nil
}

// README: end
