package interop_test

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/harness/interop"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// The long-running-operation (LRO) rows: one call with Request.Follow per
// route of a third-party LRO server (LRO-SERVERS.md says what each route
// answers, read from the package's source), in each environment.

// lroCase is one row: a route of a server, the worker's convention for
// that server's origin, and what we expect.
type lroCase struct {
	name  string // subtest name
	title string // the table's scenario column
	// server is interop.AutorestLRO or interop.SpectorLRO; route is the
	// table's "server & route" column (LRO-SERVERS.md's row and request).
	server, route string
	// convName is the convention column; lr the worker's LongRunning.
	convName string
	lr       activities.LongRunning
	method   string
	path     string
	body     string
	// jar gives the worker's HTTP client a cookie jar: AutoRest keeps a
	// poll's state in a "scenario" cookie (A5–A7, A12).
	jar bool
	// apiVersion, if set, is added by the worker's HTTP client to every GET
	// that has none, as Azure SDK clients add theirs to every request
	// (Spector's Azure.Core monitors lack it but require it).
	apiVersion string
	// routeSays is what the server's route (its name, its docs, the
	// Azure SDK tests written against it) says a client gets.
	routeSays string
	// want is what this package must do; differs, when set, says why that
	// is not what routeSays (a deliberate, documented difference, or a
	// finding).
	want    lroWant
	differs string
	// check adds the row's own assertions.
	check func(t *testing.T, o *lroObserved)
}

// lroWant is the outcome a row asserts.
type lroWant struct {
	// outcome is "success" or the error type.
	outcome string
	// status is the final status: the result's, or the failing answer's.
	status int
	// polls is Response.Accepted.Polls, or the failure's Accepted.Polls (0
	// when the call failed before polling).
	polls int
	// body is a substring of the result body, or of Failure.Body.
	body string
}

// lroObserved is how one call ended.
type lroObserved struct {
	resp     *workflows.Response
	err      error
	failure  workflows.Failure
	isFail   bool
	outcome  string
	status   int
	polls    int
	body     string
	activity time.Duration
	elapsed  time.Duration
}

const (
	azureCoreAPIVersion = "2022-12-01-preview"
	armAPIVersion       = "2023-12-01-preview"
	armOrders           = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/test-rg/providers/Azure.ResourceManager.OperationTemplates/orders/order1"
	armProvider         = "/subscriptions/00000000-0000-0000-0000-000000000000/providers/Azure.ResourceManager.OperationTemplates"
)

// provisioningState reads the body's ARM provisioningState, as Azure SDK
// Location pollers do (a custom convention; not a preset).
func provisioningState() activities.LongRunning {
	return activities.LongRunning{MonitorHeaders: []string{"Location"}, StatusField: "properties.provisioningState"}
}

