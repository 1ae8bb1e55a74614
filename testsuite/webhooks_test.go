package testsuite_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/workflows"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemhttp/temporal-idempotent-http/testsuite"
)

// The secrets of the tests: a Standard Webhooks secret is "whsec_" and
// the key in base64.
var (
	standardKey    = []byte("0123456789abcdef0123456789abcdef")
	standardSecret = "whsec_" + base64.StdEncoding.EncodeToString(standardKey)
)

const plainSecret = "whsec_plain-secret-of-the-tests"

// hookEvent is the event a webhook carries.
type hookEvent struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	Created   int64  `json:"created"`
	Timestamp string `json:"timestamp"`
	Data      struct {
		Object struct {
			ID       string          `json:"id"`
			Status   string          `json:"status"`
			Metadata json.RawMessage `json:"metadata"`
		} `json:"object"`
	} `json:"data"`
}

// received is one delivery a receiver got.
type received struct {
	event    hookEvent
	verified error // nil: the signature and timestamp verify
	header   http.Header
	query    string
}

// receiver is an httptest webhook endpoint that verifies each delivery
// by the scheme's rules, computed here with crypto/hmac so that a rule
// wrong in internal/signature would fail: 204 to a delivery that
// verifies, 400 to one that does not, or the status that answer says.
type receiver struct {
	t      *testing.T
	scheme string
	answer func(n int) int // the status of the n-th delivery (from 1), 0: by verification
	hold   chan struct{}   // if set, deliveries are held until it closes or the sender goes
	srv    *httptest.Server
	mu     sync.Mutex
	got    []received
}

func newReceiver(t *testing.T, scheme string) *receiver {
	rc := &receiver{t: t, scheme: scheme}
	rc.srv = httptest.NewServer(rc)
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var ev hookEvent
	if err := json.Unmarshal(body, &ev); err != nil {
		rc.t.Errorf("a delivery that is not an event: %v: %q", err, body)
	}
	rec := received{event: ev, verified: verify(rc.scheme, r.Header, body, ev, time.Now()), header: r.Header.Clone(), query: r.URL.RawQuery}
	rc.mu.Lock()
	rc.got = append(rc.got, rec)
	n := len(rc.got)
	rc.mu.Unlock()
	if rc.hold != nil {
		select {
		case <-rc.hold:
		case <-r.Context().Done():
			return
		}
	}
	status := 0
	if rc.answer != nil {
		status = rc.answer(n)
	}
	if status == 0 {
		status = http.StatusNoContent
		if rec.verified != nil {
			status = http.StatusBadRequest
		}
	}
	w.WriteHeader(status)
}

func (rc *receiver) deliveries() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]received(nil), rc.got...)
}

// verify checks a delivery as a receiver of scheme does, with a 5 min
// tolerance; the HMAC scheme signs no time, so its receiver checks the
// event's "created".
func verify(scheme string, h http.Header, body []byte, ev hookEvent, now time.Time) error {
	mac := func(key []byte, parts ...string) []byte {
		m := hmac.New(sha256.New, key)
		for _, p := range parts {
			m.Write([]byte(p))
		}
		return m.Sum(nil)
	}
	fresh := func(ts int64) error {
		if d := now.Sub(time.Unix(ts, 0)); d > 5*time.Minute || d < -5*time.Minute {
			return fmt.Errorf("timestamp %d is %v old", ts, d)
		}
		return nil
	}
	switch scheme {
	case "standard-webhooks":
		id, ts := h.Get("webhook-id"), h.Get("webhook-timestamp")
		if id != ev.ID {
			return fmt.Errorf("webhook-id %q, event id %q", id, ev.ID)
		}
		want := "v1," + base64.StdEncoding.EncodeToString(mac(standardKey, id, ".", ts, ".", string(body)))
		if !hmac.Equal([]byte(h.Get("webhook-signature")), []byte(want)) {
			return errors.New("webhook-signature does not verify")
		}
		n, err := strconv.ParseInt(ts, 10, 64)
		if err != nil {
			return err
		}
		return fresh(n)
	case "stripe":
		var ts, sig string
		for part := range strings.SplitSeq(h.Get("Stripe-Signature"), ",") {
			k, v, _ := strings.Cut(part, "=")
			switch k {
			case "t":
				ts = v
			case "v1":
				sig = v
			}
		}
		if !hmac.Equal([]byte(sig), []byte(hex.EncodeToString(mac([]byte(plainSecret), ts, ".", string(body))))) {
			return errors.New("Stripe-Signature does not verify")
		}
		n, err := strconv.ParseInt(ts, 10, 64)
		if err != nil {
			return err
		}
		return fresh(n)
	case "hmac":
		if !hmac.Equal([]byte(h.Get("X-Signature")), []byte(hex.EncodeToString(mac([]byte(plainSecret), string(body))))) {
			return errors.New("X-Signature does not verify")
		}
		return fresh(ev.Created)
	}
	return fmt.Errorf("scheme %q", scheme)
}

