package credential

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/idemhttp/temporal-idempotent-http/internal/backoff"
	"github.com/idemhttp/temporal-idempotent-http/internal/httpheader"
)

// The OAuth 2.0 client-credentials source's timing.
const (
	// oauth2Early is the most a token is refreshed before its expiry (or
	// a tenth of its lifetime, if less, but at least 1 s, or half the
	// lifetime if less).
	oauth2Early = 10 * time.Second
	// oauth2FetchTimeout bounds a token request; oauth2MinFetch is the
	// least time it is given, whatever the deadline of the attempt that
	// started it.
	oauth2FetchTimeout = 30 * time.Second
	oauth2MinFetch     = 10 * time.Second
	// oauth2RefusedHold is how long a refusal of the client (400, 401, a
	// token that is not Bearer) is answered from memory before the token
	// endpoint is asked again: attempts that all fail do not storm it.
	oauth2RefusedHold = 30 * time.Second
	// oauth2MaxHold caps a Retry-After honoured that way.
	oauth2MaxHold = 5 * time.Minute
	// oauth2RetryHold is that wait after a retryable failure without
	// Retry-After.
	oauth2RetryHold = time.Second
	// oauth2MinSecret is the shortest client secret accepted: a shorter
	// one could not be redacted (no 8-byte piece of it could be told).
	oauth2MinSecret = 8
)

// NewOAuth2 returns the Source of an origin whose API wants OAuth 2.0
// client credentials (RFC 6749 §4.4): it fetches an access token from
// cfg.TokenURL with client (the activity's own client, holding no
// credential of the API) and sets "Authorization: Bearer <token>". One
// token request runs at a time however many attempts ask at once; the
// token is reused until shortly before its expiry (10 s, or a tenth of
// its lifetime if less, at least 1 s) or, without expires_in, until the
// API answers 401 invalid_token and the activity calls Refresh. A failed
// token request is answered from memory for its Retry-After, 1 s
// (retryable) or 30 s (the client refused). The client secret and every
// token fetched are given to r before use. cfg is not modified and must
// not be modified afterwards. The value returned also implements
// Refresher.
func NewOAuth2(cfg *clientcredentials.Config, client *http.Client, r Redactor) (Source, error) {
	return NewOAuth2With(cfg, client, r, OAuth2Options{})
}

// OAuth2Options are the settings of NewOAuth2With beyond NewOAuth2's.
type OAuth2Options struct {
	// TLS names the TLS settings the token requests use, as the user set
	// them ("the token request used …"): every error of a token request
	// says it, since a token endpoint that wants other settings fails in
	// the handshake or refuses the client ("" says nothing).
	TLS string
	// SecretFile, if set, holds the client secret, in place of
	// cfg.ClientSecret (which must be empty): the whole file, white space
	// around it trimmed, one line. It is read at NewOAuth2With (an error
	// names Credential.ClientSecretFile) and again when it changes, as
	// NewHeaderFiles reads its files: looked at (stat) before a token
	// request, at most once a second; a file written in place read once
	// it is a second old, so that half a secret is never sent; a file
	// renamed over it at once. Each new secret is told to the Redactor
	// before it is sent, the one it replaced stays redacted (RetainFor). A
	// file that cannot be read or used then keeps the last secret, and
	// Logf says why. While the token endpoint's refusal of the client is
	// answered from memory (30 s), a new secret in the file ends the wait.
	SecretFile string
	// Logf logs what SecretFile's checks find (nil: nothing is logged).
	Logf func(msg string, kv ...any)
	// Names names the settings in errors (default: the fields of
	// activities.Credential).
	Names Names
}

// NewOAuth2With is NewOAuth2 with opts.
func NewOAuth2With(cfg *clientcredentials.Config, client *http.Client, r Redactor, opts OAuth2Options) (Source, error) {
	var secret *headerFiles
	n := opts.Names
	if opts.SecretFile != "" && cfg != nil && r != nil {
		if cfg.ClientSecret != "" {
			return nil, fmt.Errorf("credential: %s and %s are both set: set one (the file, to rotate the secret without a restart)", n.Of("OAuth2.ClientSecret"), n.Of("ClientSecretFile"))
		}
		f := &headerFile{name: "OAuth2 client secret", path: opts.SecretFile, what: "the client secret", setting: n.Of("ClientSecretFile")}
		v, err := f.read()
		if err != nil {
			return nil, fmt.Errorf("credential: %s: %w", n.Of("ClientSecretFile"), err)
		}
		f.cur.Store(v)
		f.next.Store(time.Now().Add(checkEvery).UnixNano())
		logf := opts.Logf
		if logf == nil {
			logf = func(string, ...any) {}
		}
		secret = &headerFiles{files: []*headerFile{f}, r: r, logf: logf, now: time.Now}
		cfg = withSecret(cfg, v.value[0])
	}
	if err := checkOAuth2(cfg, r, n); err != nil {
		return nil, err
	}
	if client == nil {
		client = &http.Client{Timeout: oauth2FetchTimeout}
	}
	// A redirect is never followed: the HTTP client would resend the
	// token request, client secret in its body, to Location's host.
	c := *client
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	client = &c
	s := &oauth2Source{client: client, r: r, now: time.Now, tlsNote: opts.TLS, secret: secret, names: n}
	s.cfg.Store(cfg)
	forms := clientSecrets(cfg)
	s.clientSecrets.Store(&forms)
	s.addClientSecrets()
	return s, nil
}

