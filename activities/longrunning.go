package activities

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/internal/backoff"
	"github.com/idemhttp/temporal-idempotent-http/internal/httpheader"
	"github.com/idemhttp/temporal-idempotent-http/internal/httpurl"
	"github.com/idemhttp/temporal-idempotent-http/internal/longrunning"
	"github.com/idemhttp/temporal-idempotent-http/internal/named"
	"github.com/idemhttp/temporal-idempotent-http/internal/poll"
	"github.com/idemhttp/temporal-idempotent-http/internal/redact"
	"github.com/idemhttp/temporal-idempotent-http/internal/seal"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// LongRunning is how a server reports an operation that does not finish
// within its request: where the start answer names the status monitor,
// how the monitor tells the operation's state, and where the final result
// is. It is the Convention's LongRunning, read when a call asks to follow
// (workflows.Request.Follow). The zero value is AcceptedLocation (a 202
// with Location, polled by status code). Start from a preset:
//
//	c := activities.IETFConvention()
//	c.LongRunning = activities.AzureAsyncOperation()
type LongRunning struct {
	// MonitorHeaders name the start answer's headers that hold the status
	// monitor's URL, the first present wins (default {"Location"}). A 202
	// with one of them is followed; so is a 200 or 201 with one other than
	// Location (Azure's PUT answers 201 with Azure-AsyncOperation). The
	// monitor answers a status document when StatusField or DoneField is
	// set, except a Location behind another monitor header (Azure's
	// fallback); else its status code decides (RFC 9110): 202 running (a
	// Location on it moves the monitor: the next poll goes there), 303 the
	// result's URL, another 2xx the result. A 202 that names no monitor
	// fails with workflows.ErrTypeMonitorNotFollowed: it is no result.
	MonitorHeaders []string
	// NameField, when set, reads the monitor from the start answer's JSON
	// body instead (Google's "name"): the monitor is MonitorBase + the
	// field's value, and the body is a status document.
	NameField   string
	MonitorBase string
	// StatusField is the field of the monitor's JSON status document that
	// holds the state (Azure's "status"; dots reach into objects, as in
	// "properties.provisioningState"). Its values in Succeeded, Failed and
	// Canceled (compared case-insensitively; defaults "Succeeded",
	// "Failed", "Canceled" and "Cancelled") end the operation; any other
	// value means it is still running.
	StatusField                 string
	Succeeded, Failed, Canceled []string
	// DoneField, instead of StatusField, is a field that is true once the
	// operation ended (Google's "done"): it failed when ErrorField is set
	// and not null, else it succeeded.
	DoneField string
	// ErrorField holds the server's error in a failed operation's status
	// document (default "error"); it becomes Failure.Body (redacted, at most
	// 1 KiB).
	ErrorField string
	// ResultField holds the result in a succeeded operation's status
	// document (Google's "response", Azure's "result"); the whole document
	// is the result when it is empty or absent.
	ResultField string
	// ResultAtLocation: a succeeded operation's result is read with a GET
	// of the start URL for a PUT or PATCH (the resource), of the start
	// answer's Location for a POST (Azure Resource Manager's rule, as
	// Azure SDKs apply it); else (a DELETE) it is the status document.
	ResultAtLocation bool
	// KeepQuery names the query parameters a monitor URL the server names
	// may carry into Temporal's history (for example "api-version"). The
	// monitor is written to history to be polled by later attempts, so a
	// monitor with any other query parameter, which may be a signature or
	// a token, is refused (workflows.ErrTypeMonitorNotFollowed), as is one
	// with user info. A URL the workflow wrote (workflows.WebhookPoll.URL)
	// is in history already and is polled as written.
	KeepQuery []string
	// MonitorOrigins are the origins, besides the start request's, that a
	// monitor, a result URL or a 303 may point to (each must be in
	// Config.AllowedOrigins too). Requests to each origin carry that
	// origin's own credentials, never the start origin's.
	MonitorOrigins []string
	// CancelMethod and CancelSuffix are the request that asks the server to
	// cancel the operation (workflows.FollowOptions.CancelOperation): the
	// method ("POST", "DELETE") sent to the monitor's URL plus the suffix
	// (Google: POST name:cancel). An empty CancelMethod: the convention has
	// none.
	CancelMethod string
	CancelSuffix string
}