// startOp starts an operation with body under key.
func startOp(t *testing.T, url, key, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// settled waits until srv has no webhook pending and at least n attempts.
func settled(t *testing.T, srv *testsuite.Server, n int) testsuite.Stats {
	t.Helper()
	require.Eventually(t, func() bool {
		st := srv.Stats()
		return st.Webhooks >= n && st.WebhooksPending == 0
	}, 10*time.Second, 5*time.Millisecond, "deliveries: %+v", srv.Deliveries())
	return srv.Stats()
}

// TestWebhooksSchemes: in every scheme, the terminal event's copies carry
// one ID and verify, the progress event comes after them, and the forged
// and stale copies, each under its own ID, fail verification and are
// answered 4xx, without retries.
func TestWebhooksSchemes(t *testing.T) {
	for _, tc := range []struct {
		scheme string
		secret string
	}{
		{"standard-webhooks", standardSecret},
		{"stripe", plainSecret},
		{"hmac", plainSecret},
	} {
		t.Run(string(tc.scheme), func(t *testing.T) {
			rc := newReceiver(t, tc.scheme)
			srv := testsuite.StartServer(t, testsuite.Options{Webhooks: &testsuite.Webhooks{
				URL: rc.srv.URL + "/hooks", Scheme: tc.scheme, Secret: tc.secret, State: workflows.StateFailed,
				Deliveries: 3, Progress: true, Forged: 2, Stale: 1,
			}})
			resp, body := startOp(t, srv.URL+"/payments", "k1", `{"amount":1}`)
			require.Equal(t, http.StatusCreated, resp.StatusCode, body)
			assert.JSONEq(t, `{"id":"op_1","status":"processing"}`, body)
			assert.Equal(t, srv.URL+"/resources/op_1", resp.Header.Get("Location"))

			st := settled(t, srv, 7)
			assert.Equal(t, 7, st.Webhooks, "no retries")
			assert.Equal(t, 4, st.WebhooksDelivered)
			assert.Equal(t, 3, st.WebhooksRejected)

			got := rc.deliveries()
			require.Len(t, got, 7)
			var terminal, progress []received
			bad := map[string]string{}
			for _, d := range got {
				assert.Equal(t, "application/json", d.header.Get("Content-Type"))
				assert.Contains(t, d.header.Get("User-Agent"), "temporal-idempotent-http")
				assert.Equal(t, "op_1", d.event.Data.Object.ID)
				assert.JSONEq(t, `{}`, string(d.event.Data.Object.Metadata))
				created, err := time.Parse(time.RFC3339, d.event.Timestamp)
				require.NoError(t, err)
				assert.Equal(t, d.event.Created, created.Unix(), "timestamp and created name one time")
				switch {
				case d.verified != nil:
					bad[d.event.ID] = d.verified.Error()
					assert.Equal(t, "operation.failed", d.event.Type)
				case d.event.Type == "operation.processing":
					progress = append(progress, d)
					assert.Equal(t, "processing", d.event.Data.Object.Status)
				default:
					terminal = append(terminal, d)
					assert.Equal(t, "operation.failed", d.event.Type)
					assert.Equal(t, "failed", d.event.Data.Object.Status)
				}
			}
			require.Len(t, terminal, 3)
			for _, d := range terminal[1:] {
				assert.Equal(t, terminal[0].event.ID, d.event.ID, "duplicates carry one ID")
			}
			assert.True(t, strings.HasPrefix(terminal[0].event.ID, "evt_"), terminal[0].event.ID)
			require.Len(t, progress, 1)
			assert.NotEqual(t, terminal[0].event.ID, progress[0].event.ID)
			assert.Equal(t, progress[0].event.ID, got[len(got)-1].event.ID, "progress comes after the terminal event")
			assert.Len(t, bad, 3, "each forged and stale copy has its own ID: %v", bad)
			assert.NotContains(t, bad, terminal[0].event.ID)

			kinds := map[testsuite.DeliveryKind]int{}
			for _, d := range srv.Deliveries() {
				kinds[d.Kind]++
				wantStatus := http.StatusNoContent
				if d.Kind != testsuite.DeliveryValid {
					wantStatus = http.StatusBadRequest
					assert.Contains(t, bad, d.EventID, "a %s copy verified", d.Kind)
				}
				assert.Equal(t, wantStatus, d.Status, "%+v", d)
				assert.Equal(t, 1, d.Attempt)
				assert.Equal(t, rc.srv.URL+"/hooks", d.URL)
			}
			assert.Equal(t, map[testsuite.DeliveryKind]int{testsuite.DeliveryValid: 4, testsuite.DeliveryForged: 2, testsuite.DeliveryStale: 1}, kinds)
		})
	}
}

// TestWebhooksStaleTimestamp: a stale copy is signed, well, with a
// timestamp 10 minutes old, and its event was created 10 minutes before
// the valid one's.
func TestWebhooksStaleTimestamp(t *testing.T) {
	rc := newReceiver(t, "stripe")
	srv := testsuite.StartServer(t, testsuite.Options{Webhooks: &testsuite.Webhooks{URL: rc.srv.URL, Scheme: "stripe", Secret: plainSecret, Stale: 1}})
	startOp(t, srv.URL+"/x", "k1", `{}`)
	settled(t, srv, 2)
	got := rc.deliveries()
	require.Len(t, got, 2)
	stale, valid := got[0], got[1]
	require.Error(t, stale.verified)
	assert.Contains(t, stale.verified.Error(), "old", "the signature is right, the time is not")
	require.NoError(t, valid.verified)
	assert.InDelta(t, 600, valid.event.Created-stale.event.Created, 2)
}

// TestWebhooksRetry: a delivery answered 503 is retried, with a backoff
// from 1 s, until a 2xx; one never answered 2xx is given up after
// RetryFor.
func TestWebhooksRetry(t *testing.T) {
	for _, tc := range []struct {
		name                string
		failures            int // answered 503 before a 204
		retryFor            time.Duration
		attempts, delivered int
	}{
		{"until 2xx", 2, 0, 3, 1},
		{"until RetryFor", 1 << 30, 1200 * time.Millisecond, 2, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := newReceiver(t, "standard-webhooks")
			rc.answer = func(n int) int {
				if n <= tc.failures {
					return http.StatusServiceUnavailable
				}
				return 0
			}
			srv := testsuite.StartServer(t, testsuite.Options{Webhooks: &testsuite.Webhooks{URL: rc.srv.URL, Secret: standardSecret, RetryFor: tc.retryFor}})
			startOp(t, srv.URL+"/x", "k1", `{}`)
			require.Eventually(t, func() bool { return srv.Stats().Webhooks >= 1 }, 5*time.Second, time.Millisecond)
			assert.Equal(t, 1, srv.Stats().WebhooksPending, "pending while retried")
			st := settled(t, srv, tc.attempts)
			assert.Equal(t, tc.attempts, st.Webhooks)
			assert.Equal(t, tc.delivered, st.WebhooksDelivered)
			assert.Zero(t, st.WebhooksRejected, "503 is no rejection")
			ds := srv.Deliveries()
			require.Len(t, ds, tc.attempts)
			for i, d := range ds {
				assert.Equal(t, ds[0].EventID, d.EventID, "a retry is the same event")
				assert.Equal(t, i+1, d.Attempt)
				if i > 0 {
					gap := d.Time.Sub(ds[i-1].Time)
					assert.GreaterOrEqual(t, gap, time.Duration(1<<(i-1))*time.Second/2, "backoff before attempt %d", i+1)
				}
			}
			assert.Len(t, rc.deliveries(), tc.attempts)
			for _, d := range rc.deliveries() {
				assert.NoError(t, d.verified, "each retry is signed afresh")
			}
		})
	}
}

