package testsuite_test

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemhttp/temporal-idempotent-http/testsuite"
)

// send sends method path with the key in keyHeader (none if key is "").
func send(t *testing.T, c *http.Client, base, method, path, keyHeader, key, body string) (reply, error) {
	t.Helper()
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	require.NoError(t, err)
	if key != "" {
		req.Header.Set(keyHeader, key)
	}
	resp, err := c.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return reply{resp.StatusCode, resp.Header, string(b)}, nil
}

// want is an expected made-up answer: status, content type, exact body (as
// JSON when the content type is JSON) and headers ("" = must be absent).
type want struct {
	status  int
	ctype   string
	body    string
	headers map[string]string
}

func (w want) check(t *testing.T, got reply, what string) {
	t.Helper()
	assert.Equal(t, w.status, got.status, "%s: status (body %s)", what, got.body)
	assert.Equal(t, w.ctype, got.header.Get("Content-Type"), "%s: content type", what)
	if strings.Contains(w.ctype, "json") {
		assert.JSONEq(t, w.body, got.body, "%s: body", what)
	} else {
		assert.Equal(t, w.body, got.body, "%s: body", what)
	}
	for h, v := range w.headers {
		assert.Equal(t, v, got.header.Get(h), "%s: header %s", what, h)
	}
}

const (
	problemCT   = "application/problem+json"
	plainCT     = "text/plain; charset=utf-8"
	ietfMisuse  = `{"type":"https://developer.example.com/idempotency","title":"Idempotency-Key is already used","detail":"This operation is idempotent and it requires correct usage of Idempotency Key. Idempotency Key MUST not be reused across different payloads of this operation."}`
	ietfFlight  = `{"type":"https://developer.example.com/idempotency","title":"A request is outstanding for this Idempotency-Key","detail":"A request with the same Idempotency-Key for the same operation is being processed or is outstanding."}`
	ietfMissing = `{"type":"https://developer.example.com/idempotency","title":"Idempotency-Key is missing","detail":"This operation is idempotent and it requires correct usage of Idempotency Key."}`
)

type dialectCase struct {
	name    string
	dialect testsuite.Dialect
	// keyHeader carries the key; replay is the replay marker ("" = none).
	keyHeader, replay string
	inFlight, misuse  want
	// missingKey is the answer without a key; nil: the key is optional and
	// such a request is processed every time.
	missingKey *want
}

func dialectCases() []dialectCase {
	noRetryAfter := testsuite.IETFDialect()
	noRetryAfter.InFlightRetryAfter = false
	paypal := testsuite.IETFDialect()
	paypal.KeyHeader, paypal.ReplayHeader = "PayPal-Request-Id", ""
	xkey := testsuite.StripeDialect()
	xkey.KeyHeader, xkey.ReplayHeader = "X-Idempotency-Key", "X-Idempotent-Replay"

	ietfInFlight := func(retryAfter string) want {
		return want{409, problemCT, ietfFlight, map[string]string{"Retry-After": retryAfter, "Stripe-Should-Retry": ""}}
	}
	stripeInFlight := want{409, "application/json",
		`{"error":{"type":"idempotency_error","code":"idempotency_key_in_use","message":"There is currently another in-progress request using this Idempotent Key (that probably means you submitted twice at the same time). Try again later."}}`,
		map[string]string{"Retry-After": "", "Stripe-Should-Retry": "true"}}
	stripeMisuse := want{400, "application/json",
		`{"error":{"type":"idempotency_error","message":"Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than 'k1' if you meant to execute a different request."}}`,
		map[string]string{"Stripe-Should-Retry": "false"}}
	return []dialectCase{
		{
			name: "ietf (zero Dialect)", dialect: testsuite.Dialect{}, keyHeader: "Idempotency-Key", replay: "Idempotent-Replayed",
			inFlight:   ietfInFlight("1"),
			misuse:     want{422, problemCT, ietfMisuse, map[string]string{"Stripe-Should-Retry": ""}},
			missingKey: &want{400, problemCT, ietfMissing, nil},
		},
		{
			name: "ietf without Retry-After", dialect: noRetryAfter, keyHeader: "Idempotency-Key", replay: "Idempotent-Replayed",
			inFlight:   ietfInFlight(""),
			misuse:     want{422, problemCT, ietfMisuse, nil},
			missingKey: &want{400, problemCT, ietfMissing, nil},
		},
		{
			name: "stripe", dialect: testsuite.StripeDialect(), keyHeader: "Idempotency-Key", replay: "Idempotent-Replayed",
			inFlight: stripeInFlight,
			misuse:   stripeMisuse,
		},
		{
			name: "express", dialect: testsuite.ExpressDialect(), keyHeader: "Idempotency-Key",
			inFlight: want{409, plainCT, "A previous request is still in progress for this key.\n", map[string]string{"Retry-After": ""}},
			misuse:   want{417, plainCT, "Misuse of the idempotency key. Please check your request.\n", nil},
		},
		{
			name: "custom key header, no replay marker", dialect: paypal, keyHeader: "PayPal-Request-Id",
			inFlight: want{409, problemCT,
				`{"type":"https://developer.example.com/idempotency","title":"A request is outstanding for this PayPal-Request-Id","detail":"A request with the same PayPal-Request-Id for the same operation is being processed or is outstanding."}`,
				map[string]string{"Retry-After": "1"}},
			misuse: want{422, problemCT,
				`{"type":"https://developer.example.com/idempotency","title":"PayPal-Request-Id is already used","detail":"This operation is idempotent and it requires correct usage of Idempotency Key. Idempotency Key MUST not be reused across different payloads of this operation."}`, nil},
			missingKey: &want{400, problemCT,
				`{"type":"https://developer.example.com/idempotency","title":"PayPal-Request-Id is missing","detail":"This operation is idempotent and it requires correct usage of Idempotency Key."}`, nil},
		},
		{
			name: "custom key header, custom replay marker", dialect: xkey, keyHeader: "X-Idempotency-Key", replay: "X-Idempotent-Replay",
			inFlight: stripeInFlight,
			misuse:   stripeMisuse,
		},
	}
}

