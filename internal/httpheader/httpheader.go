// Package httpheader holds the rules of a header's name (an RFC 9110
// token) and value (what net/http sends), for the request's headers and
// the worker's settings.
package httpheader

import (
	"fmt"
	"strings"
)

// ValidName reports whether s is a valid header name (an RFC 9110 token).
func ValidName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			continue
		}
		if !strings.ContainsRune("!#$%&'*+-.^_`|~", rune(c)) {
			return false
		}
	}
	return true
}

// CheckValue checks the value v of header name as net/http does before
// it sends a request (which refuses the whole request otherwise): no
// control character other than horizontal tab, and no DEL. The error names
// the header and the byte's position, never the value (it may be a
// credential's).
func CheckValue(name, v string) error {
	if i := badValueByte(v); i >= 0 {
		return fmt.Errorf("invalid value for header %s: byte %#x at %d is a control character, which HTTP does not allow in a header value", name, v[i], i)
	}
	return nil
}

// badValueByte returns the index of the first byte net/http refuses in a
// header value (a control character other than HTAB, or DEL), or -1.
func badValueByte(v string) int {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			return i
		}
	}
	return -1
}