// TestWebhooksNoRedirect: a redirect is not followed: the delivery is
// retried at its URL.
func TestWebhooksNoRedirect(t *testing.T) {
	var mu sync.Mutex
	var got []string
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.Path)
		n := len(got)
		mu.Unlock()
		if n == 1 {
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(rc.Close)
	srv := testsuite.StartServer(t, testsuite.Options{Webhooks: &testsuite.Webhooks{URL: rc.URL + "/hooks", Secret: standardSecret}})
	startOp(t, srv.URL+"/x", "k1", `{}`)
	st := settled(t, srv, 2)
	assert.Equal(t, 2, st.Webhooks)
	assert.Equal(t, 1, st.WebhooksDelivered)
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{"POST /hooks", "POST /hooks"}, got)
	assert.Equal(t, http.StatusFound, srv.Deliveries()[0].Status)
}

// TestWebhooksCallbackURL: a start request's callback_url, query
// included, gets its operation's deliveries instead of URL, and the
// event echoes the request's metadata object.
func TestWebhooksCallbackURL(t *testing.T) {
	fixed := newReceiver(t, "hmac")
	callback := newReceiver(t, "hmac")
	srv := testsuite.StartServer(t, testsuite.Options{Webhooks: &testsuite.Webhooks{URL: fixed.srv.URL, Scheme: "hmac", Secret: plainSecret}})
	for _, tc := range []struct {
		key, body, metadata string
		to                  *receiver
		query               string
	}{
		{"k1", `{"callback_url":"` + callback.srv.URL + `/cb?tenant=7&x=a%20b","metadata":{"order":"o-1","n":[1,2]}}`, `{"order":"o-1","n":[1,2]}`, callback, "tenant=7&x=a%20b"},
		{"k2", `{"metadata":{"order":"o-2"}}`, `{"order":"o-2"}`, fixed, ""},
		{"k3", `{"metadata":"not an object","callback_url":7}`, `{}`, fixed, ""},
		{"k4", ``, `{}`, fixed, ""},
	} {
		resp, body := startOp(t, srv.URL+"/orders", tc.key, tc.body)
		require.Equal(t, http.StatusCreated, resp.StatusCode, body)
		var op struct{ ID string }
		require.NoError(t, json.Unmarshal([]byte(body), &op))
		var got []received
		require.Eventually(t, func() bool {
			got = nil
			for _, d := range tc.to.deliveries() {
				if d.event.Data.Object.ID == op.ID {
					got = append(got, d)
				}
			}
			return len(got) > 0
		}, 5*time.Second, time.Millisecond, tc.key)
		require.Len(t, got, 1, tc.key)
		assert.Equal(t, tc.query, got[0].query, tc.key)
		assert.JSONEq(t, tc.metadata, string(got[0].event.Data.Object.Metadata), tc.key)
		assert.NoError(t, got[0].verified, tc.key)
		_, res := do(t, http.MethodGet, srv.URL+"/resources/"+op.ID, "")
		assert.JSONEq(t, `{"id":"`+op.ID+`","status":"succeeded","metadata":`+tc.metadata+`}`, res, tc.key)
	}
	assert.Len(t, callback.deliveries(), 1)
	assert.Len(t, fixed.deliveries(), 3)
}

