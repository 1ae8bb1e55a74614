package activities_test

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/propagation"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/internal/request"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// These tests are the third hardening round: outcomes that must not be
// lost, secrets through side doors, and silent rewrites.

// runAfter is run for an attempt that follows earlier ones: details are
// the heartbeat details the earlier attempts left (what the activity keeps
// across attempts, as JSON field names).
func runAfter(t *testing.T, cfg activities.Config, r request.Input, details map[string]any) (*workflows.Response, error, string) {
	t.Helper()
	var logs bytes.Buffer
	var s testsuite.WorkflowTestSuite
	s.SetLogger(log.NewStructuredLogger(slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	env := s.NewTestActivityEnvironment()
	if details != nil {
		env.SetHeartbeatDetails(details)
	}
	a, err := activities.New(cfg)
	require.NoError(t, err)
	a.Register(env)
	val, err := env.ExecuteActivity(activities.ActivityName, r)
	if err != nil {
		return nil, err, logs.String()
	}
	var resp workflows.Response
	require.NoError(t, val.Get(&resp))
	return &resp, nil, logs.String()
}

// cutBody answers status with a Content-Length of the whole body and
// sends only its first half before closing the connection.
func cutBody(status int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		fmt.Fprintf(buf, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
			status, http.StatusText(status), len(body), body[:len(body)/2])
		_ = buf.Flush()
		_ = conn.Close()
	}
}

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
			resp, err, _ := run(t, activities.Config{AllowedOrigins: []string{srv.URL}}, r)
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

// cutAfterCoded answers status with body complete in a content coding
// (a whole zlib, raw DEFLATE or gzip stream), but a Content-Length 10 bytes
// longer than it sends before closing the connection: the message is cut,
// though the coded stream needs no more bytes.
func cutAfterCoded(status int, coding string, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		var enc bytes.Buffer
		var zw io.WriteCloser
		name := coding
		switch coding {
		case "zlib":
			zw, name = zlib.NewWriter(&enc), "deflate"
		case "raw deflate":
			zw, _ = flate.NewWriter(&enc, flate.DefaultCompression)
			name = "deflate"
		default:
			zw = gzip.NewWriter(&enc)
		}
		_, _ = zw.Write([]byte(body))
		_ = zw.Close()
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		fmt.Fprintf(buf, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Encoding: %s\r\nContent-Length: %d\r\n\r\n",
			status, http.StatusText(status), name, enc.Len()+10)
		_, _ = buf.Write(enc.Bytes())
		_ = buf.Flush()
		_ = conn.Close()
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
			resp, err, _ := run(t, activities.Config{AllowedOrigins: []string{srv.URL}}, req(srv.URL))
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
			_, err, _ := runAfter(t, activities.Config{AllowedOrigins: []string{srv.URL}, Admission: activities.Admission{Off: true}}, r, tt.prev)
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

// TestEncodedBodiesAreRedacted (hardening 3, item 5): a workflow may not
// ask for a content coding (the bytes would defeat redaction), and a body
// that arrives encoded anyway is decoded before redaction, or withheld
// when its coding is not one the activity can decode.
func TestEncodedBodiesAreRedacted(t *testing.T) {
	t.Run("Accept-Encoding from the workflow is refused", func(t *testing.T) {
		for _, name := range []string{"Accept-Encoding", "accept-encoding"} {
			srv := newRecorder(t, status(201, `{}`))
			r := req(srv.URL)
			r.Headers = map[string]string{name: "gzip"}
			_, err, _ := run(t, activities.Config{AllowedOrigins: []string{srv.URL}}, r)
			appErr := appError(t, err)
			assert.Equal(t, workflows.ErrTypeInvalidRequest, appErr.Type())
			assert.Contains(t, appErr.Message(), "Accept-Encoding")
			assert.Zero(t, srv.count(), "nothing sent")
		}
	})
	encode := map[string]func([]byte) []byte{
		"gzip":    func(b []byte) []byte { return encodeAs("gzip", b) },
		"deflate": func(b []byte) []byte { return encodeAs("deflate", b) },
		"br":      func(b []byte) []byte { return encodeAs("br", b) }, // not decodable here
		"raw-deflate": func(b []byte) []byte {
			var buf bytes.Buffer
			w, _ := flate.NewWriter(&buf, flate.DefaultCompression)
			_, _ = w.Write(b)
			_ = w.Close()
			return buf.Bytes()
		},
	}
	tests := []struct {
		name, coding string
		status       int
		wantBody     bool // the decoded body, redacted, is in the result or snippet
	}{
		{"gzip 201", "gzip", 201, true},
		{"deflate 201", "deflate", 201, true},
		{"raw deflate 201", "raw-deflate", 201, true},
		{"br 201", "br", 201, false},
		{"gzip 401", "gzip", 401, true},
		{"br 401", "br", 401, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
				plain := []byte(`{"echo":"` + r.Header.Get("Authorization") + `","ok":true}`)
				coding := strings.TrimPrefix(tt.coding, "raw-")
				w.Header().Set("Content-Encoding", coding)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tt.status)
				_, _ = w.Write(encode[tt.coding](plain))
			})
			// The client never decompresses (as a user's HTTPClient with
			// DisableCompression would): the server encodes unasked.
			cfg := activities.Config{
				AllowedOrigins: []string{srv.URL},
				Credentials:    map[string]http.Header{srv.URL: {"Authorization": {"Bearer " + token}}},
				HTTPClient:     &http.Client{Transport: &http.Transport{DisableCompression: true}},
			}
			resp, err, logs := run(t, cfg, req(srv.URL))
			assertNoPiece(t, err, resp, logs, token)
			if tt.status == 201 {
				require.NoError(t, err)
				if tt.wantBody {
					assert.JSONEq(t, `{"echo":"Bearer [REDACTED]","ok":true}`, string(resp.Body))
					assert.True(t, resp.BodyRedacted)
				} else {
					assert.True(t, resp.BodyOmitted)
					assert.Contains(t, resp.OmittedReason, "encoded")
					assert.Nil(t, resp.Body)
					assert.Nil(t, resp.RawBody)
				}
				return
			}
			d, ok := workflows.AsFailure(err)
			require.True(t, ok)
			if tt.wantBody {
				assert.Contains(t, d.Body, `"ok":true`)
			} else {
				assert.NotContains(t, d.Body, "ok")
			}
		})
	}
}

