package activities_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktestsuite "go.temporal.io/sdk/testsuite"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// followed is what a follow against a handler gave: the result or error,
// the polls, and every request with the environment's time.
type followed struct {
	resp *workflows.Response
	err  error
	f    workflows.Failure
	n    int
	log  []string
	at   []time.Time
}

// follow runs followWorkflow against one server: POST is the start
// (start), anything else a poll (poll).
func follow(t *testing.T, conv activities.Convention, start, poll http.HandlerFunc, fo workflows.FollowOptions, cfg activities.Config) followed {
	t.Helper()
	var mu sync.Mutex
	var res followed
	env := new(sdktestsuite.WorkflowTestSuite).NewTestWorkflowEnvironment()
	srv := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		res.log = append(res.log, r.Method+" "+r.URL.RequestURI())
		res.at = append(res.at, env.Now())
		mu.Unlock()
		if r.Method == http.MethodPost && r.URL.Path == "/transfers" {
			start(w, r)
			return
		}
		mu.Lock()
		res.n++
		mu.Unlock()
		poll(w, r)
	})
	cfg.Conventions = map[string]activities.Convention{srv.URL: conv}
	testsuite.Register(t, env, &testsuite.Server{URL: srv.URL}, cfg)
	env.RegisterWorkflow(followWorkflow)
	env.ExecuteWorkflow(followWorkflow, srv.URL+"/transfers", fo)
	if res.err = env.GetWorkflowError(); res.err == nil {
		require.NoError(t, env.GetWorkflowResult(&res.resp))
	} else {
		res.f, _ = workflows.AsFailure(res.err)
	}
	return res
}

func conv(l activities.LongRunning) activities.Convention {
	c := activities.IETF()
	c.LongRunning = l
	return c
}