// TestWebhooksDropRate: a dropped operation sends nothing but its
// resource is there; the draw is Options.Rand's, per operation.
func TestWebhooksDropRate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		rate  float64
		draws []float64
		sent  []string // the operations whose webhook is sent
	}{
		{"all", 1, nil, nil},
		{"by Rand", 0.5, []float64{0.4, 0.6, 0.49, 0.5}, []string{"op_2", "op_4"}},
		{"none", 0, nil, []string{"op_1", "op_2", "op_3", "op_4"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := newReceiver(t, "standard-webhooks")
			opts := testsuite.Options{Webhooks: &testsuite.Webhooks{URL: rc.srv.URL, Secret: standardSecret, DropRate: tc.rate}}
			if tc.draws != nil {
				var mu sync.Mutex
				draws := tc.draws
				opts.Rand = func() float64 {
					mu.Lock()
					defer mu.Unlock()
					r := draws[0]
					draws = draws[1:]
					return r
				}
			}
			srv := testsuite.StartServer(t, opts)
			for i := range 4 {
				startOp(t, srv.URL+"/x", fmt.Sprint("k", i), `{}`)
			}
			time.Sleep(100 * time.Millisecond)
			settled(t, srv, len(tc.sent))
			var sent []string
			for _, d := range rc.deliveries() {
				sent = append(sent, d.event.Data.Object.ID)
			}
			assert.ElementsMatch(t, tc.sent, sent)
			assert.Equal(t, len(tc.sent), srv.Stats().Webhooks)
			resp, body := do(t, http.MethodGet, srv.URL+"/resources/op_1", "")
			assert.Equal(t, http.StatusOK, resp.StatusCode, "a dropped operation is still there to poll")
			assert.Contains(t, body, `"status":"succeeded"`)
		})
	}
}

