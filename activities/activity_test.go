package activities_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/harness/registered"
	"github.com/idemhttp/temporal-idempotent-http/internal/backoff"
	"github.com/idemhttp/temporal-idempotent-http/internal/input"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

func TestNewRejectsBadConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  activities.Config
		want string
	}{
		{"origin with path", activities.Config{AllowedOrigins: []string{"https://api.example.com/v1"}}, "no path"},
		{"origin without scheme", activities.Config{AllowedOrigins: []string{"api.example.com"}}, "must be scheme://host[:port]"},
		{"origin ftp", activities.Config{AllowedOrigins: []string{"ftp://api.example.com"}}, "unsupported scheme"},
		{"credentials for unknown origin", activities.Config{
			AllowedOrigins: []string{"https://a.example.com"},
			Credentials:    map[string]activities.Credential{"https://b.example.com": {Header: http.Header{"Authorization": {"Bearer x"}}}},
		}, "not in Config.AllowedOrigins"},
		{"credential too short to redact", activities.Config{
			AllowedOrigins: []string{"https://a.example.com"},
			Credentials:    map[string]activities.Credential{"https://a.example.com": {Header: http.Header{"Authorization": {"Bearer abc"}}}},
		}, "shorter than 8 bytes"},
		{"credential scheme without token", activities.Config{
			AllowedOrigins: []string{"https://a.example.com"},
			Credentials:    map[string]activities.Credential{"https://a.example.com": {Header: http.Header{"Authorization": {"Bearer "}}}},
		}, "shorter than 8 bytes"},
		{"convention for unknown origin", activities.Config{
			AllowedOrigins: []string{"https://a.example.com"},
			Conventions:    map[string]activities.Convention{"https://b.example.com": activities.StripeConvention()},
		}, "not in Config.AllowedOrigins"},
		{"convention key header that is a credential", activities.Config{
			AllowedOrigins: []string{"https://a.example.com"},
			Conventions:    map[string]activities.Convention{"https://a.example.com": {KeyHeader: "X-Auth-Token"}},
		}, "looks like a credential"},
		// Issue 30, item 3: a response header named like a credential
		// (redact.IsCredential) would be copied into history.
		{"result header that is a credential", activities.Config{
			AllowedOrigins: []string{"https://a.example.com"},
			ResultHeaders:  []string{"Content-Type", "Set-Cookie"},
		}, "Config.ResultHeaders names Set-Cookie"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := activities.New(tt.cfg)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

// TestBadInputSendsNothing: every invalid request fails at once with a
// non-retryable error of a clear type and message, and nothing is sent.
func TestBadInputSendsNothing(t *testing.T) {
	srv := newRecorder(t, status(201, `{}`))
	cfg := activities.Config{
		AllowedOrigins: []string{srv.URL},
		Credentials:    map[string]activities.Credential{srv.URL: {Header: http.Header{"x-api-key": {token}, "x-partner-ID": {"partner-0042"}}}},
	}
	with := func(f func(*input.Input)) input.Input {
		r := req(srv.URL + "/payments")
		f(&r)
		return r
	}
	tests := []struct {
		name     string
		req      input.Input
		wantType string
		want     string
	}{
		{"unparsable URL", with(func(r *input.Input) { r.URL = "http://[::1" }), workflows.ErrTypeInvalidRequest, "invalid URL"},
		{"relative URL", with(func(r *input.Input) { r.URL = "/payments" }), workflows.ErrTypeInvalidRequest, "not an absolute URL"},
		{"ftp scheme", with(func(r *input.Input) { r.URL = "ftp://example.com/x" }), workflows.ErrTypeInvalidRequest, "unsupported scheme"},
		{"file scheme", with(func(r *input.Input) { r.URL = "file:///etc/passwd" }), workflows.ErrTypeInvalidRequest, "unsupported scheme"},
		{"no host", with(func(r *input.Input) { r.URL = "http:///x" }), workflows.ErrTypeInvalidRequest, "no host"},
		{"user info", with(func(r *input.Input) { r.URL = strings.Replace(srv.URL, "://", "://u:pw@", 1) }), workflows.ErrTypeInvalidRequest, "user info"},
		{"origin not allowed", with(func(r *input.Input) { r.URL = "http://127.0.0.2:9/x" }), workflows.ErrTypeOriginNotAllowed, "not allowed by this worker"},
		{"same host other port", with(func(r *input.Input) { r.URL = "http://127.0.0.1:1/x" }), workflows.ErrTypeOriginNotAllowed, "not allowed"},
		{"missing key", with(func(r *input.Input) { r.IdempotencyKey = "" }), workflows.ErrTypeInvalidRequest, "missing idempotency key"},
		{"key too long", with(func(r *input.Input) { r.IdempotencyKey = strings.Repeat("k", 256) }), workflows.ErrTypeInvalidRequest, "at most 255"},
		{"key with space", with(func(r *input.Input) { r.IdempotencyKey = "a b" }), workflows.ErrTypeInvalidRequest, "printable ASCII"},
		{"GET", with(func(r *input.Input) { r.Method = "GET" }), workflows.ErrTypeInvalidRequest, "use POST, PUT, PATCH or DELETE"},
		{"Authorization in input", with(func(r *input.Input) { r.Headers = map[string]string{"authorization": "Bearer x"} }), workflows.ErrTypeInvalidRequest, "looks like a credential"},
		{"Cookie in input", with(func(r *input.Input) { r.Headers = map[string]string{"Cookie": "s=1"} }), workflows.ErrTypeInvalidRequest, "looks like a credential"},
		{"credential header in input", with(func(r *input.Input) { r.Headers = map[string]string{"X-Api-Key": "x"} }), workflows.ErrTypeInvalidRequest, "looks like a credential"},
		{"configured credential header in any case", with(func(r *input.Input) { r.Headers = map[string]string{"x-partner-id": "x"} }), workflows.ErrTypeInvalidRequest, "the worker sets it"},
		{"header names differing only in case", with(func(r *input.Input) { r.Headers = map[string]string{"X-Note": "a", "x-note": "b"} }), workflows.ErrTypeInvalidRequest, "differ only in case"},
		{"header value with a control character", with(func(r *input.Input) { r.Headers = map[string]string{"X-Note": "a\x01b"} }), workflows.ErrTypeInvalidRequest, "control character"},
		{"body over the bound", with(func(r *input.Input) { r.Body = json.RawMessage(`"` + strings.Repeat("a", 256<<10) + `"`) }), workflows.ErrTypeInvalidRequest, "at most 262144"},
		{"operation with NUL", with(func(r *input.Input) { r.Operation = "charge\x00x" }), workflows.ErrTypeInvalidRequest, "NUL"},
		{"user info in URL", with(func(r *input.Input) {
			r.URL = strings.Replace(r.URL, "http://", "http://user:hunter2hunter2@", 1)
		}), workflows.ErrTypeInvalidRequest, "user info"},
		{"key header in input", with(func(r *input.Input) { r.Headers = map[string]string{"Idempotency-Key": "x"} }), workflows.ErrTypeInvalidRequest, "IdempotencyKey"},
		{"invalid header name", with(func(r *input.Input) { r.Headers = map[string]string{"Bad Header": "x"} }), workflows.ErrTypeInvalidRequest, "invalid header name"},
		{"header injection", with(func(r *input.Input) { r.Headers = map[string]string{"X-Note": "a\r\nX-Evil: 1"} }), workflows.ErrTypeInvalidRequest, "control character"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := run(t, cfg, tt.req)
			appErr := appError(t, err)
			assert.Equal(t, tt.wantType, appErr.Type())
			assert.True(t, appErr.NonRetryable())
			assert.Contains(t, appErr.Message(), tt.want)
			assert.Equal(t, 0, srv.count(), "nothing may be sent")
		})
	}
}

func TestRequestCarriesKeyBodyAndCredentials(t *testing.T) {
	srv := newRecorder(t, status(201, `{"id":"rec_1"}`, "Content-Type", "application/json", "X-Request-Id", "r-9"))
	cfg := activities.Config{
		AllowedOrigins: []string{srv.URL},
		Credentials:    map[string]activities.Credential{srv.URL: {Header: http.Header{"Authorization": {"Bearer " + token}}}},
	}
	for _, method := range []string{"", "POST", "put", "PATCH", "DELETE"} {
		t.Run("method "+method, func(t *testing.T) {
			r := req(srv.URL + "/payments?x=1#frag")
			r.Method = method
			r.Headers = map[string]string{"X-Correlation": "c-1"}
			resp, logs, err := run(t, cfg, r)
			require.NoError(t, err)
			got, body := srv.last()
			want := strings.ToUpper(method)
			if want == "" {
				want = "POST"
			}
			assert.Equal(t, want, got.Method)
			assert.Equal(t, "/payments", got.URL.Path)
			assert.Equal(t, "x=1", got.URL.RawQuery)
			assert.Equal(t, "key-1", got.Header.Get("Idempotency-Key"))
			assert.Equal(t, "application/json", got.Header.Get("Content-Type"))
			assert.Equal(t, "Bearer "+token, got.Header.Get("Authorization"))
			assert.Equal(t, "c-1", got.Header.Get("X-Correlation"))
			assert.JSONEq(t, `{"amount":42}`, string(body))
			assert.Equal(t, 201, resp.Status)
			assert.JSONEq(t, `{"id":"rec_1"}`, string(resp.Body))
			assert.Equal(t, "r-9", resp.Headers["X-Request-Id"])
			assert.Equal(t, int32(1), resp.Attempt)
			assert.Equal(t, "key-1", resp.IdempotencyKey)
			assert.NotContains(t, logs, token, "logs must not contain the token")
		})
	}
}

func TestSuccessBodies(t *testing.T) {
	big := strings.Repeat("x", 2048)
	tests := []struct {
		name        string
		handler     http.HandlerFunc
		maxBytes    int64
		wantJSON    string
		wantRaw     string
		wantOmitted bool
		wantBytes   int64
		wantReplay  bool
	}{
		{"json", status(200, `{"ok":true}`, "Content-Type", "application/json"), 0, `{"ok":true}`, "", false, 11, false},
		{"json without content type", status(200, `[1,2]`), 0, `[1,2]`, "", false, 5, false},
		{"text", status(200, "done", "Content-Type", "text/plain"), 0, "", "done", false, 4, false},
		{"no content", status(204, ""), 0, "", "", false, 0, false},
		{"replayed", status(201, `{"id":1}`, "Idempotent-Replayed", "true"), 0, `{"id":1}`, "", false, 8, true},
		{"over the cap", status(200, `"`+big+`"`), 1024, "", "", true, 2050, false},
		{"exactly the cap", status(200, big[:1024]), 1024, "", big[:1024], false, 1024, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newRecorder(t, tt.handler)
			resp, _, err := run(t, activities.Config{AllowedOrigins: []string{srv.URL}, MaxResponseBytes: tt.maxBytes}, req(srv.URL))
			require.NoError(t, err, "a 2xx is a success, whatever its body")
			if tt.wantJSON != "" {
				assert.JSONEq(t, tt.wantJSON, string(resp.Body))
			} else {
				assert.Empty(t, resp.Body)
			}
			assert.Equal(t, tt.wantRaw, string(resp.RawBody))
			assert.Equal(t, tt.wantOmitted, resp.BodyOmitted)
			assert.Equal(t, tt.wantBytes, resp.BodyBytes)
			assert.Equal(t, tt.wantReplay, resp.Replayed)
			assert.Equal(t, 1, srv.count())
		})
	}
}

