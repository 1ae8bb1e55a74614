package testsuite_test

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/workflows"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemhttp/temporal-idempotent-http/testsuite"
)

// TestServerAsync: each style's acceptance names a monitor that reports
// running, then the outcome, with the record made once; a replay names
// the same monitor.
func TestServerAsync(t *testing.T) {
	for _, tc := range []struct {
		style                   testsuite.AsyncStyle
		header, running, done   string
		startStatus, doneStatus int
	}{
		{testsuite.AsyncLocation, "Location", `"status":"running"`, `"id":"rec_1"`, 202, 200},
		{testsuite.AsyncSeeOther, "Location", `"status":"running"`, ``, 202, 303},
		{testsuite.AsyncAzure, "Azure-AsyncOperation", `"status":"InProgress"`, `"status":"Succeeded"`, 202, 200},
		{testsuite.AsyncOperationLocation, "Operation-Location", `"status":"Running"`, `"result":{`, 202, 200},
		{testsuite.AsyncGoogle, "", `"done":false`, `"response":{`, 200, 200},
	} {
		t.Run(string(tc.style), func(t *testing.T) {
			clock := &fakeClock{t: time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)}
			srv := testsuite.StartServer(t, testsuite.Options{Now: clock.now, Async: &testsuite.Async{Style: tc.style, Duration: time.Minute, RetryAfter: 5}})
			resp, body := do(t, http.MethodPost, srv.URL+"/transfers", "k1")
			require.Equal(t, tc.startStatus, resp.StatusCode, body)
			assert.Equal(t, "5", resp.Header.Get("Retry-After"))
			monitor := srv.URL + "/v1/operations/op_1"
			if tc.header != "" {
				monitor = resp.Header.Get(tc.header)
				require.Contains(t, monitor, "/operations/op_1")
			} else {
				assert.Contains(t, body, `"name":"operations/op_1"`)
			}
			again, _ := do(t, http.MethodPost, srv.URL+"/transfers", "k1")
			if tc.header != "" {
				assert.Equal(t, monitor, again.Header.Get(tc.header), "a replay names the same monitor")
			}
			resp, body = do(t, http.MethodGet, monitor, "")
			assert.Contains(t, body, tc.running)
			clock.add(time.Minute)
			client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
			req, _ := http.NewRequest(http.MethodGet, monitor, nil)
			resp, err := client.Do(req)
			require.NoError(t, err)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			assert.Equal(t, tc.doneStatus, resp.StatusCode, string(b))
			assert.Contains(t, string(b), tc.done)
			st := srv.Stats()
			assert.Equal(t, 1, st.Records)
			assert.Equal(t, 1, st.Operations)
			assert.Equal(t, 1, st.Replays)
			assert.Equal(t, 2, st.Polls)
		})
	}
}

// TestServerAsyncOutcomes: failed, cancelled and cancel requests.
func TestServerAsyncOutcomes(t *testing.T) {
	srv := testsuite.StartServer(t, testsuite.Options{Async: &testsuite.Async{Style: testsuite.AsyncAzure, State: workflows.StateFailed}})
	resp, _ := do(t, http.MethodPost, srv.URL+"/x", "k1")
	_, body := do(t, http.MethodGet, resp.Header.Get("Azure-AsyncOperation"), "")
	var doc struct {
		Status string
		Error  struct{ Code string }
	}
	require.NoError(t, json.Unmarshal([]byte(body), &doc))
	assert.Equal(t, "Failed", doc.Status)
	assert.Equal(t, "OperationFailed", doc.Error.Code)
	res, _ := do(t, http.MethodGet, resp.Header.Get("Location"), "")
	assert.Equal(t, http.StatusNotFound, res.StatusCode, "no result for a failed operation")

	never := testsuite.StartServer(t, testsuite.Options{Async: &testsuite.Async{Style: testsuite.AsyncGoogle, Endless: true, FlakyPolls: 2}})
	do(t, http.MethodPost, never.URL+"/x", "k1")
	first, _ := do(t, http.MethodGet, never.URL+"/v1/operations/op_1", "")
	second, _ := do(t, http.MethodGet, never.URL+"/v1/operations/op_1", "")
	assert.Equal(t, http.StatusOK, first.StatusCode)
	assert.Equal(t, http.StatusServiceUnavailable, second.StatusCode, "every 2nd poll is flaky")
	c, _ := do(t, http.MethodPost, never.URL+"/v1/operations/op_1:cancel", "")
	assert.Equal(t, http.StatusOK, c.StatusCode)
	_, body = do(t, http.MethodGet, never.URL+"/v1/operations/op_1", "")
	assert.Contains(t, body, `"done":true`)
	assert.Contains(t, body, `"CANCELLED"`)
	_, missing := do(t, http.MethodGet, never.URL+"/v1/operations/op_9", "")
	assert.Contains(t, missing, "no such operation")
	assert.Equal(t, 1, never.Stats().Cancels)
}

// TestServerAsyncPaths: with Async.Paths, one server answers the paths
// under them as long-running operations and every other path at once (the
// Work, or the record), so a synchronous payment and a 202 refund are
// tested side by side; a path only sharing a prefix is not covered.
func TestServerAsyncPaths(t *testing.T) {
	srv := testsuite.StartServer(t, testsuite.Options{
		Async: &testsuite.Async{Paths: []string{"/refunds", "/v2/payouts/"}, Duration: time.Minute},
		Work:  func(*http.Request, []byte) (int, []byte) { return http.StatusOK, []byte(`{"paid":true}`) },
	})
	for _, tc := range []struct {
		path   string
		status int
		body   string
	}{
		{"/payments", http.StatusOK, `{"paid":true}`},
		{"/refunds", http.StatusAccepted, `"id":"op_1"`},
		{"/refunds/r_1/reverse", http.StatusAccepted, `"id":"op_2"`},
		{"/refundsX", http.StatusOK, `{"paid":true}`},
		{"/v2/payouts", http.StatusAccepted, `"id":"op_3"`},
		{"/v2/payouts/p_1", http.StatusAccepted, `"id":"op_4"`},
	} {
		resp, body := do(t, http.MethodPost, srv.URL+tc.path, "key"+tc.path)
		assert.Equal(t, tc.status, resp.StatusCode, tc.path)
		assert.Contains(t, body, tc.body, tc.path)
		assert.Equal(t, tc.status == http.StatusAccepted, resp.Header.Get("Location") != "", tc.path)
	}
	st := srv.Stats()
	assert.Equal(t, 4, st.Operations)
	assert.Equal(t, 6, st.Records)
	require.Error(t, testsuite.Options{Async: &testsuite.Async{Paths: []string{"refunds"}}}.Validate(), "a path must start with /")
}