// withSecret is a copy of cfg with the client secret secret (a copy field
// by field: the Config holds a cache of the auth style it detected, not
// to be copied).
func withSecret(cfg *clientcredentials.Config, secret string) *clientcredentials.Config {
	return &clientcredentials.Config{
		ClientID: cfg.ClientID, ClientSecret: secret, TokenURL: cfg.TokenURL,
		Scopes: cfg.Scopes, EndpointParams: cfg.EndpointParams, AuthStyle: cfg.AuthStyle,
	}
}

// config is the configuration of the next token request: with the
// secret SecretFile holds now, when it changed (its forms told to the
// redactor first).
func (s *oauth2Source) config() *clientcredentials.Config {
	cfg := s.cfg.Load()
	if s.secret == nil {
		return cfg
	}
	v := s.secret.value(s.secret.files[0]).value[0]
	if v == cfg.ClientSecret {
		return cfg
	}
	cfg = withSecret(cfg, v)
	forms := clientSecrets(cfg)
	for _, f := range forms {
		s.r.Add(f)
	}
	s.clientSecrets.Store(&forms)
	s.cfg.Store(cfg)
	return cfg
}

// secretRotated reports whether SecretFile holds a secret other than the
// one last sent (looked at at most once a second).
func (s *oauth2Source) secretRotated() bool {
	if s.secret == nil {
		return false
	}
	return s.secret.value(s.secret.files[0]).value[0] != s.cfg.Load().ClientSecret
}

// clientSecrets are the client secret as written and as it travels to the
// token endpoint (golang.org/x/oauth2 form-escapes it in the body, and
// Basic credentials are the base64 of the form-escaped "id:secret"): a
// token endpoint echoing its request must not show it in any of them.
func clientSecrets(cfg *clientcredentials.Config) []string {
	esc := url.QueryEscape(cfg.ClientSecret)
	basic := base64.StdEncoding.EncodeToString([]byte(url.QueryEscape(cfg.ClientID) + ":" + esc))
	out := []string{cfg.ClientSecret, basic}
	if esc != cfg.ClientSecret {
		out = append(out, esc)
	}
	return out
}

// addClientSecrets tells the redactor the client secret again: it is sent
// with every token request however long the worker runs, so it must stay
// redacted (RetainFor counts from the last Add).
func (s *oauth2Source) addClientSecrets() {
	for _, c := range *s.clientSecrets.Load() {
		s.r.Add(c)
	}
}

// checkOAuth2 validates the settings, naming fields as n says: as the
// user writes them.
func checkOAuth2(cfg *clientcredentials.Config, r Redactor, n Names) error {
	switch {
	case cfg == nil:
		return errors.New("credential: " + n.Of("OAuth2") + " is nil: set TokenURL, ClientID and ClientSecret")
	case r == nil:
		return errors.New("credential: NewOAuth2 needs a Redactor")
	}
	u, err := url.Parse(cfg.TokenURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("credential: %s %q is not an absolute http(s) URL: write the token endpoint's URL, e.g. https://api.example.com/v1/oauth2/token", n.Of("OAuth2.TokenURL"), cfg.TokenURL)
	}
	if u.User != nil {
		return fmt.Errorf("credential: %s holds user information: put the client's ID and secret in %s and %s", n.Of("OAuth2.TokenURL"), n.Of("OAuth2.ClientID"), n.Of("OAuth2.ClientSecret"))
	}
	if strings.TrimSpace(cfg.ClientID) == "" {
		return fmt.Errorf("credential: %s is empty: write the client ID the authorization server issued", n.Of("OAuth2.ClientID"))
	}
	if len(cfg.ClientSecret) < oauth2MinSecret {
		return fmt.Errorf("credential: %s is shorter than %d bytes: write the client secret the authorization server issued", n.Of("OAuth2.ClientSecret"), oauth2MinSecret)
	}
	return nil
}