// TestRedirectQueryValuesRedacted (hardening 3, item 6): a same-origin 307
// to a presigned URL is followed; when that URL answers with an error,
// none of its query values reach the message, the details or the logs.
func TestRedirectQueryValuesRedacted(t *testing.T) {
	const signature = "fe5f80f77d5fa3beca038a248ff027d0445342fe"
	srv := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/pay":
			w.Header().Set("Location", "/v2/pay?X-Amz-Signature="+signature+"&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE")
			w.WriteHeader(http.StatusTemporaryRedirect)
		case "/v2/pay":
			w.WriteHeader(http.StatusBadRequest)
		case "/v2/slow":
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	for _, path := range []string{"/pay"} {
		for _, final := range []int32{1, 5} {
			r := req(srv.URL + path)
			r.MaximumAttempts = final
			_, err, logs := run(t, activities.Config{AllowedOrigins: []string{srv.URL}}, r)
			appErr := appError(t, err)
			assert.Equal(t, workflows.ErrTypeHTTPClientError, appErr.Type())
			assert.Contains(t, appErr.Message(), "/v2/pay?X-Amz-Signature=REDACTED")
			assertNoPiece(t, err, nil, logs, signature, "AKIAIOSFODNN7EXAMPLE")
		}
	}
	t.Run("the request's own query values", func(t *testing.T) {
		r := req(srv.URL + "/v2/slow?sig=" + signature)
		_, err, logs := run(t, activities.Config{AllowedOrigins: []string{srv.URL}}, r)
		appErr := appError(t, err)
		assert.Equal(t, workflows.ErrTypeHTTPRetryableStatus, appErr.Type())
		assertNoPiece(t, err, nil, logs, signature)
	})
}

