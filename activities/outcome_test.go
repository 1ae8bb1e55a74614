package activities

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// decideStatus classifies a response with the default convention.
func decideStatus(status int, h http.Header, body string, hint bool) verdict {
	conv, _ := IETFConvention().withDefaults()
	if h == nil {
		h = http.Header{}
	}
	return decide(&answer{status: status, header: h, body: []byte(body)}, &conv, progress{Unknown: hint})
}

func TestDecideEveryStatus(t *testing.T) {
	retryable := map[int]bool{408: true, 425: true, 429: true, 500: true, 502: true, 503: true, 504: true,
		520: true, 521: true, 522: true, 523: true, 524: true}
	for status := 100; status <= 599; status++ {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			v := decideStatus(status, nil, "", false)
			switch {
			case status >= 200 && status <= 299:
				assert.Equal(t, kindSuccess, v.kind)
				assert.Empty(t, v.errType)
			case retryable[status]:
				assert.Equal(t, kindRetry, v.kind)
				assert.Equal(t, workflows.ErrTypeHTTPRetryableStatus, v.errType)
			case status == 417:
				assert.Equal(t, kindFinal, v.kind)
				assert.Equal(t, workflows.ErrTypeIdempotencyKeyReused, v.errType)
			case status >= 400 && status <= 499:
				assert.Equal(t, kindFinal, v.kind)
				assert.Equal(t, workflows.ErrTypeHTTPClientError, v.errType)
			default: // 1xx, 3xx, 501, 505-519, 525-599
				assert.Equal(t, kindFinal, v.kind)
				assert.Equal(t, workflows.ErrTypeHTTPNonRetryableStatus, v.errType)
			}
			assert.False(t, v.inFlight)
		})
	}
}

