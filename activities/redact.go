package activities

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/idemhttp/temporal-idempotent-http/internal/credential"
	"github.com/idemhttp/temporal-idempotent-http/internal/redact"
)

// redactor hides every piece of a credential: any run of bytes covered by
// an 8-byte (minCredentialBytes) window of a secret is replaced by
// "[REDACTED]". Matching windows rather than whole values also hides a
// prefix or suffix of a token that a server echoes, or one cut in two by a
// snippet. It implements credential.Redactor: the sources add the secrets
// they use (a header file's new value, a fetched token) while the worker
// runs. It is safe for concurrent use: readers use an immutable snapshot,
// which Add replaces (copy on write) only for a secret it does not know;
// for one it knows, Add is a map lookup.
type redactor struct {
	snap atomic.Pointer[redactSet]
	// mu serializes the writers.
	mu sync.Mutex
	// now is the clock of retention (time.Now).
	now func() time.Time
}

// redactSet is one snapshot of the secrets, never modified once published.
type redactSet struct {
	// windows counts, for each 8-byte window, the retained secrets
	// holding it (tokens share windows: a JWT's header), so that dropping
	// one secret keeps the windows of the others.
	windows map[uint64]int32
	// filter is a 64 Ki-bit prefilter of the windows' hashes; a dropped
	// secret's bits stay until stale says to rebuild it.
	filter []uint64
	stale  int
	// size is the secrets' total length.
	size int
	// secrets are the secrets, with when each was last added.
	secrets map[string]*lastAdded
}

// lastAdded is when a secret was last added, in Unix nanoseconds.
type lastAdded struct{ at atomic.Int64 }

// touchEvery is how stale a secret's last-added time may get before Add
// writes it again: known secrets are added with every request, and a write
// each time would make the cores contend for it.
const touchEvery = time.Minute

// maxRetainedBytes caps the bytes of the secrets kept (each byte is about
// one window): a source fetching 5-second tokens adds 17,280 a day. Beyond
// it the least recently added are dropped first, but never one added
// within inUse (a secret in use is added again at least every
// touchEvery): 512 KiB are 55 min of 800-byte JWTs fetched every 5 s, or
// 13 h of 54-byte opaque tokens, about 20 MB of windows. Each new secret
// costs a copy of the snapshot's maps (measured: 5-8 ms at the cap), not a
// rebuild.
var maxRetainedBytes = 512 << 10 // a variable for tests

const inUse = 2 * touchEvery

const redacted = "[REDACTED]"

var _ credential.Redactor = (*redactor)(nil)

func newRedactor(secrets []string) *redactor {
	r := &redactor{now: time.Now}
	r.snap.Store(&redactSet{})
	for _, s := range secrets {
		r.Add(s)
	}
	return r
}

