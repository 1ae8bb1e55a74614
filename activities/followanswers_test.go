package activities_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// TestFollowMonitorAnswers: what a start answer and its monitor say is
// read as it means (status documents, 303s, moved monitors, Retry-After,
// 409s) and monitors that cannot be followed safely are refused; the
// defects an adversarial review of the first version found, each failing
// on it.
func TestFollowMonitorAnswers(t *testing.T) {
	opLoc := conv(activities.OperationLocation())
	for _, tc := range []struct {
		name        string
		conv        activities.Convention
		start, poll http.HandlerFunc
		cfg         activities.Config
		check       func(t *testing.T, r followed)
	}{
		{"a status document behind Location is read: Failed is failed",
			conv(activities.LongRunning{StatusField: "status"}), status(202, `{}`, "Location", "/jobs/1"),
			status(200, `{"status":"Failed","error":{"code":"insufficient_funds"}}`), activities.Config{},
			func(t *testing.T, r followed) {
				assert.Equal(t, workflows.ErrTypeOperationFailed, r.f.Type)
				assert.Contains(t, r.f.Body, "insufficient_funds")
			}},
		{"a query a parser would drop is refused: a;b=",
			activities.IETFConvention(), status(202, `{}`, "Location", "/operations/1?sig;x=S3CRET-semicolon"), status(200, `{}`), activities.Config{},
			func(t *testing.T, r followed) {
				assert.Equal(t, workflows.ErrTypeMonitorNotFollowed, r.f.Type)
				assert.Zero(t, r.n)
			}},
		{"a query a parser would drop is refused: %zz",
			activities.IETFConvention(), status(202, `{}`, "Location", "/operations/1?sig=%zzS3CRET-badescape"), status(200, `{}`), activities.Config{},
			func(t *testing.T, r followed) {
				assert.Equal(t, workflows.ErrTypeMonitorNotFollowed, r.f.Type)
				enc, _ := json.Marshal(r.f)
				assert.NotContains(t, r.f.Message+string(enc), "S3CRET")
			}},
		{"a bare query token is not named in the error",
			activities.IETFConvention(), status(202, `{}`, "Location", "/operations/1?S3CRETbareTOKEN"), status(200, `{}`), activities.Config{},
			func(t *testing.T, r followed) {
				assert.Equal(t, workflows.ErrTypeMonitorNotFollowed, r.f.Type)
				enc, _ := json.Marshal(r.f)
				assert.NotContains(t, r.f.Message+string(enc), "S3CRETbareTOKEN")
			}},
		{"a monitor URL too long for history is refused",
			activities.IETFConvention(), status(202, `{}`, "Location", "/operations/"+strings.Repeat("m", 9<<10)), status(200, `{}`), activities.Config{},
			func(t *testing.T, r followed) {
				assert.Equal(t, workflows.ErrTypeMonitorNotFollowed, r.f.Type)
				assert.Contains(t, r.f.Message, "bytes long")
			}},
		{"a 202 with a terminal status document has ended",
			opLoc, status(202, `{}`, "Operation-Location", "/operations/1"), status(202, `{"status":"Succeeded","result":{"id":"x"}}`), activities.Config{},
			func(t *testing.T, r followed) {
				require.NoError(t, r.err)
				assert.JSONEq(t, `{"id":"x"}`, string(r.resp.Body))
				assert.Equal(t, 1, r.n)
			}},
		{"a 202 without a monitor is no result",
			activities.IETFConvention(), status(202, `{"id":"pending"}`), status(200, `{}`), activities.Config{},
			func(t *testing.T, r followed) {
				assert.Equal(t, workflows.ErrTypeMonitorNotFollowed, r.f.Type)
				assert.True(t, r.f.OutcomeUnknown)
			}},
		{"a 303 on the start is followed to its result",
			activities.IETFConvention(), status(303, ``, "Location", "/transfers/1"), status(200, `{"id":"t1"}`), activities.Config{},
			func(t *testing.T, r followed) {
				require.NoError(t, r.err)
				assert.JSONEq(t, `{"id":"t1"}`, string(r.resp.Body))
				assert.Equal(t, http.StatusSeeOther, r.resp.Accepted.StartStatus)
				assert.Equal(t, []string{"POST /transfers", "GET /transfers/1"}, r.log)
			}},
		{"a 303 to another origin is not followed",
			activities.IETFConvention(), status(303, ``, "Location", "https://elsewhere.example/x"), status(200, `{}`), activities.Config{},
			func(t *testing.T, r followed) {
				assert.Equal(t, workflows.ErrTypeMonitorNotFollowed, r.f.Type)
				assert.Zero(t, r.n)
			}},
		{"a 201 is the result at once",
			activities.IETFConvention(), status(201, `{"id":"done"}`, "Location", "/transfers/1"), status(200, `{}`), activities.Config{},
			func(t *testing.T, r followed) {
				require.NoError(t, r.err)
				assert.Nil(t, r.resp.Accepted)
				assert.Zero(t, r.n)
			}},
		{"the first poll waits for the start answer's Retry-After",
			activities.IETFConvention(), status(202, `{}`, "Location", "/operations/1", "Retry-After", "30"), status(200, `{}`), activities.Config{},
			func(t *testing.T, r followed) {
				require.NoError(t, r.err)
				require.Len(t, r.at, 2)
				assert.GreaterOrEqual(t, r.at[1].Sub(r.at[0]), 30*time.Second)
			}},
		{"a status document larger than MaxResponseBytes is a clear error",
			opLoc, status(202, `{}`, "Operation-Location", "/operations/1"),
			status(200, `{"status":"Succeeded","result":{"blob":"`+strings.Repeat("x", 3<<10)+`"}}`), activities.Config{MaxResponseBytes: 2 << 10},
			func(t *testing.T, r followed) {
				assert.Equal(t, workflows.ErrTypeHTTPNonRetryableStatus, r.f.Type)
				assert.True(t, r.f.OutcomeUnknown, "the operation may have succeeded")
				assert.Contains(t, r.f.Message, "raise MaxResponseBytes")
				require.NotNil(t, r.f.Accepted)
			}},
		{"a 202 with a new Location moves the monitor",
			activities.IETFConvention(), status(202, `{}`, "Location", "/operations/1"),
			func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/operations/1" {
					status(202, ``, "Location", "/operations/2")(w, r)
					return
				}
				status(202, ``)(w, r)
			}, activities.Config{},
			func(t *testing.T, r followed) {
				// Polled at the newest monitor, by every later attempt,
				// until the deadline; resuming polls it too.
				assert.Equal(t, workflows.ErrTypeOperationStillRunning, r.f.Type)
				require.NotNil(t, r.f.Accepted)
				assert.True(t, strings.HasSuffix(r.f.Accepted.Monitor, "/operations/2"), r.f.Accepted.Monitor)
				assert.Equal(t, []string{"POST /transfers", "GET /operations/1", "GET /operations/2", "GET /operations/2"}, r.log[:4])
			}},
		{"a moved monitor is polled to the result",
			activities.IETFConvention(), status(202, `{}`, "Location", "/operations/1"),
			func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/operations/1" {
					status(202, ``, "Location", "/operations/new/1")(w, r)
					return
				}
				status(200, `{"id":"done"}`)(w, r)
			}, activities.Config{},
			func(t *testing.T, r followed) {
				require.NoError(t, r.err)
				assert.JSONEq(t, `{"id":"done"}`, string(r.resp.Body))
				assert.Equal(t, 2, r.resp.Accepted.Polls)
				assert.Equal(t, []string{"POST /transfers", "GET /operations/1", "GET /operations/new/1"}, r.log)
			}},
		{"a monitor moved to another origin is not followed",
			activities.IETFConvention(), status(202, `{}`, "Location", "/operations/1"),
			status(202, ``, "Location", "https://elsewhere.example/operations/1"), activities.Config{},
			func(t *testing.T, r followed) {
				assert.Equal(t, workflows.ErrTypeMonitorNotFollowed, r.f.Type)
				assert.True(t, r.f.OutcomeUnknown)
				assert.Equal(t, 1, r.n)
			}},
		{"the final Accepted keeps the start answer's status and Retry-After",
			activities.IETFConvention(), status(202, `{}`, "Location", "/operations/1", "Retry-After", "3"), status(200, `{"id":"done"}`), activities.Config{},
			func(t *testing.T, r followed) {
				require.NoError(t, r.err)
				assert.Equal(t, 202, r.resp.Accepted.StartStatus)
				assert.Equal(t, 3*time.Second, r.resp.Accepted.RetryAfter)
			}},
		{"so does a failure's",
			opLoc, status(201, `{}`, "Operation-Location", "/operations/1"), status(200, `{"status":"Failed"}`), activities.Config{},
			func(t *testing.T, r followed) {
				assert.Equal(t, workflows.ErrTypeOperationFailed, r.f.Type)
				require.NotNil(t, r.f.Accepted)
				assert.Equal(t, 201, r.f.Accepted.StartStatus)
				assert.Equal(t, time.Second, r.f.Accepted.RetryAfter)
			}},
		{"a status document's 303 names the result",
			opLoc, status(202, `{}`, "Operation-Location", "/operations/1"),
			func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/operations/1" {
					status(303, `{"status":"Running"}`, "Location", "/transfers/1")(w, r)
					return
				}
				status(200, `{"id":"t1"}`)(w, r)
			}, activities.Config{},
			func(t *testing.T, r followed) {
				require.NoError(t, r.err)
				assert.JSONEq(t, `{"id":"t1"}`, string(r.resp.Body))
				assert.Empty(t, r.resp.Accepted.State)
				assert.Equal(t, []string{"POST /transfers", "GET /operations/1", "GET /transfers/1"}, r.log)
			}},
		{"a status document without the state is polled again",
			opLoc, status(202, `{}`, "Operation-Location", "/operations/1"), status(200, `{"state":"Succeeded"}`), activities.Config{},
			func(t *testing.T, r followed) {
				assert.Equal(t, workflows.ErrTypeOperationStillRunning, r.f.Type)
				assert.Contains(t, r.f.Message, "not a status document this origin's Convention.LongRunning reads (no status): polling again")
				assert.Greater(t, r.n, 2)
			}},
		{"a Google operation's start without a name is the result",
			google("http://unused.example"), status(200, `{"done":true}`), status(200, `{}`), activities.Config{},
			func(t *testing.T, r followed) {
				require.NoError(t, r.err)
				assert.Nil(t, r.resp.Accepted)
				assert.Zero(t, r.n)
			}},
		{"a 409 from the monitor is no key in flight",
			activities.IETFConvention(), status(202, `{}`, "Location", "/operations/1"), status(409, `{"error":"in progress"}`, "Retry-After", "1"), activities.Config{},
			func(t *testing.T, r followed) {
				assert.Equal(t, workflows.ErrTypeOperationStillRunning, r.f.Type)
				assert.NotContains(t, r.f.Message, "IdempotencyKeyInFlight")
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.check(t, follow(t, tc.conv, tc.start, tc.poll, workflows.FollowOptions{Timeout: 2 * time.Minute}, tc.cfg))
		})
	}
}

