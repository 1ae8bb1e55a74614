package testsuite

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/idemhttp/temporal-idempotent-http/internal/keyplace"
)

const (
	// tokenPath is the client-credentials token endpoint served with
	// Options.OAuthClients.
	tokenPath = "/oauth/token"
	// defaultTokenLifetime is Options.OAuthTokenLifetime's default.
	defaultTokenLifetime = time.Hour
	// sigV4Skew is how far X-Amz-Date may be from the server's clock, as AWS allows.
	sigV4Skew = 5 * time.Minute
	// realm is the realm of the server's WWW-Authenticate challenges.
	realm = `realm="testsuite"`
)

// token is an access token the server issued.
type token struct {
	client  string
	expires time.Time
}

// Validate reports settings that cannot work together: the key place of
// the Dialect (Dialect.KeyIn), CutRate, the path of Lookup, the paths and state of Async, the webhooks'
// (Webhooks.Validate) and the credential scheme's. NewServer panics with
// its error.
func (o Options) Validate() error {
	if err := o.Dialect.validate(); err != nil {
		return err
	}
	if !(o.CutRate >= 0 && o.CutRate <= 1) { // NaN too
		return fmt.Errorf("testsuite: Options.CutRate %v: want a fraction in [0, 1]", o.CutRate)
	}
	if o.Lookup != "" {
		if _, err := keyplace.Parse("body:" + o.Lookup); err != nil {
			return fmt.Errorf("testsuite: Options.Lookup %q: want a dotted path of body member names, e.g. metadata.ref: %w", o.Lookup, err)
		}
	}
	if a := o.Async; a != nil {
		if err := a.validate(); err != nil {
			return err
		}
	}
	if w := o.Webhooks; w != nil && o.Async == nil {
		if err := w.Validate(); err != nil {
			return err
		}
	}
	if err := o.validateOAuth(); err != nil {
		return err
	}
	if o.ClientCAs != nil && o.TLSCertificate == nil {
		return errors.New("testsuite: Options.ClientCAs needs Options.TLSCertificate, the certificate the server presents")
	}
	if o.TLSCertificate != nil && len(o.TLSCertificate.Certificate) == 0 {
		return errors.New("testsuite: Options.TLSCertificate has no certificate: load it with tls.LoadX509KeyPair or tls.X509KeyPair")
	}
	return o.validateSigV4()
}

// validateOAuth checks OAuthClients and OAuthTokenLifetime.
func (o Options) validateOAuth() error {
	switch {
	case o.OAuthTokenLifetime < 0:
		return fmt.Errorf("testsuite: Options.OAuthTokenLifetime %v: want 0 (1 hour) or more", o.OAuthTokenLifetime)
	case o.OAuthTokenLifetime > 0 && o.OAuthClients == nil:
		return errors.New("testsuite: Options.OAuthTokenLifetime without Options.OAuthClients: set the clients (client ID to client secret) that may get tokens")
	case o.OAuthClients != nil && o.SigV4Credentials != nil:
		return errors.New("testsuite: Options.OAuthClients and Options.SigV4Credentials both take the Authorization header: require one of them")
	}
	for id, secret := range o.OAuthClients {
		if id == "" || secret == "" {
			return fmt.Errorf("testsuite: Options.OAuthClients[%q]: want a non-empty client ID and client secret", id)
		}
	}
	return nil
}

// validateSigV4 checks SigV4Credentials, SigV4Service and SigV4Region.
func (o Options) validateSigV4() error {
	c := o.SigV4Credentials
	switch {
	case c == nil && (o.SigV4Service != "" || o.SigV4Region != ""):
		return errors.New("testsuite: Options.SigV4Service or SigV4Region without Options.SigV4Credentials: set the access key the requests must be signed with")
	case c == nil:
		return nil
	case c.AccessKeyID == "" || c.SecretAccessKey == "":
		return errors.New("testsuite: Options.SigV4Credentials: want both AccessKeyID and SecretAccessKey")
	case o.SigV4Service == "":
		return errors.New("testsuite: Options.SigV4Credentials without Options.SigV4Service: set the service the requests are signed for, e.g. execute-api")
	case o.SigV4Region == "":
		return errors.New("testsuite: Options.SigV4Credentials without Options.SigV4Region: set the region the requests are signed for, e.g. eu-west-1")
	}
	return nil
}

