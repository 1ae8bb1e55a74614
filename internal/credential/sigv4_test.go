package credential

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

// The credentials and time of AWS's published Signature V4 test suite
// (aws-sig-v4-test-suite: get-vanilla, post-vanilla, …).
const (
	suiteKeyID  = "AKIDEXAMPLE"
	suiteSecret = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
	suiteToken  = "AQoDYXdzEPT//////////wEXAMPLEtc764bNrC9SAPBSM22wDOk4x4HIZ8j4FZTwdQWLWsKWHGBuFqwAeMicRXmxfpSPfIeoIYRqTflfKD8YUuwthAx7mSEI"
)

var suiteTime = time.Date(2015, 8, 30, 12, 36, 0, 0, time.UTC)

// sigRedactor records the secrets added to it.
type sigRedactor struct {
	mu    sync.Mutex
	added []string
}

func (r *sigRedactor) Add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.added = append(r.added, s)
}

func (r *sigRedactor) has(s string) bool { return r.count(s) > 0 }

// count is how many times s was added.
func (r *sigRedactor) count(s string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, a := range r.added {
		if a == s {
			n++
		}
	}
	return n
}

// v4Provider returns credentials that expire after lifetime (never
// when 0), or err, and counts its calls.
type v4Provider struct {
	calls    atomic.Int32
	lifetime time.Duration
	token    string
	err      error
}

func (p *v4Provider) Retrieve(context.Context) (aws.Credentials, error) {
	n := p.calls.Add(1)
	if p.err != nil {
		return aws.Credentials{}, p.err
	}
	c := aws.Credentials{AccessKeyID: suiteKeyID, SecretAccessKey: suiteSecret, SessionToken: p.token, Source: "test"}
	if p.token != "" {
		c.SessionToken = p.token + string(rune('0'+n))
	}
	if p.lifetime != 0 {
		c.CanExpire, c.Expires = true, time.Now().Add(p.lifetime)
	}
	return c, nil
}

func newSuiteSigner(t *testing.T, service string, p aws.CredentialsProvider, r Redactor) *sigV4 {
	t.Helper()
	src, err := NewSigV4(service, "us-east-1", p, r, Names{})
	if err != nil {
		t.Fatal(err)
	}
	s := src.(*sigV4)
	s.UseClock(func() time.Time { return suiteTime })
	return s
}

func v4Request(t *testing.T, method, url string, body []byte, header map[string]string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	// The suite's requests carry no Content-Length header: unsigned.
	req.ContentLength = 0
	for k, v := range header {
		req.Header.Set(k, v)
	}
	return req
}

func TestSigV4SuiteVectors(t *testing.T) {
	static := credentials.NewStaticCredentialsProvider(suiteKeyID, suiteSecret, "")
	for _, tc := range []struct {
		name, method, url, body, signedHeaders, signature string
		header                                            map[string]string
	}{
		{name: "get-vanilla", method: "GET", url: "https://example.amazonaws.com/", signedHeaders: "host;x-amz-date", signature: "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"},
		{name: "post-vanilla", method: "POST", url: "https://example.amazonaws.com/", signedHeaders: "host;x-amz-date", signature: "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b"},
		{name: "get-vanilla-query-order-key-case", method: "GET", url: "https://example.amazonaws.com/?Param2=value2&Param1=value1", signedHeaders: "host;x-amz-date", signature: "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500"},
		{name: "post-x-www-form-urlencoded", method: "POST", url: "https://example.amazonaws.com/", body: "Param1=value1", header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, signedHeaders: "content-type;host;x-amz-date", signature: "ff11897932ad3f4e8b18135d722051e5ac45fc38421b1da7b9d196a0fe09473a"},
		// A static Authorization set before is replaced, not signed over.
		{name: "get-vanilla with a static Authorization", method: "GET", url: "https://example.amazonaws.com/", header: map[string]string{"Authorization": "Bearer sk_live_static"}, signedHeaders: "host;x-amz-date", signature: "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSuiteSigner(t, "service", static, &sigRedactor{})
			var body []byte
			if tc.body != "" {
				body = []byte(tc.body)
			}
			req := v4Request(t, tc.method, tc.url, body, tc.header)
			if err := s.Apply(context.Background(), req, body); err != nil {
				t.Fatal(err)
			}
			want := "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=" + tc.signedHeaders + ", Signature=" + tc.signature
			if got := req.Header.Get("Authorization"); got != want {
				t.Errorf("Authorization:\n got %s\nwant %s", got, want)
			}
			if got := req.Header.Values("Authorization"); len(got) != 1 {
				t.Errorf("Authorization sent %d times: %q", len(got), got)
			}
			if got := req.Header.Get("X-Amz-Date"); got != "20150830T123600Z" {
				t.Errorf("X-Amz-Date = %q", got)
			}
		})
	}
}