var lroCases = []lroCase{
	{
		name: "A1-moving-monitor", title: "202 + Location, POST; the monitor moves to a new URL mid-poll",
		server: interop.AutorestLRO, route: "A1 `POST /lro/post/202/retry/200`",
		convName: "`AcceptedLocation()`", lr: activities.AcceptedLocation(),
		method: http.MethodPost, path: "/lro/post/202/retry/200", body: `{}`,
		routeSays: "202 + `Location: …/newuri/…` on the first poll, 200 product at the new URL",
		want:      lroWant{outcome: "success", status: 200, polls: 2, body: `"id": "100"`},
		check: func(t *testing.T, o *lroObserved) {
			if o.resp != nil && o.resp.Accepted != nil && !strings.HasSuffix(o.resp.Accepted.Monitor, "/lro/post/newuri/202/retry/200") {
				t.Errorf("Accepted.Monitor %s, want the moved monitor", o.resp.Accepted.Monitor)
			}
		},
	},
	{
		name: "A3-put", title: "202 + Location, PUT",
		server: interop.AutorestLRO, route: "A3 `PUT /lro/put/202/retry/200`",
		convName: "`AcceptedLocation()`", lr: activities.AcceptedLocation(),
		method: http.MethodPut, path: "/lro/put/202/retry/200", body: `{}`,
		routeSays: "200 product at the first poll",
		want:      lroWant{outcome: "success", status: 200, polls: 1, body: `"name": "foo"`},
	},
	{
		name: "A4-delete-204", title: "202 + Location, DELETE → 204",
		server: interop.AutorestLRO, route: "A4 `DELETE /lro/delete/202/noretry/204`",
		convName: "`AcceptedLocation()`", lr: activities.AcceptedLocation(),
		method: http.MethodDelete, path: "/lro/delete/202/noretry/204",
		routeSays: "204 at the first poll",
		want:      lroWant{outcome: "success", status: 204, polls: 1},
	},
	{
		name: "A6-aao-post-succeeded", title: "Azure-AsyncOperation, POST: Succeeded, final GET of Location",
		server: interop.AutorestLRO, route: "A6 `POST /lro/postasync/retry/succeeded` (cookie)",
		convName: "`AzureAsyncOperation()`", lr: activities.AzureAsyncOperation(),
		method: http.MethodPost, path: "/lro/postasync/retry/succeeded", body: `{}`, jar: true,
		routeSays: "`Accepted`, `Succeeded`; the result is a GET of the start's `Location`",
		want:      lroWant{outcome: "success", status: 200, polls: 2, body: `"provisioningState": "Succeeded"`},
		check: func(t *testing.T, o *lroObserved) {
			if o.resp != nil && strings.Contains(string(o.resp.Body), `"status"`) {
				t.Errorf("the result %s is the status document, want the final GET's body", o.resp.Body)
			}
		},
	},
	{
		name: "A5-aao-put-succeeded", title: "Azure-AsyncOperation, PUT answered 200: Succeeded, final GET of the resource",
		server: interop.AutorestLRO, route: "A5 `PUT /lro/putasync/retry/succeeded` (cookie)",
		convName: "`AzureAsyncOperation()`", lr: activities.AzureAsyncOperation(),
		method: http.MethodPut, path: "/lro/putasync/retry/succeeded", body: `{}`, jar: true,
		routeSays: "`Accepted`, `Succeeded`; the result is a GET of the PUT's URL (its `Location` is the monitor again)",
		want:      lroWant{outcome: "success", status: 200, polls: 2, body: `"provisioningState": "Succeeded"`},
		check: func(t *testing.T, o *lroObserved) {
			if o.resp != nil && o.resp.Accepted != nil && !strings.HasSuffix(o.resp.Accepted.ResultURL, "/lro/putasync/retry/succeeded") {
				t.Errorf("Accepted.ResultURL %s, want the PUT's URL", o.resp.Accepted.ResultURL)
			}
		},
	},
	{
		name: "A8-lower-case", title: "Azure-AsyncOperation: lower-case `succeeded`, final GET of Location",
		server: interop.AutorestLRO, route: "A8 `POST /lro/LROPostDoubleHeadersFinalLocationGet`",
		convName: "`AzureAsyncOperation()`", lr: activities.AzureAsyncOperation(),
		method: http.MethodPost, path: "/lro/LROPostDoubleHeadersFinalLocationGet", body: `{}`,
		routeSays: "`succeeded` at the first poll; the result at `Location`",
		want:      lroWant{outcome: "success", status: 200, polls: 1, body: `{"id":"100","name":"foo"}`},
		check: func(t *testing.T, o *lroObserved) {
			if o.resp != nil && o.resp.Accepted != nil && o.resp.Accepted.State != "succeeded" {
				t.Errorf("Accepted.State %q, want the server's %q", o.resp.Accepted.State, "succeeded")
			}
		},
	},
	{
		name: "A6-aao-failed", title: "Azure-AsyncOperation: Failed with an error object",
		server: interop.AutorestLRO, route: "A6 `POST /lro/postasync/retry/failed` (cookie)",
		convName: "`AzureAsyncOperation()`", lr: activities.AzureAsyncOperation(),
		method: http.MethodPost, path: "/lro/postasync/retry/failed", body: `{}`, jar: true,
		routeSays: "`Accepted`, then `Failed` with `error` {code 500}: the operation failed",
		want:      lroWant{outcome: workflows.ErrTypeOperationFailed, status: 200, polls: 2, body: `"message": "Internal Server Error"`},
		check: func(t *testing.T, o *lroObserved) {
			if o.isFail && o.failure.OutcomeUnknown {
				t.Errorf("OutcomeUnknown set on an operation the server says failed")
			}
		},
	},
	{
		name: "A7-aao-canceled", title: "Azure-AsyncOperation, DELETE: Canceled",
		server: interop.AutorestLRO, route: "A7 `DELETE /lro/deleteasync/retry/canceled` (cookie)",
		convName: "`AzureAsyncOperation()`", lr: activities.AzureAsyncOperation(),
		method: http.MethodDelete, path: "/lro/deleteasync/retry/canceled", jar: true,
		routeSays: "`Accepted`, then `Canceled`",
		want:      lroWant{outcome: workflows.ErrTypeOperationCanceled, status: 200, polls: 2, body: `"Canceled"`},
	},
	{
		name: "A10-200-failed-by-status", title: "a 200 whose body says `provisioningState: Failed`, polled by status code",
		server: interop.AutorestLRO, route: "A10 `DELETE /lro/delete/provisioning/202/deleting/200/failed`",
		convName: "`AcceptedLocation()`", lr: activities.AcceptedLocation(),
		method: http.MethodDelete, path: "/lro/delete/provisioning/202/deleting/200/failed",
		routeSays: "200 with `provisioningState: Failed`: Azure SDKs read it as a failure",
		want:      lroWant{outcome: "success", status: 200, polls: 1, body: `"provisioningState": "Failed"`},
		differs:   "RFC 9110's convention reads status codes only: a 200 is the result, and the workflow reads its body (or the origin's convention names the field: next row)",
	},
	{
		name: "A10-200-failed-by-field", title: "the same, the convention reading `properties.provisioningState`",
		server: interop.AutorestLRO, route: "A10 `DELETE /lro/delete/provisioning/202/deleting/200/failed`",
		convName: "`AcceptedLocation()` + `StatusField: \"properties.provisioningState\"`", lr: provisioningState(),
		method: http.MethodDelete, path: "/lro/delete/provisioning/202/deleting/200/failed",
		routeSays: "200 with `provisioningState: Failed`: the operation failed",
		want:      lroWant{outcome: workflows.ErrTypeOperationFailed, status: 200, polls: 1, body: `"provisioningState": "Failed"`},
	},
	{
		name: "A12-retry-errors", title: "a 500 on the start and on a poll, then 200",
		server: interop.AutorestLRO, route: "A12 `POST /lro/retryerror/post/202/retry/200` (cookie)",
		convName: "`AcceptedLocation()`", lr: activities.AcceptedLocation(),
		method: http.MethodPost, path: "/lro/retryerror/post/202/retry/200", body: `{}`, jar: true,
		routeSays: "500 then 202 on the start; 500 then 200 on the polls: both retried",
		want:      lroWant{outcome: "success", status: 200, polls: 2, body: `"provisioningState": "Succeeded"`},
	},
	{
		name: "A9-monitor-400", title: "the monitor answers 400",
		server: interop.AutorestLRO, route: "A9 `POST /lro/nonretryerror/post/202/retry/400`",
		convName: "`AcceptedLocation()`", lr: activities.AcceptedLocation(),
		method: http.MethodPost, path: "/lro/nonretryerror/post/202/retry/400", body: `{}`,
		routeSays: "400 from the monitor: a non-retryable error",
		want:      lroWant{outcome: workflows.ErrTypeHTTPClientError, status: 400, polls: 1, body: "Expected bad request message"},
		check: func(t *testing.T, o *lroObserved) {
			if o.isFail && (o.failure.Retryable || !o.failure.OutcomeUnknown) {
				t.Errorf("Retryable %v, OutcomeUnknown %v: want a final failure of unknown outcome (the operation may go on)", o.failure.Retryable, o.failure.OutcomeUnknown)
			}
		},
	},
	{
		name: "A14-no-monitor", title: "202 without a monitor",
		server: interop.AutorestLRO, route: "A14 `POST /lro/error/post/202/nolocation`",
		convName: "`AcceptedLocation()`", lr: activities.AcceptedLocation(),
		method: http.MethodPost, path: "/lro/error/post/202/nolocation", body: `{}`,
		routeSays: "an error (LROSADs: no `Location`)",
		want:      lroWant{outcome: workflows.ErrTypeMonitorNotFollowed, status: 202, polls: 0},
	},
	{
		name: "A14-invalid-headers", title: "malformed headers: `Location: /foo`, `Retry-After: /bar`",
		server: interop.AutorestLRO, route: "A14 `POST /lro/error/post/202/retry/invalidheader`",
		convName: "`AcceptedLocation()`", lr: activities.AcceptedLocation(),
		method: http.MethodPost, path: "/lro/error/post/202/retry/invalidheader", body: `{}`,
		routeSays: "an error (LROSADs: invalid `Location` and `Retry-After`)",
		want:      lroWant{outcome: workflows.ErrTypeHTTPClientError, status: 404, polls: 1},
		differs:   "an error as the route says, one step later: a relative `Location` is valid (RFC 9110 §10.2.2), so it is resolved against the start URL and polled (404); `Retry-After: /bar` is ignored (1 s)",
	},
	{
		name: "A13-303", title: "303 See Other on the start request",
		server: interop.AutorestLRO, route: "A13 `POST /http/redirect/303`",
		convName: "`AcceptedLocation()`", lr: activities.AcceptedLocation(),
		method: http.MethodPost, path: "/http/redirect/303", body: `{}`,
		routeSays: "follow with a GET of `/http/success/get/200`: 200",
		want:      lroWant{outcome: "success", status: 200, polls: 1},
	},
	{
		name: "S1-rpc-verbatim", title: "Operation-Location, result in `result`; the monitor URL lacks the `api-version` its poll requires",
		server: interop.SpectorLRO, route: "S1 `POST /azure/core/lro/rpc/generations:submit`",
		convName: "`OperationLocation()`", lr: activities.OperationLocation(),
		method: http.MethodPost, path: "/azure/core/lro/rpc/generations:submit?api-version=" + azureCoreAPIVersion, body: `{"prompt":"text"}`,
		routeSays: "`InProgress`, then `Succeeded` with `result` `{\"data\":\"text data\"}` (the client adds its `api-version`)",
		want:      lroWant{outcome: workflows.ErrTypeHTTPClientError, status: 400, polls: 1, body: "api-version"},
		differs:   "finding: the monitor is polled as the server wrote it; Azure SDK clients add their `api-version` to every request, this package adds nothing (next row: the workaround)",
	},
	{
		name: "S4-export-result", title: "Operation-Location, result in `result`, the worker's client adding `api-version`",
		server: interop.SpectorLRO, route: "S4 `POST /azure/core/lro/standard/users/madge:export`",
		convName: "`OperationLocation()`; `HTTPClient` adds `api-version`", lr: activities.OperationLocation(),
		method: http.MethodPost, path: "/azure/core/lro/standard/users/madge:export?api-version=" + azureCoreAPIVersion + "&format=json",
		apiVersion: azureCoreAPIVersion,
		routeSays:  "`InProgress`, then `Succeeded` with `result` `{\"name\":\"madge\",\"resourceUri\":\"/users/madge\"}`",
		want:       lroWant{outcome: "success", status: 200, polls: 2, body: `{"name":"madge","resourceUri":"/users/madge"}`},
		check: func(t *testing.T, o *lroObserved) {
			if o.resp != nil && !bytes.Equal(o.resp.Body, []byte(`{"name":"madge","resourceUri":"/users/madge"}`)) {
				t.Errorf("the result is %s, want the status document's result alone", o.resp.Body)
			}
		},
	},
	{
		name: "S5-arm-put-201", title: "ARM PUT answered 201 + Azure-AsyncOperation, final GET of the resource",
		server: interop.SpectorLRO, route: "S5 `PUT …/orders/order1`",
		convName: "`AzureAsyncOperation()`", lr: activities.AzureAsyncOperation(),
		method: http.MethodPut, path: armOrders + "?api-version=" + armAPIVersion, body: `{"location":"eastus","properties":{"productId":"product1","amount":1}}`,
		routeSays: "`InProgress`, `Succeeded`; the result is a GET of the PUT's URL: the order, `Succeeded`",
		want:      lroWant{outcome: "success", status: 200, polls: 2, body: `"provisioningState":"Succeeded"`},
		check: func(t *testing.T, o *lroObserved) {
			if o.resp != nil && o.resp.Accepted != nil && o.resp.Accepted.StartStatus != 201 {
				t.Errorf("Accepted.StartStatus %d, want 201", o.resp.Accepted.StartStatus)
			}
		},
	},
	{
		name: "S8-retry-after-1", title: "ARM POST with `Retry-After: 1`, final GET of Location",
		server: interop.SpectorLRO, route: "S8 `POST …/exportArray`",
		convName: "`AzureAsyncOperation()`", lr: activities.AzureAsyncOperation(),
		method: http.MethodPost, path: armProvider + "/exportArray?api-version=" + armAPIVersion, body: `{"format":"csv"}`,
		routeSays: "`InProgress` (`Retry-After: 1`), `Succeeded`; the result at `Location`: an array",
		want:      lroWant{outcome: "success", status: 200, polls: 2, body: `[{"content":"order1,product1,1"},{"content":"order2,product2,2"}]`},
		check: func(t *testing.T, o *lroObserved) {
			if o.resp != nil && o.resp.Accepted != nil && o.resp.Accepted.RetryAfter != time.Second {
				t.Errorf("Accepted.RetryAfter %s, want the start's 1 s", o.resp.Accepted.RetryAfter)
			}
			// On the dev server: the first wait and one between the polls.
			if o.activity > 0 && o.activity < time.Second {
				t.Errorf("the polls took %s, want at least the Retry-After of 1 s between them", o.activity)
			}
		},
	},
}

