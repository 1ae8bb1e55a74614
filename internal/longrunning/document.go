package longrunning

import (
	"net/http"

	"github.com/idemhttp/temporal-idempotent-http/internal/jsonfield"
)

// Document reads a status document by its state field: Azure Resource
// Manager's Azure-AsyncOperation and the Microsoft REST API Guidelines'
// Operation-Location (activities.AzureAsyncOperation, OperationLocation).
// The string at Field (a dotted path) ends the operation when it is one
// of Succeeded, Failed or Canceled (compared case-insensitively); any
// other value is still running, as is a 202 without one. A 303 See Other
// names the result at its Location.
type Document struct {
	Field                       string
	Succeeded, Failed, Canceled []string
	// Error is the field of a failed operation's document that holds the
	// server's error; Result the field of a succeeded one's that holds the
	// result ("" for none: the whole document is the result).
	Error, Result string
}

// Read reads a 2xx or 303 answer of the monitor.
func (d Document) Read(a Answer) Reading {
	if r, ok := seeOther(a); ok {
		return r
	}
	s, ok := jsonfield.String(a.Body, d.Field)
	if !ok {
		return stillRunning(Reading{}, a.Status)
	}
	switch {
	case in(d.Succeeded, s):
		r := Reading{State: Succeeded, Name: s}
		if d.Result != "" {
			r.Detail = field(a.Body, d.Result)
		}
		return r
	case in(d.Failed, s):
		return Reading{State: Failed, Name: s, Detail: field(a.Body, d.Error)}
	case in(d.Canceled, s):
		return Reading{State: Canceled, Name: s, Detail: field(a.Body, d.Error)}
	}
	return Reading{State: Running, Name: s}
}

// Document returns the state's field.
func (d Document) Document() (string, bool) { return d.Field, true }

// Final says where a succeeded operation's result is read (azcore's
// FinalStateVia).
type Final int

const (
	// FinalDocument: the status document (or its Result field) is the
	// result.
	FinalDocument Final = iota
	// FinalOriginal: a GET of the start request's URL, the resource a PUT
	// or PATCH made, whatever Location says (on a PUT it is often the
	// monitor again).
	FinalOriginal
	// FinalLocation: a GET of the start answer's Location.
	FinalLocation
)

// FinalVia is Azure Resource Manager's rule for where the result of an
// operation started by method is, as Azure SDKs apply it (the
// convention's activities.LongRunning.ResultAtLocation), when the start
// answer h named its status document by the header monitor: the resource
// for a PUT or PATCH, the start answer's Location for a POST whose
// monitor is another header, else (a DELETE, which azcore's pollers end
// with no final GET) the document.
func FinalVia(method string, h http.Header, monitor string) Final {
	switch {
	case method == http.MethodPut || method == http.MethodPatch:
		return FinalOriginal
	case method == http.MethodPost && monitor != "Location" && h.Get("Location") != "":
		return FinalLocation
	}
	return FinalDocument
}