// AcceptedLocation is the convention of RFC 9110: a 202 Accepted (section
// 15.3.3) whose Location names a status monitor, polled with GET until it
// answers something other than 202: a 303 See Other (section 15.4.4)
// points to the result, another 2xx is the result. It is the default.
func AcceptedLocation() LongRunning {
	return LongRunning{MonitorHeaders: []string{"Location"}}
}

// AzureAsyncOperation is Azure Resource Manager's convention for
// asynchronous operations (the ARM resource provider contract, "Asynchronous
// operations"): the start answers 201 or 202 with Azure-AsyncOperation,
// whose status document's "status" ends as Succeeded, Failed (with
// "error") or Canceled, or only with Location, polled by status code. A
// succeeded operation's result is read at the resource's URL for PUT and
// PATCH, else at the start answer's Location. api-version may stay in
// monitor URLs.
func AzureAsyncOperation() LongRunning {
	return LongRunning{
		MonitorHeaders: []string{"Azure-AsyncOperation", "Location"},
		StatusField:    "status", Succeeded: []string{"Succeeded"}, Failed: []string{"Failed"}, Canceled: []string{"Canceled"},
		ErrorField: "error", ResultAtLocation: true, KeepQuery: []string{"api-version"},
	}
}

// OperationLocation is the status monitor of the Microsoft REST API
// Guidelines ("Long-running operations", used by Azure's data-plane
// services): the start answers 202 (or 200/201) with Operation-Location,
// whose status document's "status" goes NotStarted, Running, then
// Succeeded, Failed (with "error") or Canceled. A succeeded operation's
// result is read at the resource's URL for PUT and PATCH, else at the
// start answer's Location, else it is the document's "result" (else the
// document). api-version may stay in monitor URLs.
func OperationLocation() LongRunning {
	return LongRunning{
		MonitorHeaders: []string{"Operation-Location"},
		StatusField:    "status", Succeeded: []string{"Succeeded"}, Failed: []string{"Failed"}, Canceled: []string{"Canceled"},
		ErrorField: "error", ResultField: "result", ResultAtLocation: true, KeepQuery: []string{"api-version"},
	}
}

// The long-running presets the worker's --convention modifiers name
// (+azure, …), each given the origin: one registered here is one the flag
// accepts and lists in its help.
func init() {
	named.Register("azure", func(string) LongRunning { return AzureAsyncOperation() })
	named.Register("operation-location", func(string) LongRunning { return OperationLocation() })
	named.Register("google", func(origin string) LongRunning { return GoogleOperation(origin + "/v1/") })
}

// GoogleOperation is Google's long-running operations (AIP-151,
// google.longrunning.Operation): the start answers an Operation, {"name":
// …, "done": false}, polled at base + name (base such as
// "https://example.googleapis.com/v1/") until "done" is true, with the
// result in "response" or the failure in "error" (code 1, CANCELLED: a
// cancelled operation); POST base + name + ":cancel" cancels it.
func GoogleOperation(base string) LongRunning {
	return LongRunning{
		NameField: "name", MonitorBase: base, DoneField: "done", ErrorField: "error", ResultField: "response",
		CancelMethod: http.MethodPost, CancelSuffix: ":cancel",
	}
}

// withDefaults fills the zero fields of l and checks it.
func (l LongRunning) withDefaults() (LongRunning, error) {
	if l.NameField == "" && len(l.MonitorHeaders) == 0 {
		l.MonitorHeaders = []string{"Location"}
	}
	l.MonitorHeaders = slices.Clone(l.MonitorHeaders)
	for i, h := range l.MonitorHeaders {
		l.MonitorHeaders[i] = http.CanonicalHeaderKey(h)
		if !httpheader.ValidName(l.MonitorHeaders[i]) {
			return l, fmt.Errorf("LongRunning.MonitorHeaders: %q is not a valid header name", h)
		}
	}
	if l.NameField != "" {
		if _, _, err := httpurl.Parse(l.MonitorBase); err != nil {
			return l, fmt.Errorf("LongRunning.MonitorBase (for NameField %q): %w", l.NameField, err)
		}
	}
	if l.StatusField != "" {
		if len(l.Succeeded) == 0 {
			l.Succeeded = []string{"Succeeded"}
		}
		if len(l.Failed) == 0 {
			l.Failed = []string{"Failed"}
		}
		if len(l.Canceled) == 0 {
			l.Canceled = []string{"Canceled", "Cancelled"}
		}
	}
	if l.ErrorField == "" {
		l.ErrorField = "error"
	}
	origins := make([]string, len(l.MonitorOrigins))
	for i, s := range l.MonitorOrigins {
		o, err := httpurl.ParseOrigin(s)
		if err != nil {
			return l, fmt.Errorf("LongRunning.MonitorOrigins: %w", err)
		}
		origins[i] = o
	}
	l.MonitorOrigins = origins
	switch l.CancelMethod = strings.ToUpper(l.CancelMethod); l.CancelMethod {
	case "", http.MethodPost, http.MethodDelete:
	default:
		return l, fmt.Errorf("LongRunning.CancelMethod %q: POST, DELETE or none", l.CancelMethod)
	}
	return l, nil
}