func TestSigV4SessionToken(t *testing.T) {
	r := &sigRedactor{}
	p := &v4Provider{token: suiteToken}
	s := newSuiteSigner(t, "execute-api", p, r)
	req := v4Request(t, "GET", "https://abc.execute-api.us-east-1.amazonaws.com/prod/pay", nil, nil)
	// A token left by an earlier Apply must not be signed over again.
	req.Header.Set("X-Amz-Security-Token", "stale-token-from-before")
	if err := s.Apply(context.Background(), req, nil); err != nil {
		t.Fatal(err)
	}
	tok := suiteToken + "1"
	if got := req.Header.Values("X-Amz-Security-Token"); len(got) != 1 || got[0] != tok {
		t.Errorf("X-Amz-Security-Token = %q, want the session token", got)
	}
	if auth := req.Header.Get("Authorization"); !strings.Contains(auth, "SignedHeaders=host;x-amz-date;x-amz-security-token,") {
		t.Errorf("the token is not signed over: %s", auth)
	}
	for _, secret := range []string{suiteSecret, tok} {
		if !r.has(secret) {
			t.Errorf("%.12s… was not given to the redactor", secret)
		}
	}
	if r.has(suiteKeyID) {
		t.Error("the access key ID was given to the redactor: it is not a secret")
	}
}

func TestSigV4BodyHashOverExactBytes(t *testing.T) {
	static := credentials.NewStaticCredentialsProvider(suiteKeyID, suiteSecret, "")
	sign := func(service string, body []byte) *http.Request {
		s := newSuiteSigner(t, service, static, &sigRedactor{})
		req := v4Request(t, "PUT", "https://bucket.s3.us-east-1.amazonaws.com/a%20b/c.json", body, map[string]string{"Content-Type": "application/json"})
		if err := s.Apply(context.Background(), req, body); err != nil {
			t.Fatal(err)
		}
		return req
	}
	hashOf := func(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }
	body := []byte(`{"amount":100}`)
	nl := append(append([]byte{}, body...), '\n')
	for _, tc := range []struct {
		name string
		body []byte
	}{{"body", body}, {"trailing newline", nl}, {"nil", nil}, {"empty", []byte{}}} {
		t.Run(tc.name, func(t *testing.T) {
			// The reference: AWS's signer given the hash of these bytes.
			want := v4Request(t, "PUT", "https://bucket.s3.us-east-1.amazonaws.com/a%20b/c.json", tc.body, map[string]string{"Content-Type": "application/json", "X-Amz-Content-Sha256": hashOf(tc.body)})
			signer := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
			c, _ := static.Retrieve(context.Background())
			if err := signer.SignHTTP(context.Background(), c, want, hashOf(tc.body), "s3", "us-east-1", suiteTime); err != nil {
				t.Fatal(err)
			}
			got := sign("s3", tc.body)
			if got.Header.Get("X-Amz-Content-Sha256") != hashOf(tc.body) {
				t.Errorf("X-Amz-Content-Sha256 = %s, want %s", got.Header.Get("X-Amz-Content-Sha256"), hashOf(tc.body))
			}
			if got.Header.Get("Authorization") != want.Header.Get("Authorization") {
				t.Errorf("Authorization:\n got %s\nwant %s", got.Header.Get("Authorization"), want.Header.Get("Authorization"))
			}
		})
	}
	if a, b := sign("execute-api", body).Header.Get("Authorization"), sign("execute-api", nl).Header.Get("Authorization"); a == b {
		t.Error("a trailing newline does not change the signature")
	}
	if got := sign("execute-api", body).Header.Get("X-Amz-Content-Sha256"); got != "" {
		t.Errorf("X-Amz-Content-Sha256 = %q for execute-api: only S3 wants it", got)
	}
}

func TestSigV4CredentialsRenewal(t *testing.T) {
	for _, tc := range []struct {
		name     string
		lifetime time.Duration
		applies  int
		want     int32 // Retrieve calls
	}{
		{"static: once", 0, 3, 1},
		{"an hour left: cached", time.Hour, 3, 1},
		// Within renewBefore of expiry: renewed at every Apply, still valid.
		{"two minutes left: renewed before expiry", 2 * time.Minute, 3, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &v4Provider{lifetime: tc.lifetime, token: "FwoGZXIvYXdzEBYaDH"}
			r := &sigRedactor{}
			s := newSuiteSigner(t, "execute-api", p, r)
			for i := range tc.applies {
				req := v4Request(t, "GET", "https://example.amazonaws.com/", nil, nil)
				if err := s.Apply(context.Background(), req, nil); err != nil {
					t.Fatalf("Apply %d: %v", i, err)
				}
				tok := req.Header.Get("X-Amz-Security-Token")
				if !r.has(tok) {
					t.Errorf("Apply %d: the session token sent was not given to the redactor", i)
				}
			}
			if got := p.calls.Load(); got != tc.want {
				t.Errorf("Retrieve called %d times, want %d", got, tc.want)
			}
		})
	}
}

