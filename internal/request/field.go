package request

import (
	"bytes"
	"encoding/json"
	"strings"
)

// Field returns the JSON value at a dotted path ("data.object.status") in
// body: the one reading of a field by name in a JSON document, shared by
// the status documents of long-running operations, webhook events and the
// fallback poll's URL template. A missing or null value is not found.
func Field(body []byte, path string) (json.RawMessage, bool) {
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

// StringField returns the string at path in body.
func StringField(body []byte, path string) (string, bool) {
	v, ok := Field(body, path)
	if !ok {
		return "", false
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return "", false
	}
	return s, true
}