// statusDocument reports whether a monitor named by header (or by the
// body's NameField, header "") answers a status document: when the
// convention reads one, unless it is Location behind another monitor
// header (Azure's fallback, polled by status code).
func (l *LongRunning) statusDocument(header string) bool {
	return (l.StatusField != "" || l.DoneField != "") && !(header == "Location" && len(l.MonitorHeaders) > 1)
}

// accepted returns the long-running operation that the start answer ans
// (a 2xx to p) names, or nil when it names none: a monitor header (see
// MonitorHeaders), or the body's NameField. It fails with
// workflows.ErrTypeMonitorNotFollowed for a monitor the worker will not
// follow (see KeepQuery, MonitorOrigins).
func (a *Activities) accepted(ans *answer, p *prepared, attempt int32) (*workflows.Accepted, error) {
	l := &p.o.conv.LongRunning
	raw, header, named := l.monitor(ans)
	if !named {
		if ans.status == http.StatusAccepted && l.NameField == "" {
			return nil, a.fail(fmt.Sprintf("%s %s answered 202 Accepted without a status monitor (none of %s): the operation goes on at the server, and a 202 is no result. Name the monitor header in the origin's Convention.LongRunning, then run the same workflow ID again (the same key gets the stored answer)",
				p.method, p.shown, strings.Join(l.MonitorHeaders, ", ")), workflows.ErrTypeMonitorNotFollowed, workflows.Failure{
				Operation: p.req.Operation, Method: p.method, URL: p.shown, IdempotencyKey: p.req.IdempotencyKey,
				Attempt: attempt, Status: ans.status, OutcomeUnknown: true,
			})
		}
		return nil, nil
	}
	op := startedOperation(p, ans.status, l.statusDocument(header) && ans.status != http.StatusSeeOther)
	if _, wait, ok := a.pollRetryAfter(ans.header, a.cfg.Now(), p.o, p.req.Backoff); ok {
		op.RetryAfter = wait
	}
	refuse := func(what, shown string, err error) error {
		return a.fail(fmt.Sprintf("%s %s answered %d, accepting the operation, with %s %s, which this worker will not follow: %v. The operation goes on at the server: fix the worker's configuration (Convention.LongRunning, Config.AllowedOrigins, Config.SealKeys), then run the same workflow ID again (the same key gets the stored answer)",
			p.method, p.shown, ans.status, what, shown, err), workflows.ErrTypeMonitorNotFollowed, workflows.Failure{
			Operation: p.req.Operation, Method: p.method, URL: p.shown, IdempotencyKey: p.req.IdempotencyKey,
			Attempt: attempt, Status: ans.status, Location: shown, OutcomeUnknown: true,
		})
	}
	monitor, monitorSecret, err := a.followable(l, p.origin, ans.from, raw, true)
	if err != nil {
		return nil, refuse("the status monitor", a.shownURL(raw), err)
	}
	var result, resultSecret string
	if op.StatusDocument && l.ResultAtLocation {
		switch longrunning.FinalVia(p.method, ans.header, header) {
		case longrunning.FinalOriginal:
			result = p.raw
		case longrunning.FinalLocation:
			loc := ans.header.Get("Location")
			if result, resultSecret, err = a.followable(l, p.origin, ans.from, loc, true); err != nil {
				return nil, refuse("the result's Location", a.shownURL(loc), err)
			}
		}
	}
	if err := a.record(op, monitor, monitorSecret, result, resultSecret); err != nil {
		what, shown := "the status monitor", a.shownURL(raw)
		if monitorSecret == "" {
			what, shown = "the result's Location", a.shownURL(result)
		}
		return nil, refuse(what, shown, err)
	}
	return op, nil
}

