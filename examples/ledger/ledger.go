// Package ledger is the example of docs/unknown-outcomes.md, compiled and
// tested: booking an entry on a ledger API that has no idempotency keys,
// once, though an answer may be lost after the API booked it.
package ledger

import (
	"encoding/json"

	"go.temporal.io/sdk/workflow"

	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// Entry is the workflow's input.
type Entry struct {
	Account string `json:"account"`
	Cents   int    `json:"cents"`
	APIURL  string `json:"api_url"`
}

// README: workflow

// Book books the entry once on a ledger API without idempotency keys. The
// key goes in the entry's own reference member, which the ledger stores;
// after an attempt whose answer never came, the call asks the ledger for
// the entry by that reference before it would post again.
func Book(ctx workflow.Context, e Entry) (string, error) {
	body, err := json.Marshal(map[string]any{"account": e.Account, "cents": e.Cents})
	if err != nil {
		return "", err
	}
	resp, err := workflows.Call(ctx, workflows.Request{
		Operation: "book", URL: e.APIURL + "/entries", Body: body,
		KeyIn:     "body:reference",
		Reconcile: workflows.Reconcile{Lookup: e.APIURL + "/entries?reference={key}"},
	})
	if err != nil {
		return "", err // workflows.ErrTypeLookupAmbiguous: two entries carry the reference
	}
	var entry struct {
		ID string `json:"id"`
	}
	if err := resp.Decode(&entry); err != nil {
		return "", err
	}
	return entry.ID, nil // resp.Reconciled is "lookup" when the lookup found it
}

// README: end