// TestFollowResultURL: where a succeeded operation's result is read, as
// Azure SDKs read it: the resource for PUT and PATCH, even when Location
// names another URL (the AutoRest test server's PUT answers Location =
// Azure-AsyncOperation = the monitor); the start answer's Location for
// POST; the status document when there is neither.
func TestFollowResultURL(t *testing.T) {
	for _, tc := range []struct {
		method, location, want string
	}{
		{http.MethodPut, "/operationResults/1", "/orders/1?api-version=2024-01-01"},
		{http.MethodPatch, "/operationResults/1", "/orders/1?api-version=2024-01-01"},
		{http.MethodPut, "", "/orders/1?api-version=2024-01-01"},
		{http.MethodPost, "/results/1", "/results/1"},
		{http.MethodPost, "", ""},
		{http.MethodDelete, "/operations/1", ""},
	} {
		t.Run(tc.method+" "+tc.location, func(t *testing.T) {
			srv := newRecorder(t, status(202, `{}`, "Azure-AsyncOperation", "/operations/1", "Location", tc.location))
			in := req(srv.URL + "/orders/1?api-version=2024-01-01")
			in.Method, in.Follow = tc.method, true
			resp, _, err := run(t, activities.Config{AllowedOrigins: []string{srv.URL},
				Conventions: map[string]activities.Convention{srv.URL: conv(activities.AzureAsyncOperation())}}, in)
			require.NoError(t, err)
			require.NotNil(t, resp.Accepted)
			want := tc.want
			if want != "" {
				want = srv.URL + want
			}
			assert.Equal(t, want, resp.Accepted.ResultURL)
		})
	}
}

// TestFollowResultUnreadableSaysSucceeded: an operation whose status
// document says Succeeded but whose result cannot be read is not reported
// as a plain failure: the error says it succeeded.
func TestFollowResultUnreadableSaysSucceeded(t *testing.T) {
	r := follow(t, conv(activities.AzureAsyncOperation()), status(202, `{}`, "Azure-AsyncOperation", "/operations/1", "Location", "/results/1"),
		func(w http.ResponseWriter, req *http.Request) {
			if strings.HasPrefix(req.URL.Path, "/results/") {
				w.WriteHeader(http.StatusNotFound)
				return
			}
			_, _ = w.Write([]byte(`{"status":"Succeeded"}`))
		}, workflows.FollowOptions{}, activities.Config{})
	assert.Equal(t, workflows.ErrTypeHTTPClientError, r.f.Type)
	assert.Contains(t, r.f.Message, `the operation succeeded (status "Succeeded")`)
	assert.True(t, r.f.OutcomeUnknown)
	require.NotNil(t, r.f.Accepted)
	assert.Equal(t, "Succeeded", r.f.Accepted.State)
}