// monitor returns the status monitor that the start answer ans names (as
// written), the header that names it ("" for the body's NameField), and
// whether it names one: a 303's Location (RFC 9110: the result is there),
// the body's NameField, else the first of MonitorHeaders it holds; a
// Location on an answer other than 202 is a created resource, no monitor.
func (l *LongRunning) monitor(ans *answer) (raw, header string, named bool) {
	switch {
	case ans.status == http.StatusSeeOther:
		return ans.header.Get("Location"), "Location", true
	case l.NameField != "":
		raw, named = longrunning.Named(ans.body, l.NameField, l.MonitorBase)
		return raw, "", named
	}
	header, raw = longrunning.MonitorHeader(ans.header, l.MonitorHeaders)
	return raw, header, raw != "" && (ans.status == http.StatusAccepted || header != "Location")
}

// style is the reader of the monitor's answers of the operation in, by
// the settings of its start origin's convention: its status codes
// (RFC 9110) unless the start found a status document; a webhook's
// fallback poll reads it by the workflow's rule (in.Status); else
// DoneField's document (Google), else StatusField's (Azure).
func (l *LongRunning) style(in *poll.Monitor) longrunning.Style {
	switch {
	case !in.StatusDocument:
		return longrunning.StatusCode{}
	case in.Status != nil:
		return longrunning.Rule(*in.Status)
	case l.DoneField != "":
		return longrunning.Done{Field: l.DoneField, Error: l.ErrorField, Result: l.ResultField}
	}
	return longrunning.Document{Field: l.StatusField, Succeeded: l.Succeeded, Failed: l.Failed, Canceled: l.Canceled,
		Error: l.ErrorField, Result: l.ResultField}
}

// cancel is the convention's cancel request (CancelMethod, CancelSuffix).
func (l *LongRunning) cancel() longrunning.Cancel {
	return longrunning.Cancel{Method: l.CancelMethod, Suffix: l.CancelSuffix}
}

// pollRetryAfter reads the Retry-After of a start answer or a monitor's
// to origin o for the call whose backoff is b: the server's value, and the
// wait before the next poll it asks for, at least poll.MinInterval and at
// most retryAfterCap (the one place of that rule).
func (a *Activities) pollRetryAfter(h http.Header, now time.Time, o *origin, b backoff.Backoff) (asked, wait time.Duration, ok bool) {
	asked, ok = retryAfter(h, now)
	return asked, min(max(asked, poll.MinInterval), a.retryAfterCap(o, b)), ok
}

// followable resolves raw against base and checks that the worker may
// request it for an operation started at origin: an absolute http(s) URL
// without user info, on origin or one of l.MonitorOrigins, allowed by
// Config.AllowedOrigins. It returns the URL without its fragment and,
// when it goes to history, why it may not go there as it is (secret; ""
// when it may): a query parameter l.KeepQuery does not name, or a secret
// of the worker's credentials anywhere in it. Such a URL is written
// sealed (record), or not followed.
func (a *Activities) followable(l *LongRunning, origin string, base *url.URL, raw string, history bool) (s, secret string, err error) {
	if len(raw) > maxFollowedURL {
		return "", "", fmt.Errorf("it is %d bytes long, more than the %d a URL written to history may be", len(raw), maxFollowedURL)
	}
	u, err := base.Parse(strings.TrimSpace(raw))
	if err != nil {
		return "", "", fmt.Errorf("it does not parse as a URL")
	}
	if u.User != nil {
		return "", "", fmt.Errorf("it carries user info")
	}
	u.Fragment, u.RawFragment = "", ""
	s = u.String()
	_, o, err := httpurl.Parse(s)
	if err != nil {
		return "", "", err
	}
	if o != origin && !slices.Contains(l.MonitorOrigins, o) {
		return "", "", fmt.Errorf("its origin %s is not the start request's (%s) nor in Convention.LongRunning.MonitorOrigins", o, origin)
	}
	if a.origins[o] == nil {
		return "", "", fmt.Errorf("its origin %s is not in Config.AllowedOrigins", o)
	}
	if !history {
		return s, "", nil
	}
	if a.holdsSecret(u, s) {
		return s, "it carries a credential of this worker", nil
	}
	if u.RawQuery != "" {
		// Read as redact.URL does, not as url.Values, which drops what it
		// cannot parse ("a;b=…", "%zz"): every part must be name=value,
		// its name allowed.
		for part := range strings.SplitSeq(u.RawQuery, "&") {
			name, value, ok := strings.Cut(part, "=")
			_, verr := url.QueryUnescape(value)
			switch {
			case !ok || !httpheader.ValidName(name):
				return s, "its query holds a value without a name", nil
			case !slices.Contains(l.KeepQuery, name) || verr != nil || strings.Contains(value, ";"):
				return s, fmt.Sprintf("its query parameter %q may be a signature or token (Convention.LongRunning.KeepQuery names the parameters that are none)", name), nil
			}
		}
	}
	return s, "", nil
}