// oauth2Source is NewOAuth2's Source and Refresher.
type oauth2Source struct {
	// cfg is the configuration, replaced (never changed) when SecretFile
	// holds a new secret.
	cfg    atomic.Pointer[clientcredentials.Config]
	client *http.Client
	r      Redactor
	// now is the clock of the token cache (time.Now, or the activity's:
	// UseClock).
	now func() time.Time
	// clientSecrets are the forms of the client secret in use
	// (clientSecrets).
	clientSecrets atomic.Pointer[[]string]
	// tlsNote is OAuth2Options.TLS.
	tlsNote string
	// secret is OAuth2Options.SecretFile, nil without one.
	secret *headerFiles
	// names is OAuth2Options.Names.
	names Names

	// cur is the token in use (nil before the first fetch); it is
	// replaced, never changed. Apply's fast path reads it without mu.
	cur atomic.Pointer[bearer]

	mu      sync.Mutex
	flight  *flight // the token request running, if any
	failure *Error  // the last fetch's error, answered until hold
	hold    time.Time
}

// bearer is one fetched token.
type bearer struct {
	token     string    // the access token
	header    string    // "Bearer <token>"
	refreshAt time.Time // zero: no expiry known
	expiresAt time.Time // zero: no expiry known
	stale     bool      // the API said invalid_token
}

// usable: it may be sent at now.
func (b *bearer) usable(now time.Time) bool {
	return b != nil && !b.stale && (b.expiresAt.IsZero() || now.Before(b.expiresAt))
}

// fresh: it may be sent without asking for a new one.
func (b *bearer) fresh(now time.Time) bool {
	return b.usable(now) && (b.refreshAt.IsZero() || now.Before(b.refreshAt))
}

// flight is one token request; done is closed when tok or err is set.
type flight struct {
	done chan struct{}
	tok  *bearer
	err  *Error
}

// Apply sets Authorization: Bearer with the current token, fetching one
// first when there is none or it has expired. The token and the client
// secret are told to the redactor again each time (a lookup for one it
// knows): a token without expires_in may be used for days, and RetainFor
// counts from the last Add.
func (s *oauth2Source) Apply(ctx context.Context, req *http.Request, _ []byte) error {
	s.addClientSecrets()
	b := s.cur.Load()
	if !b.fresh(s.now()) {
		var err error
		if b, err = s.token(ctx); err != nil {
			return err
		}
	}
	s.r.Add(b.token)
	req.Header.Set("Authorization", b.header)
	return nil
}

// UseClock makes the token cache read now (Clocked): a token's expiry and
// refresh time, and how long a failed token request is answered from
// memory. The client secret file is still looked at by the machine's
// clock.
func (s *oauth2Source) UseClock(now func() time.Time) { s.now = now }

// Refresh fetches a new token if the one sent is still the current one
// (many attempts refused with the same token cause one fetch), and reports
// whether a token other than the one sent may now be applied.
func (s *oauth2Source) Refresh(ctx context.Context, sent *http.Request) bool {
	h := sent.Header.Get("Authorization")
	s.mu.Lock()
	if b := s.cur.Load(); b != nil && b.header == h && !b.stale {
		c := *b
		c.stale = true
		s.cur.Store(&c)
	}
	s.mu.Unlock()
	b, err := s.token(ctx)
	return err == nil && b.header != h
}

// token returns a token that may be sent now: the current one if it is
// fresh; the current one while a new one is being fetched, if it has not
// expired; else the result of the fetch running, or of a new one. A
// failure is answered from memory until its hold ends.
func (s *oauth2Source) token(ctx context.Context) (*bearer, error) {
	s.mu.Lock()
	now := s.now()
	b := s.cur.Load()
	if b.fresh(now) {
		s.mu.Unlock()
		return b, nil
	}
	if s.failure != nil && now.Before(s.hold) && (s.failure.Retryable || !s.secretRotated()) {
		err := *s.failure
		if err.RetryAfter > 0 {
			err.RetryAfter = s.hold.Sub(now) // what is left of it
		}
		s.mu.Unlock()
		if b.usable(now) {
			return b, nil
		}
		return nil, &err
	}
	f := s.flight
	if f == nil {
		f = &flight{done: make(chan struct{})}
		s.flight = f
		go s.fetch(ctx, f)
	}
	s.mu.Unlock()
	if b.usable(now) {
		return b, nil // refreshed before expiry, in the background
	}
	select {
	case <-f.done:
		if f.err != nil {
			err := *f.err
			return nil, &err
		}
		return f.tok, nil
	case <-ctx.Done():
		return nil, &Error{Scheme: "oauth2", Retryable: true, Err: fmt.Errorf("waiting for a token from the token endpoint: %w", ctx.Err())}
	}
}

