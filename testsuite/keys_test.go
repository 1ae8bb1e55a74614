package testsuite_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemhttp/temporal-idempotent-http/testsuite"
)

// keyCase is a place of the key (Dialect.KeyIn) and how a client puts it
// there.
type keyCase struct {
	name, keyIn string
	// keyName is how the made-up answers name the key.
	keyName string
	// request is a POST /payments with the key (none if "") and the
	// amount.
	request func(t *testing.T, base, key, amount string) *http.Request
}

func keyCases() []keyCase {
	newReq := func(t *testing.T, url, body string) *http.Request {
		req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		return req
	}
	return []keyCase{
		{"header", "header:X-Request-Id", "X-Request-Id", func(t *testing.T, base, key, amount string) *http.Request {
			req := newReq(t, base+"/payments", `{"amount":`+amount+`}`)
			if key != "" {
				req.Header.Set("X-Request-Id", key)
			}
			return req
		}},
		{"body", "body:idempotency_key", "idempotency_key", func(t *testing.T, base, key, amount string) *http.Request {
			body := `{"amount":` + amount + `}`
			if key != "" {
				body = `{"amount":` + amount + `,"idempotency_key":"` + key + `"}`
			}
			return newReq(t, base+"/payments", body)
		}},
		{"nested body", "body:metadata.idempotency_key", "metadata.idempotency_key", func(t *testing.T, base, key, amount string) *http.Request {
			meta := `{"order":"o1"}`
			if key != "" {
				meta = `{"order":"o1","idempotency_key":"` + key + `"}`
			}
			return newReq(t, base+"/payments", `{"amount":`+amount+`,"metadata":`+meta+`}`)
		}},
		{"query", "query:requestId", "requestId", func(t *testing.T, base, key, amount string) *http.Request {
			url := base + "/payments?capture=true"
			if key != "" {
				url += "&requestId=" + key
			}
			return newReq(t, url, `{"amount":`+amount+`}`)
		}},
	}
}

// doReq sends req through the default client.
func doReq(t *testing.T, req *http.Request) reply {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return reply{resp.StatusCode, resp.Header, string(b)}
}

// title is the title of a problem+json answer.
func title(t *testing.T, r reply) string {
	t.Helper()
	var p struct{ Title string }
	require.NoError(t, json.Unmarshal([]byte(r.body), &p), r.body)
	return p.Title
}

// TestKeyIn plays the key rules with the key in another header, in the
// body (top level and nested) and in a query parameter.
func TestKeyIn(t *testing.T) {
	scenarios := []struct {
		name string
		run  func(t *testing.T, kc keyCase, srv *testsuite.Server)
	}{
		{"the second request is replayed", func(t *testing.T, kc keyCase, srv *testsuite.Server) {
			first := doReq(t, kc.request(t, srv.URL, "k1", "1"))
			again := doReq(t, kc.request(t, srv.URL, "k1", "1"))
			assert.Equal(t, 201, first.status, first.body)
			assert.Empty(t, first.header.Get("Idempotent-Replayed"))
			assert.Equal(t, 201, again.status)
			assert.Equal(t, "true", again.header.Get("Idempotent-Replayed"))
			assert.Equal(t, first.body, again.body)
			recs := srv.Records()
			require.Len(t, recs, 1)
			assert.Equal(t, "k1", recs[0].IdempotencyKey)
			assert.Equal(t, testsuite.Stats{Requests: 2, DistinctKeys: 1, Records: 1, Replays: 1}, srv.Stats())
			log := srv.Log()
			require.Len(t, log, 2)
			assert.Equal(t, "k1", log[1].IdempotencyKey)
			assert.True(t, log[1].Replayed)
		}},
		{"another body is misuse", func(t *testing.T, kc keyCase, srv *testsuite.Server) {
			doReq(t, kc.request(t, srv.URL, "k1", "1"))
			r := doReq(t, kc.request(t, srv.URL, "k1", "2"))
			assert.Equal(t, 422, r.status, r.body)
			assert.Equal(t, kc.keyName+" is already used", title(t, r))
			assert.Equal(t, testsuite.Stats{Requests: 2, DistinctKeys: 1, Records: 1, Mismatches: 1}, srv.Stats())
		}},
		{"another key is another record", func(t *testing.T, kc keyCase, srv *testsuite.Server) {
			a := doReq(t, kc.request(t, srv.URL, "k1", "1"))
			b := doReq(t, kc.request(t, srv.URL, "k2", "1"))
			assert.Equal(t, []int{201, 201}, []int{a.status, b.status})
			assert.NotEqual(t, a.body, b.body)
			assert.Len(t, srv.Records(), 2)
		}},
		{"no key is a missing key", func(t *testing.T, kc keyCase, srv *testsuite.Server) {
			req := kc.request(t, srv.URL, "", "1")
			req.Header.Set("Idempotency-Key", "decoy") // the default header does not count
			r := doReq(t, req)
			assert.Equal(t, 400, r.status, r.body)
			assert.Equal(t, kc.keyName+" is missing", title(t, r))
			assert.Equal(t, testsuite.Stats{Requests: 1, MissingKey: 1}, srv.Stats())
			assert.Empty(t, srv.Records())
		}},
	}
	for _, kc := range keyCases() {
		t.Run(kc.name, func(t *testing.T) {
			for _, sc := range scenarios {
				t.Run(sc.name, func(t *testing.T) {
					d := testsuite.IETFDialect()
					d.KeyIn = kc.keyIn
					sc.run(t, kc, testsuite.StartServer(t, testsuite.Options{Dialect: d}))
				})
			}
		})
	}
}

