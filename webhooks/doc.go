// Package webhooks receives providers' signed notifications of an
// operation's outcome and delivers each verified one to the workflow
// waiting for it.
//
// A Verifier checks one scheme's signature: StandardWebhooks (Standard
// Webhooks and Svix), Stripe, or a plain HMAC (GitHub's
// X-Hub-Signature-256 and the like). Each holds several secrets at once,
// for rotation, compares in constant time, and returns the Event the
// delivery names or an error that wraps ErrSignature, ErrTimestamp or
// ErrEvent and says what to fix:
//
//	ev, err := v.Verify(r.Header, body, time.Now())
//	if errors.Is(err, webhooks.ErrTimestamp) {
//		// a replay, or a sender's clock off: answer v.RejectStatus()
//	}
package webhooks