// TestFollowHardening: the defects an adversarial review of the first
// version found, each failing on it.
func TestFollowHardening(t *testing.T) {
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
			activities.IETF(), status(202, `{}`, "Location", "/operations/1?sig;x=S3CRET-semicolon"), status(200, `{}`), activities.Config{},
			func(t *testing.T, r followed) {
				assert.Equal(t, workflows.ErrTypeMonitorNotFollowed, r.f.Type)
				assert.Zero(t, r.n)
			}},
		{"a query a parser would drop is refused: %zz",
			activities.IETF(), status(202, `{}`, "Location", "/operations/1?sig=%zzS3CRET-badescape"), status(200, `{}`), activities.Config{},
			func(t *testing.T, r followed) {
				assert.Equal(t, workflows.ErrTypeMonitorNotFollowed, r.f.Type)
				enc, _ := json.Marshal(r.f)
				assert.NotContains(t, r.f.Message+string(enc), "S3CRET")
			}},
		{"a bare query token is not named in the error",
			activities.IETF(), status(202, `{}`, "Location", "/operations/1?S3CRETbareTOKEN"), status(200, `{}`), activities.Config{},
			func(t *testing.T, r followed) {
				assert.Equal(t, workflows.ErrTypeMonitorNotFollowed, r.f.Type)
				enc, _ := json.Marshal(r.f)
				assert.NotContains(t, r.f.Message+string(enc), "S3CRETbareTOKEN")
			}},
		{"a monitor URL too long for history is refused",
			activities.IETF(), status(202, `{}`, "Location", "/operations/"+strings.Repeat("m", 9<<10)), status(200, `{}`), activities.Config{},
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
			activities.IETF(), status(202, `{"id":"pending"}`), status(200, `{}`), activities.Config{},
			func(t *testing.T, r followed) {
				assert.Equal(t, workflows.ErrTypeMonitorNotFollowed, r.f.Type)
				assert.True(t, r.f.OutcomeUnknown)
			}},
		{"a 303 on the start is followed to its result",
			activities.IETF(), status(303, ``, "Location", "/transfers/1"), status(200, `{"id":"t1"}`), activities.Config{},
			func(t *testing.T, r followed) {
				require.NoError(t, r.err)
				assert.JSONEq(t, `{"id":"t1"}`, string(r.resp.Body))
				assert.Equal(t, http.StatusSeeOther, r.resp.Accepted.StartStatus)
				assert.Equal(t, []string{"POST /transfers", "GET /transfers/1"}, r.log)
			}},
		{"a 303 to another origin is not followed",
			activities.IETF(), status(303, ``, "Location", "https://elsewhere.example/x"), status(200, `{}`), activities.Config{},
			func(t *testing.T, r followed) {
				assert.Equal(t, workflows.ErrTypeMonitorNotFollowed, r.f.Type)
				assert.Zero(t, r.n)
			}},
		{"a 201 is the result at once",
			activities.IETF(), status(201, `{"id":"done"}`, "Location", "/transfers/1"), status(200, `{}`), activities.Config{},
			func(t *testing.T, r followed) {
				require.NoError(t, r.err)
				assert.Nil(t, r.resp.Accepted)
				assert.Zero(t, r.n)
			}},
		{"the first poll waits for the start answer's Retry-After",
			activities.IETF(), status(202, `{}`, "Location", "/operations/1", "Retry-After", "30"), status(200, `{}`), activities.Config{},
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
			activities.IETF(), status(202, `{}`, "Location", "/operations/1"),
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
			activities.IETF(), status(202, `{}`, "Location", "/operations/1"),
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
				assert.Equal(t, int32(2), r.resp.Accepted.Polls)
				assert.Equal(t, []string{"POST /transfers", "GET /operations/1", "GET /operations/new/1"}, r.log)
			}},
		{"a monitor moved to another origin is not followed",
			activities.IETF(), status(202, `{}`, "Location", "/operations/1"),
			status(202, ``, "Location", "https://elsewhere.example/operations/1"), activities.Config{},
			func(t *testing.T, r followed) {
				assert.Equal(t, workflows.ErrTypeMonitorNotFollowed, r.f.Type)
				assert.True(t, r.f.OutcomeUnknown)
				assert.Equal(t, 1, r.n)
			}},
		{"the final Accepted keeps the start answer's status and Retry-After",
			activities.IETF(), status(202, `{}`, "Location", "/operations/1", "Retry-After", "3"), status(200, `{"id":"done"}`), activities.Config{},
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
		{"a 409 from the monitor is no key in flight",
			activities.IETF(), status(202, `{}`, "Location", "/operations/1"), status(409, `{"error":"in progress"}`, "Retry-After", "1"), activities.Config{},
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

// TestFollowCancelRequestKeepsQuery: the cancel suffix goes on the path,
// before the monitor's query.
func TestFollowCancelRequestKeepsQuery(t *testing.T) {
	c := conv(activities.OperationLocation())
	c.LongRunning.CancelMethod, c.LongRunning.CancelSuffix = http.MethodPost, ":cancel"
	env := new(sdktestsuite.WorkflowTestSuite).NewTestWorkflowEnvironment()
	var mu sync.Mutex
	var cancels []string
	srv := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/transfers":
			w.Header().Set("Operation-Location", "/operations/1?api-version=2024-01-01")
			w.WriteHeader(http.StatusAccepted)
		case r.Method == http.MethodPost:
			mu.Lock()
			cancels = append(cancels, r.URL.RequestURI())
			mu.Unlock()
		default:
			w.Header().Set("Retry-After", "5")
			_, _ = w.Write([]byte(`{"status":"Running"}`))
		}
	})
	testsuite.Register(t, env, &testsuite.Server{URL: srv.URL}, activities.Config{Conventions: map[string]activities.Convention{srv.URL: c}})
	env.RegisterWorkflow(followWorkflow)
	env.RegisterDelayedCallback(env.CancelWorkflow, 20*time.Second)
	env.ExecuteWorkflow(followWorkflow, srv.URL+"/transfers", workflows.FollowOptions{CancelOperation: true})
	assert.Equal(t, []string{"/operations/1:cancel?api-version=2024-01-01"}, cancels)
}

// TestFollowStartResultWithinBound: the start's result, the accepted
// operation included, stays within MaxResultBytes.
func TestFollowStartResultWithinBound(t *testing.T) {
	body := `{"blob":"` + strings.Repeat("y", 6<<10) + `"}`
	srv := newRecorder(t, status(202, body, "Location", "/operations/"+strings.Repeat("m", 7<<10)))
	in := req(srv.URL + "/charges")
	in.Follow = true
	resp, err, _ := run(t, activities.Config{AllowedOrigins: []string{srv.URL}, MaxResultBytes: 12 << 10}, in)
	require.NoError(t, err)
	enc, _ := json.Marshal(resp)
	assert.LessOrEqual(t, len(enc), 12<<10)
	assert.True(t, resp.BodyOmitted)
	require.NotNil(t, resp.Accepted, "the operation is kept, the body omitted")
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
			resp, err, _ := run(t, activities.Config{AllowedOrigins: []string{srv.URL},
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