func TestDecideRules(t *testing.T) {
	const (
		ietfInFlight = `{"type":"https://developer.example.com/idempotency","title":"A request is outstanding for this Idempotency-Key","detail":"A request with the same Idempotency-Key for the same operation is being processed or is outstanding."}`
		ietfReused   = `{"type":"https://developer.example.com/idempotency","title":"Idempotency-Key is already used","detail":"This operation is idempotent and it requires correct usage of Idempotency Key."}`
		stripeInUse  = `{"error":{"type":"idempotency_error","code":"idempotency_key_in_use","message":"There is currently another in-progress request using this Idempotent Key."}}`
		stripeReused = `{"error":{"type":"idempotency_error","message":"Keys for idempotent requests can only be used with the same parameters they were first used with."}}`
	)
	h := func(kv ...string) http.Header {
		out := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			out.Add(kv[i], kv[i+1])
		}
		return out
	}
	tests := []struct {
		name     string
		status   int
		header   http.Header
		body     string
		hint     bool
		want     verdictKind
		wantType string
		inFlight bool
	}{
		{"409 alone on a first attempt is a business conflict", 409, nil, `{"error":"order exists"}`, false, kindFinal, workflows.ErrTypeHTTPClientError, false},
		{"409 with Retry-After is in flight", 409, h("Retry-After", "1"), "", false, kindRetry, workflows.ErrTypeIdempotencyKeyInFlight, true},
		{"409 IETF problem body is in flight", 409, h("Content-Type", "application/problem+json"), ietfInFlight, false, kindRetry, workflows.ErrTypeIdempotencyKeyInFlight, true},
		{"409 Stripe idempotency_key_in_use is in flight", 409, nil, stripeInUse, false, kindRetry, workflows.ErrTypeIdempotencyKeyInFlight, true},
		{"409 after an attempt without an answer is in flight", 409, nil, `conflict`, true, kindRetry, workflows.ErrTypeIdempotencyKeyInFlight, true},
		{"409 with Stripe-Should-Retry true is in flight", 409, h("Stripe-Should-Retry", "true"), "", false, kindRetry, workflows.ErrTypeIdempotencyKeyInFlight, true},
		// The server's own word that the key is in flight decides over its
		// general advice: failing would report a payment that is still
		// being made as failed.
		{"409 in flight signal wins over advice false", 409, h("Stripe-Should-Retry", "false"), stripeInUse, false, kindRetry, workflows.ErrTypeIdempotencyKeyInFlight, true},
		{"409 with Retry-After wins over advice false", 409, h("Stripe-Should-Retry", "false", "Retry-After", "2"), "", false, kindRetry, workflows.ErrTypeIdempotencyKeyInFlight, true},
		// Only the activity's guess makes a bare 409 in flight: the
		// server's explicit advice decides (final, of unknown outcome).
		{"bare 409 after an unanswered attempt, advice false", 409, h("Stripe-Should-Retry", "false"), `conflict`, true, kindFinal, workflows.ErrTypeHTTPClientError, false},
		{"422 IETF key reused", 422, nil, ietfReused, false, kindFinal, workflows.ErrTypeIdempotencyKeyReused, false},
		{"422 validation error is a client error", 422, nil, `{"error":"amount must be positive"}`, false, kindFinal, workflows.ErrTypeHTTPClientError, false},
		{"422 validation error naming the key field", 422, nil, `{"errors":{"idempotency_key":["is too long (maximum is 64 characters)"]}}`, false, kindFinal, workflows.ErrTypeHTTPClientError, false},
		{"422 validation error about the key's format", 422, nil, `{"title":"Invalid Idempotency-Key","detail":"Idempotency-Key must be a UUID"}`, false, kindFinal, workflows.ErrTypeHTTPClientError, false},
		{"422 about the key's format", 422, nil, `{"detail":"Idempotency-Key does not match the required format (UUID)"}`, false, kindFinal, workflows.ErrTypeHTTPClientError, false},
		{"422 IETF draft's key reused detail", 422, nil, `{"detail":"This operation is idempotent and it requires correct usage of Idempotency Key. Idempotency Key MUST not be reused across different payloads of this operation."}`, false, kindFinal, workflows.ErrTypeIdempotencyKeyReused, false},
		{"422 @node-idempotency/nestjs key reused", 422, nil, `{"statusCode":422,"message":"Idempotency-Key is already used"}`, false, kindFinal, workflows.ErrTypeIdempotencyKeyReused, false},
		{"422 key used with another payload", 422, nil, `{"error":"idempotency key was used with a different request payload"}`, false, kindFinal, workflows.ErrTypeIdempotencyKeyReused, false},
		{"417 express-style key reused", 417, nil, "", false, kindFinal, workflows.ErrTypeIdempotencyKeyReused, false},
		{"400 Stripe idempotency_error", 400, nil, stripeReused, false, kindFinal, workflows.ErrTypeIdempotencyKeyReused, false},
		{"400 plain", 400, nil, `{"error":"bad"}`, false, kindFinal, workflows.ErrTypeHTTPClientError, false},
		{"key reused wins over advice", 400, h("Stripe-Should-Retry", "true"), stripeReused, false, kindFinal, workflows.ErrTypeIdempotencyKeyReused, false},
		{"Stripe-Should-Retry true on 400", 400, h("Stripe-Should-Retry", "true"), "", false, kindRetry, workflows.ErrTypeHTTPRetryableStatus, false},
		{"X-Should-Retry false on 503", 503, h("X-Should-Retry", "false"), "", false, kindFinal, workflows.ErrTypeHTTPNonRetryableStatus, false},
		{"X-Should-Retry false on 429", 429, h("X-Should-Retry", " FALSE "), "", false, kindFinal, workflows.ErrTypeHTTPClientError, false},
		{"X-Should-Retry true on 501", 501, h("X-Should-Retry", "true"), "", false, kindRetry, workflows.ErrTypeHTTPRetryableStatus, false},
		{"advice of another value is ignored", 503, h("X-Should-Retry", "maybe"), "", false, kindRetry, workflows.ErrTypeHTTPRetryableStatus, false},
		{"425 Too Early is retried (RFC 8470)", 425, nil, "", false, kindRetry, workflows.ErrTypeHTTPRetryableStatus, false},
		{"3xx with Location", 302, h("Location", "/x"), "", false, kindFinal, workflows.ErrTypeRedirectNotFollowed, false},
		{"3xx without Location", 304, nil, "", false, kindFinal, workflows.ErrTypeHTTPNonRetryableStatus, false},
		{"2xx ignores advice", 201, h("X-Should-Retry", "true"), "", false, kindSuccess, "", false},
		{"status 0", 0, nil, "", false, kindFinal, workflows.ErrTypeHTTPNonRetryableStatus, false},
		{"status 600", 600, nil, "", false, kindFinal, workflows.ErrTypeHTTPNonRetryableStatus, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := decideStatus(tt.status, tt.header, tt.body, tt.hint)
			assert.Equal(t, tt.want, v.kind, v.reason)
			assert.Equal(t, tt.wantType, v.errType, v.reason)
			assert.Equal(t, tt.inFlight, v.inFlight, v.reason)
			if tt.want != kindSuccess {
				assert.NotEmpty(t, v.reason)
			}
		})
	}
}