// TLSConfig is the server side of TLS with Options.TLSCertificate: the
// certificate, and, with Options.ClientCAs, client certificates required
// and verified against them. It is nil without TLSCertificate. StartServer
// serves it; give it to an http.Server that serves NewServer's handler.
func (s *Server) TLSConfig() *tls.Config {
	if s.opts.TLSCertificate == nil {
		return nil
	}
	c := &tls.Config{Certificates: []tls.Certificate{*s.opts.TLSCertificate}, MinVersion: tls.VersionTLS12}
	if s.opts.ClientCAs != nil {
		c.ClientAuth, c.ClientCAs = tls.RequireAndVerifyClientCert, s.opts.ClientCAs
	}
	return c
}

// RevokeClient revokes the OAuth client id (Options.OAuthClients): from now
// on the token endpoint answers it 401 invalid_client and the tokens it was
// issued are answered 401 invalid_token, as when an authorization server's
// administrator disables a client mid-run.
func (s *Server) RevokeClient(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.revoked == nil {
		s.revoked = map[string]bool{}
	}
	s.revoked[id] = true
	for k, t := range s.tokens {
		if t.client == id {
			delete(s.tokens, k)
		}
	}
}

// guarded reports whether the Options require a credential scheme, which
// every request but GET /stats, GET /healthz and the token endpoint's needs.
func (s *Server) guarded() bool {
	return s.opts.OAuthClients != nil || s.opts.SigV4Credentials != nil || s.opts.ClientCAs != nil
}

// authorize checks r against the credential scheme Options require. It
// reads the body and puts it back in r. A refused request is counted,
// logged and answered here, and authorize returns false.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request) bool {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	r.Body = io.NopCloser(bytes.NewReader(body))
	var a response
	var refused bool
	switch {
	case err != nil:
		return true // read answers it
	case !s.certified(r):
		a, refused = jsonError(http.StatusForbidden, "a client certificate signed by one of Options.ClientCAs is required"), true
	case s.opts.SigV4Credentials != nil:
		a, refused = s.verifySigV4(r, body)
	case s.opts.OAuthClients != nil:
		a, refused = s.verifyBearer(r)
	}
	if !refused {
		return true
	}
	key, keyErr := s.readKey(r, body)
	s.mu.Lock()
	s.stats.Requests++
	s.stats.Unauthorized++
	if key != "" && keyErr == nil {
		s.see(key)
	}
	if len(s.log) < maxLog {
		s.log = append(s.log, RequestLog{Time: s.now(), IdempotencyKey: key, Status: a.status, Authorization: r.Header.Get("Authorization") != ""})
	}
	s.mu.Unlock()
	a.write(w, Dialect{})
	return false
}

// verifyBearer checks r's bearer token (RFC 6750 §2.1): refused is true,
// with a 401 and its challenge (§3), when it is missing or not a live
// token of the token endpoint.
func (s *Server) verifyBearer(r *http.Request) (a response, refused bool) {
	scheme, tok, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	if !strings.EqualFold(scheme, "Bearer") || tok == "" {
		a = jsonError(http.StatusUnauthorized, "a bearer token from POST "+tokenPath+" is required")
		a.header = http.Header{"Www-Authenticate": {"Bearer " + realm}}
		return a, true
	}
	now := s.now()
	s.mu.Lock()
	t, ok := s.tokens[tok]
	s.mu.Unlock()
	switch {
	case !ok:
		return invalidToken("The access token is not one this server issued, or its client was revoked"), true
	case !now.Before(t.expires):
		return invalidToken("The access token expired"), true
	}
	return response{}, false
}

// certified reports whether r came with a verified client certificate,
// or Options.ClientCAs does not require one.
func (s *Server) certified(r *http.Request) bool {
	return s.opts.ClientCAs == nil || r.TLS != nil && len(r.TLS.VerifiedChains) > 0
}

// invalidToken is RFC 6750's answer to an unknown or expired token.
func invalidToken(desc string) response {
	b, _ := json.Marshal(map[string]string{"error": "invalid_token", "error_description": desc})
	return response{
		status: http.StatusUnauthorized, ctype: "application/json", body: append(b, '\n'),
		header: http.Header{"Www-Authenticate": {"Bearer " + realm + `, error="invalid_token", error_description="` + desc + `"`}},
	}
}

