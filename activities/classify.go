package activities

import (
	"net/http"
)

// Outcome is how one HTTP response is treated.
type Outcome int

// The outcomes of one attempt.
const (
	// Success: the operation is done; the response is the activity result.
	Success Outcome = iota + 1
	// Retryable: the request may be sent again with the same idempotency key.
	Retryable
	// NonRetryable: sending the same request again cannot succeed; fix the request.
	NonRetryable
)

// String names the outcome, as used in metrics tags and logs.
func (o Outcome) String() string {
	switch o {
	case Success:
		return "success"
	case Retryable:
		return "retryable"
	case NonRetryable:
		return "non_retryable"
	default:
		return "unknown"
	}
}

// Error types set on the [temporal.ApplicationError]s the activity returns.
// Match them with errors.As and (*temporal.ApplicationError).Type.
const (
	// ErrTypeInvalidRequest: the request itself is malformed (URL, scheme, method,
	// header, body that is not JSON, missing idempotency key). Nothing was sent.
	ErrTypeInvalidRequest = "InvalidRequest"
	// ErrTypeOriginNotAllowed: the URL's origin is not in the worker's allow list.
	// Nothing was sent.
	ErrTypeOriginNotAllowed = "OriginNotAllowed"
	// ErrTypeClientError: the server answered a 4xx that retrying cannot fix.
	ErrTypeClientError = "HTTPClientError"
	// ErrTypeServerError: the server answered a status that retrying cannot fix
	// (501, 505, an unexpected 1xx or 3xx, or a status outside 100–599).
	ErrTypeServerError = "HTTPNonRetryableStatus"
	// ErrTypeRetryableStatus: the server answered 408, 429, 5xx or an in-flight
	// 409; Temporal retries it with the same key.
	ErrTypeRetryableStatus = "HTTPRetryableStatus"
	// ErrTypeNetwork: the request or response failed in transit; Temporal retries
	// it with the same key.
	ErrTypeNetwork = "NetworkError"
	// ErrTypeTLS: the server's certificate could not be verified.
	ErrTypeTLS = "TLSCertificateError"
	// ErrTypeRedirect: the server redirected somewhere the activity will not
	// follow (a method-changing redirect or another origin).
	ErrTypeRedirect = "RedirectNotFollowed"
	// ErrTypeDeadline: the next retry could not start before the activity's
	// schedule-to-close deadline, so the activity fails now instead of waiting.
	ErrTypeDeadline = "RetryWouldExceedDeadline"
)

// NonRetryableErrorTypes lists every non-retryable error type above. The
// workflows package adds them to RetryPolicy.NonRetryableErrorTypes as a second
// guard beside the NonRetryable flag.
var NonRetryableErrorTypes = []string{
	ErrTypeInvalidRequest, ErrTypeOriginNotAllowed, ErrTypeClientError,
	ErrTypeServerError, ErrTypeTLS, ErrTypeRedirect, ErrTypeDeadline,
}

// Classify decides the outcome of one final HTTP response (redirects already
// resolved) and the error type used when it is not a success. It is the single
// place where statuses are classified:
//
//   - 2xx: Success.
//   - 408, 429, 500, 502, 503, 504: Retryable.
//   - 409 with a Retry-After header: Retryable (the IETF idempotency-key draft's
//     "a request with this key is still being processed").
//   - every other 4xx (400, 401, 403, 404, 409, 422, …): NonRetryable, ErrTypeClientError.
//   - 501, 505 and every other 5xx, 1xx, 3xx, and anything outside 100–599:
//     NonRetryable, ErrTypeServerError.
func Classify(status int, header http.Header) (Outcome, string) {
	switch {
	case status >= 200 && status <= 299:
		return Success, ""
	case status == http.StatusRequestTimeout,
		status == http.StatusTooManyRequests,
		status == http.StatusInternalServerError,
		status == http.StatusBadGateway,
		status == http.StatusServiceUnavailable,
		status == http.StatusGatewayTimeout:
		return Retryable, ErrTypeRetryableStatus
	case status == http.StatusConflict && header.Get("Retry-After") != "":
		return Retryable, ErrTypeRetryableStatus
	case status >= 400 && status <= 499:
		return NonRetryable, ErrTypeClientError
	default:
		return NonRetryable, ErrTypeServerError
	}
}
