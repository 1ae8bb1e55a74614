package wire_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"

	"github.com/idemhttp/temporal-idempotent-http/internal/wire"
)

// carrier holds a Body as this module's types do.
type carrier struct {
	Body wire.Body `json:"body,omitempty"`
	Next string    `json:"next"`
}

// throughTemporal encodes b as Temporal's default data converter does for
// a workflow or activity argument, and decodes it back.
func throughTemporal(t testing.TB, b []byte) []byte {
	t.Helper()
	dc := converter.GetDefaultDataConverter()
	p, err := dc.ToPayload(carrier{Body: b, Next: "after"})
	if err != nil {
		t.Fatalf("ToPayload(%q): %v", b, err)
	}
	var got carrier
	if err := dc.FromPayload(p, &got); err != nil {
		t.Fatalf("FromPayload(%s): %v", p.GetData(), err)
	}
	if got.Next != "after" {
		t.Fatalf("the field after the body was lost: %s", p.GetData())
	}
	return got.Body
}

func TestBodyRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		body string
		raw  bool // travels as the document itself (readable in the Web UI)
	}{
		{"compact object", `{"amount":42,"currency":"EUR"}`, true},
		{"compact array", `[1,"a",true,null,{}]`, true},
		{"number", `42`, true},
		{"true", `true`, true},
		{"escapes kept as written", `{"a":"\u00e9\n\"\/"}`, true},
		{"non-ASCII", `{"name":"Zoë 東京"}`, true},
		{"null", `null`, false},
		{"bare string", `"abc"`, false},
		{"bare string of HTML", `"<&>"`, false},
		{"space after colon", `{"a": 1}`, false},
		{"newlines and tabs", "{\n\t\"a\":1\n}\n", false},
		{"leading space", ` {"a":1}`, false},
		{"less than", `{"html":"<b>"}`, false},
		{"ampersand", `{"q":"a&b"}`, false},
		{"U+2028", "{\"a\":\"x\u2028y\"}", false},
		{"U+2029", "{\"a\":\"x\u2029y\"}", false},
		{"exponent", `1E+2`, true},
		{"deep", `[[[[[[[[[[{"a":[[[]]]}]]]]]]]]]]`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.True(t, json.Valid([]byte(tt.body)))
			enc, err := wire.Body(tt.body).MarshalJSON()
			require.NoError(t, err)
			require.True(t, json.Valid(enc), "%s", enc)
			if tt.raw {
				assert.Equal(t, tt.body, string(enc), "the document itself")
			} else {
				assert.Equal(t, byte('"'), enc[0], "a string holding the exact text: %s", enc)
			}
			var back wire.Body
			require.NoError(t, back.UnmarshalJSON(enc))
			assert.Equal(t, tt.body, string(back), "UnmarshalJSON(MarshalJSON)")

			// As a field, through encoding/json (which compacts and
			// HTML-escapes what a Marshaler returns) and Temporal's converter.
			field, err := json.Marshal(carrier{Body: wire.Body(tt.body)})
			require.NoError(t, err)
			var c carrier
			require.NoError(t, json.Unmarshal(field, &c))
			assert.Equal(t, tt.body, string(c.Body), "through encoding/json: %s", field)
			assert.Equal(t, tt.body, string(throughTemporal(t, []byte(tt.body))))
		})
	}
}

// TestBodyDecodesPlainJSON: input written before bodies travelled in their
// exact form (histories, or input typed by hand) holds the body as plain
// JSON: it decodes to that JSON's text.
func TestBodyDecodesPlainJSON(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"body":{"amount":42},"next":"x"}`, `{"amount":42}`},
		{`{"body":{"amount": 42 },"next":"x"}`, `{"amount": 42 }`},
		{`{"body": [1, 2] ,"next":"x"}`, `[1, 2]`},
		{`{"body":7,"next":"x"}`, `7`},
		{`{"body":"{\"a\":1}","next":"x"}`, `{"a":1}`},
		{`{"body":null,"next":"x"}`, ``},
		{`{"next":"x"}`, ``},
	}
	for _, tt := range tests {
		var c carrier
		require.NoError(t, json.Unmarshal([]byte(tt.in), &c), tt.in)
		assert.Equal(t, tt.want, string(c.Body), tt.in)
		assert.Equal(t, "x", c.Next, tt.in)
	}
}

func TestBodyEdges(t *testing.T) {
	enc, err := wire.Body(nil).MarshalJSON()
	require.NoError(t, err)
	assert.Equal(t, "null", string(enc), "no body")

	_, err = wire.Body("\"\xff\"").MarshalJSON()
	require.Error(t, err, "invalid UTF-8 cannot travel unchanged")
	assert.Contains(t, err.Error(), "UTF-8")
	_, err = json.Marshal(carrier{Body: wire.Body("\"\xff\"")})
	require.Error(t, err)

	var b wire.Body
	assert.Error(t, b.UnmarshalJSON(nil))
	assert.Error(t, b.UnmarshalJSON([]byte(`"unterminated`)))
}

func TestStable(t *testing.T) {
	for doc, want := range map[string]bool{
		`{"a":1}`:                true,
		`{"a": 1}`:               false,
		`{"a":"<"}`:              false,
		`{"a":">"}`:              false,
		`{"a":"&"}`:              false,
		"{\"a\":\"\u2028\"}":     false,
		"{\"a\":\"\u2029\"}":     false,
		"{\"a\":\"\u2027\"}":     true,
		`{"a":"\u003c"}`:         true,
		`{"a":1`:                 false,
		"[1]\n":                  false,
		`"plain"`:                true,
		`{"k":"\u2028 as text"}`: true,
	} {
		assert.Equal(t, want, wire.Stable([]byte(doc)), doc)
	}
}

