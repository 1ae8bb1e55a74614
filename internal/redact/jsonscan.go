package redact

import (
	"encoding/json"
	"unicode/utf8"
)

// CheckedFields is ValidFields for a document not yet checked: in one
// pass it checks that doc is a JSON document in valid UTF-8 (what
// json.Valid and utf8.Valid together accept, nesting depth included) and
// replaces the values of the members named like a credential as
// ValidFields does. valid is false, and doc is returned unchanged, when
// doc is not such a document.
func CheckedFields(doc []byte, with string) (out []byte, changed, valid bool) {
	return scan(doc, with, true)
}

// ValidJSON reports whether doc is a JSON document in valid UTF-8:
// json.Valid(doc) && utf8.Valid(doc), in one pass.
func ValidJSON(doc []byte) bool {
	_, _, valid := scan(doc, "", false)
	return valid
}

// maxJSONDepth is encoding/json's bound on nesting: a document nested
// deeper is not valid to json.Valid.
const maxJSONDepth = 10000

// Where scan stands in the grammar.
const (
	wantValue      = iota // a value: at the top, after ':' or an array's ','
	wantValueOrEnd        // after '[': a value or ']'
	wantNameOrEnd         // after '{': a member name or '}'
	wantName              // after an object's ',': a member name
	wantColon             // after a member name
	wantCommaOrEnd        // after a value in an object or an array
	wantNothing           // after the top-level value: white space only
)

// scan checks doc as JSON in valid UTF-8 and, with fields, redacts the
// values of credential-named members (see ValidFields, whose stack and
// rules it follows).
func scan(doc []byte, with string, fields bool) (out []byte, changed, valid bool) {
	var repl []byte
	last := 0
	// stack holds '{' for an object, '[' for an array and 'c' for an
	// array that is the value of a member named like a credential.
	var stackBuf [32]byte
	stack := stackBuf[:0]
	named := false // the next value is a credential-named member's
	state := wantValue
	// after is the state after a value, which closes nothing.
	after := func() int {
		if len(stack) == 0 {
			return wantNothing
		}
		return wantCommaOrEnd
	}
	replace := func(start, end int) {
		if repl == nil {
			repl, _ = json.Marshal(with)
		}
		out = append(append(out, doc[last:start]...), repl...)
		last = end
	}
	for i := 0; i < len(doc); {
		c := doc[i]
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' {
			i++
			continue
		}
		switch state {
		case wantValue, wantValueOrEnd:
			if c == ']' && state == wantValueOrEnd {
				stack = stack[:len(stack)-1]
				i++
				state = after()
				continue
			}
			under := fields && (named || len(stack) > 0 && stack[len(stack)-1] == 'c')
			named = false
			switch {
			case c == '{' || c == '[':
				if len(stack) >= maxJSONDepth {
					return doc, false, false
				}
				switch {
				case c == '{':
					stack = append(stack, '{')
					state = wantNameOrEnd
				case under:
					stack = append(stack, 'c')
					state = wantValueOrEnd
				default:
					stack = append(stack, '[')
					state = wantValueOrEnd
				}
				i++
				continue
			case c == '"':
				end := stringEnd(doc, i)
				if end < 0 {
					return doc, false, false
				}
				if under {
					replace(i, end+1)
				}
				i = end + 1
			case c == '-' || c >= '0' && c <= '9':
				end := numberEnd(doc, i)
				if end < 0 {
					return doc, false, false
				}
				if under {
					replace(i, end)
				}
				i = end
			case c == 't':
				if i = literalEnd(doc, i, "true"); i < 0 {
					return doc, false, false
				}
			case c == 'f':
				if i = literalEnd(doc, i, "false"); i < 0 {
					return doc, false, false
				}
			case c == 'n':
				if i = literalEnd(doc, i, "null"); i < 0 {
					return doc, false, false
				}
			default:
				return doc, false, false
			}
			state = after()
		case wantNameOrEnd, wantName:
			if c == '}' && state == wantNameOrEnd {
				stack = stack[:len(stack)-1]
				i++
				state = after()
				continue
			}
			if c != '"' {
				return doc, false, false
			}
			end := stringEnd(doc, i)
			if end < 0 {
				return doc, false, false
			}
			named = fields && nameIsCredential(doc, i, end)
			i = end + 1
			state = wantColon
		case wantColon:
			if c != ':' {
				return doc, false, false
			}
			i++
			state = wantValue
		case wantCommaOrEnd:
			top := stack[len(stack)-1]
			switch {
			case c == ',' && top == '{':
				state = wantName
			case c == ',':
				state = wantValue
			case c == '}' && top == '{', c == ']' && top != '{':
				stack = stack[:len(stack)-1]
				state = after()
			default:
				return doc, false, false
			}
			i++
		default: // wantNothing
			return doc, false, false
		}
	}
	if state != wantNothing {
		return doc, false, false
	}
	if out == nil {
		return doc, false, true
	}
	return append(out, doc[last:]...), true, true
}

// stringEnd returns the index of the quote that closes the string literal
// opening at doc[i], or -1 when the literal is not valid JSON in valid
// UTF-8 (a control character, an unknown escape, a byte sequence that is
// no UTF-8, no closing quote).
func stringEnd(doc []byte, i int) int {
	for j := i + 1; j < len(doc); {
		c := doc[j]
		switch {
		case c == '"':
			return j
		case c < 0x20:
			return -1
		case c == '\\':
			if j+1 >= len(doc) {
				return -1
			}
			switch doc[j+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				j += 2
			case 'u':
				if j+5 >= len(doc) || !ishex(doc[j+2]) || !ishex(doc[j+3]) || !ishex(doc[j+4]) || !ishex(doc[j+5]) {
					return -1
				}
				j += 6
			default:
				return -1
			}
		case c < utf8.RuneSelf:
			j++
		default:
			r, n := utf8.DecodeRune(doc[j:])
			if r == utf8.RuneError && n == 1 {
				return -1
			}
			j += n
		}
	}
	return -1
}

// numberEnd returns the index just past the JSON number starting at
// doc[i] (-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?), or -1 when none
// starts there.
func numberEnd(doc []byte, i int) int {
	digits := func(j int) int {
		for j < len(doc) && doc[j] >= '0' && doc[j] <= '9' {
			j++
		}
		return j
	}
	if doc[i] == '-' {
		i++
	}
	switch {
	case i >= len(doc):
		return -1
	case doc[i] == '0':
		i++
	case doc[i] >= '1' && doc[i] <= '9':
		i = digits(i + 1)
	default:
		return -1
	}
	if i < len(doc) && doc[i] == '.' {
		j := digits(i + 1)
		if j == i+1 {
			return -1
		}
		i = j
	}
	if i < len(doc) && (doc[i] == 'e' || doc[i] == 'E') {
		i++
		if i < len(doc) && (doc[i] == '+' || doc[i] == '-') {
			i++
		}
		j := digits(i)
		if j == i {
			return -1
		}
		i = j
	}
	return i
}

// literalEnd returns the index just past lit at doc[i], or -1 when doc
// does not hold lit there.
func literalEnd(doc []byte, i int, lit string) int {
	if len(doc)-i < len(lit) || string(doc[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}