func TestSigV4ConcurrentAppliesRetrieveOnce(t *testing.T) {
	p := &v4Provider{lifetime: time.Hour, token: "FwoGZXIvYXdzEBYaDH"}
	s := newSuiteSigner(t, "execute-api", p, &sigRedactor{})
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for range 200 {
		wg.Go(func() {
			req, _ := http.NewRequest("POST", "https://example.amazonaws.com/", nil)
			errs <- s.Apply(context.Background(), req, []byte(`{"n":1}`))
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := p.calls.Load(); got != 1 {
		t.Errorf("200 concurrent Applies retrieved the credentials %d times, want 1", got)
	}
}

// v4APIErr is a provider failure that says whether to retry.
type v4APIErr struct{ retry bool }

func (e v4APIErr) Error() string        { return "sts: throttled" }
func (e v4APIErr) RetryableError() bool { return e.retry }

func TestSigV4Refusal(t *testing.T) {
	for _, tc := range []struct {
		name      string
		p         aws.CredentialsProvider
		retryable bool
		says      string
	}{
		{"expired credentials", &v4Provider{lifetime: -time.Minute}, true, "expired at"},
		{"provider refuses", &v4Provider{err: errors.New("AccessDenied: not authorized to assume role")}, false, "not authorized to assume role"},
		{"provider says retry", &v4Provider{err: v4APIErr{retry: true}}, true, "throttled"},
		{"provider says do not retry", &v4Provider{err: v4APIErr{retry: false}}, false, "throttled"},
		{"no access key", aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) { return aws.Credentials{}, nil }), false, "AWS_ACCESS_KEY_ID"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSuiteSigner(t, "execute-api", tc.p, &sigRedactor{})
			req := v4Request(t, "GET", "https://example.amazonaws.com/", nil, nil)
			err := s.Apply(context.Background(), req, nil)
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("Apply = %v, want an *Error", err)
			}
			if ce.Scheme != "sigv4" || ce.Retryable != tc.retryable || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("Apply = %+v (%v), want scheme sigv4, retryable %v, saying %q", ce, err, tc.retryable, tc.says)
			}
			if req.Header.Get("Authorization") != "" {
				t.Error("Authorization set although the credentials failed")
			}
		})
	}
}

func TestSigV4DefaultChain(t *testing.T) {
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_ACCESS_KEY_ID", suiteKeyID)
	t.Setenv("AWS_SECRET_ACCESS_KEY", suiteSecret)
	t.Setenv("AWS_SESSION_TOKEN", suiteToken)
	r := &sigRedactor{}
	s := newSuiteSigner(t, "service", nil, r)
	req := v4Request(t, "GET", "https://example.amazonaws.com/", nil, nil)
	if err := s.Apply(context.Background(), req, nil); err != nil {
		t.Fatal(err)
	}
	if req.Header.Get("X-Amz-Security-Token") != suiteToken || !r.has(suiteSecret) || !r.has(suiteToken) {
		t.Errorf("the environment's credentials were not used and redacted: %v", req.Header)
	}

	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	t.Setenv("AWS_SESSION_TOKEN", "")
	s = newSuiteSigner(t, "service", nil, r)
	err := s.Apply(context.Background(), v4Request(t, "GET", "https://example.amazonaws.com/", nil, nil), nil)
	if err == nil || !strings.Contains(err.Error(), "AWS_ACCESS_KEY_ID") || !strings.Contains(err.Error(), "AWS_PROFILE") {
		t.Errorf("no credentials: Apply = %v, want an error naming AWS_ACCESS_KEY_ID and AWS_PROFILE", err)
	}
}

func TestNewSigV4Validates(t *testing.T) {
	static := credentials.NewStaticCredentialsProvider(suiteKeyID, suiteSecret, "")
	for _, tc := range []struct{ service, region, says string }{
		{"", "us-east-1", "Credential.SigV4.Service"},
		{"execute-api", "", "Credential.SigV4.Region"},
	} {
		_, err := NewSigV4(tc.service, tc.region, static, &sigRedactor{}, Names{})
		var ce *Error
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("NewSigV4(%q, %q) = %v, want an *Error naming %s", tc.service, tc.region, err, tc.says)
		}
	}
}
