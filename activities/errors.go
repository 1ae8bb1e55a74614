package activities

// outcome is how one attempt ends.
type outcome int

// The outcomes of one attempt.
const (
	// outcomeSuccess: the operation is done; the response is the result.
	outcomeSuccess outcome = iota + 1
	// outcomeRetry: the request may be sent again with the same key.
	outcomeRetry
	// outcomeFinal: sending the same request again cannot succeed.
	outcomeFinal
)

// String names the outcome, as used in metrics tags and logs.
func (o outcome) String() string {
	switch o {
	case outcomeSuccess:
		return "success"
	case outcomeRetry:
		return "retryable"
	case outcomeFinal:
		return "non_retryable"
	default:
		return "unknown"
	}
}

// Error types set on the [temporal.ApplicationError]s the activity returns.
// A workflow sees them wrapped in a *temporal.ActivityError; match them with
// errors.As and (*temporal.ApplicationError).Type, and read the
// [FailureDetails] with [Details]:
//
//	var appErr *temporal.ApplicationError
//	if errors.As(err, &appErr) && appErr.Type() == activities.ErrTypeKeyReused {
//		d, _ := activities.Details(err) // key, status, attempt, reason, body snippet
//	}
//
// Every type except ErrTypeRetryableStatus, ErrTypeNetwork,
// ErrTypeKeyInFlight and ErrTypeNotAdmitted is non-retryable. A retryable type becomes final, with
// outcomeFinal set and the same type, on the last attempt of the budget.
const (
	// ErrTypeInvalidRequest: the request itself is malformed (URL, scheme, method,
	// header, body, missing or malformed idempotency key). Nothing was sent.
	ErrTypeInvalidRequest = "InvalidRequest"
	// ErrTypeOriginNotAllowed: the URL's origin is not in Config.AllowedOrigins.
	// Nothing was sent.
	ErrTypeOriginNotAllowed = "OriginNotAllowed"
	// ErrTypeClientError: the server answered a 4xx that retrying cannot fix
	// (or told the activity not to retry).
	ErrTypeClientError = "HTTPClientError"
	// ErrTypeServerError: the server answered a status that retrying cannot fix
	// (501, 505 and the 5xx not retried, an unexpected 1xx or 3xx, or a
	// status outside 100–599). FailureDetails.OutcomeUnknown says whether
	// the server may have done part of the work.
	ErrTypeServerError = "HTTPNonRetryableStatus"
	// ErrTypeRetryableStatus: the server answered a retryable status (408,
	// 425, 429, 500, 502, 503, 504, 520–524: retryableStatus in outcome.go),
	// or told the activity to retry; Temporal retries it with the same key.
	ErrTypeRetryableStatus = "HTTPRetryableStatus"
	// ErrTypeNetwork: the request or response failed in transit; Temporal retries
	// it with the same key.
	ErrTypeNetwork = "NetworkError"
	// ErrTypeTLS: the server's certificate could not be verified, or the
	// URL's scheme does not match the server.
	ErrTypeTLS = "TLSCertificateError"
	// ErrTypeRedirect: the server redirected somewhere the activity will not
	// follow (a method-changing redirect, another origin, or user info).
	ErrTypeRedirect = "RedirectNotFollowed"
	// ErrTypeDeadline: the next retry could not start before the activity's
	// schedule-to-close deadline, so the activity fails now instead of waiting.
	ErrTypeDeadline = "RetryWouldExceedDeadline"
	// ErrTypeKeyInFlight: the server is still processing a request with
	// this key (most likely an earlier attempt of this operation); Temporal
	// retries it with the same key, and the wait does not use up the attempt
	// budget.
	ErrTypeKeyInFlight = "IdempotencyKeyInFlight"
	// ErrTypeNotAdmitted: the attempt sent nothing: the worker's adaptive
	// admission (Config.Admission) holds requests to the origin back, and
	// the attempt came back to wait for its turn. Temporal retries it; the
	// wait does not use up the attempt budget.
	ErrTypeNotAdmitted = "NotAdmitted"
	// ErrTypeKeyLocked: the server kept answering that a request with this
	// key is still being processed until the next wait could not end before
	// the schedule-to-close deadline. The first request may still complete
	// at the server: never retry with a new key. Wait out the server's lock
	// expiry, then run the same workflow ID again, which sends the same key.
	ErrTypeKeyLocked = "IdempotencyKeyLocked"
	// ErrTypeKeyReused: the server says this key was already used with a
	// different request (another body, method or path): a bug in the caller,
	// such as two operations sharing a name or a key, or a body that changed
	// between runs of the same workflow ID.
	ErrTypeKeyReused = "IdempotencyKeyReused"
)

// NonRetryableErrorTypes returns every error type that is never retried. The
// workflows package puts them in RetryPolicy.NonRetryableErrorTypes as a
// second guard beside the outcomeFinal flag.
func NonRetryableErrorTypes() []string {
	return []string{
		ErrTypeInvalidRequest, ErrTypeOriginNotAllowed, ErrTypeClientError,
		ErrTypeServerError, ErrTypeTLS, ErrTypeRedirect, ErrTypeDeadline,
		ErrTypeKeyLocked, ErrTypeKeyReused,
	}
}