func TestFailureStatuses(t *testing.T) {
	future := time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat)
	tests := []struct {
		name          string
		handler       http.HandlerFunc
		wantType      string
		nonRetryable  bool
		wantDelay     time.Duration // exact, 0: check range
		maxDelay      time.Duration
		wantInMessage string
	}{
		{"400", status(400, `{"error":"amount must be positive"}`), workflows.ErrTypeHTTPClientError, true, 0, 0, "amount must be positive"},
		{"401", status(401, ""), workflows.ErrTypeHTTPClientError, true, 0, 0, "401 Unauthorized"},
		{"404", status(404, ""), workflows.ErrTypeHTTPClientError, true, 0, 0, "fix the request"},
		{"409 without Retry-After", status(409, ""), workflows.ErrTypeHTTPClientError, true, 0, 0, "409 Conflict"},
		{"422", status(422, ""), workflows.ErrTypeHTTPClientError, true, 0, 0, "422"},
		{"501", status(501, ""), workflows.ErrTypeHTTPNonRetryableStatus, true, 0, 0, "501"},
		{"503 jitter", status(503, ""), workflows.ErrTypeHTTPRetryableStatus, false, 0, 200 * time.Millisecond, "full jitter"},
		{"429 Retry-After seconds", status(429, "", "Retry-After", "7"), workflows.ErrTypeHTTPRetryableStatus, false, 7 * time.Second, 0, `Retry-After "7"`},
		{"409 in flight", status(409, "", "Retry-After", "1"), workflows.ErrTypeIdempotencyKeyInFlight, false, time.Second, 0, "Retry-After"},
		{"503 Retry-After date", status(503, "", "Retry-After", future), workflows.ErrTypeHTTPRetryableStatus, false, 0, 91 * time.Second, "Retry-After"},
		{"503 Retry-After garbage", status(503, "", "Retry-After", "soon"), workflows.ErrTypeHTTPRetryableStatus, false, 0, 200 * time.Millisecond, "jitter"},
		{"503 Retry-After negative", status(503, "", "Retry-After", "-3"), workflows.ErrTypeHTTPRetryableStatus, false, 0, 200 * time.Millisecond, "jitter"},
		{"503 Retry-After huge is capped", status(503, "", "Retry-After", "99999999"), workflows.ErrTypeHTTPRetryableStatus, false, time.Minute, 0, "Retry-After"},
		{"503 Retry-After 0", status(503, "", "Retry-After", "0"), workflows.ErrTypeHTTPRetryableStatus, false, backoff.MinRetryDelay, 0, "Retry-After"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newRecorder(t, tt.handler)
			// Admission off: with it, a 503 or 429 without Retry-After is
			// paced by the limiter instead (TestAdmissionPacesThrottles).
			cfg := activities.Config{AllowedOrigins: []string{srv.URL}, MaxRetryAfter: time.Minute, Admission: activities.Admission{Off: true}}
			r := req(srv.URL)
			r.Backoff = backoff.Backoff{InitialInterval: 200 * time.Millisecond, MaximumInterval: 10 * time.Second}
			_, _, err := run(t, cfg, r)
			appErr := appError(t, err)
			assert.Equal(t, tt.wantType, appErr.Type())
			assert.Equal(t, tt.nonRetryable, appErr.NonRetryable())
			assert.Contains(t, appErr.Message(), tt.wantInMessage)
			d, ok := workflows.AsFailure(err)
			require.True(t, ok, "details attached")
			assert.Equal(t, "key-1", d.IdempotencyKey)
			assert.Equal(t, int32(1), d.Attempt)
			assert.NotZero(t, d.Status)
			if tt.nonRetryable {
				assert.Zero(t, appErr.NextRetryDelay())
				return
			}
			if tt.wantDelay > 0 {
				assert.Equal(t, tt.wantDelay, appErr.NextRetryDelay())
			} else {
				assert.Greater(t, appErr.NextRetryDelay(), time.Duration(0))
				assert.LessOrEqual(t, appErr.NextRetryDelay(), tt.maxDelay)
			}
			assert.Equal(t, appErr.NextRetryDelay(), d.NextRetryDelay)
			assert.Equal(t, 1, srv.count())
		})
	}
}

