package longrunning

import (
	"net/http"

	"github.com/idemhttp/temporal-idempotent-http/internal/poll"
)

// Rule reads a resource's status document by the workflow's rule: the
// fallback poll of an operation awaited by webhook (workflows.WebhookPoll,
// written to history as poll.StatusRule), which replaces the origin's
// convention for the reading (the convention still says which URLs may be
// followed). The document is read as a Document by the rule's field and
// values, with no error or result field; a 303 See Other points to the
// resource, whose document is read in its place.
type Rule poll.StatusRule

// Read reads a 2xx or 303 answer of the monitor.
func (r Rule) Read(a Answer) Reading {
	if a.Status == http.StatusSeeOther {
		return Reading{State: Elsewhere, Next: a.Header.Get("Location")}
	}
	return Document{Field: r.StatusField, Succeeded: r.Succeeded, Failed: r.Failed, Canceled: r.Canceled}.Read(a)
}

// Document returns the rule's field.
func (r Rule) Document() (string, bool) { return r.StatusField, true }