func TestDecideWithStripeConvention(t *testing.T) {
	conv, err := StripeConvention().withDefaults()
	require.NoError(t, err)
	v := decide(&answer{status: 409, header: http.Header{}, body: []byte(`{"error":{"code":"idempotency_key_in_use"}}`)}, &conv, progress{})
	assert.Equal(t, workflows.ErrTypeIdempotencyKeyInFlight, v.errType)
	v = decide(&answer{status: 422, header: http.Header{}, body: []byte(`idempotency key already used`)}, &conv, progress{})
	assert.Equal(t, workflows.ErrTypeHTTPClientError, v.errType, "Stripe answers key misuse with 400, not 422")
	custom := IETFConvention()
	custom.InFlight = append(custom.InFlight, Signal{Status: 423, Body: "locked"})
	conv, err = custom.withDefaults()
	require.NoError(t, err)
	v = decide(&answer{status: 423, header: http.Header{}, body: []byte(`Resource LOCKED`)}, &conv, progress{})
	assert.Equal(t, workflows.ErrTypeIdempotencyKeyInFlight, v.errType)
}

func TestDecideError(t *testing.T) {
	opErr := func(op string, err error) error { return &net.OpError{Op: op, Net: "tcp", Err: err} }
	urlErr := func(err error) error { return &url.Error{Op: "Post", URL: "https://x", Err: err} }
	tests := []struct {
		name     string
		err      error
		want     verdictKind
		wantType string
		unknown  bool
	}{
		{"connection refused", urlErr(opErr("dial", os.NewSyscallError("connect", syscall.ECONNREFUSED))), kindRetry, workflows.ErrTypeNetworkError, false},
		{"connection reset", urlErr(opErr("read", os.NewSyscallError("read", syscall.ECONNRESET))), kindRetry, workflows.ErrTypeNetworkError, true},
		{"broken pipe", urlErr(opErr("write", syscall.EPIPE)), kindRetry, workflows.ErrTypeNetworkError, true},
		{"dns not found", urlErr(opErr("dial", &net.DNSError{Err: "no such host", Name: "x", IsNotFound: true})), kindRetry, workflows.ErrTypeNetworkError, false},
		{"dns temporary", urlErr(&net.DNSError{Err: "server misbehaving", Name: "x", IsTemporary: true}), kindRetry, workflows.ErrTypeNetworkError, false},
		{"timeout", urlErr(context.DeadlineExceeded), kindRetry, workflows.ErrTypeNetworkError, true},
		{"canceled", urlErr(context.Canceled), kindRetry, workflows.ErrTypeNetworkError, true},
		{"eof", urlErr(io.EOF), kindRetry, workflows.ErrTypeNetworkError, true},
		{"body cut short", fmt.Errorf("reading the 500 response body: %w", io.ErrUnexpectedEOF), kindRetry, workflows.ErrTypeNetworkError, true},
		{"unknown authority", urlErr(&tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}), kindFinal, workflows.ErrTypeTLSCertificateError, false},
		{"bare unknown authority", urlErr(x509.UnknownAuthorityError{}), kindFinal, workflows.ErrTypeTLSCertificateError, false},
		{"hostname mismatch", urlErr(x509.HostnameError{Host: "x"}), kindFinal, workflows.ErrTypeTLSCertificateError, false},
		{"expired", urlErr(x509.CertificateInvalidError{Reason: x509.Expired}), kindFinal, workflows.ErrTypeTLSCertificateError, false},
		{"tls to plain http", urlErr(tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}), kindFinal, workflows.ErrTypeTLSCertificateError, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := decide(&answer{err: tt.err}, nil, progress{})
			assert.Equal(t, tt.want, v.kind)
			assert.Equal(t, tt.wantType, v.errType)
			assert.Equal(t, tt.unknown, v.unknown)
		})
	}
}