func TestJitterNoneLeavesDelayToTemporal(t *testing.T) {
	srv := newRecorder(t, status(503, ""))
	r := req(srv.URL)
	r.Backoff.Jitter = backoff.JitterNone
	_, _, err := run(t, activities.Config{AllowedOrigins: []string{srv.URL}, Admission: activities.Admission{Off: true}}, r)
	appErr := appError(t, err)
	assert.False(t, appErr.NonRetryable())
	assert.Zero(t, appErr.NextRetryDelay(), "JitterNone must not set NextRetryDelay")
}

func TestNetworkErrors(t *testing.T) {
	slow := newRecorder(t, func(w http.ResponseWriter, _ *http.Request) { time.Sleep(300 * time.Millisecond) })
	cut := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		conn, buf, _ := w.(http.Hijacker).Hijack()
		_, _ = buf.WriteString("HTTP/1.1 500 Internal Server Error\r\nContent-Length: 100\r\n\r\n{\"partial\":")
		_ = buf.Flush()
		_ = conn.Close()
	}))
	t.Cleanup(cut.Close)
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	t.Cleanup(tlsSrv.Close)
	plain := newRecorder(t, status(200, "{}"))
	// A port with nothing listening: connection refused. Taken after the
	// servers above, or one of them may be given the port it freed (the
	// body-cut server once was: a 500 where a refusal was expected).
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	refused := "http://" + ln.Addr().String()
	require.NoError(t, ln.Close())

	tests := []struct {
		name     string
		url      string
		client   *http.Client
		wantType string
		retry    bool
	}{
		{"connection refused", refused, nil, workflows.ErrTypeNetworkError, true},
		{"slow response", slow.URL, &http.Client{Timeout: 50 * time.Millisecond}, workflows.ErrTypeNetworkError, true},
		{"body cut short", cut.URL, nil, workflows.ErrTypeNetworkError, true},
		{"untrusted certificate", tlsSrv.URL, nil, workflows.ErrTypeTLSCertificateError, false},
		{"https to a plain http server", strings.Replace(plain.URL, "http://", "https://", 1), nil, workflows.ErrTypeTLSCertificateError, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := run(t, activities.Config{AllowedOrigins: []string{tt.url}, HTTPClient: tt.client}, req(tt.url))
			appErr := appError(t, err)
			assert.Equal(t, tt.wantType, appErr.Type())
			assert.Equal(t, !tt.retry, appErr.NonRetryable())
			if tt.retry {
				assert.Greater(t, appErr.NextRetryDelay(), time.Duration(0))
			}
			d, ok := workflows.AsFailure(err)
			require.True(t, ok)
			if tt.name != "body cut short" {
				assert.Zero(t, d.Status, "no response status")
			}
		})
	}
}