// TestNewRefusesWhatItCannotRedact (hardening 3, item 7): a Basic
// password under 8 bytes would never be redacted: New refuses it, naming
// the part; a Basic credential with an empty password (Stripe's form: the
// secret key is the user name) has its user name redacted.
func TestNewRefusesWhatItCannotRedact(t *testing.T) {
	const origin = "https://api.example.com"
	basic := func(user, pass string) string {
		return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
	}
	tests := []struct {
		name, value, want string
	}{
		{"short password", basic("acct_1234567890", "hunt3r"), "password"},
		{"password of 7", basic("acct_1234567890", "1234567"), "password"},
		{"short user without a password", basic("sk_test", ""), "user name"},
		{"short password, unpadded", strings.TrimRight(basic("acct_1234567890", "hunt3r"), "="), "password"},
		{"short user without a password, unpadded", strings.TrimRight(basic("sk_test", ""), "="), "user name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := activities.New(activities.Config{
				AllowedOrigins: []string{origin},
				Credentials:    map[string]http.Header{origin: {"Authorization": {tt.value}}},
			})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			assert.Contains(t, err.Error(), "Basic")
		})
	}
	t.Run("Stripe-style key as the user name is redacted", func(t *testing.T) {
		const key = "sk_test_51H8abcdefGHIJ"
		srv := newRecorder(t, status(401, `{"error":"invalid api key `+key+`"}`))
		cfg := activities.Config{
			AllowedOrigins: []string{srv.URL},
			Credentials:    map[string]http.Header{srv.URL: {"Authorization": {basic(key, "")}}},
		}
		_, err, logs := run(t, cfg, req(srv.URL))
		appError(t, err)
		assertNoPiece(t, err, nil, logs, key)
	})
	t.Run("password of 8 is redacted", func(t *testing.T) {
		const pass = "hunt3r-pw"
		srv := newRecorder(t, status(401, `{"error":"wrong password `+pass+`"}`))
		cfg := activities.Config{
			AllowedOrigins: []string{srv.URL},
			Credentials:    map[string]http.Header{srv.URL: {"Authorization": {basic("acct_1234567890", pass)}}},
		}
		_, err, logs := run(t, cfg, req(srv.URL))
		appError(t, err)
		assertNoPiece(t, err, nil, logs, pass)
	})
}

// TestWorkflowHeadersAreSentOrRefused (hardening 3, item 8): a header the
// workflow sets is either sent as set or refused before anything is sent;
// never accepted and then overwritten.
func TestWorkflowHeadersAreSentOrRefused(t *testing.T) {
	srv := newRecorder(t, status(201, `{}`))
	cfg := activities.Config{
		AllowedOrigins: []string{srv.URL},
		Propagator:     propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}),
	}
	t.Run("sent as set", func(t *testing.T) {
		r := req(srv.URL)
		r.Headers = map[string]string{"Accept": "application/vnd.api+json", "user-agent": "shop/2.1"}
		_, err, _ := run(t, cfg, r)
		require.NoError(t, err)
		got, _ := srv.last()
		assert.Equal(t, []string{"application/vnd.api+json"}, got.Header.Values("Accept"))
		assert.Equal(t, []string{"shop/2.1"}, got.Header.Values("User-Agent"))
	})
	t.Run("defaults", func(t *testing.T) {
		_, err, _ := run(t, cfg, req(srv.URL))
		require.NoError(t, err)
		got, _ := srv.last()
		assert.Equal(t, "application/json", got.Header.Get("Accept"))
		assert.Equal(t, "temporal-idempotent-http", got.Header.Get("User-Agent"))
	})
	for _, name := range []string{"Traceparent", "tracestate", "Baggage"} {
		t.Run("refused: "+name, func(t *testing.T) {
			before := srv.count()
			r := req(srv.URL)
			r.Headers = map[string]string{name: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
			_, err, _ := run(t, cfg, r)
			appErr := appError(t, err)
			assert.Equal(t, workflows.ErrTypeInvalidRequest, appErr.Type())
			assert.Contains(t, appErr.Message(), http.CanonicalHeaderKey(name))
			assert.Equal(t, before, srv.count(), "nothing sent")
		})
	}
}

