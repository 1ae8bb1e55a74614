package testsuite_test

import (
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemhttp/temporal-idempotent-http/testsuite"
)

// fresh is a client on a new connection for every request: Go's
// Transport would send a request with an Idempotency-Key header cut on a
// reused connection again on its own, hiding the cut (see Step.Cut).
var fresh = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// postWith sends POST url with body and the key in Idempotency-Key (none
// if ""), through c; it returns the answer or the error.
func postWith(t *testing.T, c *http.Client, url, key, body string) (answer, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := c.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return answer{resp.StatusCode, string(b), resp.Header.Get("Idempotent-Replayed") == "true", resp.Header.Get("Retry-After")}, nil
}

// TestCutAfterWork: a cut step lets the request do its work, then drops
// the connection without an answer; the retry with the same key gets the
// stored answer where keys count, and does the work again where they do
// not.
func TestCutAfterWork(t *testing.T) {
	bodyKey := testsuite.IETFDialect()
	bodyKey.KeyIn = "body:idempotency_key"
	tests := []struct {
		name       string
		dialect    testsuite.Dialect
		key        string // in Idempotency-Key
		body       string
		wantReplay bool     // the retry is a replay of the cut answer
		wantIDs    []string // the records after the retry
		wantKey    string   // Record.IdempotencyKey
	}{
		{"ietf: the retry is replayed", testsuite.IETFDialect(), "k1", `{"amount":1}`, true, []string{"rec_1"}, "k1"},
		{"stripe: the retry is replayed", testsuite.StripeDialect(), "k1", `{"amount":1}`, true, []string{"rec_1"}, "k1"},
		{"ietf, key in the body: the retry is replayed", bodyKey, "", `{"amount":1,"idempotency_key":"k1"}`, true, []string{"rec_1"}, "k1"},
		{"plain: the retry makes a second record", testsuite.PlainDialect(), "k1", `{"amount":1}`, false, []string{"rec_1", "rec_2"}, "k1"},
		{"stripe without a key: a second record", testsuite.StripeDialect(), "", `{"amount":1}`, false, []string{"rec_1", "rec_2"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := testsuite.StartServer(t, testsuite.Options{Dialect: tt.dialect})
			srv.Script(testsuite.CutAfterWork())
			_, err := postWith(t, fresh, srv.URL+"/payments", tt.key, tt.body)
			require.Error(t, err, "the client gets no answer")
			recs := srv.Records()
			require.Len(t, recs, 1, "the work was done")
			assert.Equal(t, tt.wantKey, recs[0].IdempotencyKey)
			assert.Equal(t, 1, srv.Stats().Cut)
			log := srv.Log()
			require.Len(t, log, 1)
			assert.True(t, log[0].Cut)
			assert.Equal(t, 201, log[0].Status, "the status it was not answered")

			retry, err := postWith(t, fresh, srv.URL+"/payments", tt.key, tt.body)
			require.NoError(t, err)
			assert.Equal(t, 201, retry.status, retry.body)
			assert.Equal(t, tt.wantReplay, retry.replayed)
			assert.Contains(t, retry.body, `"id":"`+tt.wantIDs[len(tt.wantIDs)-1]+`"`, "the retry's answer names the record")
			var ids []string
			for _, r := range srv.Records() {
				ids = append(ids, r.ID)
			}
			assert.Equal(t, tt.wantIDs, ids)
			st := srv.Stats()
			assert.Equal(t, 1, st.Cut, "the retry is answered")
			assert.Equal(t, 2, st.Requests)
			assert.Equal(t, b2i(tt.wantReplay), st.Replays)
		})
	}
}