// holdsSecret reports whether the URL u (s as written) holds a piece of a
// secret the redactor knows: as written, percent-escaped (once or more),
// or unescaped in its path or query.
func (a *Activities) holdsSecret(u *url.URL, s string) bool {
	if a.redact.string(s) != s || a.redact.next([]byte(u.Path), 0) >= 0 {
		return true
	}
	q, err := url.QueryUnescape(u.RawQuery)
	return err == nil && a.redact.next([]byte(q), 0) >= 0
}

// shownURL is the URL s as history, messages and logs may show it: query
// values and user info redacted (redact.URL), then every secret
// the redactor knows.
func (a *Activities) shownURL(s string) string {
	return a.redact.string(redact.URL(s))
}

// sealedURLs are the URLs Accepted.Sealed holds.
type sealedURLs struct {
	Monitor   string `json:"m,omitempty"`
	ResultURL string `json:"r,omitempty"`
}

// record writes op's monitor and result URL (followable's, with why each
// may not go to history as it is) into op: as they are when both may go;
// else each shown (shownURL) and both sealed with Config.SealKeys in
// op.Sealed, or, without keys, an error saying what to configure.
func (a *Activities) record(op *workflows.Accepted, monitor, monitorSecret, result, resultSecret string) error {
	if monitorSecret == "" && resultSecret == "" {
		op.Monitor, op.ResultURL, op.Sealed = monitor, result, ""
		return nil
	}
	if a.seal == nil {
		return fmt.Errorf("%s, which must not be written to Temporal's history in clear: give every worker the same Config.SealKeys (the worker's --seal-keys-file) to carry it sealed, or, for a query parameter that holds no secret, name it in Convention.LongRunning.KeepQuery", cmp.Or(monitorSecret, resultSecret))
	}
	plain, err := json.Marshal(sealedURLs{Monitor: monitor, ResultURL: result})
	if err != nil {
		return err
	}
	op.Sealed = a.seal.Seal(string(plain), sealContext(op.IdempotencyKey))
	op.Monitor, op.ResultURL = a.shownURL(monitor), a.shownURL(result)
	if result == "" {
		op.ResultURL = ""
	}
	return nil
}

// sealContext binds a sealed value to its operation's key.
func sealContext(key string) string { return "idemhttp accepted\x00" + key }

// unseal returns the monitor and result URL of the operation in: those
// sealed in in.Sealed, else in's own.
func (a *Activities) unseal(in *poll.Monitor) (monitor, result string, err error) {
	if in.Sealed == "" {
		return in.Monitor, in.ResultURL, nil
	}
	if a.seal == nil {
		return "", "", fmt.Errorf("its URLs are sealed, and this worker holds no Config.SealKeys (%w): give every worker the same keys", seal.ErrKeyNotHeld)
	}
	plain, err := a.seal.Open(in.Sealed, sealContext(in.IdempotencyKey))
	if err != nil {
		return "", "", fmt.Errorf("its sealed URLs cannot be opened: %w; give every worker the same Config.SealKeys (keep an old key listed until the operations it sealed have ended)", err)
	}
	var u sealedURLs
	if err := json.Unmarshal([]byte(plain), &u); err != nil {
		return "", "", fmt.Errorf("its sealed URLs are not intact")
	}
	return u.Monitor, u.ResultURL, nil
}

// maxFollowedURL bounds a monitor or result URL: it is written to history
// in the start's result and the poll's input.
const maxFollowedURL = 8 << 10

// startedOperation is the operation the start request p accepted with an
// answer of status, its monitor read as a status document or not; the
// caller sets its monitor and result URLs.
func startedOperation(p *prepared, status int, document bool) *workflows.Accepted {
	return &workflows.Accepted{
		Operation: p.req.Operation, Method: p.method, URL: p.raw, IdempotencyKey: p.req.IdempotencyKey,
		StartStatus: status, StatusDocument: document, RetryAfter: poll.MinInterval,
	}
}

// followedOperation is the operation the poll activity follows, as its
// input in names it, after polls polls.
func followedOperation(in *poll.Monitor, polls int32) *workflows.Accepted {
	op := in.Accepted
	op.State, op.Polls = "", int(polls)
	return &op
}