func TestRedirects(t *testing.T) {
	other := newRecorder(t, status(201, `{"other":true}`))
	var srv *recorder
	srv = newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/temp":
			http.Redirect(w, r, "/final", http.StatusTemporaryRedirect)
		case "/perm":
			http.Redirect(w, r, srv.URL+"/final", http.StatusPermanentRedirect)
		case "/found":
			http.Redirect(w, r, "/final", http.StatusFound)
		case "/see-other":
			http.Redirect(w, r, "/final", http.StatusSeeOther)
		case "/moved":
			http.Redirect(w, r, "/final", http.StatusMovedPermanently)
		case "/cross":
			http.Redirect(w, r, other.URL+"/final", http.StatusTemporaryRedirect)
		case "/loop":
			http.Redirect(w, r, "/loop", http.StatusTemporaryRedirect)
		case "/final":
			status(201, `{"final":true}`)(w, r)
		}
	})
	cfg := activities.Config{
		AllowedOrigins: []string{srv.URL, other.URL},
		Credentials:    map[string]activities.Credential{srv.URL: {Header: http.Header{"Authorization": {"Bearer " + token}}}},
	}
	tests := []struct {
		path         string
		wantOK       bool
		wantRequests int
		wantLocation string
	}{
		{"/temp", true, 2, ""},
		{"/perm", true, 2, ""},
		{"/found", false, 1, "/final"},
		{"/see-other", false, 1, "/final"},
		{"/moved", false, 1, "/final"},
		{"/cross", false, 1, "/final"},
		{"/loop", false, 6, "/loop"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			before, otherBefore := srv.count(), other.count()
			resp, _, err := run(t, cfg, req(srv.URL+tt.path))
			assert.Equal(t, tt.wantRequests, srv.count()-before)
			assert.Equal(t, 0, other.count()-otherBefore, "never follow to another origin")
			if tt.wantOK {
				require.NoError(t, err)
				assert.JSONEq(t, `{"final":true}`, string(resp.Body))
				got, body := srv.last()
				assert.Equal(t, "POST", got.Method, "a POST stays a POST")
				assert.Equal(t, "key-1", got.Header.Get("Idempotency-Key"))
				assert.JSONEq(t, `{"amount":42}`, string(body))
				return
			}
			appErr := appError(t, err)
			assert.Equal(t, workflows.ErrTypeRedirectNotFollowed, appErr.Type())
			assert.True(t, appErr.NonRetryable())
			assert.Contains(t, appErr.Message(), tt.wantLocation)
			d, _ := workflows.AsFailure(err)
			assert.Contains(t, d.Location, tt.wantLocation)
		})
	}
}

