// Package rules holds the rules every HTTP operation of this module obeys,
// in one place for the workflow side (which refuses a bad request before
// it is written to Temporal's history) and the activity (which refuses it
// again before anything is sent): the method, the operation name, the body
// and the extra headers; and the level of the log lines about a call that
// failed (CallerHandles), one rule for both sides. The URL's are in
// package httpurl, the key's in package idemkey.
package rules

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/idemhttp/temporal-idempotent-http/internal/httpheader"
	"github.com/idemhttp/temporal-idempotent-http/internal/redact"
)

// MaxBodyBytes bounds a request body: it is stored in Temporal's history
// (workflow input and activity input), whose payloads are limited to 2 MiB.
const MaxBodyBytes = 256 << 10

// DefaultMethod is the method of a request that names none.
const DefaultMethod = http.MethodPost

// Method returns the request method in upper case, POST for "", or an error
// for a method other than POST, PUT, PATCH and DELETE.
func Method(m string) (string, error) {
	u := strings.ToUpper(strings.TrimSpace(m))
	switch u {
	case "":
		return DefaultMethod, nil
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return u, nil
	}
	return "", fmt.Errorf("method %q is not supported: use POST, PUT, PATCH or DELETE", m)
}

// Operation checks an operation name: it is part of the derived key, where
// a NUL byte separates the fields, so it may not hold one.
func Operation(op string) error {
	if strings.IndexByte(op, 0) >= 0 {
		return errors.New("operation name contains a NUL byte: it would derive the same key as another (workflow ID, operation) pair; remove it")
	}
	if !utf8.ValidString(op) {
		return errors.New("operation name is not valid UTF-8")
	}
	return nil
}

// Body checks a JSON request body: valid JSON, valid UTF-8 (RFC 8259 §8.1;
// it travels through history as text) and at most MaxBodyBytes.
func Body(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	if len(b) > MaxBodyBytes {
		return fmt.Errorf("request body is %d bytes: at most %d are allowed, since it is stored in Temporal's history; send a reference to the data instead", len(b), MaxBodyBytes)
	}
	if redact.ValidJSON(b) {
		// utf8.Valid and json.Valid in one pass.
		return nil
	}
	if !utf8.Valid(b) {
		return fmt.Errorf("request body is not valid UTF-8 (%d bytes): JSON must be UTF-8", len(b))
	}
	return fmt.Errorf("request body is not valid JSON (%d bytes): encode it with encoding/json", len(b))
}

// BodyHash is the hex SHA-256 of a request body: the bytes sent.
func BodyHash(body []byte) string {
	sum := sha256.Sum256(body)
	var buf [2 * sha256.Size]byte // one allocation: the string
	hex.Encode(buf[:], sum[:])
	return string(buf[:])
}

// setByClient are headers the activity or the HTTP client sets itself.
var setByClient = map[string]string{
	"Idempotency-Key":   "set the request's IdempotencyKey (or let it be derived) instead",
	"Content-Type":      "the body is always sent as application/json",
	"Content-Length":    "it is computed from the body",
	"Host":              "it is taken from the URL",
	"Transfer-Encoding": "it is managed by the HTTP client",
	"Connection":        "it is managed by the HTTP client",
	"Te":                "it is managed by the HTTP client",
	"Upgrade":           "it is managed by the HTTP client",
	"Expect":            "it is managed by the HTTP client",
	"Accept-Encoding":   "the HTTP client negotiates compression itself and decodes the body before credentials are redacted from it; an encoded body would hide them",
	"Accept-Charset":    "a body in another charset would hide credentials from redaction",
	"Traceparent":       "the worker writes each attempt's W3C trace context",
	"Tracestate":        "the worker writes each attempt's W3C trace context",
}

// Headers checks the extra headers of a request: valid names (RFC 9110
// tokens), no two names that differ only in case, values without control
// characters other than horizontal tab, no credential headers (see
// redact.IsCredential) and none that the activity sets itself.
func Headers(h map[string]string) error {
	seen := make(map[string]string, len(h))
	for _, name := range slices.Sorted(maps.Keys(h)) {
		if !httpheader.ValidName(name) {
			return fmt.Errorf("invalid header name %q: use letters, digits and !#$%%&'*+-.^_`|~", name)
		}
		canon := http.CanonicalHeaderKey(name)
		if other, dup := seen[canon]; dup {
			return fmt.Errorf("headers %q and %q differ only in case: HTTP header names are case-insensitive, keep one", other, name)
		}
		seen[canon] = name
		if err := httpheader.CheckValue(canon, h[name]); err != nil {
			return err
		}
		if redact.IsCredential(canon) {
			return fmt.Errorf("header %s may not be set in the request: it looks like a credential, and the request is stored in Temporal's history; configure it on the worker", canon)
		}
		if why, ok := setByClient[canon]; ok {
			return fmt.Errorf("header %s may not be set in the request: %s", canon, why)
		}
	}
	return nil
}

// CallerHandles is the one rule for the level of the package's log lines
// about a call that failed: a failure its workflow is expected to handle
// is logged once at Warn (the activity's line; the workflow's own line is
// at Info), anything else at Error, as it needs an operator.
//
// The caller handles a final answer of the server about the request
// itself: a 4xx (clientError: workflows.ErrTypeHTTPClientError), such as a
// declined 402, a 404, a 409 conflict or a 422, whose outcome is known.
// 401, 403 and 407 are an operator's: they name the worker's credentials
// or the API's permissions. So is every other failure: a 5xx, a network or
// TLS error, a key reused or still in flight, a deadline, an invalid
// request, an outcome unknown.
func CallerHandles(status int, clientError, unknown bool) bool {
	switch status {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusProxyAuthRequired:
		return false
	}
	return clientError && !unknown && status >= 400 && status <= 499
}