// TestWebhooksResource: GET /resources/{id} reports processing for
// Duration after the start (by Options.Now), then the outcome; a replay
// is the stored answer and starts nothing.
func TestWebhooksResource(t *testing.T) {
	for _, outcome := range []workflows.State{"", workflows.StateSucceeded, workflows.StateFailed, workflows.StateCanceled} {
		t.Run("outcome="+string(outcome), func(t *testing.T) {
			clock := &fakeClock{t: time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)}
			rc := newReceiver(t, "standard-webhooks")
			srv := testsuite.StartServer(t, testsuite.Options{Now: clock.now, Webhooks: &testsuite.Webhooks{
				URL: rc.srv.URL, Secret: standardSecret, Duration: time.Hour, State: outcome,
			}})
			first, body := startOp(t, srv.URL+"/jobs", "k1", `{"metadata":{"a":1}}`)
			again, replay := startOp(t, srv.URL+"/jobs", "k1", `{"metadata":{"a":1}}`)
			assert.Equal(t, http.StatusCreated, again.StatusCode)
			assert.Equal(t, body, replay)
			assert.Equal(t, first.Header.Get("Location"), again.Header.Get("Location"))
			assert.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))

			resp, res := do(t, http.MethodGet, srv.URL+"/resources/op_1", "")
			assert.Equal(t, http.StatusOK, resp.StatusCode)
			assert.JSONEq(t, `{"id":"op_1","status":"processing","metadata":{"a":1}}`, res)
			clock.add(time.Hour - time.Second)
			_, res = do(t, http.MethodGet, srv.URL+"/resources/op_1", "")
			assert.Contains(t, res, `"status":"processing"`)
			clock.add(time.Second)
			want := outcome
			if want == "" {
				want = workflows.StateSucceeded
			}
			_, res = do(t, http.MethodGet, srv.URL+"/resources/op_1", "")
			assert.Contains(t, res, `"status":"`+want+`"`)
			missing, _ := do(t, http.MethodGet, srv.URL+"/resources/op_2", "")
			assert.Equal(t, http.StatusNotFound, missing.StatusCode)
			st := srv.Stats()
			assert.Equal(t, 1, st.Operations)
			assert.Equal(t, 1, st.Records)
			assert.Equal(t, 4, st.Polls)
			assert.Empty(t, rc.deliveries(), "the webhook waits for Duration on the real clock")
		})
	}
}

