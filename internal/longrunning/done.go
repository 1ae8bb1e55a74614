package longrunning

import (
	"encoding/json"
	"net/url"
	"strings"

	"github.com/idemhttp/temporal-idempotent-http/internal/jsonfield"
)

// Done reads Google's long-running operations (AIP-151,
// google.longrunning.Operation; activities.GoogleOperation): the start
// answers an Operation whose name locates the monitor (Named), polled
// until the boolean at Field ("done") is true; it then failed when the
// field Error ("error") is set and not null (cancelled when its code is
// 1, google.rpc.Code CANCELLED), else it succeeded, its result at Result
// ("response"). A 303 See Other names the result at its Location.
type Done struct {
	Field, Error, Result string
}

// Read reads a 2xx or 303 answer of the monitor.
func (d Done) Read(a Answer) Reading {
	if r, ok := seeOther(a); ok {
		return r
	}
	v, ok := jsonfield.Value(a.Body, d.Field)
	var done bool
	if ok && json.Unmarshal(v, &done) != nil || json.Unmarshal(a.Body, new(map[string]json.RawMessage)) != nil {
		return stillRunning(Reading{}, a.Status)
	}
	e, failed := jsonfield.Value(a.Body, d.Error)
	switch {
	case !done:
		return Reading{State: Running, Name: d.Field + ": false"}
	case failed:
		var status struct{ Code int }
		if json.Unmarshal(e, &status) == nil && status.Code == 1 {
			return Reading{State: Canceled, Name: d.Field + ": true, " + d.Error + " CANCELLED", Detail: e}
		}
		return Reading{State: Failed, Name: d.Field + ": true, " + d.Error, Detail: e}
	}
	r := Reading{State: Succeeded, Name: d.Field + ": true"}
	if d.Result != "" {
		r.Detail = field(a.Body, d.Result)
	}
	return r
}

// Document returns the done field.
func (d Done) Document() (string, bool) { return d.Field, true }

// Named returns the monitor's URL that a start answer's body names: base
// followed by the string at field (Google's "name"), false when the body
// names none.
func Named(body []byte, field, base string) (string, bool) {
	name, ok := jsonfield.String(body, field)
	if !ok || name == "" {
		return "", false
	}
	return strings.TrimSuffix(base, "/") + "/" + strings.TrimPrefix(name, "/"), true
}

// Cancel is the request that asks the server to cancel an operation:
// Method ("POST", "DELETE") sent to the monitor's URL with Suffix added to
// its path (AIP-151: POST name:cancel). Any style may have one; the zero
// Cancel is none.
type Cancel struct {
	Method, Suffix string
}

// Request returns the cancel request for the operation whose monitor is
// the absolute URL monitor: its method and URL, false when there is none.
func (c Cancel) Request(monitor string) (method, target string, ok bool) {
	if c.Method == "" {
		return "", "", false
	}
	u, err := url.Parse(monitor)
	if err != nil {
		return "", "", false
	}
	u.Path, u.RawPath = u.Path+c.Suffix, ""
	return c.Method, u.String(), true
}
