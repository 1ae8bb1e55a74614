package redact

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// checkScan fails t unless CheckedFields and ValidJSON agree with
// json.Valid and utf8.Valid on doc, and CheckedFields with ValidFields.
func checkScan(t *testing.T, doc []byte) {
	t.Helper()
	want := json.Valid(doc) && utf8.Valid(doc)
	got, changed, valid := CheckedFields(doc, "[R]")
	if valid != want {
		t.Fatalf("CheckedFields(%.80q): valid %v, json.Valid && utf8.Valid %v", doc, valid, want)
	}
	if v := ValidJSON(doc); v != want {
		t.Fatalf("ValidJSON(%.80q) = %v, json.Valid && utf8.Valid %v", doc, v, want)
	}
	if !valid {
		if changed || string(got) != string(doc) {
			t.Fatalf("not JSON, yet changed: %.80q -> %.80q", doc, got)
		}
		return
	}
	wantOut, wantChanged := ValidFields(doc, "[R]")
	if string(got) != string(wantOut) || changed != wantChanged {
		t.Fatalf("CheckedFields(%.80q) = %.80q, %v; ValidFields %.80q, %v", doc, got, changed, wantOut, wantChanged)
	}
}

// TestCheckedFieldsIsValidThenFields: one pass accepts what json.Valid
// and utf8.Valid accept, and redacts as ValidFields.
func TestCheckedFieldsIsValidThenFields(t *testing.T) {
	docs := []string{
		``, ` `, `{}`, `[]`, ` {"a" : [1, -0.5e+3, true, false, null, "x"] } `, `{"token":"t","n":{"apiKey":12}}`,
		`{"password":[["a",1],{"pin":2,"x":"y"}]}`, `{"secret":{"used":false}}`, `"a"`, `0`, `-0`, `01`, `-`, `1.`, `1e`, `1e+`, `.5`, `+1`,
		`1E-7`, `tru`, `true1`, `nul`, `falsey`, `{"a":1,}`, `[1,]`, `{"a"}`, `{"a":}`, `{,}`, `[,1]`, `{"a":1 "b":2}`, `{1:2}`, `[1}`, `{"a":1]`,
		`"\u00e9"`, `"\u00g9"`, `"\x"`, `"\/\b\f\n\r\t\"\\"`, "\"a\x01\"", "\"\xff\"", "\"\xed\xa0\x80\"", "\"\xef\xbf\xbd\"", "\"é\"", "é",
		`"abc`, `"abc\`, `{"a":"b"}x`, `[1] [2]`, "\ufeff{}", "{\"a\":\"\xc3\"}", `{"\u0074oken":"x"}`, `{"a":[]}`, `[[[]]]`, `[[[]]`,
	}
	for _, d := range docs {
		checkScan(t, []byte(d))
	}
	for _, depth := range []int{31, 32, 33, maxJSONDepth - 1, maxJSONDepth, maxJSONDepth + 1} {
		checkScan(t, []byte(strings.Repeat("[", depth)+strings.Repeat("]", depth)))
		checkScan(t, []byte(strings.Repeat(`{"a":`, depth)+"1"+strings.Repeat("}", depth)))
	}
}

func FuzzCheckedFields(f *testing.F) {
	for _, s := range []string{`{"accessToken":"a","b":[{"apiKey":1}]}`, `{"\u0074oken":{"x":"}"}}`, `[1,"token",{"k":{"secret":null}}]`,
		`{"a" : "b" , "password" : [ ] }`, `-12.5E+3`, "\"\xed\xa0\x80\"", `{"a":[1,2,{"b":"\u00e9"}]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(checkScan)
}

// benchBody is an API's small answer, as BenchmarkDoNoNetwork's.
var benchBody = []byte(`{"id":"rec_1","status":"created","amount":42,"currency":"EUR"}`)

// BenchmarkCheckedFields is the one pass of a 2xx body.
func BenchmarkCheckedFields(b *testing.B) {
	for b.Loop() {
		if _, _, ok := CheckedFields(benchBody, "[REDACTED]"); !ok {
			b.Fatal("not JSON")
		}
	}
}

// BenchmarkValidThenFields is what CheckedFields replaces: three passes.
func BenchmarkValidThenFields(b *testing.B) {
	for b.Loop() {
		if !utf8.Valid(benchBody) || !json.Valid(benchBody) {
			b.Fatal("not JSON")
		}
		ValidFields(benchBody, "[REDACTED]")
	}
}
