package activities

// verdictKind is how one attempt ends: the kind of a verdict. Its String is
// the value of the "outcome" label of the attempts metric and the
// idempotent_http.outcome span attribute.
type verdictKind int

// The kinds of verdict.
const (
	// kindSuccess: the operation is done; the response is the result.
	kindSuccess verdictKind = iota + 1
	// kindRetry: the request may be sent again with the same key.
	kindRetry
	// kindFinal: sending the same request again cannot succeed.
	kindFinal
)

// String names the kind, as used in metrics tags, spans and logs.
func (k verdictKind) String() string {
	switch k {
	case kindSuccess:
		return "success"
	case kindRetry:
		return "retryable"
	case kindFinal:
		return "non_retryable"
	default:
		return "unknown"
	}
}
