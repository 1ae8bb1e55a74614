// Package loglevel holds the one rule for the level of the log lines
// about a call that failed.
package loglevel

import (
	"net/http"
)

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
