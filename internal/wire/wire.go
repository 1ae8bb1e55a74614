// Package wire holds how this module's types travel through Temporal's JSON
// payload converter: bodies byte for byte (the converter re-encodes a
// json.RawMessage: it compacts it and escapes <, > and & as \u003c, \u003e
// and \u0026, while signatures over a body and the server's own body hash
// need the caller's bytes), and durations as readable strings.
package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"
)

// Body is a JSON document that survives Temporal's JSON payload converter
// byte for byte. It encodes as the document itself when re-encoding leaves
// it unchanged (compact, no <, >, &, U+2028 or U+2029, not a bare JSON
// string), so the Web UI shows it as JSON; otherwise as a JSON string holding
// its exact text. It decodes both: a JSON string whose text is a JSON
// document is that exact text; any other JSON value is the document (so is
// a string whose text is not JSON: a bare-string body as histories written
// before hold it). A body that is itself a bare JSON string, or null,
// always travels in the string form; a null field decodes as no body.
type Body []byte

// MarshalJSON implements json.Marshaler.
func (b Body) MarshalJSON() ([]byte, error) {
	if len(b) == 0 {
		return []byte("null"), nil
	}
	if !utf8.Valid(b) {
		// encoding/json would replace the invalid bytes: refuse instead.
		return nil, errors.New("the body is not valid UTF-8, which JSON requires: it cannot travel through Temporal unchanged")
	}
	if Stable(b) && b[0] != '"' && string(b) != "null" {
		return b, nil
	}
	return json.Marshal(string(b))
}

// UnmarshalJSON implements json.Unmarshaler.
func (b *Body) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	switch {
	case len(data) == 0:
		return errors.New("wire.Body: empty JSON value")
	case string(data) == "null":
		*b = nil
	case data[0] == '"':
		var s string
		if err := json.Unmarshal(data, &s); err != nil {
			return err
		}
		if json.Valid([]byte(s)) {
			*b = Body(s)
		} else {
			// Not a document's text: a document that is itself a JSON
			// string, as histories written before hold it.
			*b = append(Body(nil), data...)
		}
	default:
		*b = append(Body(nil), data...)
	}
	return nil
}

// Stable reports whether encoding/json leaves the JSON document b unchanged
// when it re-encodes it as a json.RawMessage.
func Stable(b []byte) bool {
	var buf bytes.Buffer
	if json.Compact(&buf, b) != nil || !bytes.Equal(buf.Bytes(), b) {
		return false
	}
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '<', '>', '&':
			return false
		case 0xe2: // U+2028 and U+2029 are E2 80 A8 and E2 80 A9.
			if i+2 < len(b) && b[i+1] == 0x80 && (b[i+2] == 0xa8 || b[i+2] == 0xa9) {
				return false
			}
		}
	}
	return true
}

// Duration is a time.Duration that encodes as a Go duration string ("10s",
// "1m30s"), so the Web UI shows it and the Temporal CLI or another SDK can
// write it; it decodes a string or, as histories written before hold, a
// number of nanoseconds.
type Duration time.Duration

// MarshalJSON implements json.Marshaler.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON implements json.Unmarshaler.
func (d *Duration) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '"' {
		var s string
		if err := json.Unmarshal(data, &s); err != nil {
			return err
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("duration %q: write it as a Go duration such as \"10s\" or \"1m30s\"", s)
		}
		*d = Duration(v)
		return nil
	}
	var n int64
	if err := json.Unmarshal(data, &n); err != nil {
		return fmt.Errorf("duration %s: write it as a string such as \"10s\" (or a number of nanoseconds)", data)
	}
	*d = Duration(n)
	return nil
}

// Marshal encodes the struct v as encoding/json does, except that its
// time.Duration fields encode as Duration and its json.RawMessage fields as
// Body. A type's MarshalJSON calls it on a method-less copy of itself:
//
//	func (r Request) MarshalJSON() ([]byte, error) { type plain Request; return wire.Marshal(plain(r)) }
func Marshal(v any) ([]byte, error) { return MarshalView(v, "") }

// MarshalView is Marshal with each field's JSON name and options taken
// from its struct tag named view instead of json (a field without one is
// left out); view "" is Marshal. For one declaration that travels in two
// shapes, as poll.WebhookPoll does (poll.StatusRule, its rule, in
// the poll activity's input).
func MarshalView(v any, view string) ([]byte, error) {
	rv := reflect.ValueOf(v)
	w := reflect.New(shadow(rv.Type(), view)).Elem()
	copyFields(w, rv, rv.Type())
	return json.Marshal(w.Interface())
}

