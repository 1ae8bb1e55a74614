package testsuite_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemhttp/temporal-idempotent-http/testsuite"
)

// serve hands one POST /payments with the key header set to value, byte for
// byte (no client in between to trim or refuse it), to srv.
func serve(srv *testsuite.Server, keyHeader, value string) reply {
	r := httptest.NewRequest("POST", "/payments", strings.NewReader(`{"amount":1}`))
	r.Header[http.CanonicalHeaderKey(keyHeader)] = []string{value}
	w := httptest.NewRecorder()
	srv.ServeHTTP(w, r)
	return reply{w.Code, w.Header(), w.Body.String()}
}

// TestKeyString: the IETF dialect takes the key quoted, as an RFC 8941
// sf-string, or bare, and both forms of a value are one key (one record,
// then replays); Stripe and Express take the quoted form as written, quotes
// included: another key.
func TestKeyString(t *testing.T) {
	paypal := testsuite.IETFDialect()
	paypal.KeyHeader = "PayPal-Request-Id"
	tests := []struct {
		name    string
		dialect testsuite.Dialect
		header  string   // default Idempotency-Key
		values  []string // sent in turn, same operation
		// wantKeys are the records' keys; the rest of the values are replays.
		wantKeys []string
	}{
		{"ietf: quoted, then bare", testsuite.IETFDialect(), "", []string{`"k1"`, `k1`}, []string{"k1"}},
		{"ietf: bare, then quoted", testsuite.IETFDialect(), "", []string{`k1`, `"k1"`}, []string{"k1"}},
		{"ietf: the draft's example", testsuite.IETFDialect(), "", []string{`"8e03978e-40d5-43e8-bc93-6894a57f9324"`, `8e03978e-40d5-43e8-bc93-6894a57f9324`}, []string{"8e03978e-40d5-43e8-bc93-6894a57f9324"}},
		{"ietf: escapes undone", testsuite.IETFDialect(), "", []string{`"a\"b\\c"`, `a"b\c`}, []string{`a"b\c`}},
		{"ietf: spaces around the string", testsuite.IETFDialect(), "", []string{`  "k1" `, `"k1"`, `k1`}, []string{"k1"}},
		{"ietf: a space inside is part of the key", testsuite.IETFDialect(), "", []string{`"k 1"`, `"k 1"`}, []string{"k 1"}},
		{"ietf: a bare key with a quote inside is taken as written", testsuite.IETFDialect(), "", []string{`k"1`, `"k\"1"`}, []string{`k"1`}},
		{"zero Dialect is ietf", testsuite.Dialect{}, "", []string{`"k1"`, `k1`}, []string{"k1"}},
		{"ietf preset with another key header", paypal, "PayPal-Request-Id", []string{`"k1"`, `k1`}, []string{"k1"}},
		{"stripe: quoted is another key", testsuite.StripeDialect(), "", []string{`"k1"`, `k1`, `"k1"`}, []string{`"k1"`, "k1"}},
		{"stripe: a malformed quoted key is a key", testsuite.StripeDialect(), "", []string{`"k1`, `"k1`}, []string{`"k1`}},
		{"express: quoted is another key", testsuite.ExpressDialect(), "", []string{`"k1"`, `k1`}, []string{`"k1"`, "k1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			header := tt.header
			if header == "" {
				header = "Idempotency-Key"
			}
			srv := testsuite.NewServer(testsuite.Options{Dialect: tt.dialect})
			var first reply
			for i, v := range tt.values {
				r := serve(srv, header, v)
				require.Equal(t, 201, r.status, "request %d (%s): %s", i+1, v, r.body)
				if i == 0 {
					first = r
				}
			}
			var keys []string
			for _, rec := range srv.Records() {
				keys = append(keys, rec.IdempotencyKey)
			}
			assert.Equal(t, tt.wantKeys, keys, "records")
			st := srv.Stats()
			assert.Equal(t, len(tt.wantKeys), st.Records)
			assert.Equal(t, len(tt.values)-len(tt.wantKeys), st.Replays)
			assert.Equal(t, len(tt.wantKeys), st.DistinctKeys)
			assert.Zero(t, st.MissingKey)
			if len(tt.wantKeys) == 1 {
				again := serve(srv, header, tt.values[len(tt.values)-1])
				assert.Equal(t, first.body, again.body, "the replay is the first answer")
			}
		})
	}
}

// TestKeyStringMalformed: in the IETF dialect a key header that starts with
// a double quote but is not an RFC 8941 sf-string is an invalid key: 400
// problem+json, no record, counted as a missing key, logged as received;
// also in a dialect whose key is otherwise optional.
func TestKeyStringMalformed(t *testing.T) {
	ietfInvalid := want{400, problemCT, `{"type":"https://developer.example.com/idempotency","title":"Idempotency-Key is invalid","detail":"Idempotency-Key must be a String Structured Field (RFC 8941), such as \"8e03978e-40d5-43e8-bc93-6894a57f9324\", or the bare key."}`, nil}
	stripeString := testsuite.StripeDialect()
	stripeString.KeyString = true
	stripeInvalid := want{400, "application/json", `{"error":{"type":"invalid_request_error","message":"Invalid Idempotency-Key header: send the key bare or as a quoted string."}}`, nil}
	expressString := testsuite.ExpressDialect()
	expressString.KeyString = true
	expressInvalid := want{400, plainCT, "Invalid Idempotency-Key header.\n", nil}

	malformed := []struct{ name, value string }{
		{"unterminated", `"k1`},
		{"only a quote", `"`},
		{"backslash at the end", `"k1\`},
		{"escaped closing quote", `"k1\"`},
		{"other escape", `"k\n1"`},
		{"escaped letter", `"\k1"`},
		{"empty string", `""`},
		{"parameter", `"k1";a=1`},
		{"boolean parameter", `"k1";a`},
		{"token after", `"k1" x`},
		{"two strings", `"k1""k2"`},
		{"a list", `"k1", "k2"`},
		{"inner list", `"k1" ("k2")`},
		{"tab inside", "\"k\t1\""},
		{"control byte inside", "\"k\x011\""},
		{"DEL inside", "\"k\x7f1\""},
		{"non-ASCII inside", `"ké1"`},
		{"tab after", "\"k1\"\t"},
	}
	dialects := []struct {
		name    string
		dialect testsuite.Dialect
		want    want
	}{
		{"ietf", testsuite.IETFDialect(), ietfInvalid},
		{"zero Dialect", testsuite.Dialect{}, ietfInvalid},
		{"stripe with KeyString (key otherwise optional)", stripeString, stripeInvalid},
		{"express with KeyString (key otherwise optional)", expressString, expressInvalid},
	}
	for _, d := range dialects {
		for _, m := range malformed {
			t.Run(d.name+"/"+m.name, func(t *testing.T) {
				srv := testsuite.NewServer(testsuite.Options{Dialect: d.dialect})
				d.want.check(t, serve(srv, "Idempotency-Key", m.value), m.value)
				assert.Equal(t, testsuite.Stats{Requests: 1, MissingKey: 1}, srv.Stats())
				assert.Empty(t, srv.Records())
				log := srv.Log()
				require.Len(t, log, 1)
				assert.Equal(t, m.value, log[0].IdempotencyKey, "logged as received")
				assert.Equal(t, 400, log[0].Status)
			})
		}
	}
}