// TestWebhooksDuration: on the real clock, nothing is sent before
// Duration; when the webhook arrives, the resource reports the outcome.
func TestWebhooksDuration(t *testing.T) {
	rc := newReceiver(t, "standard-webhooks")
	var srv *testsuite.Server
	var atDelivery string
	rc.answer = func(int) int {
		_, atDelivery = do(t, http.MethodGet, srv.URL+"/resources/op_1", "")
		return 0
	}
	srv = testsuite.StartServer(t, testsuite.Options{Webhooks: &testsuite.Webhooks{URL: rc.srv.URL, Secret: standardSecret, Duration: 300 * time.Millisecond}})
	start := time.Now()
	startOp(t, srv.URL+"/x", "k1", `{}`)
	_, res := do(t, http.MethodGet, srv.URL+"/resources/op_1", "")
	assert.Contains(t, res, `"status":"processing"`)
	settled(t, srv, 1)
	assert.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond)
	assert.Contains(t, atDelivery, `"status":"succeeded"`)
	assert.Equal(t, 1, srv.Stats().WebhooksDelivered)
}

// TestWebhooksShuffle: with Shuffle the progress event comes first in
// some operations; without, never.
func TestWebhooksShuffle(t *testing.T) {
	for _, shuffle := range []bool{false, true} {
		t.Run(fmt.Sprint("shuffle=", shuffle), func(t *testing.T) {
			rc := newReceiver(t, "standard-webhooks")
			srv := testsuite.StartServer(t, testsuite.Options{Webhooks: &testsuite.Webhooks{
				URL: rc.srv.URL, Secret: standardSecret, Progress: true, Shuffle: shuffle, Jitter: time.Millisecond,
			}})
			const ops = 24
			for i := range ops {
				startOp(t, srv.URL+"/x", fmt.Sprint("k", i), `{}`)
			}
			settled(t, srv, 2*ops)
			first := map[string]string{}
			for _, d := range rc.deliveries() {
				require.NoError(t, d.verified)
				if _, ok := first[d.event.Data.Object.ID]; !ok {
					first[d.event.Data.Object.ID] = d.event.Type
				}
			}
			require.Len(t, first, ops)
			progressFirst := 0
			for _, typ := range first {
				if typ == "operation.processing" {
					progressFirst++
				}
			}
			if shuffle {
				assert.Positive(t, progressFirst, "24 operations shuffled, the progress event never first (odds 2^-24)")
			} else {
				assert.Zero(t, progressFirst)
			}
		})
	}
}