// b2i is 1 for true, 0 for false.
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestCutAfterWorkAnyAnswer: a cut step drops whatever the request would
// have been answered: a replay, a misuse, a lookup; a failure step is
// answered as ever.
func TestCutAfterWorkAnyAnswer(t *testing.T) {
	srv := testsuite.StartServer(t, testsuite.Options{Lookup: "ref"})
	first, err := postWith(t, fresh, srv.URL+"/payments", "k1", `{"ref":"r1"}`)
	require.NoError(t, err)
	require.Equal(t, 201, first.status)
	srv.Script(testsuite.CutAfterWork(), testsuite.CutAfterWork(), testsuite.Fail(503), testsuite.CutAfterWork())
	_, err = postWith(t, fresh, srv.URL+"/payments", "k1", `{"ref":"r1"}`)
	assert.Error(t, err, "a replay cut")
	_, err = postWith(t, fresh, srv.URL+"/payments", "k1", `{"ref":"r2"}`)
	assert.Error(t, err, "a misuse cut")
	failed, err := postWith(t, fresh, srv.URL+"/payments", "k1", `{"ref":"r1"}`)
	require.NoError(t, err)
	assert.Equal(t, 503, failed.status, "a failure step is answered")
	_, err = fresh.Get(srv.URL + "/payments?ref=r1")
	assert.Error(t, err, "a lookup cut")
	assert.Equal(t, testsuite.Stats{Requests: 5, DistinctKeys: 1, Records: 1, Replays: 1, Mismatches: 1, Failures: 1, Cut: 3, Lookups: 1}, srv.Stats())
	var cut []bool
	for _, l := range srv.Log() {
		cut = append(cut, l.Cut)
	}
	assert.Equal(t, []bool{false, true, true, false, true}, cut)
}

// TestCutRate: with a seeded Rand, the requests cut are the ones whose
// draw for CutRate falls under it, after the draw for FailureRate; every
// request cut did its work.
func TestCutRate(t *testing.T) {
	tests := []struct {
		name                 string
		failureRate, cutRate float64
		seed                 uint64
	}{
		{"half", 0, 0.5, 1},
		{"a quarter", 0, 0.25, 2},
		{"every one", 0, 1, 3},
		{"with failures", 0.3, 0.5, 4},
	}
	const n = 40
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The same draws, made again to know which requests to expect cut.
			draws := rand.New(rand.NewPCG(tt.seed, 0))
			var want []string
			for range n {
				switch {
				case tt.failureRate > 0 && draws.Float64() < tt.failureRate:
					want = append(want, "503")
				case draws.Float64() < tt.cutRate:
					want = append(want, "cut")
				default:
					want = append(want, "201")
				}
			}
			srv := testsuite.StartServer(t, testsuite.Options{
				Dialect: testsuite.PlainDialect(), FailureRate: tt.failureRate, CutRate: tt.cutRate,
				Rand: rand.New(rand.NewPCG(tt.seed, 0)).Float64,
			})
			var got []string
			for range n {
				a, err := postWith(t, fresh, srv.URL+"/payments", "k", `{}`)
				if err != nil {
					got = append(got, "cut")
				} else {
					got = append(got, strconv.Itoa(a.status))
				}
			}
			assert.Equal(t, want, got)
			cuts, fails := count(want, "cut"), count(want, "503")
			assert.Positive(t, cuts)
			st := srv.Stats()
			assert.Equal(t, cuts, st.Cut)
			assert.Equal(t, fails, st.Failures)
			assert.Equal(t, n-fails, st.Records, "every request not failed did its work, cut or not")
		})
	}
}

// TestCutRateZeroDrawsNothing: without CutRate (and FailureRate) Rand is
// never called: seeded runs of earlier versions draw the same numbers.
func TestCutRateZeroDrawsNothing(t *testing.T) {
	srv := testsuite.StartServer(t, testsuite.Options{Rand: func() float64 {
		t.Error("Rand called")
		return math.NaN()
	}})
	a, err := postWith(t, fresh, srv.URL+"/payments", "k", `{}`)
	require.NoError(t, err)
	assert.Equal(t, 201, a.status)
	assert.Equal(t, 0, srv.Stats().Cut)
}

func count(xs []string, x string) int {
	n := 0
	for _, y := range xs {
		if y == x {
			n++
		}
	}
	return n
}

// TestCutAfterWorkTLS: the cut works over TLS, HTTP/1.1 (the connection
// closed) and HTTP/2 (the stream reset).
func TestCutAfterWorkTLS(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		t.Run(map[bool]string{false: "http/1.1", true: "h2"}[h2], func(t *testing.T) {
			srv := testsuite.NewServer(testsuite.Options{})
			hs := httptest.NewUnstartedServer(srv)
			hs.EnableHTTP2 = h2
			hs.StartTLS()
			t.Cleanup(hs.Close)
			c := hs.Client()
			srv.Script(testsuite.CutAfterWork())
			_, err := postWith(t, c, hs.URL+"/payments", "k1", `{}`)
			require.Error(t, err)
			retry, err := postWith(t, c, hs.URL+"/payments", "k1", `{}`)
			require.NoError(t, err)
			assert.True(t, retry.replayed)
			assert.Equal(t, 1, srv.Stats().Records)
			assert.Equal(t, 1, srv.Stats().Cut)
		})
	}
}
