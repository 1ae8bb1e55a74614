package activities

import (
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/idemhttp/temporal-idempotent-http/internal/credential"
	"github.com/idemhttp/temporal-idempotent-http/internal/named"
)

// Credential is how the worker authorizes the requests to one origin
// (Config.Credentials). Any of its parts may be set; they are applied to
// every request sent to that origin, and to no other, in this order:
// Header, HeaderFiles, OAuth2, then SigV4 (which signs the headers the
// others set); CertFile and KeyFile authenticate the connection. Every
// secret of it (a header value, a key read from a file, a fetched token,
// the client secret, the AWS secret key and session token, the private
// key) is redacted from history, results, errors, spans and logs, whatever
// the server echoes: no 8-byte piece of one is written anywhere.
type Credential struct {
	// Header holds static headers, such as Authorization: Bearer … or
	// X-Api-Key: …. Names match case-insensitively; each value must be at
	// least 8 bytes long (a shorter one cannot be redacted).
	Header http.Header
	// HeaderFiles maps a header name to a file that holds the header's
	// whole value ("Bearer sk_live_…", surrounding white space trimmed).
	// A file is read at New and again when it changes (checked at most
	// once a second), so a rotated key is sent without a restart; the
	// value it replaced stays redacted for a day. A file that cannot be
	// read keeps the last value it held (logged); at New it is an error.
	HeaderFiles map[string]string
	// OAuth2 fetches a bearer token with the client-credentials grant
	// (RFC 6749 §4.4) and sends it as Authorization: Bearer …: TokenURL,
	// ClientID and ClientSecret (or ClientSecretFile) are required;
	// Scopes and EndpointParams
	// (an "audience", say) are sent as set; AuthStyle chooses the client
	// secret in the body or HTTP Basic (default: detected). One worker
	// fetches one token per expiry window however many attempts run at
	// once, and a new one shortly before it expires; an origin that
	// answers 401 with WWW-Authenticate: Bearer error="invalid_token" gets
	// one new token and the request again, with the same idempotency key.
	// A token endpoint that is down or refuses fails the attempt with
	// workflows.ErrTypeCredentialUnavailable (retried when asking again
	// may help), never as an HTTP failure of the API: nothing was sent, or
	// the API refused the old token (401 invalid_token) and no new one
	// could be had.
	OAuth2 *clientcredentials.Config
	// ClientSecretFile, if set, is a file that holds OAuth2's client
	// secret (the whole file, surrounding white space trimmed), in place
	// of OAuth2.ClientSecret, which must then be empty. It is read at New
	// and again when it changes (looked at before a token request, at
	// most once a second; a file written in place once it is a second
	// old, so that half a secret is never sent), so a rotated secret is
	// used without a restart; the secret it replaced stays redacted for a
	// day. A file that cannot be read keeps the last secret (logged); at
	// New it is an error. Default: OAuth2.ClientSecret.
	ClientSecretFile string
	// CertFile and KeyFile are the PEM files of the client certificate
	// and its private key that the origin requires (mutual TLS); they are
	// re-read when they change, for new connections. CAFile, if set, is a
	// PEM file of the only certificate authorities trusted for the
	// origin's server certificate (default: the system's). New refuses
	// files that do not parse or a key that does not match. They need
	// Config.HTTPClient's Transport to be an *http.Transport (or nil)
	// that does not dial TLS itself (no DialTLSContext): the origin gets
	// a clone that dials with the certificate, over HTTP/1.1, so that a
	// certificate the origin refuses is reported as such
	// (workflows.ErrTypeCredentialUnavailable, final, no failure of the
	// origin for its breaker) even when the refusal breaks a request
	// being written, or comes without a TLS alert (the origin closes the
	// connection, as Node's https server and many load balancers do:
	// checked once on a new connection that sends no request).
	CertFile, KeyFile, CAFile string
	// TokenTLS, if set, is the TLS of OAuth2's token requests in place of
	// the origin's: a token endpoint on another host may have a
	// certificate of another CA, and want a client certificate of its own
	// or none. A zero TLSFiles presents no client certificate and trusts
	// the system's CAs. Default (nil): the origin's CertFile, KeyFile and
	// CAFile when it has any (the token endpoint of a bank requiring
	// mutual TLS requires it too, RFC 8705), else Config.HTTPClient's.
	// A token request that fails says which settings it used.
	TokenTLS *TLSFiles
	// SigV4 signs every request with AWS Signature Version 4, over the
	// exact bytes of its body (API Gateway, Lambda function URLs, any
	// AWS service), with AWS's own signer. It sets Authorization: an
	// Authorization from Header, HeaderFiles or OAuth2 is replaced, not
	// sent; every other header is signed over.
	SigV4 *SigV4
	// RetryRefused is how long a call whose credential was refused or is
	// misconfigured (the token endpoint refused the client, a key file
	// does not parse, the origin refused the client certificate) asks
	// again before it fails, so that an operator who fixes the worker's
	// files meanwhile loses no call (default 0: the call fails at the
	// first refusal; the worker's origins file, read by package host,
	// defaults its retry_refused to 5 minutes); the call's
	// ScheduleToCloseTimeout bounds it too. Each
	// attempt sends nothing and fails with a retryable
	// workflows.ErrTypeCredentialUnavailable (the activity's last failure
	// in the Web UI); the waits, from 1 s doubling to 1 min, are not
	// counted against RetryOptions.MaximumAttempts, nor are those for a
	// credential that could not be had (a token endpoint that is down).
	RetryRefused time.Duration

	// names names the settings above in errors, at New and at run time:
	// their Go fields, or the keys of the file the worker read them from.
	names credential.Names
}