// fetchContext is the token request's context: the caller's values and
// deadline, not its cancellation, since the request serves every attempt
// waiting for it (each waits until its own deadline at most). The
// deadline is kept between oauth2MinFetch and oauth2FetchTimeout away:
// attempts shorter than the token endpoint's answer would otherwise each
// start a request that never ends in time.
func fetchContext(ctx context.Context) (context.Context, context.CancelFunc) {
	d := oauth2FetchTimeout
	if dl, ok := ctx.Deadline(); ok {
		d = min(max(time.Until(dl), oauth2MinFetch), oauth2FetchTimeout)
	}
	return context.WithTimeout(context.WithoutCancel(ctx), d)
}

// fetch runs flight f for the attempt whose ctx started it: one token
// request, then publishes its result.
func (s *oauth2Source) fetch(ctx context.Context, f *flight) {
	ctx, cancel := fetchContext(ctx)
	defer cancel()
	start := s.now()
	cfg := s.config()
	s.addClientSecrets()
	tok, err := cfg.Token(context.WithValue(ctx, oauth2.HTTPClient, s.client))
	var b *bearer
	var e *Error
	if err != nil {
		e = s.oauth2Error(err, start)
		if s.tlsNote != "" {
			e.Err = fmt.Errorf("%w; %s", e.Err, s.tlsNote)
		}
	} else {
		b, e = s.accept(tok, start)
	}
	s.mu.Lock()
	f.tok, f.err = b, e
	if e != nil {
		s.failure, s.hold = e, start.Add(hold(e))
	} else {
		s.failure = nil
		s.cur.Store(b)
	}
	s.flight = nil
	s.mu.Unlock()
	close(f.done)
}

// hold is how long failure e is answered from memory.
func hold(e *Error) time.Duration {
	switch {
	case e.RetryAfter > 0:
		return min(e.RetryAfter, oauth2MaxHold)
	case e.Retryable:
		return oauth2RetryHold
	}
	return oauth2RefusedHold
}

// accept checks a token the endpoint issued at start, tells the redactor,
// and returns it with its refresh time.
func (s *oauth2Source) accept(tok *oauth2.Token, start time.Time) (*bearer, *Error) {
	s.r.Add(tok.AccessToken)
	if tok.RefreshToken != "" {
		s.r.Add(tok.RefreshToken)
	}
	if len(tok.AccessToken) < MinSecretBytes {
		// Never quoted: it could not be redacted.
		return nil, &Error{Scheme: "oauth2", Err: fmt.Errorf("the token endpoint issued an access token of %d bytes, shorter than %d: it could not be redacted from results and logs, so it is not sent; check %s", len(tok.AccessToken), MinSecretBytes, s.names.Of("OAuth2.TokenURL"))}
	}
	if err := httpheader.CheckValue("Authorization", "Bearer "+tok.AccessToken); err != nil {
		// Never quoted: net/http would refuse every request carrying it.
		return nil, &Error{Scheme: "oauth2", Err: fmt.Errorf("the token endpoint issued an access token that no request can carry (%w), so it is not sent; check %s", err, s.names.Of("OAuth2.TokenURL"))}
	}
	if tok.TokenType != "" && !strings.EqualFold(tok.TokenType, "Bearer") {
		return nil, &Error{Scheme: "oauth2", Err: fmt.Errorf("the token endpoint issued a token of type %q; only Bearer tokens are supported: configure the client at the authorization server for Bearer tokens", short(tok.TokenType))}
	}
	b := &bearer{token: tok.AccessToken, header: "Bearer " + tok.AccessToken}
	if !tok.Expiry.IsZero() {
		// Expiry was computed by the oauth2 package from expires_in
		// (whole seconds) with the wall clock; anchor it on ours.
		// The server counts from its own clock, often in whole seconds
		// (iat floored): refresh at least a second early, unless the
		// lifetime is that short.
		life := time.Until(tok.Expiry).Round(time.Second)
		early := max(min(oauth2Early, life/10), min(time.Second, life/2))
		b.expiresAt = start.Add(life)
		b.refreshAt = b.expiresAt.Add(-early)
	}
	return b, nil
}

