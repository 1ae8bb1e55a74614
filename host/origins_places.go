package host

import (
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// places are where the keys of an origins file are written, by key path
// (placeKey). BurntSushi/toml keeps them (MetaData.keyInfo) but does not
// export them, so they are found here, in a file that toml.Decode has
// accepted: a scan of TOML's few forms (table headers, dotted and quoted
// keys, the four kinds of strings, arrays, inline tables) that only needs
// to find where each key and value starts. A key it does not find (there
// should be none) is reported at its table's place.
type places struct {
	at    map[string]place
	lines []int // the offset at which each line starts
}

// place is where a key is written (line and column of its name, 1-based,
// columns in bytes) and where its value starts (for a table: its header's
// "[").
type place struct{ line, col, vline, vcol int }

// placeKey is the key of path in places.at.
func placeKey(path []string) string { return strings.Join(path, "\x00") }

// locate finds the places of text's keys.
func locate(text string) places {
	p := places{at: map[string]place{}, lines: []int{0}}
	for i := 0; i < len(text); i++ {
		if text[i] == '\n' {
			p.lines = append(p.lines, i+1)
		}
	}
	s := &scan{text: text, p: &p}
	s.document()
	return p
}

// lineCol is the line and column (1-based, in bytes) of offset i.
func (p places) lineCol(i int) (int, int) {
	n := sort.Search(len(p.lines), func(l int) bool { return p.lines[l] > i }) // lines starting after i
	if n == 0 {
		return 1, i + 1
	}
	return n, i - p.lines[n-1] + 1
}

// find is the place of path, or of the closest of its tables that has
// one, and whether it is path's own.
func (p places) find(path []string) (place, bool) {
	for n := len(path); n > 0; n-- {
		if pl, ok := p.at[placeKey(path[:n])]; ok {
			return pl, n == len(path)
		}
	}
	return place{line: 1, col: 1, vline: 1, vcol: 1}, false
}

// scan reads a TOML document that is known to be valid. It gives up (ok
// false) at anything it does not expect, keeping the places found.
type scan struct {
	text string
	i    int
	p    *places
	ok   bool
}

func (s *scan) document() {
	s.ok = true
	var table []string
	for s.ok {
		s.blank(true)
		if s.i >= len(s.text) {
			return
		}
		if s.text[s.i] == '[' {
			start := s.i
			open, close := "[", "]"
			if strings.HasPrefix(s.text[s.i:], "[[") {
				open, close = "[[", "]]"
			}
			s.i += len(open)
			parts, at := s.key()
			s.blank(false)
			if !s.ok || !strings.HasPrefix(s.text[s.i:], close) {
				return
			}
			s.i += len(close)
			table = parts
			s.record(nil, parts, at, start)
		} else {
			s.keyValue(table)
		}
		s.blank(false) // a comment may end the line
		if s.i < len(s.text) && s.text[s.i] != '\n' && s.text[s.i] != '\r' {
			return
		}
	}
}

// record notes the places of base+parts[:n], each at at[n-1], the last
// with its value at offset value; the first place found of a key is kept
// (a table defined implicitly, then by its header, is where first named).
func (s *scan) record(base, parts []string, at []int, value int) {
	for n := 1; n <= len(parts); n++ {
		k := placeKey(append(append([]string(nil), base...), parts[:n]...))
		line, col := s.p.lineCol(at[n-1])
		vline, vcol := line, col
		if n == len(parts) {
			vline, vcol = s.p.lineCol(value)
		}
		if _, ok := s.p.at[k]; !ok {
			s.p.at[k] = place{line: line, col: col, vline: vline, vcol: vcol}
		}
	}
}

// keyValue reads key = value in the table base.
func (s *scan) keyValue(base []string) {
	parts, at := s.key()
	s.blank(false)
	if !s.ok || s.i >= len(s.text) || s.text[s.i] != '=' {
		s.ok = false
		return
	}
	s.i++
	s.blank(false)
	s.record(base, parts, at, s.i)
	s.value(append(append([]string(nil), base...), parts...))
}

// key reads a dotted key: its parts and the offset of each.
func (s *scan) key() ([]string, []int) {
	var parts []string
	var at []int
	for s.ok {
		s.blank(false)
		if s.i >= len(s.text) {
			s.ok = false
			break
		}
		at = append(at, s.i)
		switch s.text[s.i] {
		case '"':
			parts = append(parts, s.basic())
		case '\'':
			parts = append(parts, s.literal())
		default:
			start := s.i
			for s.i < len(s.text) && bare(s.text[s.i]) {
				s.i++
			}
			if s.i == start {
				s.ok = false
			}
			parts = append(parts, s.text[start:s.i])
		}
		s.blank(false)
		if s.i >= len(s.text) || s.text[s.i] != '.' {
			break
		}
		s.i++
	}
	return parts, at
}

func bare(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// value reads the value of the key at path: inline tables' keys are
// recorded under it.
func (s *scan) value(path []string) {
	if s.i >= len(s.text) {
		s.ok = false
		return
	}
	switch {
	case strings.HasPrefix(s.text[s.i:], `"""`), strings.HasPrefix(s.text[s.i:], `'''`):
		s.multiline(s.text[s.i])
	case s.text[s.i] == '"':
		s.basic()
	case s.text[s.i] == '\'':
		s.literal()
	case s.text[s.i] == '[':
		s.i++
		for s.ok {
			s.blank(true)
			if s.i >= len(s.text) {
				s.ok = false
				return
			}
			if s.text[s.i] == ']' {
				s.i++
				return
			}
			s.value(path)
			s.blank(true)
			if s.i < len(s.text) && s.text[s.i] == ',' {
				s.i++
			}
		}
	case s.text[s.i] == '{':
		s.i++
		for s.ok {
			s.blank(false)
			if s.i >= len(s.text) {
				s.ok = false
				return
			}
			if s.text[s.i] == '}' {
				s.i++
				return
			}
			s.keyValue(path)
			s.blank(false)
			if s.i < len(s.text) && s.text[s.i] == ',' {
				s.i++
			}
		}
	default: // a number, a boolean, a date: up to what may follow a value
		start := s.i
		for s.i < len(s.text) && !strings.ContainsRune(",]}#\r\n", rune(s.text[s.i])) {
			s.i++
		}
		if s.i == start {
			s.ok = false
		}
	}
}

// blank skips spaces and tabs, and comments; with lines, line ends too.
func (s *scan) blank(lines bool) {
	for s.i < len(s.text) {
		switch c := s.text[s.i]; {
		case c == ' ' || c == '\t':
			s.i++
		case c == '#':
			for s.i < len(s.text) && s.text[s.i] != '\n' {
				s.i++
			}
		case lines && (c == '\n' || c == '\r'):
			s.i++
		default:
			return
		}
	}
}

// basic reads a "basic string" and returns its value.
func (s *scan) basic() string {
	var b strings.Builder
	for s.i++; s.i < len(s.text); {
		c := s.text[s.i]
		switch {
		case c == '"':
			s.i++
			return b.String()
		case c == '\\' && s.i+1 < len(s.text):
			b.WriteString(s.escape())
		default:
			b.WriteByte(c)
			s.i++
		}
	}
	s.ok = false
	return b.String()
}

// The escapes of a basic string: those that stand for a character, and
// the number of hexadecimal digits of those that give its code (\e and
// \xHH are TOML 1.1's).
var (
	escapes   = map[byte]string{'b': "\b", 't': "\t", 'n': "\n", 'f': "\f", 'r': "\r", 'e': "\x1b", '"': `"`, '\\': `\`}
	hexDigits = map[byte]int{'x': 2, 'u': 4, 'U': 8}
)

// escape reads the escape sequence at s.i and returns what it stands for.
func (s *scan) escape() string {
	c := s.text[s.i+1]
	s.i += 2
	if r, ok := escapes[c]; ok {
		return r
	}
	n := hexDigits[c]
	if n == 0 || s.i+n > len(s.text) {
		s.ok = false
		return ""
	}
	v, err := strconv.ParseUint(s.text[s.i:s.i+n], 16, 32)
	s.i += n
	if err != nil {
		s.ok = false
		return ""
	}
	if c == 'x' {
		return string(rune(v))
	}
	return string(utf8.AppendRune(nil, rune(v)))
}

// literal reads a 'literal string' and returns its value.
func (s *scan) literal() string {
	start := s.i + 1
	end := strings.IndexByte(s.text[start:], '\'')
	if end < 0 {
		s.ok = false
		s.i = len(s.text)
		return ""
	}
	s.i = start + end + 1
	return s.text[start : start+end]
}

// multiline reads a multi-line string, from its three quotes (q) to the
// next three not escaped, which may be followed by up to two more (quotes
// ending the string's value).
func (s *scan) multiline(q byte) {
	delim := strings.Repeat(string(q), 3)
	for s.i += 3; s.i < len(s.text); {
		if q == '"' && s.text[s.i] == '\\' {
			s.i += 2
			continue
		}
		if strings.HasPrefix(s.text[s.i:], delim) {
			n := 3
			for n < 5 && s.i+n < len(s.text) && s.text[s.i+n] == q {
				n++
			}
			s.i += n
			return
		}
		s.i++
	}
	s.ok = false
}