// TestCredentialsStayOnTheWorker: the token goes only to its own origin and
// never into a result, an error or a log, even when a server echoes it.
func TestCredentialsStayOnTheWorker(t *testing.T) {
	echo := func(code int) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("X-Request-Id", r.Header.Get("Authorization"))
			w.WriteHeader(code)
			_, _ = fmt.Fprintf(w, `{"you_sent":%q}`, r.Header.Get("Authorization"))
		}
	}
	for _, code := range []int{200, 400, 503} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			own := newRecorder(t, echo(code))
			foreign := newRecorder(t, echo(code))
			cfg := activities.Config{
				AllowedOrigins: []string{own.URL, foreign.URL},
				Credentials:    map[string]activities.Credential{own.URL: {Header: http.Header{"Authorization": {"Bearer " + token}}}},
			}
			resp, logs, err := run(t, cfg, req(own.URL))
			got, _ := own.last()
			assert.Equal(t, "Bearer "+token, got.Header.Get("Authorization"), "the token reaches its origin")
			out, _ := json.Marshal(resp)
			assert.NotContains(t, string(out), token, "result")
			if err != nil {
				assert.NotContains(t, err.Error(), token, "error message")
				d, _ := workflows.AsFailure(err)
				dj, _ := json.Marshal(d)
				assert.NotContains(t, string(dj), token, "error details")
			}
			assert.NotContains(t, logs, token, "logs")

			_, _, _ = run(t, cfg, req(foreign.URL))
			got, _ = foreign.last()
			assert.Empty(t, got.Header.Get("Authorization"), "no token for another origin")
		})
	}
}