// runLongRunning runs every LRO row in environment r, in parallel, against
// servers of the environment's own (Spector's counters are per route and
// global; a row has a route of its own).
func runLongRunning(t *testing.T, r runner) {
	urls := map[string]string{}
	for _, name := range []string{interop.AutorestLRO, interop.SpectorLRO} {
		urls[name] = interop.Start(t, name, interop.Options{}).URL
	}
	for _, c := range lroCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			row := lroResults.add(r.name(), c)
			t.Cleanup(func() { lroResults.finish(row, t.Failed()) })
			base := urls[c.server]
			org := origin(t, base)
			conv := activities.IETFConvention()
			conv.LongRunning = c.lr
			cfg := activities.Config{
				AllowedOrigins: []string{org},
				Conventions:    map[string]activities.Convention{org: conv},
			}
			if c.jar || c.apiVersion != "" {
				hc := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
				if c.jar {
					// One jar per row: one operation at a time per jar.
					jar, err := cookiejar.New(nil)
					if err != nil {
						t.Fatal(err)
					}
					hc.Jar = jar
				}
				if c.apiVersion != "" {
					hc.Transport = addAPIVersion{next: hc.Transport, version: c.apiVersion}
				}
				cfg.HTTPClient = hc
			}
			exec := r.prepare(t, cfg)
			req := workflows.Request{
				Operation:              "lro",
				Method:                 c.method,
				URL:                    base + c.path,
				StartToCloseTimeout:    5 * time.Second,
				ScheduleToCloseTimeout: 30 * time.Second,
				Follow:                 &workflows.FollowOptions{Timeout: 30 * time.Second, Interval: time.Second, MaximumInterval: 2 * time.Second},
			}
			req.Retry.InitialInterval = 500 * time.Millisecond
			if c.body != "" {
				req.Body = json.RawMessage(c.body)
			}
			start := time.Now()
			res := exec(t, uniqueName(t, "wf"), req)
			o := observe(res, time.Since(start))
			row.record(o)
			if res.err != nil {
				t.Logf("workflow: %v", res.err)
			}
			w := c.want
			if o.outcome != w.outcome {
				t.Errorf("outcome %s, want %s (error: %v)", o.outcome, w.outcome, res.err)
			}
			if o.status != w.status {
				t.Errorf("final status %d, want %d", o.status, w.status)
			}
			if o.polls != w.polls {
				t.Errorf("%d polls, want %d", o.polls, w.polls)
			}
			if !strings.Contains(o.body, w.body) {
				t.Errorf("body %q, want it to hold %q", o.body, w.body)
			}
			if c.check != nil {
				c.check(t, o)
			}
		})
	}
}

