package activities_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/propagation"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/internal/input"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// TestRequestDecodesPlainJSONBody (class 7): activity input written before
// bodies travelled in their exact form has the body as plain JSON; it
// still decodes, to that JSON's text; the exact form round-trips.
func TestRequestDecodesPlainJSONBody(t *testing.T) {
	for in, want := range map[string]string{
		`{"url":"https://x.example/p","idempotency_key":"k","body":{"amount":42}}`:    `{"amount":42}`,
		`{"url":"https://x.example/p","idempotency_key":"k","body":[1, 2]}`:           `[1, 2]`,
		`{"url":"https://x.example/p","idempotency_key":"k","body":"{\"a\": \"<\"}"}`: `{"a": "<"}`,
		`{"url":"https://x.example/p","idempotency_key":"k","body":null}`:             ``,
	} {
		var r input.Input
		require.NoError(t, json.Unmarshal([]byte(in), &r), in)
		assert.Equal(t, want, string(r.Body), in)
		assert.Equal(t, "k", r.IdempotencyKey)
		enc, err := json.Marshal(r)
		require.NoError(t, err)
		var again input.Input
		require.NoError(t, json.Unmarshal(enc, &again))
		assert.Equal(t, want, string(again.Body), "round trip of %s", enc)
	}
}

// TestUnsafeInputRefusedOddAnswersClassified (classes 8–11): what the old
// activity sent or classified wrongly: control characters other than CR, LF
// and NUL in header values, three spellings of one header name, bodies over
// 256 KiB, NUL in operation names, hosts that are not ASCII (all refused
// before anything is sent); 425 Too Early (retried); several Retry-After
// headers (the longest valid one wins).
func TestUnsafeInputRefusedOddAnswersClassified(t *testing.T) {
	t.Run("refused", func(t *testing.T) {
		srv := newRecorder(t, status(201, `{}`))
		cfg := activities.Config{AllowedOrigins: []string{srv.URL, "http://xn--bcher-kva.example"}}
		with := func(f func(*input.Input)) input.Input {
			r := req(srv.URL + "/payments")
			f(&r)
			return r
		}
		tests := []struct {
			name string
			req  input.Input
			want string
		}{
			{"ESC in a header value", with(func(r *input.Input) { r.Headers = map[string]string{"X-Note": "a\x1b[31mb"} }), "control character"},
			{"DEL in a header value", with(func(r *input.Input) { r.Headers = map[string]string{"X-Note": "a\x7fb"} }), "control character"},
			{"vertical tab in a header value", with(func(r *input.Input) { r.Headers = map[string]string{"X-Note": "a\vb"} }), "control character"},
			{"three spellings of one header", with(func(r *input.Input) {
				r.Headers = map[string]string{"X-Note": "a", "x-note": "b", "X-NOTE": "c"}
			}), "differ only in case"},
			{"body one byte over 256 KiB", with(func(r *input.Input) { r.Body = json.RawMessage(`"` + strings.Repeat("a", 256<<10-1) + `"`) }), "at most 262144"},
			{"operation with NUL", with(func(r *input.Input) { r.Operation = "charge\x00refund" }), "NUL"},
			{"non-ASCII host", with(func(r *input.Input) { r.URL = "http://bücher.example/pay" }), "punycode"},
			{"percent-encoded non-ASCII host", with(func(r *input.Input) { r.URL = "http://b%C3%BCcher.example/pay" }), "punycode"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				before := srv.count()
				_, _, err := run(t, cfg, tt.req)
				appErr := appError(t, err)
				assert.Equal(t, workflows.ErrTypeInvalidRequest, appErr.Type(), appErr.Message())
				assert.True(t, appErr.NonRetryable())
				assert.Contains(t, appErr.Message(), tt.want)
				assert.Equal(t, before, srv.count(), "nothing sent")
			})
		}
		t.Run("body of exactly 256 KiB", func(t *testing.T) {
			body := `"` + strings.Repeat("a", 256<<10-2) + `"`
			_, _, err := run(t, cfg, with(func(r *input.Input) { r.Body = json.RawMessage(body) }))
			require.NoError(t, err)
			_, got := srv.last()
			assert.Equal(t, body, string(got))
		})
	})
	t.Run("answers", func(t *testing.T) {
		tests := []struct {
			name      string
			status    int
			header    http.Header
			wantType  string
			wantDelay time.Duration // 0: any backoff
		}{
			{"425 Too Early is retried", 425, nil, workflows.ErrTypeHTTPRetryableStatus, 0},
			{"425 with Retry-After", 425, http.Header{"Retry-After": {"3"}}, workflows.ErrTypeHTTPRetryableStatus, 3 * time.Second},
			{"several Retry-After: the longest valid", 503, http.Header{"Retry-After": {"2", "garbage", "7"}}, workflows.ErrTypeHTTPRetryableStatus, 7 * time.Second},
			{"several Retry-After: garbage first", 429, http.Header{"Retry-After": {"soon", "4"}}, workflows.ErrTypeHTTPRetryableStatus, 4 * time.Second},
			{"several Retry-After: a date and seconds", 503, http.Header{"Retry-After": {"1", time.Now().Add(9 * time.Second).UTC().Format(http.TimeFormat)}}, workflows.ErrTypeHTTPRetryableStatus, 9 * time.Second},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				srv := newRecorder(t, func(w http.ResponseWriter, _ *http.Request) {
					for k, vs := range tt.header {
						for _, v := range vs {
							w.Header().Add(k, v)
						}
					}
					w.WriteHeader(tt.status)
				})
				_, _, err := run(t, activities.Config{AllowedOrigins: []string{srv.URL}}, req(srv.URL))
				appErr := appError(t, err)
				assert.Equal(t, tt.wantType, appErr.Type(), appErr.Message())
				assert.False(t, appErr.NonRetryable(), appErr.Message())
				if tt.wantDelay > 0 {
					assert.InDelta(t, tt.wantDelay, appErr.NextRetryDelay(), float64(1100*time.Millisecond), appErr.Message())
				} else {
					assert.Positive(t, appErr.NextRetryDelay())
				}
			})
		}
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
		_, _, err := run(t, cfg, r)
		require.NoError(t, err)
		got, _ := srv.last()
		assert.Equal(t, []string{"application/vnd.api+json"}, got.Header.Values("Accept"))
		assert.Equal(t, []string{"shop/2.1"}, got.Header.Values("User-Agent"))
	})
	t.Run("defaults", func(t *testing.T) {
		_, _, err := run(t, cfg, req(srv.URL))
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
			_, _, err := run(t, cfg, r)
			appErr := appError(t, err)
			assert.Equal(t, workflows.ErrTypeInvalidRequest, appErr.Type())
			assert.Contains(t, appErr.Message(), http.CanonicalHeaderKey(name))
			assert.Equal(t, before, srv.count(), "nothing sent")
		})
	}
}