func TestDuration(t *testing.T) {
	for _, d := range []time.Duration{0, time.Nanosecond, 1500 * time.Millisecond, 90 * time.Second, 26 * time.Hour, -time.Second, 1<<63 - 1} {
		enc, err := json.Marshal(wire.Duration(d))
		require.NoError(t, err)
		var back wire.Duration
		require.NoError(t, json.Unmarshal(enc, &back), "%s", enc)
		assert.Equal(t, d, time.Duration(back), "%s", enc)
	}
	enc, _ := json.Marshal(wire.Duration(10 * time.Second))
	assert.Equal(t, `"10s"`, string(enc))
	var d wire.Duration
	require.NoError(t, json.Unmarshal([]byte(`1500000000`), &d), "nanoseconds, as histories written before hold")
	assert.Equal(t, 1500*time.Millisecond, time.Duration(d))
	err := json.Unmarshal([]byte(`"ten seconds"`), &d)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"10s"`)
	assert.Error(t, json.Unmarshal([]byte(`1.5`), &d))
}

// sample has every kind of field wire.Marshal and wire.Unmarshal treat.
type sample struct {
	Name   string          `json:"name"`
	Wait   time.Duration   `json:"wait,omitempty"`
	Idle   time.Duration   `json:"idle,omitempty"`
	Body   json.RawMessage `json:"body,omitempty"`
	Raw    []byte          `json:"raw,omitempty"`
	secret string
}

func TestMarshalUnmarshal(t *testing.T) {
	in := sample{Name: "n", Wait: 1500 * time.Millisecond, Body: json.RawMessage("{\"a\": \"<\u2028\"}\n"), Raw: []byte{0xff, 0}, secret: "s"}
	enc, err := wire.Marshal(in)
	require.NoError(t, err)
	assert.Contains(t, string(enc), `"wait":"1.5s"`)
	assert.NotContains(t, string(enc), "idle", "a zero duration is omitted")
	assert.NotContains(t, string(enc), "secret")
	// Temporal's converter re-encodes what a MarshalJSON returns.
	re, err := json.Marshal(json.RawMessage(enc))
	require.NoError(t, err)
	var out sample
	require.NoError(t, wire.Unmarshal(re, &out))
	in.secret = ""
	assert.Equal(t, in, out)

	// Written before: durations as nanoseconds, the body as plain JSON.
	var old sample
	require.NoError(t, wire.Unmarshal([]byte(`{"name":"o","wait":2000000000,"body":{"a": 1}}`), &old))
	assert.Equal(t, sample{Name: "o", Wait: 2 * time.Second, Body: json.RawMessage(`{"a": 1}`)}, old)

	// Fields absent from the data are kept, as encoding/json keeps them.
	kept := sample{Name: "keep", Idle: time.Minute, secret: "s"}
	require.NoError(t, wire.Unmarshal([]byte(`{"wait":"1s"}`), &kept))
	assert.Equal(t, sample{Name: "keep", Wait: time.Second, Idle: time.Minute, secret: "s"}, kept)

	assert.Error(t, wire.Unmarshal([]byte(`{"wait":"soon"}`), &kept))
}

// FuzzWireBody: any valid UTF-8 JSON document survives MarshalJSON and
// UnmarshalJSON, encoding/json as a field, and Temporal's default data
// converter byte for byte, and its encoding is valid JSON.
func FuzzWireBody(f *testing.F) {
	for _, s := range []string{
		`{"a":1}`, `{"a": 1}`, `null`, ` null `, `"s"`, `"<\u2028>"`, "[\n1,\n2\n]", `{"a":"\u00e9"}`,
		`1E+2`, `-0.0e-0`, `{"":""}`, "\"\u2029\"", `[{"a":[true,false,null]}]`, "\t{}\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !utf8.Valid(b) || !json.Valid(b) {
			return
		}
		enc, err := wire.Body(b).MarshalJSON()
		if err != nil {
			t.Fatalf("MarshalJSON(%q): %v", b, err)
		}
		if !json.Valid(enc) {
			t.Fatalf("MarshalJSON(%q) = %q: not JSON", b, enc)
		}
		var back wire.Body
		if err := back.UnmarshalJSON(enc); err != nil || !bytes.Equal(back, b) {
			t.Fatalf("UnmarshalJSON(MarshalJSON(%q)) = %q, %v", b, back, err)
		}
		field, err := json.Marshal(carrier{Body: b, Next: "after"})
		if err != nil {
			t.Fatalf("json.Marshal: %v", err)
		}
		var c carrier
		if err := json.Unmarshal(field, &c); err != nil || !bytes.Equal(c.Body, b) || c.Next != "after" {
			t.Fatalf("through encoding/json: %q became %q (%s), %v", b, c.Body, field, err)
		}
		if got := throughTemporal(t, b); !bytes.Equal(got, b) {
			t.Fatalf("through Temporal's converter: %q became %q", b, got)
		}
		if strings.TrimSpace(string(b)) != string(b) && enc[0] != '"' {
			t.Fatalf("MarshalJSON(%q) = %q: surrounding space must travel in the string form", b, enc)
		}
	})
}

// TestLegacyBareStringBody: a history written before holds a body that is a
// bare JSON string as "body":"hello"; it still decodes as that document.
func TestLegacyBareStringBody(t *testing.T) {
	for in, want := range map[string]string{`"hello"`: `"hello"`, `"{\"a\":1}"`: `{"a":1}`, `"\"hello\""`: `"hello"`} {
		var b wire.Body
		if err := b.UnmarshalJSON([]byte(in)); err != nil || string(b) != want {
			t.Errorf("UnmarshalJSON(%s) = %q, %v; want %q", in, b, err, want)
		}
	}
}