// Add makes secret redacted from now on, and for at least
// credential.RetainFor after its last Add (unless maxRetainedBytes of
// secrets were added since). A secret shorter than minCredentialBytes is ignored
// (the sources refuse them).
func (r *redactor) Add(secret string) {
	if len(secret) < minCredentialBytes {
		return
	}
	now := r.now().UnixNano()
	if e, ok := r.snap.Load().secrets[secret]; ok {
		if now-e.at.Load() >= int64(touchEvery) {
			e.at.Store(now)
		}
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.snap.Load()
	if e, ok := old.secrets[secret]; ok {
		e.at.Store(now)
		return
	}
	next := &redactSet{windows: maps.Clone(old.windows), filter: slices.Clone(old.filter), stale: old.stale, size: old.size, secrets: maps.Clone(old.secrets)}
	if next.windows == nil {
		next.windows, next.filter, next.secrets = map[uint64]int32{}, make([]uint64, 1<<10), map[string]*lastAdded{}
	}
	e := &lastAdded{}
	e.at.Store(now)
	next.secrets[secret] = e
	next.size += len(secret)
	next.count(secret, 1)
	next.drop(now)
	r.snap.Store(next)
}

// count adds d to the count of each window of s.
func (r *redactSet) count(s string, d int32) {
	for i := 0; i+minCredentialBytes <= len(s); i++ {
		w := binary.LittleEndian.Uint64([]byte(s[i : i+8]))
		n := r.windows[w] + d
		switch {
		case n <= 0:
			delete(r.windows, w)
			r.stale++
		case d > 0:
			r.windows[w] = n
			h := filterBit(w)
			r.filter[h>>6] |= 1 << (h & 63)
		default:
			r.windows[w] = n
		}
	}
}

// forget removes secret s from a set not yet published.
func (r *redactSet) forget(s string) {
	delete(r.secrets, s)
	r.size -= len(s)
	r.count(s, -1)
}

// drop removes, from a set not yet published, the secrets not added for
// RetainFor, and the least recently added beyond maxRetainedBytes (none added
// within inUse); it rebuilds the filter once more windows were dropped
// than remain.
func (r *redactSet) drop(now int64) {
	var old []string
	for s, e := range r.secrets {
		if now-e.at.Load() >= int64(credential.RetainFor) {
			old = append(old, s)
		}
	}
	for _, s := range old {
		r.forget(s)
	}
	if r.size > maxRetainedBytes {
		type aged struct {
			s  string
			at int64
		}
		all := make([]aged, 0, len(r.secrets))
		for s, e := range r.secrets {
			all = append(all, aged{s, e.at.Load()})
		}
		slices.SortFunc(all, func(a, b aged) int { return cmp.Compare(a.at, b.at) })
		for _, a := range all {
			if r.size <= maxRetainedBytes || now-a.at < int64(inUse) {
				break
			}
			r.forget(a.s)
		}
	}
	if r.stale > len(r.windows) {
		clear(r.filter)
		for w := range r.windows {
			h := filterBit(w)
			r.filter[h>>6] |= 1 << (h & 63)
		}
		r.stale = 0
	}
}

func filterBit(w uint64) uint64 { return (w * 0x9e3779b97f4a7c15) >> 48 }

// The redactor's methods use its current snapshot.

func (r *redactor) next(b []byte, i int) int           { return r.snap.Load().next(b, i) }
func (r *redactor) bytes(b []byte) ([]byte, bool)      { return r.snap.Load().bytes(b) }
func (r *redactor) string(s string) string             { return r.snap.Load().string(s) }
func (r *redactor) json(b []byte) ([]byte, bool, bool) { return r.snap.Load().json(b) }
func (r *redactor) snippet(body []byte) string         { return r.snap.Load().snippet(body) }

// next returns the start of the first secret window at or after i in b, or -1.
func (r *redactSet) next(b []byte, i int) int {
	if len(r.windows) == 0 {
		return -1
	}
	for ; i+8 <= len(b); i++ {
		w := binary.LittleEndian.Uint64(b[i:])
		h := filterBit(w)
		if r.filter[h>>6]&(1<<(h&63)) == 0 {
			continue
		}
		if _, ok := r.windows[w]; ok {
			return i
		}
	}
	return -1
}

// bytes returns b with every secret run replaced, written as is or with
// percent-escapes (escaped), and whether anything was. b itself is never
// modified.
func (r *redactSet) bytes(b []byte) ([]byte, bool) {
	out, changed := r.literal(b)
	if e, ok := r.escaped(out); ok {
		return e, true
	}
	return out, changed
}

// literal is bytes for the secrets as written.
func (r *redactSet) literal(b []byte) ([]byte, bool) {
	i := r.next(b, 0)
	if i < 0 {
		return b, false
	}
	out := make([]byte, 0, len(b))
	last := 0
	for i >= 0 {
		start, end := i, i+8
		j := r.next(b, i+1)
		for j >= 0 && j <= end {
			end = j + 8
			j = r.next(b, j+1)
		}
		out = append(append(out, b[last:start]...), redacted...)
		last, i = end, j
	}
	return append(out, b[last:]...), true
}

// string is bytes for a string.
func (r *redactSet) string(s string) string {
	if len(r.windows) == 0 {
		return s
	}
	b, changed := r.bytes([]byte(s))
	if !changed {
		return s
	}
	return string(b)
}

// maxUnescapes is how many times escaped decodes a text: a secret escaped
// twice ("%2574" for "t") is found too.
const maxUnescapes = 3

// escaped returns b with every run of bytes whose percent-escapes,
// decoded once or up to maxUnescapes times, hold a secret's window
// replaced (a URL's "%74%6F%6B…" is the same bytes to whoever reads it),
// and whether there was one.
func (r *redactSet) escaped(b []byte) ([]byte, bool) {
	if bytes.IndexByte(b, '%') < 0 || !r.escapedHit(b) {
		return b, false
	}
	// cur is b decoded; cur[k] came from b[from[k]:to[k]].
	cur, from, to := b, []int(nil), []int(nil)
	var hide []bool
	for range maxUnescapes {
		var ok bool
		if cur, from, to, ok = unescapeOnce(cur, from, to); !ok {
			break
		}
		for i := r.next(cur, 0); i >= 0; i = r.next(cur, i+1) {
			if hide == nil {
				hide = make([]bool, len(b))
			}
			for k := from[i]; k < to[i+7]; k++ {
				hide[k] = true
			}
		}
	}
	if hide == nil {
		return b, false
	}
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); {
		if !hide[i] {
			out = append(out, b[i])
			i++
			continue
		}
		out = append(out, redacted...)
		for i < len(b) && hide[i] {
			i++
		}
	}
	return out, true
}

// escapedHit reports whether b's percent-escapes, decoded once or up to
// maxUnescapes times, hold a secret's window: escaped's test, which
// costs a copy of b a round, not escaped's offsets.
func (r *redactSet) escapedHit(b []byte) bool {
	for range maxUnescapes {
		out := make([]byte, 0, len(b))
		decoded := false
		for i := 0; i < len(b); i++ {
			if hi, lo := hexValue(b, i+1), hexValue(b, i+2); b[i] == '%' && hi >= 0 && lo >= 0 {
				out = append(out, byte(hi<<4|lo))
				i += 2
				decoded = true
				continue
			}
			out = append(out, b[i])
		}
		if !decoded {
			return false
		}
		if r.next(out, 0) >= 0 {
			return true
		}
		b = out
	}
	return false
}

