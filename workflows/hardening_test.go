package workflows_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	idemtest "github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// rawServer records every request body byte for byte and answers with
// answer, which sees the request number (from 1) and the body.
type rawServer struct {
	*httptest.Server
	mu     sync.Mutex
	bodies [][]byte
	paths  []string
	answer func(w http.ResponseWriter, r *http.Request, n int)
}

func newRawServer(t *testing.T, answer func(w http.ResponseWriter, r *http.Request, n int)) *rawServer {
	s := &rawServer{answer: answer}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.bodies = append(s.bodies, b)
		s.paths = append(s.paths, r.URL.Path)
		n := len(s.bodies)
		s.mu.Unlock()
		s.answer(w, r, n)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *rawServer) requests() ([][]byte, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]byte(nil), s.bodies...), append([]string(nil), s.paths...)
}

func answer(status int, body string, kv ...string) func(http.ResponseWriter, *http.Request, int) {
	return func(w http.ResponseWriter, _ *http.Request, _ int) {
		for i := 0; i+1 < len(kv); i += 2 {
			w.Header().Set(kv[i], kv[i+1])
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

// loggedEnv is a test workflow environment with the activity and the ready
// workflow registered (testsuite.Register), whose logs go to the returned
// buffer as JSON lines, and which counts the activity attempts started.
func loggedEnv(t *testing.T, cfg activities.Config) (*testsuite.TestWorkflowEnvironment, *bytes.Buffer, *int) {
	var logs bytes.Buffer
	var s testsuite.WorkflowTestSuite
	s.SetLogger(log.NewStructuredLogger(slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	env := s.NewTestWorkflowEnvironment()
	// The SDK's 3 s default is close to what a 1 MiB body takes through
	// the converter with -race on a loaded machine.
	env.SetTestTimeout(30 * time.Second)
	idemtest.Register(t, env, nil, cfg)
	started := new(int)
	env.SetOnActivityStartedListener(func(*activity.Info, context.Context, converter.EncodedValues) { *started++ })
	return env, &logs, started
}

// logLines returns the decoded JSON log lines whose msg is msg.
func logLines(t *testing.T, logs *bytes.Buffer, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

func sha(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// TestCredentialHeadersRefusedBeforeScheduling (hardening issue, class 4):
// a header whose name looks like a credential, in any spelling, is refused
// by workflows.Call before the activity is scheduled, so its value never
// reaches Temporal's history; ordinary headers go through to the server.
func TestCredentialHeadersRefusedBeforeScheduling(t *testing.T) {
	srv := newRawServer(t, answer(201, `{}`))
	tests := []struct {
		name    string
		refused bool
	}{
		{"Authorization", true},
		{"authorization", true},
		{"Proxy-Authorization", true},
		{"Cookie", true},
		{"X-Api-Key", true},
		{"x-api-key", true},
		{"X-API-KEY", true},
		{"Api-Key", true},
		{"Apikey", true},
		{"X-Auth-Token", true},
		{"X-Access-Token", true},
		{"X-Amz-Security-Token", true},
		{"Ocp-Apim-Subscription-Key", true},
		{"X-Client-Secret", true},
		{"X-Csrf-Token", true},
		{"X-Session-Id", true},
		{"Private-Token", true},
		{"X_Api_Key", true},
		{"X-Correlation-Id", false},
		{"Accept-Language", false},
		{"X-Request-Id", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env, _, started := loggedEnv(t, activities.Config{AllowedOrigins: []string{srv.URL}})
			before, _ := srv.requests()
			var got *workflows.Response
			env.ExecuteWorkflow(func(ctx workflow.Context) error {
				var err error
				got, err = workflows.Call(ctx, workflows.Request{
					Operation: "charge", URL: srv.URL + "/payments", Body: json.RawMessage(`{"amount":1}`),
					Headers: map[string]string{tt.name: "secret-value-0123456789"},
				})
				return err
			})
			err := env.GetWorkflowError()
			after, _ := srv.requests()
			if !tt.refused {
				require.NoError(t, err)
				assert.Equal(t, 201, got.Status)
				assert.Equal(t, 1, *started)
				assert.Len(t, after, len(before)+1)
				return
			}
			var appErr *temporal.ApplicationError
			require.True(t, errors.As(err, &appErr), "got %v", err)
			assert.Equal(t, workflows.ErrTypeInvalidRequest, appErr.Type())
			assert.True(t, appErr.NonRetryable())
			assert.Contains(t, appErr.Message(), "looks like a credential")
			assert.NotContains(t, appErr.Message(), "secret-value-0123456789", "the value is not repeated")
			assert.Zero(t, *started, "no activity scheduled")
			assert.Len(t, after, len(before), "nothing sent")
		})
	}
}

// TestOversizedResultsStayUnderThePayloadLimit (class 5): a 201 whose body
// would pass Temporal's payload limit once encoded (JSON escaping makes a
// string of '<' six times longer, base64 a binary body 4/3) is a success
// with the body omitted, identified by its size and SHA-256, and the
// encoded result stays within Config.MaxResultBytes; the ready workflow in
// the test environment returns it.
func TestOversizedResultsStayUnderThePayloadLimit(t *testing.T) {
	lt := []byte(`{"html":"` + strings.Repeat("<", 1<<20-16) + `"}`)
	require.LessOrEqual(t, len(lt), activities.DefaultMaxResponseBytes, "within MaxResponseBytes: only the encoding is too large")
	bin := func(n int) []byte {
		b := make([]byte, n)
		_, _ = rand.Read(b)
		b[0] = 0xff // never valid JSON
		return b
	}
	tests := []struct {
		name        string
		body        []byte
		ctype       string
		maxResult   int
		wantOmitted bool
	}{
		{"1 MiB of < in one JSON string", lt, "application/json", 0, true},
		{"1 MiB of binary under the default bound", bin(1 << 20), "application/octet-stream", 0, false},
		{"binary whose base64 fits", bin(180 << 10), "application/octet-stream", 256 << 10, false},
		{"binary whose base64 does not fit", bin(200 << 10), "application/octet-stream", 256 << 10, true},
		{"JSON of < that fits unescaped but not escaped", []byte(`"` + strings.Repeat("<", 100<<10) + `"`), "application/json", 256 << 10, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newRawServer(t, answer(201, string(tt.body), "Content-Type", tt.ctype))
			cfg := activities.Config{AllowedOrigins: []string{srv.URL}, MaxResultBytes: tt.maxResult}
			bound := tt.maxResult
			if bound == 0 {
				bound = activities.DefaultMaxResultBytes
			}
			env, _, _ := loggedEnv(t, cfg)
			env.ExecuteWorkflow(workflows.WorkflowName, workflows.Request{Operation: "report", URL: srv.URL + "/reports", Body: json.RawMessage(`{}`)})
			require.NoError(t, env.GetWorkflowError())
			var resp workflows.Response
			require.NoError(t, env.GetWorkflowResult(&resp))
			assert.Equal(t, 201, resp.Status)
			assert.Equal(t, int64(len(tt.body)), resp.BodyBytes)

			enc, err := json.Marshal(resp)
			require.NoError(t, err)
			assert.LessOrEqual(t, len(enc), bound, "json.Marshal of the result")
			p, err := converter.GetDefaultDataConverter().ToPayload(resp)
			require.NoError(t, err)
			assert.LessOrEqual(t, len(p.GetData()), bound, "the payload Temporal stores")

			if tt.wantOmitted {
				assert.True(t, resp.BodyOmitted)
				assert.Equal(t, "too large", resp.OmittedReason)
				assert.Equal(t, sha(tt.body), resp.BodySHA256, "SHA-256 of what the server sent")
				assert.Empty(t, resp.Body)
				assert.Empty(t, resp.RawBody)
				return
			}
			assert.False(t, resp.BodyOmitted)
			assert.Equal(t, tt.body, []byte(resp.RawBody), "kept byte for byte")
		})
	}
}

// TestBodyReachesTheServerByteForByte (class 7): a json.RawMessage body with
// spaces, newlines, <, >, &, U+2028 and U+2029 reaches the server exactly as
// given, through workflows.Call and through the ready workflow, and the
// body_sha256 logged (the activity's success line, the workflow's failure
// line) is the SHA-256 of those bytes.
func TestBodyReachesTheServerByteForByte(t *testing.T) {
	bodies := map[string]string{
		"pretty with HTML characters": "{\n  \"note\": \"a < b > c & d\",\n\t\"amount\" : 42 \n}\n",
		"line separators":             "{\"memo\":\"one\u2028two\u2029three\"}",
		"escapes kept as written":     `{"s":"\u003c\/tag\u003e \u00e9 \ud83d\ude00","n":1.50,"e":1E+2}`,
		"a bare JSON string":          `"<&>"`,
		"a number":                    ` 1e3 `,
		"null":                        `null`,
		"array with spaces":           `[ 1 , "x" , true ]`,
	}
	for name, body := range bodies {
		for _, via := range []string{"Call", "ready workflow"} {
			for _, status := range []int{201, 400} {
				t.Run(fmt.Sprintf("%s/%s/%d", name, via, status), func(t *testing.T) {
					srv := newRawServer(t, answer(status, `{"ok":true}`))
					env, logs, _ := loggedEnv(t, activities.Config{AllowedOrigins: []string{srv.URL}})
					req := workflows.Request{Operation: "charge", URL: srv.URL + "/payments", Body: json.RawMessage(body)}
					if via == "Call" {
						env.ExecuteWorkflow(func(ctx workflow.Context) error {
							_, err := workflows.Call(ctx, req)
							return err
						})
					} else {
						env.ExecuteWorkflow(workflows.WorkflowName, req)
					}
					got, _ := srv.requests()
					require.Len(t, got, 1)
					assert.Equal(t, body, string(got[0]), "the bytes on the wire")
					want := sha([]byte(body))
					if status == 201 {
						require.NoError(t, env.GetWorkflowError())
						lines := logLines(t, logs, "HTTP request succeeded")
						require.Len(t, lines, 1)
						assert.Equal(t, want, lines[0]["body_sha256"])
						return
					}
					require.Error(t, env.GetWorkflowError())
					lines := logLines(t, logs, "idempotent HTTP call failed")
					require.Len(t, lines, 1)
					assert.Equal(t, want, lines[0]["body_sha256"])
				})
			}
		}
	}
}

// TestRequestDecodesPlainJSONBody: workflow input written before bodies
// travelled in their exact form (a history, or input typed by hand) has
// the body as plain JSON; it still decodes, to that JSON's text.
func TestRequestDecodesPlainJSONBody(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"url":"https://x.example/p","body":{"amount":42}}`, `{"amount":42}`},
		{`{"url":"https://x.example/p","body":[1,2]}`, `[1,2]`},
		{`{"url":"https://x.example/p","body":"{\"a\":\"<\"}"}`, `{"a":"<"}`},
		{`{"url":"https://x.example/p","body":null}`, ``},
		{`{"url":"https://x.example/p"}`, ``},
	}
	for _, tt := range tests {
		var r workflows.Request
		require.NoError(t, json.Unmarshal([]byte(tt.in), &r), tt.in)
		assert.Equal(t, tt.want, string(r.Body), tt.in)
		assert.Equal(t, "https://x.example/p", r.URL)
	}
}

// TestRetryAfterDateOnTheEnvironmentClock (class 12): under time skipping,
// Retry-After dates and the schedule-to-close deadline are read on the test
// environment's clock (testsuite.Register wires env.Now): a date beyond the
// deadline fails at once with RetryWouldExceedDeadline; a date within it is
// waited out exactly, whatever the environment's start time, and also
// after the workflow's clock has been skipped ahead by a timer or by an
// earlier operation's retries. (The environment's ScheduledTime is the
// wall clock: before the fix in activities/retry.go, a call after a skip
// failed its first retry at once, "only 0s remain".)
func TestRetryAfterDateOnTheEnvironmentClock(t *testing.T) {
	past := time.Date(2024, 2, 29, 12, 0, 0, 0, time.UTC)
	date := func(d time.Duration) func(now time.Time) string {
		return func(now time.Time) string { return now.Add(d).UTC().Format(http.TimeFormat) }
	}
	seconds := func(s string) func(time.Time) string { return func(time.Time) string { return s } }
	tests := []struct {
		name         string
		start        time.Time     // zero: the wall clock
		sleep        time.Duration // the workflow sleeps before the call
		earlier      bool          // an earlier operation waits out Retry-After: 600 first
		retryAfter   func(now time.Time) string
		wantDeadline bool
		wantWait     time.Duration
	}{
		{name: "date beyond the deadline", retryAfter: date(3 * time.Minute), wantDeadline: true},
		{name: "date beyond the deadline, start in the past", start: past, retryAfter: date(3 * time.Minute), wantDeadline: true},
		{name: "date beyond the deadline after a day's timer", sleep: 24 * time.Hour, retryAfter: date(3 * time.Minute), wantDeadline: true},
		{name: "date within the deadline, start in the past", start: past, retryAfter: date(30 * time.Second), wantWait: 30 * time.Second},
		{name: "date within the deadline after a day's timer", sleep: 24 * time.Hour, retryAfter: date(30 * time.Second), wantWait: 30 * time.Second},
		{name: "seconds after a day's timer", sleep: 24 * time.Hour, retryAfter: seconds("1"), wantWait: time.Second},
		{name: "seconds after an earlier operation's long wait", earlier: true, retryAfter: seconds("1"), wantWait: time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var env *testsuite.TestWorkflowEnvironment
			var mu sync.Mutex
			var payAt []time.Time // env clock at each /pay request
			earlier := 0
			srv := newRawServer(t, func(w http.ResponseWriter, r *http.Request, _ int) {
				now := env.Now()
				mu.Lock()
				defer mu.Unlock()
				switch {
				case r.URL.Path == "/earlier":
					earlier++
					if earlier == 1 {
						w.Header().Set("Retry-After", "600")
						w.WriteHeader(503)
						return
					}
					w.WriteHeader(201)
				case len(payAt) == 0 || tt.wantDeadline:
					payAt = append(payAt, now)
					w.Header().Set("Retry-After", tt.retryAfter(now))
					w.WriteHeader(503)
				default:
					payAt = append(payAt, now)
					w.WriteHeader(201)
				}
			})
			env, _, _ = loggedEnv(t, activities.Config{AllowedOrigins: []string{srv.URL}, MaxRetryAfter: time.Hour})
			if !tt.start.IsZero() {
				env.SetStartTime(tt.start)
			}
			env.ExecuteWorkflow(func(ctx workflow.Context) error {
				if tt.sleep > 0 {
					if err := workflow.Sleep(ctx, tt.sleep); err != nil {
						return err
					}
				}
				if tt.earlier {
					if _, err := workflows.Call(ctx, workflows.Request{Operation: "earlier", URL: srv.URL + "/earlier", ScheduleToCloseTimeout: 15 * time.Minute}); err != nil {
						return err
					}
				}
				_, err := workflows.Call(ctx, workflows.Request{Operation: "charge", URL: srv.URL + "/pay", ScheduleToCloseTimeout: 2 * time.Minute})
				return err
			})
			err := env.GetWorkflowError()
			mu.Lock()
			defer mu.Unlock()
			if tt.wantDeadline {
				var appErr *temporal.ApplicationError
				require.True(t, errors.As(err, &appErr), "got %v", err)
				assert.Equal(t, workflows.ErrTypeRetryWouldExceedDeadline, appErr.Type(), appErr.Message())
				assert.Len(t, payAt, 1, "failed at once, without waiting")
				d, ok := workflows.AsFailure(err)
				require.True(t, ok)
				assert.InDelta(t, 3*time.Minute, d.RetryAfter, float64(time.Second), "the date read on the environment's clock")
				return
			}
			require.NoError(t, err)
			require.Len(t, payAt, 2)
			assert.InDelta(t, tt.wantWait, payAt[1].Sub(payAt[0]), float64(time.Second), "the wait, on the environment's clock")
		})
	}
}
