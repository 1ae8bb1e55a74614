package activities

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/idemhttp/temporal-idempotent-http/internal/request"
)

// FuzzLongRunningState: the status-document reader never panics, reads a
// terminal state only from a value its convention lists (or a done flag
// that is true), and field returns valid JSON.
func FuzzLongRunningState(f *testing.F) {
	for _, s := range []string{
		`{"status":"Succeeded"}`, `{"status":"InProgress"}`, `{"status":"failed","error":{"code":"X"}}`,
		`{"name":"operations/1","done":true,"response":{"id":1}}`, `{"done":false}`, `{"done":true,"error":null}`,
		`{"properties":{"provisioningState":"Canceled"}}`, `[]`, `null`, `{"status":1}`, `{"done":"yes"}`, ``,
	} {
		f.Add([]byte(s))
	}
	azure, _ := AzureAsyncOperation().withDefaults()
	nested := azure
	nested.StatusField = "properties.provisioningState"
	goog, _ := GoogleOperation("https://x.example/v1/").withDefaults()
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, l := range []*LongRunning{&azure, &nested, &goog} {
			st, name := l.state(body)
			switch st {
			case stateSucceeded, stateFailed, stateCanceled:
				if l.StatusField != "" {
					want := map[state][]string{stateSucceeded: l.Succeeded, stateFailed: l.Failed, stateCanceled: l.Canceled}[st]
					ok := false
					for _, v := range want {
						ok = ok || strings.EqualFold(v, name)
					}
					if !ok {
						t.Fatalf("state %d from %q, not a listed value", st, name)
					}
				} else {
					var done bool
					v, _ := request.Field(body, l.DoneField)
					if json.Unmarshal(v, &done) != nil || !done {
						t.Fatalf("ended without done: true in %q", body)
					}
				}
			}
			for _, path := range []string{l.StatusField, l.DoneField, l.ErrorField, l.ResultField} {
				if path == "" {
					continue
				}
				if v, ok := request.Field(body, path); ok && !json.Valid(v) {
					t.Fatalf("field %s of %q is not JSON: %q", path, body, v)
				}
			}
		}
	})
}
