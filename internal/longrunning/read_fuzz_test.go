package longrunning

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/idemhttp/temporal-idempotent-http/internal/jsonfield"
)

// FuzzRead: the status-document readers never panic, read a terminal
// state only from a value their convention lists (or a done flag that is
// true), and a Detail is valid JSON.
func FuzzRead(f *testing.F) {
	for _, s := range []string{
		`{"status":"Succeeded"}`, `{"status":"InProgress"}`, `{"status":"failed","error":{"code":"X"}}`,
		`{"name":"operations/1","done":true,"response":{"id":1}}`, `{"done":false}`, `{"done":true,"error":null}`,
		`{"properties":{"provisioningState":"Canceled"}}`, `[]`, `null`, `{"status":1}`, `{"done":"yes"}`, ``,
	} {
		f.Add([]byte(s))
	}
	azure := azureDocument
	nested := azure
	nested.Field = "properties.provisioningState"
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, status := range []int{http.StatusOK, http.StatusAccepted} {
			for _, d := range []Document{azure, nested} {
				r := d.Read(Answer{Status: status, Body: body})
				want := map[State][]string{Succeeded: d.Succeeded, Failed: d.Failed, Canceled: d.Canceled}[r.State]
				if want != nil && !in(want, r.Name) {
					t.Fatalf("state %d from %q, not a listed value", r.State, r.Name)
				}
				valid(t, r, body)
			}
			r := googleDone.Read(Answer{Status: status, Body: body})
			if r.State == Succeeded || r.State == Failed || r.State == Canceled {
				var done bool
				v, _ := jsonfield.Value(body, googleDone.Field)
				if json.Unmarshal(v, &done) != nil || !done {
					t.Fatalf("ended without done: true in %q", body)
				}
			}
			valid(t, r, body)
		}
	})
}

// valid fails t when r's Detail is not JSON, or r names a URL (a status
// document names none).
func valid(t *testing.T, r Reading, body []byte) {
	t.Helper()
	if r.Detail != nil && !json.Valid(r.Detail) {
		t.Fatalf("detail of %q is not JSON: %q", body, r.Detail)
	}
	if r.Next != "" {
		t.Fatalf("reading %+v of %q names a URL", r, body)
	}
}
