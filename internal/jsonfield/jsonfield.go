// Package jsonfield reads a JSON value at a dotted path
// ("data.object.status"): the one reading of a field by name, shared by
// the status documents of long-running operations, webhook events and the
// fallback poll's URL template.
package jsonfield

import (
	"bytes"
	"encoding/json"
	"strings"
)

// Value returns the JSON value at a dotted path ("data.object.status") in
// body: the one reading of a field by name in a JSON document, shared by
// the status documents of long-running operations, webhook events and the
// fallback poll's URL template. A missing or null value is not found.
func Value(body []byte, path string) (json.RawMessage, bool) {
	v := json.RawMessage(body)
	for name := range strings.SplitSeq(path, ".") {
		var obj map[string]json.RawMessage
		if json.Unmarshal(v, &obj) != nil {
			return nil, false
		}
		if v = obj[name]; v == nil {
			return nil, false
		}
	}
	v = bytes.TrimSpace(v)
	return v, len(v) > 0 && string(v) != "null"
}

// String returns the string at path in body.
func String(body []byte, path string) (string, bool) {
	v, ok := Value(body, path)
	if !ok {
		return "", false
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return "", false
	}
	return s, true
}
