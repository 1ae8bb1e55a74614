package testsuite_test

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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
			testsuite.Stats{Requests: 2, DistinctKeys: 1, Records: 1}},
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
	advance(24*time.Hour - time.Second) // Options.Window's default
	assert.True(t, post(t, srv.URL, "k", `{}`).replayed, "still inside the 24 h window")
	advance(time.Second)
	a := post(t, srv.URL, "k", `{"other":true}`)
	assert.Equal(t, 201, a.status, "after the window the key is new, even with another body")
	assert.False(t, a.replayed)
	assert.Equal(t, 2, srv.Stats().Records)
}

func TestServerScript(t *testing.T) {
	srv := testsuite.StartServer(t, testsuite.Options{})
	srv.Script(testsuite.Fail(503), testsuite.Fail(429, "1"), testsuite.Step{Status: 201}, testsuite.Fail(500))
	got := []answer{post(t, srv.URL, "k", `{}`), post(t, srv.URL, "k", `{}`), post(t, srv.URL, "k", `{}`), post(t, srv.URL, "k", `{}`), post(t, srv.URL, "k", `{}`)}
	assert.Equal(t, 503, got[0].status)
	assert.Equal(t, 429, got[1].status)
	assert.Equal(t, "1", got[1].retry)
	assert.Equal(t, 201, got[2].status)
	assert.Equal(t, 500, got[3].status)
	assert.True(t, got[4].replayed)
	assert.Equal(t, testsuite.Stats{Requests: 5, DistinctKeys: 1, Records: 1, Replays: 1, Failures: 3}, srv.Stats())
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
	assert.Equal(t, []int{201, 201, 429}, codes, "beyond Capacity: 429 by default")
	now = now.Add(time.Second)
	assert.Equal(t, 201, post(t, limited.URL, "c", `{}`).status, "a new window admits again")

	shedding := testsuite.StartServer(t, testsuite.Options{Capacity: 1, CapacityStatus: 503, Now: func() time.Time { return now }})
	codes = []int{post(t, shedding.URL, "a", `{}`).status, post(t, shedding.URL, "b", `{}`).status}
	assert.Equal(t, []int{201, 503}, codes, "beyond Capacity: CapacityStatus")
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

// TestServerFailureAfterWindowKeepsNewerEntry: a first request whose work
// fails only after its window has passed must not delete the entry of a
// newer request with the same key (which would let a third request do the
// work again: two records for one key).
func TestServerFailureAfterWindowKeepsNewerEntry(t *testing.T) {
	clk := newClock()
	release := make(chan struct{})
	var calls atomic.Int32
	srv := testsuite.StartServer(t, testsuite.Options{Now: clk.Now, Work: func(*http.Request, []byte) (int, []byte) {
		if calls.Add(1) == 1 {
			<-release
			return http.StatusInternalServerError, []byte(`{"error":"upstream failed"}`)
		}
		return http.StatusCreated, nil
	}})
	var wg sync.WaitGroup
	var first answer
	wg.Go(func() { first = post(t, srv.URL+"/payments", "k", `{}`) })
	require.Eventually(t, func() bool { return calls.Load() == 1 }, 5*time.Second, time.Millisecond)
	clk.Advance(24 * time.Hour) // Options.Window's default
	second := post(t, srv.URL+"/payments", "k", `{}`)
	require.Equal(t, 201, second.status, "the key is new after the window: %s", second.body)
	close(release)
	wg.Wait()
	assert.Equal(t, 500, first.status)
	third := post(t, srv.URL+"/payments", "k", `{}`)
	assert.Equal(t, 201, third.status)
	assert.True(t, third.replayed, "the second request's entry survives the first one's failure")
	assert.Equal(t, second.body, third.body)
	assert.Len(t, srv.Records(), 1, "one record for one key")
}

// TestServerLockTimeout: a lock older than LockTimeout is taken over by the
// next request; the late work of the first is not stored over the newer one.
func TestServerLockTimeout(t *testing.T) {
	clk := newClock()
	release := make(chan struct{})
	var calls atomic.Int32
	srv := testsuite.StartServer(t, testsuite.Options{Now: clk.Now, LockTimeout: time.Minute, Work: func(_ *http.Request, _ []byte) (int, []byte) {
		n := calls.Add(1)
		if n == 1 {
			<-release
		}
		return http.StatusCreated, []byte(`{"work":` + strconv.Itoa(int(n)) + `}`)
	}})
	var wg sync.WaitGroup
	var first answer
	wg.Go(func() { first = post(t, srv.URL+"/payments", "k", `{}`) })
	require.Eventually(t, func() bool { return calls.Load() == 1 }, 5*time.Second, time.Millisecond)
	clk.Advance(time.Minute - time.Second)
	assert.Equal(t, 409, post(t, srv.URL+"/payments", "k", `{}`).status, "still locked")
	clk.Advance(time.Second)
	second := post(t, srv.URL+"/payments", "k", `{}`)
	assert.Equal(t, answer{201, `{"work":2}`, false, ""}, second, "the expired lock is taken over")
	close(release)
	wg.Wait()
	assert.Equal(t, `{"work":1}`, first.body, "the late work still answers its own client")
	third := post(t, srv.URL+"/payments", "k", `{}`)
	assert.Equal(t, answer{201, `{"work":2}`, true, ""}, third, "the newer response is the stored one")
	clk.Advance(10 * time.Minute)
	assert.True(t, post(t, srv.URL+"/payments", "k", `{}`).replayed, "a done key outlives LockTimeout, up to its window")
	st := srv.Stats()
	assert.Equal(t, testsuite.Stats{Requests: 5, DistinctKeys: 1, Records: 2, Replays: 2, InFlight: 1, Expired: 1}, st, "one key, its expired lock taken over: two records")
}

// TestServerCloseDropsOrphans: Close drops the connection of a held
// orphaned request (never a made-up 200), and later orphans at once.
func TestServerCloseDropsOrphans(t *testing.T) {
	srv := testsuite.StartServer(t, testsuite.Options{Orphan: func(string) bool { return true }})
	errs := make(chan error, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/payments", strings.NewReader(`{}`))
		req.Header.Set("Idempotency-Key", "k")
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errs <- err
	}()
	require.Eventually(t, func() bool { return srv.Stats().Orphaned == 1 }, 5*time.Second, time.Millisecond)
	select {
	case err := <-errs:
		t.Fatalf("answered before Close: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	srv.Close()
	select {
	case err := <-errs:
		assert.Error(t, err, "the connection is dropped")
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not release the orphaned request")
	}
	_, err := http.Post(srv.URL+"/payments", "application/json", strings.NewReader(`{}`))
	require.NoError(t, err, "a request without a key is not orphaned")
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/payments", strings.NewReader(`{}`))
	req.Header.Set("Idempotency-Key", "k2")
	_, err = http.DefaultClient.Do(req)
	assert.Error(t, err, "after Close an orphan is dropped at once")
	assert.Equal(t, 0, srv.Stats().Records)
}

func TestServerShouldRetryHeader(t *testing.T) {
	for _, tt := range []struct {
		dialect testsuite.Dialect
		want    []string // Stripe-Should-Retry of 503, 429, 400, 500
	}{
		{testsuite.StripeDialect(), []string{"true", "true", "", "true"}},
		{testsuite.IETFDialect(), []string{"", "", "", ""}},
		{testsuite.ExpressDialect(), []string{"", "", "", ""}},
	} {
		t.Run(tt.dialect.Name, func(t *testing.T) {
			srv := testsuite.StartServer(t, testsuite.Options{Dialect: tt.dialect})
			srv.Script(testsuite.Fail(503), testsuite.Fail(429, "2"), testsuite.Fail(400), testsuite.Fail(500))
			var got []string
			for range 4 {
				req, _ := http.NewRequest(http.MethodPost, srv.URL+"/payments", strings.NewReader(`{}`))
				req.Header.Set("Idempotency-Key", "k")
				resp, err := http.DefaultClient.Do(req)
				require.NoError(t, err)
				resp.Body.Close()
				got = append(got, resp.Header.Get("Stripe-Should-Retry"))
			}
			assert.Equal(t, tt.want, got)
			assert.Equal(t, 4, srv.Stats().Failures)
		})
	}
}

// TestServerDistinctKeys (issue 30, item 13): DistinctKeys is how many
// different keys the server's requests carried, whatever each was
// answered: the number of different keys in Log, not how often a key was
// claimed (a key whose work is refused is claimed again by its retry).
func TestServerDistinctKeys(t *testing.T) {
	tests := []struct {
		name string
		keys []string // one POST each, in order
		work int      // the status the work answers
		fail int      // scripted 503s in front of the key logic
		want int
	}{
		{"one key 30 times, its work refused (a business 409)", slices.Repeat([]string{"k"}, 30), 409, 1, 1},
		{"one key 30 times, replayed", slices.Repeat([]string{"k"}, 30), 201, 1, 1},
		{"two keys interleaved, refused", []string{"a", "b", "a", "b", "a"}, 422, 0, 2},
		{"a key seen only by a failure", []string{"k"}, 201, 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := testsuite.StartServer(t, testsuite.Options{Work: func(*http.Request, []byte) (int, []byte) {
				return tt.work, []byte(`{"error":"already refunded"}`)
			}})
			for range tt.fail {
				srv.Script(testsuite.Step{Status: 503})
			}
			for _, k := range tt.keys {
				post(t, srv.URL+"/refunds", k, `{}`)
			}
			inLog := map[string]bool{}
			for _, l := range srv.Log() {
				inLog[l.IdempotencyKey] = true
			}
			assert.Len(t, inLog, tt.want, "the keys in Log")
			assert.Equal(t, tt.want, srv.Stats().DistinctKeys, "DistinctKeys")
		})
	}
}