func TestRetryAfterOfSeveralValues(t *testing.T) {
	now := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	h := http.Header{}
	h.Add("Retry-After", "2")
	h.Add("Retry-After", "garbage")
	h.Add("Retry-After", "7")
	d, ok := retryAfter(h, now)
	assert.True(t, ok)
	assert.Equal(t, 7*time.Second, d, "the longest valid value wins")
	h = http.Header{"Retry-After": {"Wed, 02 Dec 2026 00:00:09 GMT"}}
	d, ok = retryAfter(h, now)
	assert.True(t, ok)
	assert.Equal(t, 9*time.Second, d)
}

func TestVerdictKindString(t *testing.T) {
	for k, want := range map[verdictKind]string{kindSuccess: "success", kindRetry: "retryable", kindFinal: "non_retryable", 0: "unknown"} {
		assert.Equal(t, want, k.String())
	}
}

// TestGatewayAnswersAreUnknownOutcomes: a 408 or 5xx may come from a
// gateway while the server behind it goes on charging, so a bare 409 after
// one is waited out; a 429 or 425 comes before any processing.
func TestGatewayAnswersAreUnknownOutcomes(t *testing.T) {
	for status, unknown := range map[int]bool{
		408: true, 500: true, 502: true, 503: true, 504: true, 425: false, 429: false,
		520: true, 521: true, 522: true, 523: true, 524: true,
		// Final 5xx: the server may have failed halfway, except where it
		// says it did not take the request up (method, HTTP version).
		501: false, 505: false, 507: true, 511: true, 599: true, 400: false, 404: false,
	} {
		v := decideStatus(status, nil, "", false)
		assert.Equal(t, unknown, v.unknown, "%d", status)
	}
}

