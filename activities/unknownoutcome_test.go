package activities_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// These tests are the third hardening round: outcomes that must not be
// lost, secrets through side doors, and silent rewrites.

// TestCutSuccessBodyIsRetried (hardening 3, item 1): a 2xx whose body
// breaks off is not a success without its body: the server did the work,
// and a retry with the same key gets its whole stored answer. The attempt
// is a retryable NetworkError of unknown outcome; on the last attempt of
// the budget it is final, still of unknown outcome.
func TestCutSuccessBodyIsRetried(t *testing.T) {
	body := `{"id":"pay_1","amount":4200,"status":"succeeded","note":"` + strings.Repeat("n", 200) + `"}`
	for _, tt := range []struct {
		name     string
		attempts int32
		final    bool
	}{
		{"attempts left", 5, false},
		{"last attempt", 1, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := newRecorder(t, cutBody(201, body))
			r := req(srv.URL)
			r.MaximumAttempts = tt.attempts
			resp, _, err := run(t, activities.Config{AllowedOrigins: []string{srv.URL}}, r)
			require.Nil(t, resp, "a 201 without its whole body is not a success")
			appErr := appError(t, err)
			assert.Equal(t, workflows.ErrTypeNetworkError, appErr.Type(), appErr.Message())
			assert.Equal(t, tt.final, appErr.NonRetryable(), appErr.Message())
			assert.Contains(t, appErr.Message(), "201")
			d, ok := workflows.AsFailure(err)
			require.True(t, ok)
			assert.True(t, d.OutcomeUnknown, "the server did the work, the answer was lost")
			assert.Equal(t, 201, d.Status)
			if !tt.final {
				assert.Positive(t, appErr.NextRetryDelay())
			}
		})
	}
}

// TestCutAfterCodedStreamIsRetried: a 2xx whose coded body is whole but
// whose message breaks off is a body cut short, as a plain one is
// (TestCutSuccessBodyIsRetried): a zlib or raw DEFLATE stream ends before
// the connection does, so the decoder's end is not the message's. Found by
// FuzzDo (testdata/fuzz/FuzzDo/cb286c833fc51b80).
func TestCutAfterCodedStreamIsRetried(t *testing.T) {
	body := `{"id":"pay_1","amount":4200,"status":"succeeded"}`
	for _, coding := range []string{"zlib", "raw deflate", "gzip"} {
		t.Run(coding, func(t *testing.T) {
			srv := newRecorder(t, cutAfterCoded(201, coding, body))
			resp, _, err := run(t, activities.Config{AllowedOrigins: []string{srv.URL}}, req(srv.URL))
			require.Nil(t, resp, "a 201 whose message was cut is not a success")
			appErr := appError(t, err)
			assert.Equal(t, workflows.ErrTypeNetworkError, appErr.Type(), appErr.Message())
			assert.False(t, appErr.NonRetryable(), appErr.Message())
			d, ok := workflows.AsFailure(err)
			require.True(t, ok)
			assert.True(t, d.OutcomeUnknown)
			assert.Equal(t, 201, d.Status)
		})
	}
}

// TestFinalErrorAfterUnansweredAttempt (hardening 3, items 2 and 3): a
// final error says OutcomeUnknown whenever an earlier attempt got no
// answer (or met the key in flight), and whenever the final answer is a
// gateway's; Cloudflare's 520–524 are retried as 502 and 504 are.
func TestFinalErrorAfterUnansweredAttempt(t *testing.T) {
	unanswered := map[string]any{"attempt": 1, "counted": 1, "unknown": true, "sent": 1}
	inFlight := map[string]any{"attempt": 1, "counted": 0, "in_flight_count": 1, "in_flight_since": "2026-12-03T10:00:00Z", "sent": 1}
	answered := map[string]any{"attempt": 1, "counted": 1, "sent": 1}
	tests := []struct {
		name        string
		handler     http.HandlerFunc
		prev        map[string]any
		wantType    string
		wantFinal   bool
		wantUnknown bool
	}{
		{"400 after an unanswered attempt", status(400, `{"error":"bad"}`), unanswered, workflows.ErrTypeHTTPClientError, true, true},
		{"400 after a key in flight", status(400, `{"error":"bad"}`), inFlight, workflows.ErrTypeHTTPClientError, true, true},
		{"400 after an answered attempt", status(400, `{"error":"bad"}`), answered, workflows.ErrTypeHTTPClientError, true, false},
		{"400 on the first attempt", status(400, `{"error":"bad"}`), nil, workflows.ErrTypeHTTPClientError, true, false},
		{"501 after an unanswered attempt", status(501, ""), unanswered, workflows.ErrTypeHTTPNonRetryableStatus, true, true},
		{"501 on the first attempt", status(501, ""), nil, workflows.ErrTypeHTTPNonRetryableStatus, true, false},
		{"redirect after an unanswered attempt", status(302, "", "Location", "https://elsewhere.example/x"), unanswered, workflows.ErrTypeRedirectNotFollowed, true, true},
		{"key reused after an unanswered attempt", status(422, `{"title":"Idempotency-Key is already used"}`), unanswered, workflows.ErrTypeIdempotencyKeyReused, true, true},
		{"a gateway's 502 the server advises not to retry", status(502, "", "X-Should-Retry", "false"), nil, workflows.ErrTypeHTTPNonRetryableStatus, true, true},
		{"507 is final and may have been half done", status(507, ""), nil, workflows.ErrTypeHTTPNonRetryableStatus, true, true},
		{"520 is retried", status(520, ""), nil, workflows.ErrTypeHTTPRetryableStatus, false, true},
		{"521 is retried", status(521, ""), nil, workflows.ErrTypeHTTPRetryableStatus, false, true},
		{"522 is retried", status(522, ""), nil, workflows.ErrTypeHTTPRetryableStatus, false, true},
		{"523 is retried", status(523, ""), nil, workflows.ErrTypeHTTPRetryableStatus, false, true},
		{"524 is retried", status(524, ""), nil, workflows.ErrTypeHTTPRetryableStatus, false, true},
		{"524 on the last attempt after an unanswered one", status(524, ""), map[string]any{"attempt": 1, "counted": 4, "unknown": true, "sent": 1}, workflows.ErrTypeHTTPRetryableStatus, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newRecorder(t, tt.handler)
			r := req(srv.URL)
			r.MaximumAttempts = 5
			_, _, err := runAfter(t, activities.Config{AllowedOrigins: []string{srv.URL}, Admission: activities.Admission{Off: true}}, r, tt.prev)
			appErr := appError(t, err)
			assert.Equal(t, tt.wantType, appErr.Type(), appErr.Message())
			assert.Equal(t, tt.wantFinal, appErr.NonRetryable(), appErr.Message())
			d, ok := workflows.AsFailure(err)
			require.True(t, ok)
			assert.Equal(t, tt.wantUnknown, d.OutcomeUnknown, appErr.Message())
			if !tt.wantFinal {
				assert.NotContains(t, appErr.Message(), "fix the request")
			}
		})
	}
}
