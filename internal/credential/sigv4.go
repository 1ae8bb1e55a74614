package credential

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials/processcreds"
	"github.com/aws/smithy-go/logging"
)

// renewBefore is how long before its expiry a temporary credential is
// renewed (aws.CredentialsCacheOptions.ExpiryWindow): an attempt never
// signs with a session token about to lapse in flight.
const renewBefore = 5 * time.Minute

// emptyHash is the SHA-256 of no bytes, the payload hash of a request
// without a body.
const emptyHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// noCredentialsHint says what to set when the default chain finds
// nothing; creds names the setting of the credentials provider
// ("Credential.SigV4.Credentials").
func noCredentialsHint(creds string) string {
	return "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for temporary credentials) in the worker's environment, or AWS_PROFILE to a profile of ~/.aws/credentials or ~/.aws/config, or " + creds
}

// sigV4 signs each request with AWS Signature Version 4 (see NewSigV4).
type sigV4 struct {
	service, region string
	creds           *aws.CredentialsCache
	defaultChain    bool // creds is the SDK's default chain (the hint to give)
	signer          *v4.Signer
	r               Redactor
	now             func() time.Time // the signing time: time.Now, or the activity's clock (UseClock)
	names           Names
}

// NewSigV4 returns a Source that signs every request with AWS Signature
// Version 4 for service and region, with AWS's own signer
// (aws-sdk-go-v2/aws/signer/v4), over the SHA-256 of the exact body bytes
// sent. p provides the credentials; nil is the AWS SDK's default chain
// (the environment's AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and
// AWS_SESSION_TOKEN, the shared profile AWS_PROFILE names, SSO, web
// identity, the container's or instance's role). Credentials are retrieved
// per Apply through an aws.CredentialsCache, renewed 5 minutes before they
// expire.
//
// Apply sets X-Amz-Date, X-Amz-Security-Token (session credentials), for
// service "s3" X-Amz-Content-Sha256 (as S3 requires), and Authorization:
// SigV4 replaces any Authorization header set before (a static one is
// neither signed over nor sent). Every other header of the request is
// signed over except User-Agent, Expect, Transfer-Encoding and
// X-Amzn-Trace-Id, so a header changed after Apply (by a proxy or a
// RoundTripper) breaks the signature.
//
// The secret access key and the session token are given to r before they
// are used. The access key ID is not secret (AWS logs it, and it travels in
// the clear in every Authorization header), and neither is the signature:
// it is a MAC of one request valid for 15 minutes, from which the key
// cannot be recovered; adding one per request would grow the redactor
// without bound.
//
// Its errors name the settings as n says.
func NewSigV4(service, region string, p aws.CredentialsProvider, r Redactor, n Names) (Source, error) {
	if service == "" {
		return nil, &Error{Scheme: "sigv4", Err: errors.New(n.Of("SigV4.Service") + ` is empty: set the signing name of the service ("execute-api" for API Gateway, "lambda" for a function URL, "s3", …)`)}
	}
	if region == "" {
		return nil, &Error{Scheme: "sigv4", Err: errors.New(n.Of("SigV4.Region") + ` is empty: set the region of the endpoint ("eu-west-1", …)`)}
	}
	if r == nil {
		return nil, &Error{Scheme: "sigv4", Err: errors.New("no Redactor: the secret key could not be redacted")}
	}
	s := &sigV4{service: service, region: region, r: r, now: time.Now, names: n}
	if p == nil {
		// The SDK's own log lines (IMDS fallbacks, …) would bypass the
		// worker's redacting logger: silenced; its errors say the same.
		cfg, err := config.LoadDefaultConfig(context.Background(), config.WithLogger(logging.Nop{}))
		if err != nil {
			return nil, &Error{Scheme: "sigv4", Err: fmt.Errorf("loading the AWS SDK's default configuration: %w; check AWS_PROFILE and ~/.aws/config, or set %s", err, n.Of("SigV4.Credentials"))}
		}
		p, s.defaultChain = cfg.Credentials, true
		if p == nil {
			return nil, &Error{Scheme: "sigv4", Err: errors.New("no AWS credentials found: " + noCredentialsHint(n.Of("SigV4.Credentials")))}
		}
	}
	s.creds = aws.NewCredentialsCache(p, func(o *aws.CredentialsCacheOptions) { o.ExpiryWindow = renewBefore })
	s.signer = v4.NewSigner(func(o *v4.SignerOptions) {
		// S3 signs the path as sent; every other service escapes it again.
		o.DisableURIPathEscaping = service == "s3"
	})
	return s, nil
}