// The worker's origins file sets Credential.names (internal/named: a hook
// of this repository's binaries, not part of the API), so that its errors
// name the file's keys where they are written.
func init() {
	named.Register("credential-names", func(c Credential, n credential.Names) Credential {
		c.names = n
		return c
	})
}

// TLSFiles are the TLS settings of an origin's OAuth2 token requests
// (Credential.TokenTLS), as PEM files.
type TLSFiles struct {
	// CertFile and KeyFile are the client certificate and its private key
	// presented to the token endpoint, both or neither (default: none);
	// re-read when they change, and redacted, as Credential.CertFile and
	// KeyFile.
	CertFile, KeyFile string
	// CAFile holds the only certificate authorities trusted for the token
	// endpoint's certificate (default: the system's).
	CAFile string
}

// SigV4 is an origin's AWS Signature Version 4 (Credential.SigV4).
type SigV4 struct {
	// Service and Region are the signing scope ("execute-api",
	// "eu-west-1"; "lambda" for a function URL). Required.
	Service, Region string
	// Credentials provides the access key, secret key and session token
	// (default: the AWS SDK's default chain: the environment's
	// AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN, then
	// the shared profile AWS_PROFILE names, then the instance's role).
	// Temporary credentials are renewed before they expire.
	Credentials aws.CredentialsProvider
}

// The constructors of the sources that reach beyond the worker (a token
// endpoint, certificate files), replaced by tests (export_test.go).
var (
	newOAuth2 = credential.NewOAuth2With
	newTLS    = credential.NewTLSFor
)

// sigV4Headers are the headers AWS Signature V4 sets.
var sigV4Headers = []string{"Authorization", "X-Amz-Date", "X-Amz-Security-Token", "X-Amz-Content-Sha256"}

// authorize builds o's own transport when c, the credential of origin o
// (named s in Config.Credentials), authenticates the connection, then the
// sources of c in the order Credential documents. Every source whose times
// are the API's (credential.Clocked) reads cfg.Now, set by then. Its
// errors, and those of the sources at run time, name c's settings as
// c.names says.
func (o *origin) authorize(cfg Config, s string, c Credential, red *redactor) error {
	field := fmt.Sprintf("Config.Credentials[%s]", s)
	o.names = c.names
	// at begins an error about part of c (".OAuth2: "; "." before a
	// field the error names itself): Config.Credentials[s] and part, or
	// the name its loader gave c.
	at := func(part string) string {
		if c.names.Credential != "" {
			return c.names.Credential + ": "
		}
		return field + part
	}
	o.set = map[string]bool{}
	o.retryRefused = max(c.RetryRefused, 0)
	add := func(src credential.Source, err error, part string, headers ...string) error {
		if err != nil {
			return fmt.Errorf("%s%w", at(part), err)
		}
		if c, ok := src.(credential.Clocked); ok {
			c.UseClock(cfg.Now)
		}
		o.sources = append(o.sources, src)
		if r, ok := src.(credential.Refresher); ok {
			o.refreshers = append(o.refreshers, r)
		}
		for _, h := range headers {
			o.set[http.CanonicalHeaderKey(h)] = true
		}
		return nil
	}
	if len(c.Header) > 0 {
		src, err := credential.NewStatic(c.Header, red, c.names)
		if err := add(src, err, ".", slices.Collect(maps.Keys(c.Header))...); err != nil {
			return err
		}
	}
	if len(c.HeaderFiles) > 0 {
		logf := func(msg string, kv ...any) { slog.Warn(msg, append([]any{"origin", s}, kv...)...) }
		src, err := credential.NewHeaderFiles(c.HeaderFiles, red, logf, c.names)
		if err := add(src, err, ".", slices.Collect(maps.Keys(c.HeaderFiles))...); err != nil {
			return err
		}
	}
	if c.CertFile != "" || c.KeyFile != "" || c.CAFile != "" {
		if err := o.authenticate(cfg, at(": "), c, red); err != nil {
			return err
		}
	}
	if c.TokenTLS != nil && c.OAuth2 == nil {
		return fmt.Errorf("%s.TokenTLS is set without OAuth2: it is the TLS of OAuth2's token requests; set OAuth2, or remove TokenTLS", field)
	}
	if c.ClientSecretFile != "" && c.OAuth2 == nil {
		return fmt.Errorf("%s.ClientSecretFile is set without OAuth2: it holds OAuth2's client secret; set OAuth2, or remove ClientSecretFile", field)
	}
	if c.OAuth2 != nil {
		tc, via, err := o.tokenClient(cfg, at(": "), c, red)
		if err != nil {
			return err
		}
		logf := func(msg string, kv ...any) { slog.Warn(msg, append([]any{"origin", s}, kv...)...) }
		src, err := newOAuth2(c.OAuth2, tc, red, credential.OAuth2Options{TLS: via, SecretFile: c.ClientSecretFile, Logf: logf, Names: c.names})
		if err := add(src, err, ".OAuth2: ", "Authorization"); err != nil {
			return err
		}
	}
	if c.SigV4 != nil {
		src, err := credential.NewSigV4(c.SigV4.Service, c.SigV4.Region, c.SigV4.Credentials, red, c.names)
		if err := add(src, err, ".SigV4: ", sigV4Headers...); err != nil {
			return err
		}
	}
	return nil
}