// TestWebhooksClose: Close stops the timers, the retries and a delivery
// under way at once, and leaves no goroutine behind.
func TestWebhooksClose(t *testing.T) {
	base := runtime.NumGoroutine()
	hanging := newReceiver(t, "standard-webhooks")
	hanging.hold = make(chan struct{})
	failing := newReceiver(t, "standard-webhooks")
	failing.answer = func(int) int { return http.StatusServiceUnavailable }
	srv := testsuite.NewServer(testsuite.Options{Webhooks: &testsuite.Webhooks{URL: failing.srv.URL, Secret: standardSecret}})
	hs := httptest.NewServer(srv)
	startOp(t, hs.URL+"/x", "retried", `{}`)
	startOp(t, hs.URL+"/x", "hanging", `{"callback_url":"`+hanging.srv.URL+`"}`)
	startOp(t, hs.URL+"/x", "retried-too", `{"callback_url":"`+failing.srv.URL+`?op=3"}`)
	// An operation whose timer runs when the server is closed.
	slow := testsuite.NewServer(testsuite.Options{Webhooks: &testsuite.Webhooks{URL: failing.srv.URL, Secret: standardSecret, Duration: time.Hour}})
	slowHS := httptest.NewServer(slow)
	startOp(t, slowHS.URL+"/x", "timer", `{}`)
	require.Eventually(t, func() bool { return len(hanging.deliveries()) == 1 && srv.Stats().Webhooks >= 2 }, 5*time.Second, time.Millisecond)

	start := time.Now()
	srv.Close()
	slow.Close()
	assert.Less(t, time.Since(start), time.Second, "Close waits for no delivery, no timer")
	before, sent := srv.Stats(), len(failing.deliveries())
	srv.Close()                         // twice is fine
	time.Sleep(1200 * time.Millisecond) // past the first retry's backoff (0.5-1 s)
	after := srv.Stats()
	assert.Equal(t, before.Webhooks, after.Webhooks, "nothing sent after Close")
	assert.Equal(t, 3, after.WebhooksPending, "the abandoned copies stay counted")
	assert.Len(t, failing.deliveries(), sent)
	assert.Zero(t, slow.Stats().Webhooks)

	resp, _ := startOp(t, hs.URL+"/x", "late", `{}`)
	assert.Equal(t, http.StatusCreated, resp.StatusCode, "the server still answers")
	hs.Close()
	slowHS.Close()
	hanging.srv.Close()
	failing.srv.Close()
	http.DefaultClient.CloseIdleConnections()
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > base && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > base {
		buf := make([]byte, 1<<16)
		t.Errorf("goroutines: %d before, %d after Close:\n%s", base, n, buf[:runtime.Stack(buf, true)])
	}
}

// TestWebhooksValidate: a bad Webhooks says what to fix, and NewServer
// panics with it.
func TestWebhooksValidate(t *testing.T) {
	ok := testsuite.Webhooks{URL: "http://127.0.0.1:1/hooks", Secret: standardSecret}
	require.NoError(t, ok.Validate())
	for _, tc := range []struct {
		name string
		edit func(*testsuite.Webhooks)
		want string
	}{
		{"no secret", func(w *testsuite.Webhooks) { w.Secret = "" }, "Secret"},
		{"standard secret not base64", func(w *testsuite.Webhooks) { w.Secret = "whsec_not base64!" }, "whsec_"},
		{"stripe without secret", func(w *testsuite.Webhooks) { w.Scheme, w.Secret = "stripe", "" }, "Secret: required"},
		{"scheme", func(w *testsuite.Webhooks) { w.Scheme = "svix" }, `Scheme "svix"`},
		{"url", func(w *testsuite.Webhooks) { w.URL = "/relative" }, "absolute"},
		{"state", func(w *testsuite.Webhooks) { w.State = "never" }, `State "never"`},
		{"drop rate", func(w *testsuite.Webhooks) { w.DropRate = 1.5 }, "DropRate"},
		{"negative", func(w *testsuite.Webhooks) { w.Forged = -1 }, "Forged"},
		{"negative duration", func(w *testsuite.Webhooks) { w.Jitter = -time.Second }, "Jitter"},
	} {
		w := ok
		tc.edit(&w)
		err := w.Validate()
		if assert.Error(t, err, tc.name) {
			assert.Contains(t, err.Error(), tc.want, tc.name)
		}
		assert.Panics(t, func() { testsuite.NewServer(testsuite.Options{Webhooks: &w}) }, tc.name)
	}
	hmacOK := testsuite.Webhooks{Scheme: "hmac", Secret: "s"}
	assert.NoError(t, hmacOK.Validate(), "URL is optional: callback URLs only")
}