// serveToken is the client-credentials token endpoint (RFC 6749 §4.4):
// a client of Options.OAuthClients, authenticated by HTTP Basic or by
// client_id and client_secret in the body (§2.3.1), gets a bearer token
// (§5.1); anything else gets an error (§5.2).
func (s *Server) serveToken(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.stats.TokenRequests++
	s.mu.Unlock()
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Pragma", "no-cache")
	if !s.certified(r) {
		jsonError(http.StatusForbidden, "a client certificate signed by one of Options.ClientCAs is required").write(w, Dialect{})
		return
	}
	if r.Method != http.MethodPost || r.ParseForm() != nil {
		oauthError(w, http.StatusBadRequest, "invalid_request", "POST a form (application/x-www-form-urlencoded)")
		return
	}
	id, secret, basic := r.BasicAuth()
	if basic {
		id, _ = url.QueryUnescape(id)
		secret, _ = url.QueryUnescape(secret)
		if r.PostForm.Has("client_secret") {
			oauthError(w, http.StatusBadRequest, "invalid_request", "authenticate the client one way: HTTP Basic or the body, not both")
			return
		}
	} else {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	switch gt := r.PostForm.Get("grant_type"); gt {
	case "client_credentials":
	case "":
		oauthError(w, http.StatusBadRequest, "invalid_request", "grant_type is missing")
		return
	default:
		oauthError(w, http.StatusBadRequest, "unsupported_grant_type", "only client_credentials is supported")
		return
	}
	tok, lifetime, ok := s.issue(id, secret)
	if !ok {
		if basic {
			w.Header().Set("WWW-Authenticate", "Basic "+realm)
		}
		oauthError(w, http.StatusUnauthorized, "invalid_client", "unknown client, wrong secret or revoked client")
		return
	}
	b, _ := json.Marshal(map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": int((lifetime + time.Second - 1) / time.Second)})
	write(w, http.StatusOK, "application/json", append(b, '\n'))
}

// issue returns a new token for the client id if secret is its secret
// and it is not revoked, and its lifetime.
func (s *Server) issue(id, secret string) (string, time.Duration, bool) {
	want, known := s.opts.OAuthClients[id]
	// Compare anyway, so that an unknown client takes as long as a known one.
	match := subtle.ConstantTimeCompare([]byte(secret), []byte(want)) == 1
	lifetime := s.opts.OAuthTokenLifetime
	if lifetime == 0 {
		lifetime = defaultTokenLifetime
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !known || !match || s.revoked[id] {
		return "", 0, false
	}
	var raw [32]byte
	_, _ = rand.Read(raw[:])
	tok := base64.RawURLEncoding.EncodeToString(raw[:])
	if s.tokens == nil {
		s.tokens = map[string]token{}
	}
	if len(s.tokens) >= 64 {
		for k, t := range s.tokens {
			if !now.Before(t.expires) {
				delete(s.tokens, k)
			}
		}
	}
	s.tokens[tok] = token{client: id, expires: now.Add(lifetime)}
	return tok, lifetime, true
}

// oauthError writes an RFC 6749 §5.2 error.
func oauthError(w http.ResponseWriter, status int, code, desc string) {
	b, _ := json.Marshal(map[string]string{"error": code, "error_description": desc})
	write(w, status, "application/json", append(b, '\n'))
}

// sigV4Auth is the Authorization header of a Signature V4 request.
type sigV4Auth struct {
	accessKey, date, region, service string
	signedHeaders, signature         string
}

// parseSigV4 reads "AWS4-HMAC-SHA256 Credential=AKID/DATE/REGION/SERVICE/aws4_request,
// SignedHeaders=a;b, Signature=hex".
func parseSigV4(h string) (sigV4Auth, bool) {
	rest, ok := strings.CutPrefix(h, "AWS4-HMAC-SHA256 ")
	if !ok {
		return sigV4Auth{}, false
	}
	var a sigV4Auth
	var cred string
	for part := range strings.SplitSeq(rest, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "Credential":
			cred = v
		case "SignedHeaders":
			a.signedHeaders = v
		case "Signature":
			a.signature = v
		}
	}
	scope := strings.Split(cred, "/")
	if len(scope) != 5 || scope[4] != "aws4_request" || a.signedHeaders == "" || a.signature == "" {
		return sigV4Auth{}, false
	}
	a.accessKey, a.date, a.region, a.service = scope[0], scope[1], scope[2], scope[3]
	return a, true
}

// verifySigV4 checks r's Signature V4 by signing the same request again
// with AWS's Go signer: the method, path, query, the headers it names as
// signed and the SHA-256 of the body received. refused is true, with a
// 403 in the style of AWS, when the signature, the key, the scope or the
// session token do not match, or X-Amz-Date is more than 5 minutes off.
func (s *Server) verifySigV4(r *http.Request, body []byte) (a response, refused bool) {
	want := *s.opts.SigV4Credentials
	auth, ok := parseSigV4(r.Header.Get("Authorization"))
	if !ok {
		return awsError("MissingAuthenticationTokenException", "Missing Authentication Token: sign the request with AWS Signature Version 4"), true
	}
	if subtle.ConstantTimeCompare([]byte(auth.accessKey), []byte(want.AccessKeyID)) != 1 ||
		subtle.ConstantTimeCompare([]byte(r.Header.Get("X-Amz-Security-Token")), []byte(want.SessionToken)) != 1 {
		return awsError("UnrecognizedClientException", "The security token included in the request is invalid."), true
	}
	at, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	switch {
	case err != nil:
		return awsError("InvalidSignatureException", "X-Amz-Date is missing or not in the form 20060102T150405Z"), true
	case auth.date != at.Format("20060102") || auth.region != s.opts.SigV4Region || auth.service != s.opts.SigV4Service:
		return awsError("InvalidSignatureException", fmt.Sprintf("Credential should be scoped to the date of X-Amz-Date, region %s and service %s", s.opts.SigV4Region, s.opts.SigV4Service)), true
	}
	if now := s.now(); at.Before(now.Add(-sigV4Skew)) || at.After(now.Add(sigV4Skew)) {
		return awsError("InvalidSignatureException", "Signature expired: X-Amz-Date is more than 5 minutes from the server's time"), true
	}
	sig, err := resign(r, body, auth.signedHeaders, want, s.opts.SigV4Service, s.opts.SigV4Region, at)
	if err != nil || subtle.ConstantTimeCompare([]byte(sig), []byte(auth.signedHeaders+"/"+auth.signature)) != 1 {
		return awsError("InvalidSignatureException", "The request signature we calculated does not match the signature you provided."), true
	}
	return response{}, false
}

// resign signs a copy of r made of its method, URL, the headers signed
// names and body, and returns "signed headers/signature".
func resign(r *http.Request, body []byte, signed string, creds aws.Credentials, service, region string, at time.Time) (string, error) {
	u := *r.URL
	u.Scheme, u.Host = "http", r.Host
	if r.TLS != nil {
		u.Scheme = "https" // the signer drops a default port by the scheme, as the client's did
	}
	c, err := http.NewRequestWithContext(context.Background(), r.Method, u.String(), nil)
	if err != nil {
		return "", err
	}
	c.Host = r.Host
	for name := range strings.SplitSeq(signed, ";") {
		switch name {
		case "host":
		case "content-length":
			c.ContentLength = int64(len(body))
		default:
			if vs := r.Header.Values(name); vs != nil {
				c.Header[http.CanonicalHeaderKey(name)] = vs
			}
		}
	}
	sum := sha256.Sum256(body)
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, c, hex.EncodeToString(sum[:]), service, region, at); err != nil {
		return "", err
	}
	got, ok := parseSigV4(c.Header.Get("Authorization"))
	if !ok {
		return "", errors.New("the signer wrote no Authorization header")
	}
	return got.signedHeaders + "/" + got.signature, nil
}

// awsError is a 403 in the style of AWS's JSON APIs (API Gateway, Lambda):
// the error type in X-Amzn-ErrorType and in the body's __type.
func awsError(typ, msg string) response {
	b, _ := json.Marshal(map[string]string{"__type": typ, "message": msg})
	return response{
		status: http.StatusForbidden, ctype: "application/json", body: append(b, '\n'),
		header: http.Header{"X-Amzn-Errortype": {typ}},
	}
}