// TestDialects plays every scenario against every dialect.
func TestDialects(t *testing.T) {
	type env struct {
		t       *testing.T
		dc      dialectCase
		srv     *testsuite.Server
		clk     *clock
		release chan struct{} // for a Work that waits
	}
	// do sends with the dialect's key header through the default client.
	do := func(e env, method, path, key, body string) reply {
		e.t.Helper()
		r, err := send(e.t, http.DefaultClient, e.srv.URL, method, path, e.dc.keyHeader, key, body)
		require.NoError(e.t, err)
		return r
	}
	// noReplayMarker: neither the dialect's marker nor the IETF one.
	noReplayMarker := func(e env, r reply, what string) {
		e.t.Helper()
		assert.Empty(e.t, r.header.Get("Idempotent-Replayed"), what)
		if e.dc.replay != "" {
			assert.Empty(e.t, r.header.Get(e.dc.replay), what)
		}
	}
	scenarios := []struct {
		name string
		opts func(o *testsuite.Options, e env)
		run  func(e env)
	}{
		{name: "new key does the work once", run: func(e env) {
			r := do(e, "POST", "/payments", "k1", `{"amount":1}`)
			assert.Equal(e.t, 201, r.status, r.body)
			noReplayMarker(e, r, "first answer")
			recs := e.srv.Records()
			require.Len(e.t, recs, 1)
			assert.Equal(e.t, "k1", recs[0].IdempotencyKey)
			assert.Equal(e.t, testsuite.Stats{Requests: 1, DistinctKeys: 1, Records: 1}, e.srv.Stats())
		}},
		{name: "replay is the stored response, marked as the dialect marks it", run: func(e env) {
			first := do(e, "POST", "/payments", "k1", `{"amount":1}`)
			again := do(e, "POST", "/payments", "k1", `{"amount":1}`)
			assert.Equal(e.t, first.status, again.status)
			assert.Equal(e.t, first.body, again.body)
			if e.dc.replay != "" {
				assert.Equal(e.t, "true", again.header.Get(e.dc.replay), "replay marker")
			}
			if e.dc.replay != "Idempotent-Replayed" {
				assert.Empty(e.t, again.header.Get("Idempotent-Replayed"), "no IETF replay marker in this dialect")
			}
			assert.Equal(e.t, testsuite.Stats{Requests: 2, DistinctKeys: 1, Records: 1, Replays: 1}, e.srv.Stats())
		}},
		{name: "same key other body is misuse", run: func(e env) {
			do(e, "POST", "/payments", "k1", `{"amount":1}`)
			e.dc.misuse.check(e.t, do(e, "POST", "/payments", "k1", `{"amount":2}`), "other body")
			assert.Equal(e.t, testsuite.Stats{Requests: 2, DistinctKeys: 1, Records: 1, Mismatches: 1}, e.srv.Stats())
		}},
		{name: "same key other path is misuse, never the first path's response", run: func(e env) {
			do(e, "POST", "/payments", "k1", `{"amount":1}`)
			r := do(e, "POST", "/refunds", "k1", `{"amount":1}`)
			e.dc.misuse.check(e.t, r, "other path")
			noReplayMarker(e, r, "other path")
			do(e, "POST", "/payments?capture=false", "k1", `{"amount":1}`)
			assert.Equal(e.t, testsuite.Stats{Requests: 3, DistinctKeys: 1, Records: 1, Mismatches: 2}, e.srv.Stats(), "another query string is another operation too")
			assert.Equal(e.t, 201, do(e, "POST", "/refunds", "k2", `{"amount":1}`).status, "the other operation with its own key")
			assert.Len(e.t, e.srv.Records(), 2)
		}},
		{name: "same key other method is misuse", run: func(e env) {
			do(e, "POST", "/payments", "k1", `{"amount":1}`)
			e.dc.misuse.check(e.t, do(e, "PUT", "/payments", "k1", `{"amount":1}`), "PUT")
			e.dc.misuse.check(e.t, do(e, "DELETE", "/payments", "k1", `{"amount":1}`), "DELETE")
			assert.Equal(e.t, testsuite.Stats{Requests: 3, DistinctKeys: 1, Records: 1, Mismatches: 2}, e.srv.Stats())
		}},
		{name: "in flight", opts: func(o *testsuite.Options, e env) {
			o.Work = func(*http.Request, []byte) (int, []byte) {
				<-e.release
				return 201, nil
			}
		}, run: func(e env) {
			var wg sync.WaitGroup
			var first reply
			wg.Go(func() { first = do(e, "POST", "/payments", "k1", `{"amount":1}`) })
			require.Eventually(e.t, func() bool { return e.srv.Stats().DistinctKeys == 1 }, 5*time.Second, time.Millisecond)
			e.dc.inFlight.check(e.t, do(e, "POST", "/payments", "k1", `{"amount":1}`), "duplicate in flight")
			e.dc.misuse.check(e.t, do(e, "POST", "/payments", "k1", `{"amount":2}`), "other body in flight: misuse first")
			close(e.release)
			wg.Wait()
			assert.Equal(e.t, 201, first.status, first.body)
			again := do(e, "POST", "/payments", "k1", `{"amount":1}`)
			assert.Equal(e.t, first.body, again.body, "replayed once done")
			assert.Equal(e.t, testsuite.Stats{Requests: 4, DistinctKeys: 1, Records: 1, Replays: 1, InFlight: 1, Mismatches: 1}, e.srv.Stats())
		}},
		{name: "orphaned lock answers in flight until the window ends", opts: func(o *testsuite.Options, _ env) {
			var taken atomic.Bool
			o.Orphan = func(key string) bool { return key == "k1" && taken.CompareAndSwap(false, true) }
		}, run: func(e env) {
			impatient := &http.Client{Timeout: 200 * time.Millisecond}
			_, err := send(e.t, impatient, e.srv.URL, "POST", "/payments", e.dc.keyHeader, "k1", `{"amount":1}`)
			require.Error(e.t, err, "the orphaned request is never answered")
			for range 3 { // at 0 h, 8 h and 16 h
				e.dc.inFlight.check(e.t, do(e, "POST", "/payments", "k1", `{"amount":1}`), "after the orphan")
				e.clk.Advance(8 * time.Hour)
			}
			e.clk.Advance(-time.Second) // 24 h - 1 s after the orphan
			e.dc.inFlight.check(e.t, do(e, "POST", "/payments", "k1", `{"amount":1}`), "just inside the window")
			assert.Equal(e.t, testsuite.Stats{Requests: 5, DistinctKeys: 1, InFlight: 4, Orphaned: 1}, e.srv.Stats())
			e.clk.Advance(time.Second)
			r := do(e, "POST", "/payments", "k1", `{"amount":1}`)
			assert.Equal(e.t, 201, r.status, "the key is new after the window: %s", r.body)
			assert.Len(e.t, e.srv.Records(), 1)
		}},
		{name: "missing key", run: func(e env) {
			hdr := ""
			if e.dc.keyHeader != "Idempotency-Key" {
				hdr = "a key in Idempotency-Key does not count: "
			}
			post := func() reply {
				e.t.Helper()
				req, err := http.NewRequest("POST", e.srv.URL+"/payments", strings.NewReader(`{"amount":1}`))
				require.NoError(e.t, err)
				if hdr != "" {
					req.Header.Set("Idempotency-Key", "k1")
				}
				resp, err := http.DefaultClient.Do(req)
				require.NoError(e.t, err)
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				return reply{resp.StatusCode, resp.Header, string(b)}
			}
			if e.dc.missingKey != nil {
				e.dc.missingKey.check(e.t, post(), hdr+"missing key")
				assert.Equal(e.t, testsuite.Stats{Requests: 1, MissingKey: 1}, e.srv.Stats())
				return
			}
			a, b := post(), post()
			assert.Equal(e.t, []int{201, 201}, []int{a.status, b.status}, hdr+"processed without idempotency")
			noReplayMarker(e, b, "no key, no replay")
			assert.Equal(e.t, testsuite.Stats{Requests: 2, Records: 2, MissingKey: 2}, e.srv.Stats(), hdr+"the work every time")
		}},
	}
	for _, dc := range dialectCases() {
		t.Run(dc.name, func(t *testing.T) {
			for _, sc := range scenarios {
				t.Run(sc.name, func(t *testing.T) {
					e := env{t: t, dc: dc, clk: newClock(), release: make(chan struct{})}
					opts := testsuite.Options{Dialect: dc.dialect, Now: e.clk.Now}
					if sc.opts != nil {
						sc.opts(&opts, e)
					}
					e.srv = testsuite.StartServer(t, opts)
					sc.run(e)
				})
			}
		})
	}
}
