package reconcile

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemhttp/temporal-idempotent-http/internal/keyplace"
)

func TestRead(t *testing.T) {
	for _, tt := range []struct {
		name      string
		status    int
		body      string
		items     string
		keyInPath bool
		want      Found
		record    string
		n         int
	}{
		{"404 of a per-record route", 404, `{"error":"not found"}`, "", true, NotFound, "", 0},
		{"404 of a list route", 404, `{"error":"no route"}`, "", false, Unreadable, "", 0},
		{"empty list", 200, `[]`, "", false, NotFound, "", 0},
		{"one", 200, ` [ {"id":"p1","client_reference":"k"} ] `, "", false, One, `{"id":"p1","client_reference":"k"}`, 1},
		{"one, the key nested", 200, `[{"id":"p1","metadata":{"refs":["x","k"]}}]`, "", false, One, `{"id":"p1","metadata":{"refs":["x","k"]}}`, 1},
		{"two", 200, `[{"id":"p1","r":"k"},{"id":"p2","r":"k"}]`, "", false, Many, "", 2},
		{"others' records: the filter ignored", 200, `[{"id":"p1","r":"other"}]`, "", false, Unreadable, "", 0},
		{"ours among others'", 200, `[{"id":"p1","r":"other"},{"id":"p2","r":"k"}]`, "", false, One, `{"id":"p2","r":"k"}`, 1},
		{"object is the record", 200, `{"id":"p1","r":"k"}`, "", true, One, `{"id":"p1","r":"k"}`, 1},
		{"an envelope is not a record", 200, `{"object":"list","data":[],"has_more":false}`, "", false, Unreadable, "", 0},
		{"items one", 200, `{"object":"list","data":[{"id":"p1","r":"k"}]}`, "data", false, One, `{"id":"p1","r":"k"}`, 1},
		{"items none", 200, `{"data":[]}`, "data", false, NotFound, "", 0},
		{"items many", 200, `{"data":[{"r":"k"},{"r":"k"},{"r":"k"}]}`, "data", false, Many, "", 3},
		{"items missing", 200, `{"list":[]}`, "data", false, Unreadable, "", 0},
		{"items an object", 200, `{"data":{"id":1,"r":"k"}}`, "data", false, Unreadable, "", 0},
		{"not JSON", 200, `<html>`, "", false, Unreadable, "", 0},
		{"list of strings", 200, `["k"]`, "", false, Unreadable, "", 0},
		{"500", 500, `[]`, "", false, Unreadable, "", 0},
		{"string", 200, `"k"`, "", false, Unreadable, "", 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f, rec, n := Read(tt.status, []byte(tt.body), tt.items, "k", tt.keyInPath)
			assert.Equal(t, tt.want, f)
			assert.Equal(t, tt.record, string(rec))
			assert.Equal(t, tt.n, n)
		})
	}
}

func TestKeyInPath(t *testing.T) {
	assert.True(t, Reconcile{Lookup: "https://api.example.com/payments/by-ref/{key}"}.KeyInPath())
	assert.False(t, Reconcile{Lookup: "https://api.example.com/payments?ref={key}"}.KeyInPath())
}

func TestValidate(t *testing.T) {
	body := keyplace.Place{In: keyplace.Body, Name: "client_reference"}
	for _, tt := range []struct {
		name  string
		r     Reconcile
		place keyplace.Place
		err   string
	}{
		{"zero", Reconcile{}, keyplace.Place{}, ""},
		{"lookup", Reconcile{Lookup: "https://api.example.com/payments?client_reference={key}"}, body, ""},
		{"at most once with a header key", Reconcile{AtMostOnce: true}, keyplace.Place{}, ""},
		{"both", Reconcile{Lookup: "https://api.example.com/p?r={key}", AtMostOnce: true}, body, "exclude each other"},
		{"lookup and its activity", Reconcile{Lookup: "https://api.example.com/p?r={key}", LookupActivity: "FindPayment"}, body, "exclude each other"},
		{"lookup activity with a header key", Reconcile{LookupActivity: "FindPayment"}, keyplace.Place{}, ""},
		{"no placeholder", Reconcile{Lookup: "https://api.example.com/payments"}, body, "exactly once"},
		{"two placeholders", Reconcile{Lookup: "https://api.example.com/{key}?r={key}"}, body, "exactly once"},
		{"other origin", Reconcile{Lookup: "https://other.example.com/p?r={key}"}, body, "the call on https://api.example.com"},
		{"header key", Reconcile{Lookup: "https://api.example.com/p?r={key}"}, keyplace.Place{}, "needs the key where the API keeps it"},
		{"items without lookup", Reconcile{Items: "data"}, body, "Items needs Lookup"},
		{"bad items", Reconcile{Lookup: "https://api.example.com/p?r={key}", Items: "a..b"}, body, "dotted path"},
		{"relative", Reconcile{Lookup: "/p?r={key}"}, body, "Request.Reconcile.Lookup"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.r.Validate("Request.Reconcile", "https://api.example.com/payments")
			if err == nil {
				err = tt.r.CheckPlace("Request.Reconcile", tt.place)
			}
			if tt.err == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.err)
		})
	}
}

func TestURL(t *testing.T) {
	r := Reconcile{Lookup: "https://api.example.com/payments?client_reference={key}"}
	assert.Equal(t, "https://api.example.com/payments?client_reference=a+b%26c", r.URL("a b&c"))
}

// FuzzRead: whatever a lookup answers, One comes with a JSON object that
// carries the key, and Many with more than one match: an ambiguous
// answer, or another's record, is never a result.
func FuzzRead(f *testing.F) {
	f.Add(200, []byte(`[{"id":1,"r":"k"}]`), "", "k", false)
	f.Add(200, []byte(`{"data":[{"id":1,"r":"k"},{"id":2}]}`), "data", "k", false)
	f.Add(404, []byte(``), "", "k", true)
	f.Fuzz(func(t *testing.T, status int, body []byte, items, key string, keyInPath bool) {
		found, rec, n := Read(status, body, items, key, keyInPath)
		switch found {
		case One:
			if n != 1 || len(rec) == 0 || rec[0] != '{' || !carries(rec, key) {
				t.Fatalf("Read(%d, %q, %q) = One with %q, %d", status, body, items, rec, n)
			}
		case Many:
			if n < 2 || rec != nil {
				t.Fatalf("Read(%d, %q, %q) = Many with %q, %d", status, body, items, rec, n)
			}
		default:
			if rec != nil {
				t.Fatalf("Read(%d, %q, %q) = %d with a record", status, body, items, found)
			}
		}
	})
}
