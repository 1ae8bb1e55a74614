// Package credential holds the credential schemes the HTTP activity applies
// to the requests of one origin: one small type per scheme behind Source,
// chosen by the origin's activities.Credential settings (as
// internal/longrunning holds one reader per long-running style). A Source
// does no I/O to the API itself; some fetch their secret elsewhere (a
// token endpoint) or read it from a file.
//
// Every secret a Source uses is told to its Redactor before the request
// that carries it is sent, so that no piece of it reaches Temporal's
// history, a result, an error, a span or a log line, whatever the server
// echoes.
package credential

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"time"
)

// Source authorizes the requests to one origin.
type Source interface {
	// Apply authorizes req, about to be sent with body (the exact bytes
	// sent; nil for none), by setting its headers: Apply may add or
	// replace headers of req, nothing else, and must not keep req. It is
	// called once per request sent (a retry and a redirect hop are new
	// requests), concurrently from many attempts. An error is an *Error.
	Apply(ctx context.Context, req *http.Request, body []byte) error
}

// Refresher is a Source whose secret the server can declare stale before
// its expiry: when an origin answers 401 with WWW-Authenticate: Bearer
// error="invalid_token" (RFC 6750 §3.1), the activity calls Refresh once
// with the request it sent, then applies the Source again and resends the
// request with the same idempotency key. Refresh reports whether a new
// secret may now be applied (false: do not resend).
type Refresher interface {
	Refresh(ctx context.Context, sent *http.Request) bool
}

// Clocked is a Source whose times are the API's: the expiry of an OAuth
// 2.0 token (the API refuses it by its own clock), the date of a Signature
// V4 request. The activity gives it its clock (activities.Config.Now) with
// UseClock, once, before the first Apply, so that in a test environment
// whose clock skips time (testsuite.Register) a token expires, and a
// request is dated, by that clock, as the reference server on it reads
// them. The sources whose times are the machine's are not Clocked: a
// file's modification time (header files, the client secret file), a
// certificate's validity at the TLS handshake, the AWS SDK's credential
// cache, and every rate of reading or asking (a file looked at once a
// second, a token request's timeout).
type Clocked interface {
	UseClock(now func() time.Time)
}

// TLSSource is a Source that also authenticates the connection: the
// origin's transport uses TLSConfig (its client certificate, re-read on
// rotation by GetClientCertificate, and the CA pool for the origin, if
// any).
type TLSSource interface {
	TLSConfig() *tls.Config
}

// Redactor learns the secrets a Source uses. Add is cheap for a secret it
// already knows and safe for concurrent use; a secret stays redacted at
// least RetainFor after it was last added.
type Redactor interface {
	Add(secret string)
}

// RetainFor is how long a secret that is no longer used (a rotated key, an
// expired token) stays redacted after it was last added.
const RetainFor = 24 * time.Hour

// Error is a credential that could not be applied: a token endpoint that
// is down or refuses, a key file that cannot be read, a signature that
// cannot be made. The activity reports it as
// workflows.ErrTypeCredentialUnavailable, never as an HTTP failure of the
// API: nothing was sent to the API.
type Error struct {
	// Scheme names the scheme ("oauth2", "header-file", "sigv4", "mtls").
	Scheme string
	// Retryable: asking again may help (the token endpoint answered 5xx or
	// 429, or could not be reached); false when it refused the client
	// (400 invalid_client, 401) or the configuration is wrong.
	Retryable bool
	// RetryAfter is the wait the token endpoint asked for, if any.
	RetryAfter time.Duration
	// Status is the token endpoint's HTTP status, 0 when none.
	Status int
	// Err says what happened and what to do; it holds no secret.
	Err error
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s credential: %v", e.Scheme, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }
