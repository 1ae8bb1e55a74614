package keyplace

import (
	"encoding/json"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want Place
		err  string
	}{
		{"", Place{}, ""},
		{"header:PayPal-Request-Id", Place{Header, "PayPal-Request-Id"}, ""},
		{"body:idempotency_key", Place{Body, "idempotency_key"}, ""},
		{"body:metadata.idempotency_key", Place{Body, "metadata.idempotency_key"}, ""},
		{"query:requestId", Place{Query, "requestId"}, ""},
		{"idempotency_key", Place{}, "want header:NAME"},
		{"cookie:k", Place{}, "is not header, body or query"},
		{"body:", Place{}, "empty"},
		{"body:a..b", Place{}, "empty member name"},
		{"body:a.", Place{}, "empty member name"},
		{"query:a=b", Place{}, "no &, ="},
		{"header:a b", Place{}, "space"},
	} {
		t.Run(tt.in, func(t *testing.T) {
			p, err := Parse(tt.in)
			if tt.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, p)
			assert.Equal(t, tt.in, p.String())
		})
	}
}

func TestInsertBody(t *testing.T) {
	for _, tt := range []struct {
		name, body, path, want, err string
	}{
		{"top level", `{"amount":4200}`, "idempotency_key", `{"amount":4200,"idempotency_key":"k1"}`, ""},
		{"spaces kept", "{ \"amount\" : 4200 ,\n \"note\":\"a<b\"\n}", "idempotency_key", "{ \"amount\" : 4200 ,\n \"note\":\"a<b\",\"idempotency_key\":\"k1\"\n}", ""},
		{"empty object", `{}`, "ClientToken", `{"ClientToken":"k1"}`, ""},
		{"empty object with space", `{ }`, "ClientToken", `{"ClientToken":"k1" }`, ""},
		{"nested", `{"amount":1,"metadata":{"order":"o1"},"z":[1,{"a":2}]}`, "metadata.idempotency_key", `{"amount":1,"metadata":{"order":"o1","idempotency_key":"k1"},"z":[1,{"a":2}]}`, ""},
		{"nested empty", `{"metadata":{}}`, "metadata.idempotency_key", `{"metadata":{"idempotency_key":"k1"}}`, ""},
		{"same key already there", `{"idempotency_key":"k1","amount":1}`, "idempotency_key", `{"idempotency_key":"k1","amount":1}`, ""},
		{"another key already there", `{"idempotency_key":"other","amount":1}`, "idempotency_key", "", "already has idempotency_key"},
		{"null already there", `{"idempotency_key":null}`, "idempotency_key", "", "= null"},
		{"number already there", `{"idempotency_key":7}`, "idempotency_key", "", "already has"},
		{"missing parent", `{"amount":1}`, "metadata.idempotency_key", "", "has no member metadata"},
		{"parent not an object", `{"metadata":"x"}`, "metadata.idempotency_key", "", "not a JSON object"},
		{"array body", `[1,2]`, "idempotency_key", "", "not a JSON object"},
		{"string body", `"x"`, "idempotency_key", "", "not a JSON object"},
		{"empty body", ``, "idempotency_key", "", "not valid JSON"},
		{"broken body", `{"a":`, "idempotency_key", "", "not valid JSON"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := InsertBody([]byte(tt.body), tt.path, "k1")
			if tt.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, string(got))
			k, ok := BodyKey(got, tt.path)
			assert.True(t, ok)
			assert.Equal(t, "k1", k)
		})
	}
}

func TestInsertQuery(t *testing.T) {
	for _, tt := range []struct {
		name, url, want, err string
	}{
		{"no query", "https://api.example.com/v1/things", "https://api.example.com/v1/things?requestId=k%2F1", ""},
		{"query kept as written", "https://api.example.com/v1/things?b=2&a=%7E", "https://api.example.com/v1/things?b=2&a=%7E&requestId=k%2F1", ""},
		{"same already", "https://api.example.com/x?requestId=k%2F1", "https://api.example.com/x?requestId=k%2F1", ""},
		{"another already", "https://api.example.com/x?requestId=zz", "", "already has the query parameter requestId"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			u, err := url.Parse(tt.url)
			require.NoError(t, err)
			got, err := InsertQuery(u, "requestId", "k/1")
			if tt.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got.String())
			assert.Equal(t, "k/1", got.Query().Get("requestId"))
			assert.Equal(t, tt.url, u.String(), "the URL given is not modified")
		})
	}
}

// FuzzInsertBody: whatever the body and path, an insertion that succeeds
// yields valid JSON whose path holds the key, and every other byte of
// the body is kept in order.
func FuzzInsertBody(f *testing.F) {
	f.Add([]byte(`{"amount":4200}`), "idempotency_key")
	f.Add([]byte(`{"metadata":{"a":[1,{"b":2}]}}`), "metadata.idempotency_key")
	f.Add([]byte(`{ }`), "a")
	f.Add([]byte(`{"a":{"a":{}}}`), "a.a.a")
	f.Fuzz(func(t *testing.T, body []byte, path string) {
		p, err := Parse("body:" + path)
		if err != nil {
			return
		}
		out, err := InsertBody(body, p.Name, "key-1")
		if err != nil {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("InsertBody(%q, %q) = %q: not valid JSON", body, path, out)
		}
		if k, ok := BodyKey(out, p.Name); !ok || k != "key-1" {
			t.Fatalf("InsertBody(%q, %q) = %q: the key is not at the path (%q, %v)", body, path, out, k, ok)
		}
		// body is a subsequence of out, with one run inserted.
		i := 0
		for i < len(body) && body[i] == out[i] {
			i++
		}
		rest := body[i:]
		if string(out[len(out)-len(rest):]) != string(rest) {
			t.Fatalf("InsertBody(%q, %q) = %q: the body was not kept byte for byte", body, path, out)
		}
	})
}
