package activities

import (
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/idemhttp/temporal-idempotent-http/internal/redact"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// Reasons a successful response's body is not in the result.
const (
	omittedTooLarge   = "too large"
	omittedCredential = "credential"
	omittedEncoded    = "encoded"
)

// urlHeaders hold URLs the server sends: their user info and query values
// are redacted before they are stored, as those of any header whose value
// is a URL (urlValue: a monitor header, Operation-Location,
// Azure-AsyncOperation, that Config.ResultHeaders names).
var urlHeaders = map[string]bool{"Location": true, "Content-Location": true}

// urlValue reports whether a header's value v is a URL: absolute (http or
// https), or a path.
func urlValue(v string) bool {
	v = strings.TrimSpace(v)
	return strings.HasPrefix(v, "/") || len(v) > 8 && (strings.EqualFold(v[:7], "http://") || strings.EqualFold(v[:8], "https://"))
}

// result builds the workflows.Response of a 2xx: the body kept if it is complete, free
// of credentials (redacted inside JSON strings, or omitted when that is not
// possible) and small enough that the encoded result stays within
// MaxResultBytes; otherwise omitted, with its size and SHA-256. acc is
// the long-running operation the answer accepted or ended, if any.
func (a *Activities) result(ans *answer, p *prepared, attempt int32, acc *workflows.Accepted) *workflows.Response {
	r := &workflows.Response{
		Status:         ans.status,
		Attempt:        attempt,
		IdempotencyKey: p.req.IdempotencyKey,
		BodyBytes:      ans.size,
		Replayed:       p.o.conv.replayed(ans.header),
		BodyTruncated:  ans.truncated,
		Accepted:       scrubAccepted(a.redact.snap.Load(), acc),
	}
	for _, canon := range p.o.resultHeaders {
		// ans.header.Get(canon), without canonicalizing canon again.
		var v string
		if vs := ans.header[canon]; len(vs) > 0 {
			v = vs[0]
		}
		if v == "" {
			continue
		}
		if urlHeaders[canon] || urlValue(v) {
			v = redact.URL(v)
		}
		if len(v) > maxHeaderValue {
			v = v[:maxHeaderValue]
		}
		if r.Headers == nil {
			r.Headers = map[string]string{}
		}
		r.Headers[canon] = a.redact.string(v)
	}
	omit := func(reason string) {
		r.Body, r.RawBody = nil, nil
		r.BodyOmitted, r.OmittedReason, r.BodySHA256, r.BodyRedacted = true, reason, ans.bodySHA256(), false
	}
	body := ans.body
	switch {
	case ans.encoded != "":
		omit(omittedEncoded)
	case ans.size > a.cfg.MaxResponseBytes || ans.truncated:
		omit(omittedTooLarge)
	case len(body) == 0:
	case utf8.Valid(body) && json.Valid(body):
		// JSON with invalid UTF-8 in a string (a Latin-1 server) cannot
		// travel as JSON byte for byte: it is kept as RawBody (default).
		red, changed, ok := a.redact.json(body)
		switch {
		case !ok:
			omit(omittedCredential)
		case changed:
			r.Body, r.BodyRedacted, r.BodySHA256 = json.RawMessage(red), true, ans.bodySHA256()
		default:
			r.Body = json.RawMessage(body)
		}
	default:
		red, changed := a.redact.bytes(body)
		r.RawBody, r.BodyRedacted = red, changed
		if changed {
			r.BodySHA256 = ans.bodySHA256()
		}
	}
	// JSON escaping can make a string 6 times longer, base64 4/3: measure
	// the encoding only when the body and the headers could pass the bound;
	// omit the body, then the headers, until it fits.
	n := len(r.Body) + len(r.RawBody)
	for k, v := range r.Headers {
		n += len(k) + len(v)
	}
	if acc := r.Accepted; acc != nil {
		n += len(acc.Sealed) + len(acc.URL) + len(acc.Monitor) + len(acc.ResultURL) + len(acc.State) + len(acc.Operation)
	}
	if n > 0 && 6*n+2<<10 > a.cfg.MaxResultBytes && !a.fits(r) {
		if len(r.Body)+len(r.RawBody) > 0 {
			omit(omittedTooLarge)
		}
		if !a.fits(r) {
			r.Headers = nil
		}
	}
	return r
}

// fits reports whether r encodes within MaxResultBytes.
func (a *Activities) fits(r *workflows.Response) bool {
	enc, err := json.Marshal(r)
	return err == nil && len(enc) <= a.cfg.MaxResultBytes
}