// rawResponse answers with a hand-written status line, headers and body,
// then closes the connection (close-delimited when headers carry no
// Content-Length).
func rawResponse(status int, headers string, body []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		fmt.Fprintf(buf, "HTTP/1.1 %d %s\r\n%s\r\n", status, http.StatusText(status), headers)
		_, _ = buf.Write(body)
		_ = buf.Flush()
		_ = conn.Close()
	}
}

// TestEncodedBodiesReview: what an adversarial review of the decoding
// found, each failing before its fix: a body gzipped twice (the HTTP client
// used to undo one layer and drop Content-Encoding, hiding the other); a
// close-delimited coded body cut in transit (reported as a success); a
// thousand layers of deflate (a decompressor each, 85 MiB); a server's
// words in Content-Encoding shown in the Failure.
func TestEncodedBodiesReview(t *testing.T) {
	cfg := func(url string) activities.Config {
		return activities.Config{
			AllowedOrigins: []string{url},
			Credentials:    map[string]http.Header{url: {"Authorization": {"Bearer " + token}}},
		}
	}
	echo := []byte(`{"id":"pay_1","echo":"Bearer ` + token + `"}`)
	t.Run("gzip twice", func(t *testing.T) {
		wire := encodeAs("gzip", encodeAs("gzip", echo))
		srv := newRecorder(t, rawResponse(201, fmt.Sprintf("Content-Type: application/json\r\nContent-Encoding: gzip\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n", len(wire)), wire))
		resp, err, logs := run(t, cfg(srv.URL), req(srv.URL))
		require.NoError(t, err)
		assertNoPiece(t, err, resp, logs, token)
		assert.JSONEq(t, `{"id":"pay_1","echo":"Bearer [REDACTED]"}`, string(resp.Body))
	})
	t.Run("close-delimited deflate cut in transit", func(t *testing.T) {
		enc := encodeAs("deflate", []byte(`{"note":"`+strings.Repeat("abcdefghij", 300)+`"}`))
		srv := newRecorder(t, rawResponse(201, "Content-Type: application/json\r\nContent-Encoding: deflate\r\nConnection: close\r\n", enc[:len(enc)/2]))
		resp, err, _ := run(t, cfg(srv.URL), req(srv.URL))
		require.Nil(t, resp, "a 201 cut in transit is not a success")
		assert.Equal(t, workflows.ErrTypeNetworkError, appError(t, err).Type())
	})
	t.Run("more layers than decoded", func(t *testing.T) {
		wire := echo
		for range 1000 {
			wire = encodeAs("deflate", wire)
		}
		ce := strings.TrimSuffix(strings.Repeat("deflate,", 1000), ",")
		srv := newRecorder(t, rawResponse(201, fmt.Sprintf("Content-Type: application/json\r\nContent-Encoding: %s\r\nContent-Length: %d\r\n", ce, len(wire)), wire))
		resp, err, logs := run(t, cfg(srv.URL), req(srv.URL))
		require.NoError(t, err)
		assertNoPiece(t, err, resp, logs, token)
		assert.True(t, resp.BodyOmitted)
		assert.Equal(t, "encoded", resp.OmittedReason)
	})
	t.Run("a server's words as the coding", func(t *testing.T) {
		srv := newRecorder(t, rawResponse(400, "Content-Encoding: "+strings.ToLower(token)+"\r\nContent-Length: 2\r\n", []byte("xx")))
		_, err, logs := run(t, cfg(srv.URL), req(srv.URL))
		assertNoPiece(t, err, nil, logs, strings.ToLower(token))
		d, ok := workflows.AsFailure(err)
		require.True(t, ok)
		assert.Contains(t, d.Body, "unknown coding")
	})
}

// TestUnparsableLocationQuery: the HTTP client's own error quotes a
// Location it cannot parse, query value and all; it is redacted too.
func TestUnparsableLocationQuery(t *testing.T) {
	for _, code := range []int{302, 307} {
		srv := newRecorder(t, status(code, "", "Location", "/pay/%zz?session_token=LEAKEDQUERYVALUE"))
		r := req(srv.URL)
		r.MaximumAttempts = 1
		_, err, logs := run(t, activities.Config{AllowedOrigins: []string{srv.URL}}, r)
		appError(t, err)
		assertNoPiece(t, err, nil, logs, "LEAKEDQUERYVALUE")
	}
}