// TestKeyInOptional: without the key, a dialect whose key is optional
// does the work every time, wherever the key goes.
func TestKeyInOptional(t *testing.T) {
	for _, kc := range keyCases() {
		t.Run(kc.name, func(t *testing.T) {
			d := testsuite.StripeDialect()
			d.KeyIn = kc.keyIn
			srv := testsuite.StartServer(t, testsuite.Options{Dialect: d})
			a := doReq(t, kc.request(t, srv.URL, "", "1"))
			b := doReq(t, kc.request(t, srv.URL, "", "1"))
			assert.Equal(t, []int{201, 201}, []int{a.status, b.status})
			assert.Empty(t, b.header.Get("Idempotent-Replayed"))
			assert.Equal(t, testsuite.Stats{Requests: 2, Records: 2, MissingKey: 2}, srv.Stats())
			k := doReq(t, kc.request(t, srv.URL, "k1", "1"))
			again := doReq(t, kc.request(t, srv.URL, "k1", "1"))
			assert.Equal(t, 201, k.status)
			assert.Equal(t, "true", again.header.Get("Idempotent-Replayed"), "with the key, replayed")
		})
	}
}

// TestKeyInBody covers what is particular to a key in the body: a member
// that is not a string, an empty string, a body that is not JSON, and the
// words of each dialect's missing-key answer.
func TestKeyInBody(t *testing.T) {
	for _, tt := range []struct {
		name, body string
		status     int
	}{
		{"number", `{"amount":1,"idempotency_key":7}`, 400},
		{"null", `{"amount":1,"idempotency_key":null}`, 400},
		{"empty string", `{"amount":1,"idempotency_key":""}`, 400},
		{"object", `{"amount":1,"idempotency_key":{"k":"v"}}`, 400},
		{"not JSON", `{"amount":`, 400},
		{"array", `[{"idempotency_key":"k1"}]`, 400},
		{"string", `{"amount":1,"idempotency_key":"k1"}`, 201},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := testsuite.IETFDialect()
			d.KeyIn = "body:idempotency_key"
			srv := testsuite.StartServer(t, testsuite.Options{Dialect: d})
			r := post(t, srv.URL+"/payments", "", tt.body)
			assert.Equal(t, tt.status, r.status, r.body)
			if tt.status == 400 {
				assert.Equal(t, 1, srv.Stats().MissingKey)
			}
		})
	}
	for _, tt := range []struct {
		dialect testsuite.Dialect
		want    string
	}{
		{testsuite.IETFDialect(), `{"type":"https://developer.example.com/idempotency","title":"metadata.ref is missing","detail":"This operation is idempotent and it requires correct usage of Idempotency Key."}`},
		{func() testsuite.Dialect { d := testsuite.StripeDialect(); d.KeyOptional = false; return d }(), `{"error":{"type":"invalid_request_error","message":"Missing required body member: metadata.ref."}}`},
		{func() testsuite.Dialect { d := testsuite.ExpressDialect(); d.KeyOptional = false; return d }(), "Missing metadata.ref body member.\n"},
	} {
		t.Run("missing key answer "+tt.dialect.Name, func(t *testing.T) {
			tt.dialect.KeyIn = "body:metadata.ref"
			srv := testsuite.StartServer(t, testsuite.Options{Dialect: tt.dialect})
			r := post(t, srv.URL+"/payments", "", `{"metadata":{}}`)
			assert.Equal(t, 400, r.status)
			if strings.HasPrefix(tt.want, "{") {
				assert.JSONEq(t, tt.want, r.body)
			} else {
				assert.Equal(t, tt.want, r.body)
			}
		})
	}
}

// TestKeyInTooLarge: a body over 1 MiB is refused as too large before its
// key is looked for (its key cannot be read).
func TestKeyInTooLarge(t *testing.T) {
	d := testsuite.IETFDialect()
	d.KeyIn = "body:idempotency_key"
	srv := testsuite.StartServer(t, testsuite.Options{Dialect: d})
	big := `{"idempotency_key":"k1","pad":"` + strings.Repeat("x", 1<<20) + `"}`
	r := post(t, srv.URL+"/payments", "", big)
	assert.Equal(t, http.StatusRequestEntityTooLarge, r.status, r.body)
	assert.Equal(t, 0, srv.Stats().MissingKey)
}

// TestKeyInHeaderOverridesKeyHeader: "header:NAME" is KeyHeader NAME,
// whatever KeyHeader says.
func TestKeyInHeaderOverridesKeyHeader(t *testing.T) {
	d := testsuite.IETFDialect() // KeyHeader Idempotency-Key
	d.KeyIn = "header:PayPal-Request-Id"
	srv := testsuite.StartServer(t, testsuite.Options{Dialect: d})
	r := post(t, srv.URL+"/payments", "k1", `{}`) // in Idempotency-Key
	assert.Equal(t, 400, r.status)
	assert.Equal(t, "PayPal-Request-Id is missing", title(t, reply{r.status, nil, r.body}))
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/payments", strings.NewReader(`{}`))
	require.NoError(t, err)
	req.Header.Set("PayPal-Request-Id", `"k1"`)
	assert.Equal(t, 201, doReq(t, req).status)
	assert.Equal(t, "k1", srv.Records()[0].IdempotencyKey, "KeyString still reads the header")
}
