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

	"github.com/stretchr/testify/assert"
)

func TestClassifyEveryStatus(t *testing.T) {
	retryable := map[int]bool{408: true, 429: true, 500: true, 502: true, 503: true, 504: true}
	for status := 100; status <= 599; status++ {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			outcome, errType := Classify(status, http.Header{})
			switch {
			case status >= 200 && status <= 299:
				assert.Equal(t, Success, outcome)
				assert.Empty(t, errType)
			case retryable[status]:
				assert.Equal(t, Retryable, outcome)
				assert.Equal(t, ErrTypeRetryableStatus, errType)
			case status >= 400 && status <= 499:
				assert.Equal(t, NonRetryable, outcome)
				assert.Equal(t, ErrTypeClientError, errType)
			default: // 1xx, 3xx, 501, 505-599
				assert.Equal(t, NonRetryable, outcome)
				assert.Equal(t, ErrTypeServerError, errType)
			}
		})
	}
}

func TestClassifyNamedStatuses(t *testing.T) {
	tests := []struct {
		status     int
		retryAfter string
		want       Outcome
		wantType   string
	}{
		{200, "", Success, ""},
		{201, "", Success, ""},
		{204, "", Success, ""},
		{400, "", NonRetryable, ErrTypeClientError},
		{401, "", NonRetryable, ErrTypeClientError},
		{403, "", NonRetryable, ErrTypeClientError},
		{404, "", NonRetryable, ErrTypeClientError},
		{409, "", NonRetryable, ErrTypeClientError},
		{409, "1", Retryable, ErrTypeRetryableStatus}, // key still in flight
		{422, "", NonRetryable, ErrTypeClientError},
		{408, "", Retryable, ErrTypeRetryableStatus},
		{429, "2", Retryable, ErrTypeRetryableStatus},
		{500, "", Retryable, ErrTypeRetryableStatus},
		{501, "", NonRetryable, ErrTypeServerError},
		{502, "", Retryable, ErrTypeRetryableStatus},
		{503, "", Retryable, ErrTypeRetryableStatus},
		{504, "", Retryable, ErrTypeRetryableStatus},
		{505, "", NonRetryable, ErrTypeServerError},
		{0, "", NonRetryable, ErrTypeServerError},
		{600, "", NonRetryable, ErrTypeServerError},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d_%s", tt.status, tt.retryAfter), func(t *testing.T) {
			h := http.Header{}
			if tt.retryAfter != "" {
				h.Set("Retry-After", tt.retryAfter)
			}
			got, gotType := Classify(tt.status, h)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.wantType, gotType)
		})
	}
}

func TestClassifyError(t *testing.T) {
	opErr := func(err error) error { return &net.OpError{Op: "dial", Net: "tcp", Err: err} }
	urlErr := func(err error) error { return &url.Error{Op: "Post", URL: "https://x", Err: err} }
	tests := []struct {
		name     string
		err      error
		want     Outcome
		wantType string
	}{
		{"connection refused", urlErr(opErr(os.NewSyscallError("connect", syscall.ECONNREFUSED))), Retryable, ErrTypeNetwork},
		{"connection reset", urlErr(opErr(os.NewSyscallError("read", syscall.ECONNRESET))), Retryable, ErrTypeNetwork},
		{"broken pipe", urlErr(opErr(syscall.EPIPE)), Retryable, ErrTypeNetwork},
		{"dns not found", urlErr(opErr(&net.DNSError{Err: "no such host", Name: "x", IsNotFound: true})), Retryable, ErrTypeNetwork},
		{"dns temporary", urlErr(opErr(&net.DNSError{Err: "server misbehaving", Name: "x", IsTemporary: true})), Retryable, ErrTypeNetwork},
		{"timeout", urlErr(context.DeadlineExceeded), Retryable, ErrTypeNetwork},
		{"canceled", urlErr(context.Canceled), Retryable, ErrTypeNetwork},
		{"eof", urlErr(io.EOF), Retryable, ErrTypeNetwork},
		{"body cut short", fmt.Errorf("reading the 200 response body: %w", io.ErrUnexpectedEOF), Retryable, ErrTypeNetwork},
		{"unknown authority", urlErr(&tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}), NonRetryable, ErrTypeTLS},
		{"bare unknown authority", urlErr(x509.UnknownAuthorityError{}), NonRetryable, ErrTypeTLS},
		{"hostname mismatch", urlErr(x509.HostnameError{Host: "x"}), NonRetryable, ErrTypeTLS},
		{"expired", urlErr(x509.CertificateInvalidError{Reason: x509.Expired}), NonRetryable, ErrTypeTLS},
		{"tls to plain http", urlErr(tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}), NonRetryable, ErrTypeTLS},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, gotType := ClassifyError(tt.err)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.wantType, gotType)
		})
	}
}

func TestOutcomeString(t *testing.T) {
	for o, want := range map[Outcome]string{Success: "success", Retryable: "retryable", NonRetryable: "non_retryable", 0: "unknown"} {
		assert.Equal(t, want, o.String())
	}
}
