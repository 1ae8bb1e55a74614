package testsuite_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemhttp/temporal-idempotent-http/testsuite"
)

type answer struct {
	status   int
	body     string
	replayed bool
	retry    string
}

func post(t *testing.T, url, key, body string) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, string(b), resp.Header.Get("Idempotent-Replayed") == "true", resp.Header.Get("Retry-After")}
}

func TestServerRules(t *testing.T) {
	type step struct {
		key, body  string
		wantStatus int
		wantReplay bool
	}
	tests := []struct {
		name        string
		steps       []step
		wantRecords int
		wantStats   testsuite.Stats
	}{
		{"new key creates one record", []step{{"k1", `{"a":1}`, 201, false}}, 1,
			testsuite.Stats{Requests: 1, DistinctKeys: 1, Records: 1}},
		{"repeat replays the stored response", []step{{"k1", `{"a":1}`, 201, false}, {"k1", `{"a":1}`, 201, true}, {"k1", `{"a":1}`, 201, true}}, 1,
			testsuite.Stats{Requests: 3, DistinctKeys: 1, Records: 1, Replays: 2}},
		{"same key different body is 422", []step{{"k1", `{"a":1}`, 201, false}, {"k1", `{"a":2}`, 422, false}}, 1,
			testsuite.Stats{Requests: 2, DistinctKeys: 1, Records: 1, Mismatches: 1}},
		{"missing key is 400", []step{{"", `{"a":1}`, 400, false}}, 0,
			testsuite.Stats{Requests: 1, MissingKey: 1}},
		{"invalid JSON is 400 and not stored", []step{{"k1", `{"a":`, 400, false}, {"k1", `{"a":1}`, 201, false}}, 1,
			testsuite.Stats{Requests: 2, DistinctKeys: 2, Records: 1}},
		{"two keys two records", []step{{"k1", `{}`, 201, false}, {"k2", `{}`, 201, false}}, 2,
			testsuite.Stats{Requests: 2, DistinctKeys: 2, Records: 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := testsuite.StartServer(t, testsuite.Options{})
			var first string
			for i, s := range tt.steps {
				a := post(t, srv.URL+"/payments", s.key, s.body)
				assert.Equal(t, s.wantStatus, a.status, "step %d: %s", i, a.body)
				assert.Equal(t, s.wantReplay, a.replayed, "step %d", i)
				if s.wantReplay {
					assert.Equal(t, first, a.body, "a replay is the stored response")
				} else if a.status == 201 && first == "" {
					first = a.body
				}
			}
			assert.Len(t, srv.Records(), tt.wantRecords)
			assert.Equal(t, tt.wantStats, srv.Stats())
		})
	}
}

func TestServerInFlight(t *testing.T) {
	srv := testsuite.StartServer(t, testsuite.Options{ProcessingTime: 300 * time.Millisecond, InFlightRetryAfter: 2})
	var wg sync.WaitGroup
	var first answer
	wg.Go(func() { first = post(t, srv.URL, "k", `{}`) })
	require.Eventually(t, func() bool { return srv.Stats().DistinctKeys == 1 }, 2*time.Second, time.Millisecond)
	dup := post(t, srv.URL, "k", `{}`)
	wg.Wait()
	assert.Equal(t, http.StatusConflict, dup.status)
	assert.Equal(t, "2", dup.retry)
	assert.Equal(t, 201, first.status)
	assert.Equal(t, 1, srv.Stats().Records)
	assert.Equal(t, 1, srv.Stats().InFlight)
	again := post(t, srv.URL, "k", `{}`)
	assert.True(t, again.replayed)
}

func TestServerExpiry(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	srv := testsuite.StartServer(t, testsuite.Options{Now: clock})
	require.Equal(t, 201, post(t, srv.URL, "k", `{}`).status)
	advance(testsuite.DefaultWindow - time.Second)
	assert.True(t, post(t, srv.URL, "k", `{}`).replayed, "still inside the 24 h window")
	advance(time.Second)
	a := post(t, srv.URL, "k", `{"other":true}`)
	assert.Equal(t, 201, a.status, "after the window the key is new, even with another body")
	assert.False(t, a.replayed)
	assert.Equal(t, 2, srv.Stats().Records)
}

func TestServerScript(t *testing.T) {
	steps, err := testsuite.ParseScript("503, 429:1,201,500")
	require.NoError(t, err)
	assert.Equal(t, []testsuite.Step{{Status: 503}, {Status: 429, RetryAfter: "1"}, {Status: 201}, {Status: 500}}, steps)
	srv := testsuite.StartServer(t, testsuite.Options{})
	srv.Script(steps...)
	got := []answer{post(t, srv.URL, "k", `{}`), post(t, srv.URL, "k", `{}`), post(t, srv.URL, "k", `{}`), post(t, srv.URL, "k", `{}`), post(t, srv.URL, "k", `{}`)}
	assert.Equal(t, 503, got[0].status)
	assert.Equal(t, 429, got[1].status)
	assert.Equal(t, "1", got[1].retry)
	assert.Equal(t, 201, got[2].status)
	assert.Equal(t, 500, got[3].status)
	assert.True(t, got[4].replayed)
	assert.Equal(t, testsuite.Stats{Requests: 5, DistinctKeys: 1, Records: 1, Replays: 1, Failures: 3}, srv.Stats())

	for _, bad := range []string{"abc", "99", "600", "503:1,x"} {
		_, err := testsuite.ParseScript(bad)
		assert.Error(t, err, bad)
	}
}

func TestServerFailureRateAndCapacity(t *testing.T) {
	always := testsuite.StartServer(t, testsuite.Options{FailureRate: 1, FailureRetryAfter: "3600"})
	a := post(t, always.URL, "k", `{}`)
	assert.Equal(t, 503, a.status)
	assert.Equal(t, "3600", a.retry)
	assert.Equal(t, 0, always.Stats().Records)

	now := time.Unix(0, 0)
	limited := testsuite.StartServer(t, testsuite.Options{Capacity: 2, CapacityWindow: time.Second, Now: func() time.Time { return now }})
	codes := []int{post(t, limited.URL, "a", `{}`).status, post(t, limited.URL, "b", `{}`).status, post(t, limited.URL, "c", `{}`).status}
	assert.Equal(t, []int{201, 201, 503}, codes)
	now = now.Add(time.Second)
	assert.Equal(t, 201, post(t, limited.URL, "c", `{}`).status, "a new window admits again")
}

func TestServerConcurrentDuplicates(t *testing.T) {
	srv := testsuite.StartServer(t, testsuite.Options{ProcessingTime: 20 * time.Millisecond})
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(`{"x":1}`))
			req.Header.Set("Idempotency-Key", "same")
			resp, err := http.DefaultClient.Do(req)
			if assert.NoError(t, err) {
				resp.Body.Close()
				assert.Contains(t, []int{201, 409}, resp.StatusCode)
			}
		})
	}
	wg.Wait()
	assert.Equal(t, 1, srv.Stats().Records, "50 concurrent duplicates, one record")
}

func TestServerStatsEndpoint(t *testing.T) {
	srv := testsuite.StartServer(t, testsuite.Options{})
	post(t, srv.URL, "k", `{}`)
	resp, err := http.Get(srv.URL + "/stats")
	require.NoError(t, err)
	defer resp.Body.Close()
	var st testsuite.Stats
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&st))
	assert.Equal(t, testsuite.Stats{Requests: 1, DistinctKeys: 1, Records: 1}, st)
}