// observe reads a call's end for the table.
func observe(res result, elapsed time.Duration) *lroObserved {
	o := &lroObserved{resp: res.resp, err: res.err, activity: res.activity, elapsed: elapsed}
	if res.err == nil {
		o.outcome, o.status, o.body = "success", res.resp.Status, string(res.resp.Body)
		if res.resp.Accepted != nil {
			o.polls = res.resp.Accepted.Polls
		}
		return o
	}
	o.outcome = describe(nil, res.err)
	if f, ok := workflows.AsFailure(res.err); ok {
		o.failure, o.isFail = f, true
		o.status, o.body = f.Status, f.Body
		if f.Accepted != nil {
			o.polls = f.Accepted.Polls
		}
	}
	return o
}

// addAPIVersion adds api-version to a GET without one, as the api-version
// policy of an Azure SDK client's pipeline adds it to every request. It
// copies the request it changes (http.RoundTripper's contract).
type addAPIVersion struct {
	next    http.RoundTripper
	version string
}

func (a addAPIVersion) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodGet || r.URL.Query().Has("api-version") {
		return a.next.RoundTrip(r)
	}
	r2 := r.Clone(r.Context())
	q := r2.URL.Query()
	q.Set("api-version", a.version)
	r2.URL.RawQuery = q.Encode()
	return a.next.RoundTrip(r2)
}

