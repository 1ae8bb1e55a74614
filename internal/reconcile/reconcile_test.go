package reconcile

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemhttp/temporal-idempotent-http/internal/keyplace"
)

func TestRead(t *testing.T) {
	for _, tt := range []struct {
		name   string
		status int
		body   string
		items  string
		want   Found
		record string
		n      int
	}{
		{"404", 404, `{"error":"not found"}`, "", NotFound, "", 0},
		{"empty list", 200, `[]`, "", NotFound, "", 0},
		{"one", 200, ` [ {"id":"p1","client_reference":"k"} ] `, "", One, `{"id":"p1","client_reference":"k"}`, 1},
		{"two", 200, `[{"id":"p1"},{"id":"p2"}]`, "", Many, "", 2},
		{"object is the record", 200, `{"id":"p1"}`, "", One, `{"id":"p1"}`, 1},
		{"items one", 200, `{"object":"list","data":[{"id":"p1"}]}`, "data", One, `{"id":"p1"}`, 1},
		{"items none", 200, `{"data":[]}`, "data", NotFound, "", 0},
		{"items many", 200, `{"data":[{"id":1},{"id":2},{"id":3}]}`, "data", Many, "", 3},
		{"items missing", 200, `{"list":[]}`, "data", Unreadable, "", 0},
		{"items an object", 200, `{"data":{"id":1}}`, "data", Unreadable, "", 0},
		{"not JSON", 200, `<html>`, "", Unreadable, "", 0},
		{"list of strings", 200, `["p1"]`, "", Unreadable, "", 1},
		{"500", 500, `[]`, "", Unreadable, "", 0},
		{"string", 200, `"p1"`, "", Unreadable, "", 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f, rec, n := Read(tt.status, []byte(tt.body), tt.items)
			assert.Equal(t, tt.want, f)
			assert.Equal(t, tt.record, string(rec))
			assert.Equal(t, tt.n, n)
		})
	}
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

// FuzzRead: whatever a lookup answers, One comes with a JSON object and
// Many with more than one match: an ambiguous answer is never a record.
func FuzzRead(f *testing.F) {
	f.Add(200, []byte(`[{"id":1}]`), "")
	f.Add(200, []byte(`{"data":[{"id":1},{"id":2}]}`), "data")
	f.Add(404, []byte(``), "")
	f.Fuzz(func(t *testing.T, status int, body []byte, items string) {
		found, rec, n := Read(status, body, items)
		switch found {
		case One:
			if n != 1 || len(rec) == 0 || rec[0] != '{' {
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
