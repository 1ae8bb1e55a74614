// Package keyplace says where a request carries its idempotency key (a
// header, a member of its JSON body, or a query parameter) and puts it
// there: the one reading of "header:NAME", "body:PATH" and "query:NAME",
// shared by the activity that sends the key, the workflow side that checks
// a call before it reaches history, the origins file and the reference
// server that reads the key back.
package keyplace

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// In is the part of a request that carries the key.
type In int

const (
	// Header: the key is a request header (Place.Name is its name; ""
	// for the origin's key header).
	Header In = iota
	// Body: the key is a string member of the JSON body at a dotted path
	// (Place.Name: "idempotency_key", "metadata.idempotency_key").
	Body
	// Query: the key is a query parameter (Place.Name is its name).
	Query
)

// Place is where a request carries its key. The zero Place is the
// origin's key header.
type Place struct {
	In   In
	Name string
}

// maxName bounds a place's name: a header name, a path or a parameter.
const maxName = 256

// Parse reads s: "" (the origin's key header), "header:NAME",
// "body:PATH" (a dotted path of member names) or "query:NAME". Its
// errors say what to write instead.
func Parse(s string) (Place, error) {
	if s == "" {
		return Place{}, nil
	}
	in, name, ok := strings.Cut(s, ":")
	if !ok {
		return Place{}, fmt.Errorf("key place %q: want header:NAME, body:PATH or query:NAME (e.g. body:idempotency_key)", s)
	}
	if name == "" || len(name) > maxName {
		return Place{}, fmt.Errorf("key place %q: the name after %q is empty or longer than %d bytes", s, in+":", maxName)
	}
	for _, r := range name {
		if r <= ' ' || r >= 0x7f || r == '"' || r == '\\' {
			return Place{}, fmt.Errorf("key place %q: the name holds a space, a quote, a backslash or a byte outside printable ASCII", s)
		}
	}
	switch in {
	case "header":
		return Place{In: Header, Name: name}, nil
	case "body":
		for seg := range strings.SplitSeq(name, ".") {
			if seg == "" {
				return Place{}, fmt.Errorf("key place %q: the path has an empty member name (two dots, or a dot at an end)", s)
			}
		}
		return Place{In: Body, Name: name}, nil
	case "query":
		if strings.ContainsAny(name, "&=#?") {
			return Place{}, fmt.Errorf("key place %q: a query parameter's name has no &, =, # or ?", s)
		}
		return Place{In: Query, Name: name}, nil
	}
	return Place{}, fmt.Errorf("key place %q: %q is not header, body or query", s, in)
}

// String is p as Parse reads it ("" for the zero Place).
func (p Place) String() string {
	switch p.In {
	case Body:
		return "body:" + p.Name
	case Query:
		return "query:" + p.Name
	}
	if p.Name == "" {
		return ""
	}
	return "header:" + p.Name
}

// Describe names p for messages: "the header Idempotency-Key", "the body
// member metadata.idempotency_key", "the query parameter requestId".
func (p Place) Describe() string {
	switch p.In {
	case Body:
		return "the body member " + p.Name
	case Query:
		return "the query parameter " + p.Name
	}
	return "the header " + p.Name
}

// ErrNotObject is InsertBody's error for a body that is not a JSON object.
var ErrNotObject = errors.New("not a JSON object")

// InsertBody returns body with the string key at path (dotted member
// names): the body byte for byte, with `"NAME":"KEY"` inserted after the
// last member of the object that holds it. Every object on the path but
// the last member must exist. A body that already has the member with
// key as its value is returned as it is; with another value, it is an
// error: the body would carry two keys.
func InsertBody(body []byte, path, key string) ([]byte, error) {
	if !json.Valid(body) {
		// locate reads only as far as the path: the rest is checked here.
		return nil, errors.New("the body is not valid JSON")
	}
	segs := strings.Split(path, ".")
	at, empty, have, err := locate(body, segs)
	if err != nil {
		return nil, err
	}
	if have != nil {
		var s string
		if json.Unmarshal(have, &s) == nil && s == key {
			return body, nil
		}
		return nil, fmt.Errorf("the body already has %s = %s: the idempotency key goes there; leave it out of the body", path, clip(have))
	}
	name, _ := json.Marshal(segs[len(segs)-1])
	val, _ := json.Marshal(key)
	out := make([]byte, 0, len(body)+len(name)+len(val)+2)
	out = append(out, body[:at]...)
	if !empty {
		out = append(out, ',')
	}
	out = append(out, name...)
	out = append(out, ':')
	out = append(out, val...)
	return append(out, body[at:]...), nil
}