// unescapeOnce decodes the percent-escapes of cur once; from and to say
// where each byte of cur came from in the original text (nil: cur is
// it), and the same for the result. ok is false when cur holds none.
func unescapeOnce(cur []byte, from, to []int) (out []byte, outFrom, outTo []int, ok bool) {
	src := func(k int) (int, int) {
		if from == nil {
			return k, k + 1
		}
		return from[k], to[k]
	}
	out, outFrom, outTo = make([]byte, 0, len(cur)), make([]int, 0, len(cur)), make([]int, 0, len(cur))
	for i := 0; i < len(cur); i++ {
		f, t := src(i)
		hi, lo := hexValue(cur, i+1), hexValue(cur, i+2)
		if cur[i] == '%' && hi >= 0 && lo >= 0 {
			_, t = src(i + 2)
			out = append(out, byte(hi<<4|lo))
			i += 2
			ok = true
		} else {
			out = append(out, cur[i])
		}
		outFrom, outTo = append(outFrom, f), append(outTo, t)
	}
	return out, outFrom, outTo, ok
}

// hexValue is the value of the hex digit b[i], or -1.
func hexValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch c := b[i]; {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// json redacts the JSON document b (valid: the caller checked it with
// json.Valid): the value of every member named like a
// credential (redact.Fields, the one rule for names), then secrets
// inside the string literals, keeping every other byte: the result is
// valid JSON whenever b is. ok is false when a secret stands outside any
// string (a token of digits written as a number): no safe redaction
// exists then, and out has only the named members redacted.
func (r *redactSet) json(b []byte) (out []byte, changed, ok bool) {
	b, changed = redact.ValidFields(b, redacted)
	return r.jsonStrings(b, changed)
}

// jsonStrings is json's second step, for b, a document whose named
// members are redacted already (changed: any was): the secrets inside
// its string literals.
func (r *redactSet) jsonStrings(b []byte, changed bool) (out []byte, _, ok bool) {
	if r.next(b, 0) < 0 && !bytes.Contains(b, []byte(`\`)) && (bytes.IndexByte(b, '%') < 0 || !r.escapedHit(b)) {
		return b, changed, true // no secret, and none hidden behind an escape
	}
	named := changed
	last, seg := 0, 0
	for i := 0; i < len(b); i++ {
		if b[i] != '"' {
			continue
		}
		if r.next(b[seg:i], 0) >= 0 {
			return b, named, false
		}
		end := redact.StringEnd(b, i)
		if end < 0 {
			return b, named, false
		}
		var s string
		if json.Unmarshal(b[i:end+1], &s) == nil {
			if red := r.string(s); red != s {
				out = append(append(out, b[last:i]...), encodeString(red)...)
				last, changed = end+1, true
			}
		}
		i, seg = end, end+1
	}
	if r.next(b[seg:], 0) >= 0 {
		return b, named, false
	}
	if out != nil {
		out = append(out, b[last:]...)
	} else {
		out = b
	}
	if r.next(out, 0) >= 0 {
		// A secret spans a string's quotes, or an escape as written (a
		// secret holding '"' or '\'): no safe redaction either.
		return b, named, false
	}
	return out, changed, true
}

func encodeString(s string) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// snippet returns the start of an error body for messages and details: the
// credentials redacted first (inside JSON strings too), then cut to at most
// errorBodyBytes at a character boundary, as valid UTF-8.
func (r *redactSet) snippet(body []byte) string {
	red, _ := r.bytes(body)
	if json.Valid(red) {
		// Where a secret stands outside a string, the bytes redacted
		// above stay, with the named members redacted.
		red, _, _ = r.json(red)
	} else if bytes.Contains(red, []byte(`\u`)) && r.next(unescapeU(red), 0) >= 0 {
		// Not a JSON document (cut at MaxResponseBytes, say), yet a
		// credential hides behind \uXXXX escapes: withhold the whole body.
		return "[body withheld: it holds an escaped credential]"
	}
	// Invalid bytes become U+FFFD (3 bytes each) before the cut, so that
	// the snippet stays within errorBodyBytes.
	s := strings.ToValidUTF8(string(red), "\uFFFD")
	if len(s) > errorBodyBytes {
		cut := errorBodyBytes
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut]
	}
	return strings.TrimSpace(s)
}

// unescapeU returns b with every \uXXXX escape replaced by its character,
// so that a credential written with escapes shows as itself.
func unescapeU(b []byte) []byte {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] == '\\' && i+5 < len(b) && b[i+1] == 'u' {
			if n, err := strconv.ParseUint(string(b[i+2:i+6]), 16, 32); err == nil {
				out = utf8.AppendRune(out, rune(n))
				i += 5
				continue
			}
		}
		out = append(out, b[i])
	}
	return out
}
