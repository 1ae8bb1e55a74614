package workflows_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// Pay calls a payment API once and says what its caller should do next,
// for each type of failure the call can end in.
func Pay(ctx workflow.Context, url string) (string, error) {
	_, err := workflows.Call(ctx, workflows.Request{
		Operation: "pay", URL: url, Body: json.RawMessage(`{"amount":100}`),
		Retry:               workflows.RetryOptions{MaximumAttempts: 2},
		StartToCloseTimeout: 5 * time.Second, ScheduleToCloseTimeout: 30 * time.Second,
	})
	if err == nil {
		return "paid", nil
	}
	f, ok := workflows.AsFailure(err)
	if !ok {
		return "", err // a timeout or a cancellation: not an answer of the API
	}
	var next string
	switch f.Type {
	case workflows.ErrTypeHTTPClientError:
		next = fmt.Sprintf("the API refused it (%d): a business outcome, or fix the request", f.Status)
	case workflows.ErrTypeInvalidRequest:
		next = "nothing sent: fix the Request"
	case workflows.ErrTypeOriginNotAllowed:
		next = "nothing sent: allow the origin on the worker, or fix the URL"
	case workflows.ErrTypeTLSCertificateError:
		next = "nothing done: fix the URL's scheme or the worker's trust store"
	case workflows.ErrTypeRedirectNotFollowed:
		next = "call " + f.Location + " if that is the right place"
	case workflows.ErrTypeIdempotencyKeyReused:
		next = "a bug: two calls share a key; give each call its own operation name"
	case workflows.ErrTypeHTTPRetryableStatus, workflows.ErrTypeNetworkError,
		workflows.ErrTypeHTTPNonRetryableStatus, workflows.ErrTypeRetryWouldExceedDeadline,
		workflows.ErrTypeIdempotencyKeyLocked:
		// The budget or the deadline ran out, or the server cannot
		// handle the request: the work may be done (OutcomeUnknown).
		next = "gave up"
	default: // IdempotencyKeyInFlight and NotAdmitted are waits, retried until one of the above
		next = "unexpected"
	}
	if f.OutcomeUnknown {
		next += "; the API may have done it: run this workflow ID again, never another key"
	}
	if f.Attempt > 0 { // 0: refused by the workflow, before any attempt
		next = fmt.Sprintf("attempt %d: %s", f.Attempt, next)
	}
	return f.Type + ", " + next, nil
}

// ExampleAsFailure ends a payment in each type of failure, with a server
// that answers so.
func ExampleAsFailure() {
	answer := func(status int, header, value, body string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if header != "" {
				w.Header().Set(header, value)
			}
			w.WriteHeader(status)
			fmt.Fprint(w, body)
		}
	}
	hung := func(w http.ResponseWriter, r *http.Request) { panic(http.ErrAbortHandler) }
	tests := []struct {
		handler http.HandlerFunc
		url     func(server string) string // the URL to call; default server + "/payments"
		allow   func(server string) string // the origin the worker allows; default server
	}{
		{handler: answer(402, "", "", `{"error":"card declined"}`)},
		{handler: answer(422, "", "", `{"message":"Idempotency-Key is already used"}`)},
		{handler: answer(302, "Location", "https://pay.example.com/v2/payments", "")},
		{handler: answer(503, "", "", "")},
		{handler: answer(507, "", "", "")},
		{handler: hung},
		{handler: answer(503, "Retry-After", "120", "")},
		{handler: answer(409, "Retry-After", "1", `{"detail":"a request with this key is being processed"}`)},
		{handler: answer(201, "", "", "{}"), url: func(s string) string { return strings.Replace(s, "http:", "https:", 1) + "/payments" },
			allow: func(s string) string { return strings.Replace(s, "http:", "https:", 1) }},
		{handler: answer(201, "", "", "{}"), allow: func(string) string { return "https://api.example.com" }},
		{handler: answer(201, "", "", "{}"), url: func(s string) string { return "ftp" + strings.TrimPrefix(s, "http") }},
	}
	for _, tt := range tests {
		hs := httptest.NewServer(tt.handler)
		url, allow := hs.URL+"/payments", hs.URL
		if tt.url != nil {
			url = tt.url(hs.URL)
		}
		if tt.allow != nil {
			allow = tt.allow(hs.URL)
		}
		var suite testsuite.WorkflowTestSuite
		suite.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
		env := suite.NewTestWorkflowEnvironment()
		// Now: the test environment skips time, and the activity's deadlines
		// must see it (on a worker, leave it unset).
		acts, err := activities.New(activities.Config{AllowedOrigins: []string{allow}, Now: env.Now})
		if err != nil {
			panic(err)
		}
		acts.Register(env)
		env.RegisterWorkflow(Pay)
		env.ExecuteWorkflow(Pay, url)
		var out string
		if err := env.GetWorkflowResult(&out); err != nil {
			panic(err)
		}
		fmt.Println(out)
		hs.Close()
	}
	// Output:
	// HTTPClientError, attempt 1: the API refused it (402): a business outcome, or fix the request
	// IdempotencyKeyReused, attempt 1: a bug: two calls share a key; give each call its own operation name
	// RedirectNotFollowed, attempt 1: call https://pay.example.com/v2/payments if that is the right place
	// HTTPRetryableStatus, attempt 2: gave up; the API may have done it: run this workflow ID again, never another key
	// HTTPNonRetryableStatus, attempt 1: gave up; the API may have done it: run this workflow ID again, never another key
	// NetworkError, attempt 2: gave up; the API may have done it: run this workflow ID again, never another key
	// RetryWouldExceedDeadline, attempt 1: gave up; the API may have done it: run this workflow ID again, never another key
	// IdempotencyKeyLocked, attempt 29: gave up; the API may have done it: run this workflow ID again, never another key
	// TLSCertificateError, attempt 1: nothing done: fix the URL's scheme or the worker's trust store
	// OriginNotAllowed, attempt 1: nothing sent: allow the origin on the worker, or fix the URL
	// InvalidRequest, nothing sent: fix the Request
}