// oauth2Error maps a failed token request to an *Error: retryable when
// the endpoint could not be reached or answered 5xx or 429, final when it
// refused the client. It holds the endpoint's error code and description,
// never its body. Its errors name the settings as s.names says.
func (s *oauth2Source) oauth2Error(err error, start time.Time) *Error {
	n := s.names
	tokenURL := n.Of("OAuth2.TokenURL")
	e := &Error{Scheme: "oauth2"}
	var re *oauth2.RetrieveError
	if !errors.As(err, &re) {
		if refused(err) {
			// Final: the same certificate would be refused again.
			e.Err = fmt.Errorf("the token endpoint (%s) refused the client certificate in the TLS handshake (%s): it wants a client certificate it trusts; check the one its token requests present (%s, else the origin's %s)", tokenURL, refusalReason(err), n.Of("TokenTLS"), n.Of("CertFile"))
			return e
		}
		if VerifyError(err) != nil {
			// Final: the same settings would fail again.
			e.Err = fmt.Errorf("the token endpoint's (%s) certificate could not be verified: %v: trust the CA that issued it (%s) or fix the endpoint's certificate", tokenURL, VerifyError(err), n.Of("TokenTLS.CAFile"))
			return e
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			e.Retryable = true
			e.Err = fmt.Errorf("the token endpoint (%s) could not be reached: %w", tokenURL, ue.Err)
			return e
		}
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			e.Retryable = true
			e.Err = fmt.Errorf("the token endpoint (%s) did not answer in time: %w", tokenURL, err)
			return e
		}
		// A 2xx answer that is not a token response (not JSON, or no
		// access_token): the URL is not a token endpoint.
		e.Err = errors.New("the token endpoint's answer is not an OAuth 2.0 token response (RFC 6749 §5.1): check " + tokenURL)
		return e
	}
	if re.Response != nil {
		e.Status = re.Response.StatusCode
	}
	what := "the token endpoint answered"
	if e.Status != 0 {
		what += fmt.Sprintf(" HTTP %d", e.Status)
	}
	if re.ErrorCode != "" {
		what += fmt.Sprintf(" %s", short(re.ErrorCode))
		if re.ErrorDescription != "" {
			what += fmt.Sprintf(" (%s)", short(re.ErrorDescription))
		}
	}
	switch {
	case e.Status == http.StatusTooManyRequests || e.Status >= 500:
		e.Retryable = true
		if re.Response != nil {
			e.RetryAfter, _ = backoff.RetryAfter(re.Response.Header.Get("Retry-After"), start)
		}
		e.Err = errors.New(what + ": the authorization server is unavailable; the attempt may be retried")
	case e.Status >= 300 && e.Status <= 399:
		e.Err = errors.New(what + ": a redirect, which is not followed (it would carry the client secret elsewhere): write the final URL in " + tokenURL)
	case re.ErrorCode == "invalid_scope":
		e.Err = errors.New(what + ": check " + n.Of("OAuth2.Scopes") + " against the scopes the client may ask for")
	case re.ErrorCode == "unauthorized_client" || re.ErrorCode == "unsupported_grant_type":
		e.Err = errors.New(what + ": the authorization server does not allow this client the client_credentials grant; enable it for " + n.Of("OAuth2.ClientID"))
	case re.ErrorCode == "invalid_request":
		e.Err = errors.New(what + ": check " + n.Of("OAuth2.EndpointParams") + " and " + n.Of("OAuth2.AuthStyle"))
	default: // invalid_client, 401, 403, other 4xx
		secret := n.Of("OAuth2.ClientSecret")
		if s.secret != nil {
			secret = n.Of("ClientSecretFile")
		}
		e.Err = errors.New(what + ": the client was refused; check " + n.Of("OAuth2.ClientID") + " and " + secret + ": the client may have been revoked, or its secret rotated")
	}
	return e
}

// short keeps server text short and printable in an error.
func short(s string) string {
	const max = 120
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	if len(s) > max {
		s = s[:max] + "…"
	}
	return s
}

// VerifyError is the error in err of a failed verification of a server's
// certificate (an unknown authority, another host name, an expired or
// invalid certificate), or nil: the one rule, for the token endpoint and
// the activity's classification of an origin's answer.
func VerifyError(err error) error {
	var (
		verr *tls.CertificateVerificationError
		uerr x509.UnknownAuthorityError
		herr x509.HostnameError
		cerr x509.CertificateInvalidError
	)
	switch {
	case errors.As(err, &verr):
		return verr
	case errors.As(err, &uerr):
		return uerr
	case errors.As(err, &herr):
		return herr
	case errors.As(err, &cerr):
		return cerr
	}
	return nil
}