// TestLongRunningTestEnv runs the LRO rows in Temporal's test environment.
func TestLongRunningTestEnv(t *testing.T) {
	t.Parallel()
	runLongRunning(t, testEnv{})
}

// TestLongRunningDevServer runs the LRO rows on the Temporal dev server.
func TestLongRunningDevServer(t *testing.T) {
	t.Parallel()
	runLongRunning(t, devServer{})
}

// lroRow is one measured LRO row in one environment.
type lroRow struct {
	Env  string
	Case lroCase
	Obs  *lroObserved
	// Done, Failed: the row ran; its assertions failed.
	Done, Failed bool
}

type lroTable struct {
	mu   sync.Mutex
	rows []*lroRow
}

var lroResults lroTable

func (tb *lroTable) add(env string, c lroCase) *lroRow {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	r := &lroRow{Env: env, Case: c}
	tb.rows = append(tb.rows, r)
	return r
}

func (r *lroRow) record(o *lroObserved) {
	lroResults.mu.Lock()
	defer lroResults.mu.Unlock()
	r.Obs = o
}

func (tb *lroTable) finish(r *lroRow, failed bool) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	r.Done, r.Failed = true, failed
}

// markdown renders one table per environment, rows in lroCases' order:
// scenario, server and route, the worker's convention, what the route
// says, and what happened (✓/✗: the row's assertions met or not; = or ≠:
// the same end as the route says or not, with the reason under the table).
func (tb *lroTable) markdown() string {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	var envs []string
	cells := map[[2]string]*lroRow{}
	for _, r := range tb.rows {
		if !slices.Contains(envs, r.Env) {
			envs = append(envs, r.Env)
		}
		cells[[2]string{r.Env, r.Case.name}] = r
	}
	// The dev server last, however they ran.
	slices.SortStableFunc(envs, func(a, b string) int {
		return cmp.Compare(boolInt(a == devServer{}.name()), boolInt(b == devServer{}.name()))
	})
	if len(envs) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n## Long-running operations\n\n" +
		"Each row is one workflow call with `Request.Follow` against a route of a third-party mock API " +
		"(LRO-SERVERS.md says what each route answers, A… AutoRest test server, S… Spector), " +
		"with the worker's convention for that origin. Outcome: ✓ or ✗ (the row's assertions met or not), " +
		"`success` or the error type, the polls (`Response.Accepted.Polls`, or the failure's; 0: it failed before polling), " +
		"the final status (the result's, or the failing answer's), and the call's wall time (the test environment skips waits). " +
		"\"=\": the end the route says; \"≠ (n)\": another end, for reason n under the tables.\n")
	// The notes, numbered in lroCases' order.
	var notes []string
	note := map[string]int{}
	for _, c := range lroCases {
		if c.differs != "" {
			notes = append(notes, c.differs)
			note[c.name] = len(notes)
		}
	}
	for _, env := range envs {
		fmt.Fprintf(&b, "\n### %s\n\n| scenario | server & route | convention | the route says | outcome; polls; final status | |\n|---|---|---|---|---|---|\n", env)
		for _, c := range lroCases {
			r := cells[[2]string{env, c.name}]
			if r == nil || !r.Done || r.Obs == nil {
				fmt.Fprintf(&b, "| %s | %s | %s | %s | not run | |\n", c.title, c.route, c.convName, c.routeSays)
				continue
			}
			mark := "✓"
			if r.Failed {
				mark = "✗"
			}
			o := r.Obs
			same := "="
			if n := note[c.name]; n > 0 {
				same = fmt.Sprintf("≠ (%d)", n)
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s `%s`; %d; %d (%.1f s) | %s |\n",
				c.title, c.route, c.convName, c.routeSays, mark, o.outcome, o.polls, o.status, o.elapsed.Seconds(), same)
		}
	}
	if len(notes) > 0 {
		b.WriteString("\n")
		for i, n := range notes {
			fmt.Fprintf(&b, "%d. %s\n", i+1, n)
		}
	}
	return b.String()
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
