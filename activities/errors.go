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
