// Package webhooks receives providers' signed notifications of an
// operation's outcome and delivers each verified one to the workflow
// awaiting it (workflows.Request.Webhook).
//
// A [Receiver] is an http.Handler, for users to mount in their own server
// (the worker's --webhook-addr serves one): it reads a delivery up to a
// bound, checks its signature with a [Verifier], finds the workflow and
// operation (in the event's metadata on a fixed endpoint, in the path of
// a per-operation callback URL made by [Callbacks]), and hands the event
// to the workflow as a Temporal Update whose ID is the event's, answering
// 2xx only once the workflow took it or needs it no more; anything that
// fails verification never reaches Temporal. docs/webhooks.md
// states the answers, what reaches history and the security
// model.
//
// A Verifier checks one scheme's signature: [StandardWebhooksVerifier] (Standard
// Webhooks and Svix), [StripeVerifier], or a plain [HMACVerifier] (GitHub's
// X-Hub-Signature-256 and the like). Each holds several secrets at once,
// for rotation, compares in constant time, and returns the Event the
// delivery names or an error that wraps ErrSignature, ErrTimestamp or
// ErrEvent and says what to fix. The signing rules themselves live in
// internal/signature, which the reference server's sender
// (testsuite.Webhooks) shares.
package webhooks