func TestConcurrentAttempts(t *testing.T) {
	var n atomic.Int32
	srv := newRecorder(t, func(w http.ResponseWriter, _ *http.Request) {
		n.Add(1)
		status(201, `{}`)(w, nil)
	})
	a, err := activities.New(activities.Config{AllowedOrigins: []string{srv.URL}})
	require.NoError(t, err)
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			var s testsuite.WorkflowTestSuite
			env := s.NewTestActivityEnvironment()
			a.Register(env)
			r := req(srv.URL)
			r.IdempotencyKey = fmt.Sprintf("k-%d", i)
			_, err := env.ExecuteActivity(input.ActivityName, r)
			assert.NoError(t, err)
		})
	}
	wg.Wait()
	assert.Equal(t, int32(16), n.Load())
}

// TestDoOutsideAnActivity: called outside a Temporal activity (there is no
// retry policy to drive it), the HTTP activity returns an error instead of panicking.
func TestDoOutsideAnActivity(t *testing.T) {
	acts, err := activities.New(activities.Config{AllowedOrigins: []string{"https://pay.example.com"}})
	require.NoError(t, err)
	resp, err := registered.Of(acts).Do(t.Context(), req("https://pay.example.com/payments"))
	assert.Nil(t, resp)
	assert.ErrorContains(t, err, "runs only as a Temporal activity")
}

// TestCredentialsInLocationAndSchemeLikeValues: a token in a redirect's
// path, and a credential value whose first word merely looks like an auth
// scheme, never reach the error or its details.
func TestCredentialsInLocationAndSchemeLikeValues(t *testing.T) {
	const sig = "0123456789abcdef01234567 1700000000"
	tests := []struct {
		name    string
		handler http.HandlerFunc
	}{
		{"token in a redirect path", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Location", "https://elsewhere.example/cb/"+token+"/x")
			w.WriteHeader(http.StatusFound)
		}},
		{"scheme-like credential echoed", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte("bad signature " + r.Header.Get("X-Signature") + " and " + r.Header.Get("Authorization")))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newRecorder(t, tt.handler)
			cfg := activities.Config{AllowedOrigins: []string{srv.URL}, Credentials: map[string]activities.Credential{srv.URL: {Header: http.Header{
				"X-Signature": {sig}, "Authorization": {"Bearer " + token},
			}}}}
			_, _, err := run(t, cfg, req(srv.URL+"/payments"))
			require.Error(t, err)
			d, _ := workflows.AsFailure(err)
			all := err.Error() + " " + d.Location + " " + d.Body
			for _, secret := range []string{token, "0123456789abcdef01234567", "1700000000"} {
				for i := 0; i+8 <= len(secret); i++ {
					assert.NotContains(t, all, secret[i:i+8])
				}
			}
		})
	}
}