// MarshalOrdered is Marshal with the object's members named in first
// written first, in that order, and the others after them, in their
// order: for a type whose histories hold its members in an order other
// than its fields' (a struct that embeds another, as poll.Monitor
// embeds poll.Accepted). The members' bytes are Marshal's.
func MarshalOrdered(v any, first ...string) ([]byte, error) {
	data, err := Marshal(v)
	if err != nil {
		return nil, err
	}
	type member struct {
		key   string
		value json.RawMessage
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if _, err := dec.Token(); err != nil { // {
		return nil, err
	}
	var members []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		m := member{key: tok.(string)}
		if err := dec.Decode(&m.value); err != nil {
			return nil, err
		}
		members = append(members, m)
	}
	rank := func(key string) int {
		if i := slices.Index(first, key); i >= 0 {
			return i
		}
		return len(first)
	}
	slices.SortStableFunc(members, func(a, b member) int { return rank(a.key) - rank(b.key) })
	out := append(make([]byte, 0, len(data)), '{')
	for i, m := range members {
		if i > 0 {
			out = append(out, ',')
		}
		key, _ := json.Marshal(m.key)
		out = append(append(append(out, key...), ':'), m.value...)
	}
	return append(out, '}'), nil
}

// Unmarshal decodes data into the struct *v as encoding/json does, reading
// its time.Duration fields as Duration and its json.RawMessage fields as Body.
func Unmarshal(data []byte, v any) error { return UnmarshalView(data, v, "") }

// UnmarshalView decodes what MarshalView encodes.
func UnmarshalView(data []byte, v any, view string) error {
	rv := reflect.ValueOf(v).Elem()
	w := reflect.New(shadow(rv.Type(), view)).Elem()
	copyFields(w, rv, rv.Type())
	if err := json.Unmarshal(data, w.Addr().Interface()); err != nil {
		return err
	}
	copyFields(rv, w, rv.Type())
	return nil
}

// copyFields sets the exported fields of dst from those of src, one of
// them a struct of type t and the other its shadow, embedded structs
// field by field.
func copyFields(dst, src reflect.Value, t reflect.Type) {
	for i := range t.NumField() {
		f := t.Field(i)
		switch {
		case !f.IsExported():
		case embedded(f):
			copyFields(dst.Field(i), src.Field(i), f.Type)
		default:
			dst.Field(i).Set(src.Field(i).Convert(dst.Field(i).Type()))
		}
	}
}

// embedded reports whether f is an embedded struct, whose fields
// encoding/json writes as the outer struct's own.
func embedded(f reflect.StructField) bool {
	return f.Anonymous && f.IsExported() && f.Type.Kind() == reflect.Struct
}

var (
	shadows      sync.Map // shadowKey → reflect.Type
	durationType = reflect.TypeFor[time.Duration]()
	rawType      = reflect.TypeFor[json.RawMessage]()
)

// shadowKey is a type and the view of it a shadow is.
type shadowKey struct {
	t    reflect.Type
	view string
}

// shadow returns t with Duration for time.Duration and Body for
// json.RawMessage fields, embedded structs shadowed alike (a shadow has
// no methods: an embedded struct's MarshalJSON is not promoted to it),
// and a blank for each unexported field; with a view, each field's json
// tag is its view tag ("-" without one).
func shadow(t reflect.Type, view string) reflect.Type {
	key := shadowKey{t, view}
	if s, ok := shadows.Load(key); ok {
		return s.(reflect.Type)
	}
	fields := make([]reflect.StructField, t.NumField())
	for i := range fields {
		f := t.Field(i)
		switch f.Type {
		case durationType:
			f.Type = reflect.TypeFor[Duration]()
		case rawType:
			f.Type = reflect.TypeFor[Body]()
		}
		if embedded(f) {
			f.Type = shadow(f.Type, view)
		}
		if view != "" && !f.Anonymous {
			name, ok := f.Tag.Lookup(view)
			if !ok {
				name = "-"
			}
			f.Tag = reflect.StructTag(`json:"` + name + `"`)
		}
		if !f.IsExported() {
			// reflect.StructOf takes no unexported field: a blank stands in.
			f = reflect.StructField{Name: "Unexported" + strconv.Itoa(i), Type: reflect.TypeFor[struct{}](), Tag: `json:"-"`}
		}
		fields[i] = f
	}
	s := reflect.StructOf(fields)
	shadows.Store(key, s)
	return s
}