// UseClock dates the requests signed from now on by now (Clocked): the
// API checks the date against its own clock. The credentials' expiry is
// still checked by the machine's clock, as the AWS SDK's cache does.
func (s *sigV4) UseClock(now func() time.Time) { s.now = now }

// Apply signs req with the current credentials.
func (s *sigV4) Apply(ctx context.Context, req *http.Request, body []byte) error {
	c, err := s.credentials(ctx)
	if err != nil {
		return err
	}
	s.r.Add(c.SecretAccessKey)
	if c.SessionToken != "" {
		s.r.Add(c.SessionToken)
	}
	hash := emptyHash
	if len(body) > 0 {
		sum := sha256.Sum256(body)
		hash = hex.EncodeToString(sum[:])
	}
	// A request applied before (or a static header) must not carry a
	// stale signature, date or token into this one.
	for _, h := range []string{"Authorization", "X-Amz-Date", "X-Amz-Security-Token", "X-Amz-Content-Sha256"} {
		req.Header.Del(h)
	}
	if s.service == "s3" {
		req.Header.Set("X-Amz-Content-Sha256", hash)
	}
	if err := s.signer.SignHTTP(ctx, c, req, hash, s.service, s.region, s.now().UTC()); err != nil {
		return &Error{Scheme: "sigv4", Err: fmt.Errorf("signing the request: %w", err)}
	}
	return nil
}

// credentials returns the cached credentials, renewed when due, or an
// *Error that says what to do.
func (s *sigV4) credentials(ctx context.Context) (aws.Credentials, error) {
	c, err := s.creds.Retrieve(ctx)
	if err != nil {
		hint := "check the provider set in " + s.names.Of("SigV4.Credentials")
		if s.defaultChain {
			hint = noCredentialsHint(s.names.Of("SigV4.Credentials"))
		}
		var pe *processcreds.ProviderError
		if errors.As(err, &pe) && strings.Contains(pe.Error(), "process output") {
			// The SDK quotes the process's whole output, keys and all,
			// which the redactor cannot know yet: withheld.
			return aws.Credentials{}, &Error{Scheme: "sigv4", Retryable: retryable(ctx, err), Err: errors.New("retrieving AWS credentials: the credential_process of the AWS profile printed no valid credentials JSON (its output is withheld: it may hold the secret key); run the process by hand and fix its output, or " + hint)}
		}
		return aws.Credentials{}, &Error{Scheme: "sigv4", Retryable: retryable(ctx, err), Err: fmt.Errorf("retrieving AWS credentials: %w; %s", err, hint)}
	}
	if c.AccessKeyID == "" || c.SecretAccessKey == "" {
		return aws.Credentials{}, &Error{Scheme: "sigv4", Err: errors.New("the AWS credentials provider returned no access key: " + noCredentialsHint(s.names.Of("SigV4.Credentials")))}
	}
	// The cache moved Expires renewBefore earlier; the credentials
	// themselves lapse renewBefore later.
	if c.CanExpire && !c.Expires.Add(renewBefore).After(time.Now()) {
		s.creds.Invalidate()
		return aws.Credentials{}, &Error{Scheme: "sigv4", Retryable: true, Err: fmt.Errorf("the AWS credentials provider returned credentials (access key %s) that expired at %s: renew them at their source (the profile's SSO login, the role, the file AWS_SHARED_CREDENTIALS_FILE names)", c.AccessKeyID, c.Expires.Add(renewBefore).UTC().Format(time.RFC3339))}
	}
	return c, nil
}

// retryable reports whether asking the provider again may help: it says
// so (the SDK's RetryableError), or it could not be reached.
func retryable(ctx context.Context, err error) bool {
	var re interface{ RetryableError() bool }
	if errors.As(err, &re) {
		return re.RetryableError()
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	var status interface{ HTTPStatusCode() int }
	if errors.As(err, &status) {
		code := status.HTTPStatusCode()
		return code == http.StatusTooManyRequests || code >= 500
	}
	return ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded)
}