// BodyKey returns the string at path in body: where a server that reads
// the key from the body finds it.
func BodyKey(body []byte, path string) (string, bool) {
	_, _, have, err := locate(body, strings.Split(path, "."))
	if err != nil || have == nil {
		return "", false
	}
	var s string
	if json.Unmarshal(have, &s) != nil {
		return "", false
	}
	return s, true
}

// locate finds, in the JSON object body, the object at segs[:len-1]: the
// offset where a member is inserted (after its last member, or after its
// "{" when it is empty), and the value of its member segs[len-1], if any.
func locate(body []byte, segs []string) (at int, empty bool, have json.RawMessage, err error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	where := "the body"
	for i, seg := range segs {
		tok, err := dec.Token()
		if err != nil {
			return 0, false, nil, fmt.Errorf("%s is not valid JSON: %w", where, err)
		}
		if d, ok := tok.(json.Delim); !ok || d != '{' {
			return 0, false, nil, fmt.Errorf("%s is %w: the key's member cannot go in it", where, ErrNotObject)
		}
		at, empty = int(dec.InputOffset()), true
		last := i == len(segs)-1
		found := false
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return 0, false, nil, fmt.Errorf("%s is not valid JSON: %w", where, err)
			}
			name, _ := tok.(string)
			empty = false
			if name == seg && !last && !found {
				// Descend: the next round reads this member's value.
				found = true
				break
			}
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil {
				return 0, false, nil, fmt.Errorf("%s is not valid JSON: %w", where, err)
			}
			if name == seg && last && have == nil {
				have = v
			}
			at = int(dec.InputOffset())
		}
		if last {
			if _, err := dec.Token(); err != nil {
				return 0, false, nil, fmt.Errorf("%s is not valid JSON: %w", where, err)
			}
			if have != nil && string(bytes.TrimSpace(have)) == "null" {
				return 0, false, nil, fmt.Errorf("the body has %s = null: leave the member out, the idempotency key goes there", strings.Join(segs, "."))
			}
			return at, empty, have, nil
		}
		if !found {
			return 0, false, nil, fmt.Errorf("the body has no member %s: the idempotency key's path %s must lead to an object the body has", strings.Join(segs[:i+1], "."), strings.Join(segs, "."))
		}
		where = "the body's member " + strings.Join(segs[:i+1], ".")
	}
	return 0, false, nil, errors.New("empty path")
}

// InsertQuery returns u with the query parameter name=key added after
// its query as written. A URL that already has the parameter with key as
// its value is returned as it is; with another value, it is an error.
func InsertQuery(u *url.URL, name, key string) (*url.URL, error) {
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("the URL's query does not parse: %w", err)
	}
	if vs, ok := q[name]; ok {
		if len(vs) == 1 && vs[0] == key {
			return u, nil
		}
		return nil, fmt.Errorf("the URL already has the query parameter %s: the idempotency key goes there; leave it out of the URL", name)
	}
	c := *u
	if c.RawQuery != "" {
		c.RawQuery += "&"
	}
	c.RawQuery += url.QueryEscape(name) + "=" + url.QueryEscape(key)
	return &c, nil
}

// clip returns v for a message, at most 64 bytes.
func clip(v []byte) string {
	if len(v) > 64 {
		return string(v[:64]) + "…"
	}
	return string(v)
}