// TestDecideBareConflict (issue 30, item 12): a bare 409 after an attempt
// of unknown outcome is the key in flight only by the activity's guess,
// which ends after Convention.BareConflictWait of waits, or at once for a
// Convention.SignalsInFlight origin; the server's own marks are waited
// out whatever the guess. The reasons say what the earlier attempt got.
func TestDecideBareConflict(t *testing.T) {
	after503 := progress{Attempt: 1, Counted: 1, Unknown: true, UnknownGot: "got 503 Service Unavailable", Waited: time.Second}
	guessing := func(p progress, n int32, after, waited time.Duration) progress {
		p.Guessed, p.GuessedAfter, p.Waited = n, after, waited
		return p
	}
	ietf, _ := IETFConvention().withDefaults()
	stripe, _ := StripeConvention().withDefaults()
	short := IETFConvention()
	short.BareConflictWait = 5 * time.Second
	short, _ = short.withDefaults()
	marksAll := IETFConvention()
	marksAll.SignalsInFlight = true
	marksAll, _ = marksAll.withDefaults()
	const business = `{"error":"already refunded"}`
	tests := []struct {
		name       string
		conv       Convention
		header     http.Header
		body       string
		prev       progress
		wantType   string
		wantGuess  bool
		wantReason string
	}{
		{"first bare 409 after a 503 is guessed in flight", ietf, nil, business, after503, workflows.ErrTypeIdempotencyKeyInFlight, true, "an earlier attempt with this key got 503 Service Unavailable"},
		{"progress recorded before UnknownGot reads as no answer", ietf, nil, business, progress{Attempt: 1, Counted: 1, Unknown: true}, workflows.ErrTypeIdempotencyKeyInFlight, true, "an earlier attempt with this key ended without an answer"},
		{"after the server said in flight", ietf, nil, business, progress{Attempt: 1, InFlightCount: 1}, workflows.ErrTypeIdempotencyKeyInFlight, true, "the server has answered that a request with this key was being processed"},
		{"guess under the default wait", ietf, nil, business, guessing(after503, 4, time.Second, 29*time.Second), workflows.ErrTypeIdempotencyKeyInFlight, true, "28s so far"},
		{"guess at the default wait is final", ietf, nil, business, guessing(after503, 5, time.Second, 31*time.Second), workflows.ErrTypeHTTPClientError, false, "after 30s of waits for the key (Convention.BareConflictWait 30s)"},
		{"guess at a shorter wait is final", short, nil, business, guessing(after503, 2, time.Second, 6*time.Second), workflows.ErrTypeHTTPClientError, false, "got 503 Service Unavailable"},
		{"SignalsInFlight: final at once", marksAll, nil, business, after503, workflows.ErrTypeHTTPClientError, false, "Convention.SignalsInFlight"},
		{"Stripe: a bare 409 is final at once", stripe, nil, business, after503, workflows.ErrTypeHTTPClientError, false, "got 503 Service Unavailable"},
		{"Stripe: idempotency_key_in_use is in flight", stripe, nil, `{"error":{"code":"idempotency_key_in_use"}}`, after503, workflows.ErrTypeIdempotencyKeyInFlight, false, "in-flight signal"},
		{"a signalled 409 is waited out past the guess", ietf, nil, `{"detail":"still processing"}`, guessing(after503, 9, time.Second, time.Hour), workflows.ErrTypeIdempotencyKeyInFlight, false, "in-flight signal"},
		{"Retry-After is waited out past the guess", marksAll, http.Header{"Retry-After": {"1"}}, business, guessing(after503, 9, time.Second, time.Hour), workflows.ErrTypeIdempotencyKeyInFlight, false, "Retry-After"},
		{"a bare 409 on a first attempt stays a conflict", ietf, nil, business, progress{}, workflows.ErrTypeHTTPClientError, false, "no earlier attempt without an answer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := tt.header
			if h == nil {
				h = http.Header{}
			}
			v := decide(&answer{status: 409, header: h, body: []byte(tt.body)}, &tt.conv, tt.prev)
			assert.Equal(t, tt.wantType, v.errType, v.reason)
			assert.Equal(t, tt.wantType == workflows.ErrTypeIdempotencyKeyInFlight, v.inFlight, v.reason)
			assert.Equal(t, tt.wantGuess, v.guessed, v.reason)
			if v.inFlight {
				assert.Equal(t, kindRetry, v.kind, v.reason)
			} else {
				assert.Equal(t, kindFinal, v.kind, v.reason)
			}
			assert.Contains(t, v.reason, tt.wantReason)
		})
	}
}

// TestAnswerGot: what the messages say an attempt of unknown outcome got.
func TestAnswerGot(t *testing.T) {
	tests := []struct {
		ans  answer
		want string
	}{
		{answer{status: 503}, "got 503 Service Unavailable"},
		{answer{status: 524}, "got 524"},
		{answer{err: io.EOF}, "ended without an answer"},
		{answer{status: 200, err: io.ErrUnexpectedEOF}, "got a 200 answer whose body broke off"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, tt.ans.got())
	}
}
