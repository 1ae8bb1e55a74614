package host

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/internal/credential"
	"github.com/idemhttp/temporal-idempotent-http/internal/httpheader"
	"github.com/idemhttp/temporal-idempotent-http/internal/httpurl"
	"github.com/idemhttp/temporal-idempotent-http/internal/keyplace"
	"github.com/idemhttp/temporal-idempotent-http/internal/named"
	"github.com/idemhttp/temporal-idempotent-http/internal/redact"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// originsFile is the TOML file worker --origins reads (ORIGINS_FILE): one
// [origin."ORIGIN"] table per origin the worker may call, and the global
// [admission] table. See docs/credentials.md. A key's example tag is the
// value its errors show (a string's without its quotes).
type originsFile struct {
	Admission *admissionTable        `toml:"admission"`
	Origin    map[string]originTable `toml:"origin"`
}

// originTable is one [origin."ORIGIN"] table.
type originTable struct {
	// Convention is a preset (--convention's PRESET); KeyHeader,
	// KeyQuoted and LongRunning are its modifiers.
	Convention string `toml:"convention" example:"stripe"`
	KeyHeader  string `toml:"key_header" example:"PayPal-Request-Id"`
	KeyQuoted  bool   `toml:"key_quoted" example:"true"`
	// KeyIn is activities.Convention.KeyIn: "body:PATH" or "query:NAME".
	KeyIn       string `toml:"key_in" example:"body:idempotency_key"`
	LongRunning string `toml:"long_running" example:"azure"`
	// Reconcile is activities.Convention.Reconcile, the table
	// [origin."ORIGIN".reconcile]: lookup and items, or at_most_once.
	Reconcile *reconcileTable `toml:"reconcile"`
	// Headers maps a header name to its value: a string (inline, only in
	// a private file), { env = "VAR", prefix = "Bearer " } or
	// { file = "/path" }.
	Headers map[string]any `toml:"headers"`
	OAuth2  *oauth2Table   `toml:"oauth2"`
	TLS     *tlsTable      `toml:"tls"`
	SigV4   *sigV4Table    `toml:"aws_sigv4"`
	// RetryRefused is activities.Credential.RetryRefused, e.g. "5m"
	// (default defaultRetryRefused; "0s": fail at the first refusal).
	RetryRefused *time.Duration `toml:"retry_refused" example:"5m"`
	// MaxRetryAfter is activities.Convention.MaxRetryAfter, e.g. "1h".
	MaxRetryAfter time.Duration `toml:"max_retry_after"`
	// Admission is the origin's own admission, laid over the worker's
	// (activities.Config.OriginAdmission): the keys of [admission].
	Admission *admissionTable `toml:"admission"`
}

// reconcileTable is an origin's [origin."ORIGIN".reconcile] table.
type reconcileTable struct {
	Lookup     string `toml:"lookup" example:"https://api.example.com/payments?client_reference={key}"`
	Items      string `toml:"items" example:"data"`
	AtMostOnce bool   `toml:"at_most_once" example:"true"`
}

// oauth2Table is an origin's [origin."ORIGIN".oauth2] table.
type oauth2Table struct {
	TokenURL         string            `toml:"token_url" example:"https://login.example.com/oauth2/token"`
	ClientID         string            `toml:"client_id" example:"treasury-worker"`
	ClientIDEnv      string            `toml:"client_id_env" example:"CLIENT_ID"`
	ClientSecret     string            `toml:"client_secret"`
	ClientSecretEnv  string            `toml:"client_secret_env" example:"CLIENT_SECRET"`
	ClientSecretFile string            `toml:"client_secret_file" example:"/run/secrets/client-secret"`
	Scopes           []string          `toml:"scopes" example:"[\"payments\"]"`
	Audience         string            `toml:"audience" example:"https://api.example.com"`
	EndpointParams   map[string]string `toml:"endpoint_params" example:"{ resource = \"payments\" }"`
	AuthStyle        string            `toml:"auth_style" example:"header"`
	// TLS is the token requests' own TLS (activities.Credential.TokenTLS):
	// cert_file and key_file both or neither, ca_file.
	TLS *tlsTable `toml:"tls"`
}

// tlsTable is an origin's [origin."ORIGIN".tls] table.
type tlsTable struct {
	CertFile string `toml:"cert_file" example:"/run/secrets/client.crt"`
	KeyFile  string `toml:"key_file" example:"/run/secrets/client.key"`
	CAFile   string `toml:"ca_file" example:"/run/secrets/ca.pem"`
}

// sigV4Table is an origin's [origin."ORIGIN".aws_sigv4] table.
type sigV4Table struct {
	Service string `toml:"service" example:"execute-api"`
	Region  string `toml:"region" example:"eu-west-1"`
	Profile string `toml:"profile" example:"payments"`
}

// originSettings is what an origins file gives activities.Config.
type originSettings struct {
	Origins     []string // canonical, sorted
	Conventions map[string]activities.Convention
	// Credentials are the origins' credentials, each naming its settings
	// by the file's keys in its errors (credential.Names).
	Credentials map[string]activities.Credential
	// OriginAdmission are the origins' own [origin."…".admission] tables,
	// laid over the worker's admission by admissions.
	OriginAdmission map[string]*admissionTable
	// admission is the file's [admission] table (nil: none).
	admission *admissionTable
	// Secrets are the secret values the file gave (inline, from the
	// environment or a client secret file), for the logger to redact.
	Secrets []string
}

// environ reads an environment variable; os.LookupEnv in the worker.
type environ func(name string) (string, bool)

// loadOrigins reads and checks the origins file at path. Its errors, and
// those of the credentials it returns (at activities.New and at run
// time), say where in the file (path:line:column), which key as written,
// and what to write; they quote no piece of a secret.
func loadOrigins(path string, env environ) (originSettings, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return originSettings{}, fmt.Errorf("--origins: %w", err)
	}
	// toml.Decode skips a byte order mark too: the offsets of its errors
	// count from after it.
	text := strings.TrimPrefix(string(raw), "\ufeff")
	l := &loader{path: path, env: env, places: locate(text)}
	var doc map[string]any
	if _, err := toml.Decode(text, &doc); err != nil {
		return originSettings{}, l.syntaxError(err)
	}
	if err := l.check(doc); err != nil {
		return originSettings{}, err
	}
	var f originsFile
	if _, err := toml.Decode(text, &f); err != nil {
		// check has refused what the types do not read.
		return originSettings{}, fmt.Errorf("--origins %s: %s", path, quoted.ReplaceAllString(err.Error(), `"…"`))
	}
	if err := l.admission(key{"admission"}, f.Admission); err != nil {
		return originSettings{}, err
	}
	if l.private, err = privateFile(path); err != nil {
		return originSettings{}, err
	}
	s := originSettings{Conventions: map[string]activities.Convention{}, Credentials: map[string]activities.Credential{}, OriginAdmission: map[string]*admissionTable{}, admission: f.Admission}
	first := map[string]string{} // canonical origin → the name of its first table
	for _, name := range l.inFileOrder(key{"origin"}, slices.Collect(maps.Keys(f.Origin))) {
		k := key{"origin", name}
		o, err := httpurl.ParseOrigin(name)
		if err != nil {
			return originSettings{}, l.fail(k, false, "%s: %v: write the origin as scheme://host[:port], e.g. [origin.\"https://api.stripe.com\"]", k.table(), err)
		}
		if other, twice := first[o]; twice {
			return originSettings{}, l.fail(k, false, "%s is the origin %s a second time (%s is at %s): give each origin one table", k.table(), o, key{"origin", other}.table(), l.at(key{"origin", other}, false))
		}
		first[o] = name
		s.Origins = append(s.Origins, o)
		if err := l.origin(&s, k, o, f.Origin[name]); err != nil {
			return originSettings{}, err
		}
	}
	slices.Sort(s.Origins)
	s.Secrets = l.secrets
	return s, nil
}

// loader reads one origins file's origins.
type loader struct {
	path    string
	env     environ
	places  places
	private bool // the file is 0600 or stricter and the worker's user owns it
	secrets []string
}

// key is a key of the origins file, by its path from the top:
// {"origin", "https://x.example", "oauth2", "token_url"}.
type key []string

// with is k's key named parts.
func (k key) with(parts ...string) key { return append(append(key(nil), k...), parts...) }

// origin is the name of the origin whose table holds k, or "".
func (k key) origin() string {
	if len(k) >= 2 && k[0] == "origin" {
		return k[1]
	}
	return ""
}

// String is k as written in its origin's table ("oauth2.token_url", or
// headers."X Key" with the quotes a key needs), or from the top outside
// one ("admission.max_wait").
func (k key) String() string {
	if k.origin() != "" && len(k) > 2 {
		return toml.Key(k[2:]).String()
	}
	return toml.Key(k).String()
}

// table is the header of k's table: [origin."https://x.example".oauth2].
func (k key) table() string { return "[" + toml.Key(k).String() + "]" }

// fail is an error about the key k, or its value: where it is written
// (where its table is, if it is not), the origin whose table holds it (an
// origin's own table is named by the message), and the message, which
// names k as written and says what to write.
func (l *loader) fail(k key, value bool, format string, args ...any) error {
	in := ""
	if o := k.origin(); o != "" && len(k) > 2 {
		in = fmt.Sprintf("origin %q: ", o)
	}
	return fmt.Errorf("--origins %s: %s%s", l.at(k, value), in, fmt.Sprintf(format, args...))
}

// at is where k, or its value, is written: FILE:LINE:COLUMN (its table's,
// if it is not written).
func (l *loader) at(k key, value bool) string {
	p, own := l.places.find(k)
	line, col := p.line, p.col
	if value && own {
		line, col = p.vline, p.vcol
	}
	return fmt.Sprintf("%s:%d:%d", l.path, line, col)
}

// inFileOrder sorts the names of the keys of table k as they come in the
// file: the first error found is the first in the file.
func (l *loader) inFileOrder(k key, names []string) []string {
	slices.SortFunc(names, func(a, b string) int {
		pa, _ := l.places.find(k.with(a))
		pb, _ := l.places.find(k.with(b))
		return cmp.Or(cmp.Compare(pa.line, pb.line), cmp.Compare(pa.col, pb.col), strings.Compare(a, b))
	})
	return names
}

// name is how credential errors name the key k: "tls.cert_file at
// FILE:LINE:COLUMN", or, not written, the table it would go in.
func (l *loader) name(k key) string {
	for n := len(k); n >= 2; n-- {
		p, own := l.places.find(k[:n])
		switch {
		case !own:
			continue
		case n == len(k):
			return fmt.Sprintf("%s at %s:%d:%d", k, l.path, p.line, p.col)
		}
		return fmt.Sprintf("%s (not set; %s is at %s:%d:%d)", k, k[:n].table(), l.path, p.line, p.col)
	}
	return fmt.Sprintf("%s (not set in %s)", k, l.path)
}

// written reports whether the key k is written in the file.
func (l *loader) written(k key) bool {
	_, own := l.places.find(k)
	return own
}

// syntaxError is err, toml.Decode's error for a file that is not TOML, as
// where (FILE:LINE:COLUMN), the key it came after, what is wrong and,
// where the problem is a known one, what to write. It quotes no piece of
// the file that could be a secret.
func (l *loader) syntaxError(err error) error {
	var pe toml.ParseError
	if !errors.As(err, &pe) {
		return fmt.Errorf("--origins %s: %s", l.path, quoted.ReplaceAllString(err.Error(), `"…"`))
	}
	line, col := l.places.lineCol(pe.Position.Start)
	// ParseError.Message is empty when the problem is an error of its own.
	problem := pe.Message
	if problem == "" {
		problem = strings.TrimPrefix(pe.Error(), fmt.Sprintf("toml: line %d: ", pe.Position.Line))
		problem = strings.TrimPrefix(problem, fmt.Sprintf("toml: line %d (last key %q): ", pe.Position.Line, pe.LastKey))
	}
	msg := quoted.ReplaceAllString(problem, `"…"`)
	// The examples name the key the problem came after, when it is one.
	example := "convention"
	if i := strings.LastIndexByte(pe.LastKey, '.'); i >= 0 && (toml.Key{pe.LastKey[i+1:]}).String() == pe.LastKey[i+1:] {
		example = pe.LastKey[i+1:]
	}
	for _, a := range syntaxAdvice {
		if strings.HasPrefix(problem, a.problem) {
			msg = a.says + ": " + strings.ReplaceAll(a.write, "{key}", example)
			break
		}
	}
	after := ""
	if pe.LastKey != "" {
		after = fmt.Sprintf(" (after the key %s)", pe.LastKey)
	}
	return fmt.Errorf("--origins %s:%d:%d: not TOML%s: %s", l.path, line, col, after, msg)
}

// syntaxAdvice says what is wrong, and what to write ({key}: the key the
// problem came after), for the problems toml.Decode finds
// (BurntSushi/toml's texts, by their start) that a person writing an
// origins file makes; any other is reported as it is.
var syntaxAdvice = []struct{ problem, says, write string }{
	{"expected value but found", "a value without quotes, or not a value", `write string values in double quotes, e.g. {key} = "…"`},
	{"unexpected EOF; expected value", "no value after =", `write the value, e.g. {key} = "…"`},
	{"expected a top-level item to end with a newline, comment, or EOF", "more after the value on its line", `quote the whole value, e.g. Authorization = "Bearer …" in a private file, or start a comment with #`},
	{"expected '.' or ']' to end table name", "the table's name is not closed", `close it with ], e.g. [origin."https://api.stripe.com"]`},
	{"expected end of table array name delimiter", "the table's name is not closed", `close it with ]], or write [origin."https://api.stripe.com"] for a table`},
	{"unexpected end of table name", "a table without a name", `name it, e.g. [origin."https://api.stripe.com"]`},
	{"unexpected table separator", "a table without a name", `name it, e.g. [origin."https://api.stripe.com"]`},
	{"strings cannot contain newlines", "a string not closed on its line", `close it with " on the same line, e.g. {key} = "…"`},
	{`unexpected EOF; expected '"'`, "a string not closed", `close it with ", e.g. {key} = "…"`},
	{`unexpected EOF; expected "'"`, "a string not closed", `close it with '`},
	{`unexpected EOF; expected '"""'`, "a multi-line string not closed", `close it with """`},
	{`unexpected EOF; expected "'''"`, "a multi-line string not closed", `close it with '''`},
	{"newlines not allowed within inline tables", "an inline table over several lines", `write it on one line, e.g. Authorization = { env = "API_KEY", prefix = "Bearer " }, or as a table of its own`},
	{"trailing comma not allowed in inline tables", "a comma before }", "remove it"},
	{"expected a comma or an inline table terminator", "an inline table not closed", `separate its keys with commas and close it with }, e.g. { env = "API_KEY", prefix = "Bearer " }`},
	{"expected a comma (',') or array terminator (']')", "a list not closed", `separate its items with commas and close it with ], e.g. scopes = ["payments", "refunds"]`},
	{"invalid escape in string", "a backslash that starts no escape", `write \\ for a backslash, or use single quotes, which keep backslashes: ca_file = 'C:\certs\ca.pem'`},
	{"expected '.' or '=', but got", "a key with a character keys do not have, or no =", `write key = value, and quote a key with other characters than letters, digits, _ and -, e.g. "X Api Key" = { env = "API_KEY" }`},
	{"unexpected '='", "a key missing before =", "write key = value"},
	{"Key '", "a key given twice, or both as a table and as a value", "keep one of them"},
	{"invalid datetime", "a date or time that is not one", `write a date as 2006-01-02, or quote the value if it is no date`},
}

// quoted matches what a TOML error quotes from the file: a value of 8
// bytes or more might be a piece of a secret.
var quoted = regexp.MustCompile(`"[^"]{8,}"|'[^']{8,}'`)

// shown is v, a value of the file, as an error may quote it: whole when
// it is shorter than a secret can be (8 bytes), else its start only (no
// piece of 8 bytes).
func shown(v string) string {
	if len(v) < 8 {
		return strconv.Quote(v)
	}
	return strconv.Quote(strings.ToValidUTF8(v[:5], "")+"…") + " (" + strconv.Itoa(len(v)) + " bytes)"
}

// shownPath is p, a file's path, as an error may quote it: whole when it
// has a directory, else as shown (it may be a secret written in its place).
func shownPath(p string) string {
	if strings.ContainsRune(p, '/') {
		return p
	}
	return shown(p)
}

// problem is a key (or its value) that check refuses, and why.
type problem struct {
	key   key
	value bool
	msg   string
}

// check refuses what the file's types do not read: a key that nothing
// reads (with the valid key it may be a typo of), a value of the wrong
// type, a duration that does not parse; the first of them in the file.
// doc is the file decoded as TOML.
//
// (It walks doc, not toml.MetaData.Undecoded: in BurntSushi/toml v1.4.0
// the keys of a table three levels deep share one array, so that every key
// of [origin."…".oauth2] reads as its last one, and a misspelled first key
// is never reported: BurntSushi/toml#417.)
func (l *loader) check(doc map[string]any) error {
	var found []problem
	walk(doc, reflect.TypeFor[originsFile](), nil, "", &found)
	if len(found) == 0 {
		return nil
	}
	p := slices.MinFunc(found, func(a, b problem) int {
		pa, pb := l.placeOf(a), l.placeOf(b)
		return cmp.Or(cmp.Compare(pa[0], pb[0]), cmp.Compare(pa[1], pb[1]))
	})
	return l.fail(p.key, p.value, "%s", p.msg)
}

// placeOf is the line and column p is reported at.
func (l *loader) placeOf(p problem) [2]int {
	pl, own := l.places.find(p.key)
	if p.value && own {
		return [2]int{pl.vline, pl.vcol}
	}
	return [2]int{pl.line, pl.col}
}

// walk checks that v, the value of the key k, is what the Go type t reads
// (example: the key's example value), adding what it is not to found.
func walk(v any, t reflect.Type, k key, example string, found *[]problem) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	wrong := func() {
		*found = append(*found, problem{k, true, fmt.Sprintf("%s: want %s, not %s%s", k, wanted(t), kindOf(v), eg(k, t, example))})
	}
	switch {
	case t == reflect.TypeFor[time.Duration]():
		s, ok := v.(string)
		if !ok {
			wrong()
		} else if _, err := time.ParseDuration(s); err != nil {
			*found = append(*found, problem{k, true, fmt.Sprintf("%s: %s is not a duration: write a number and its unit (ms, s, m or h) in double quotes%s", k, shown(s), eg(k, t, example))})
		}
	case t.Kind() == reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			wrong()
			return
		}
		for name, x := range m {
			if f, ok := fieldByTag(t, name); ok {
				walk(x, f.Type, k.with(name), f.Tag.Get("example"), found)
			} else {
				*found = append(*found, unknownKey(k.with(name), t))
			}
		}
	case t.Kind() == reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			wrong()
			return
		}
		for name, x := range m {
			walk(x, t.Elem(), k.with(name), "", found)
		}
	case t.Kind() == reflect.Slice:
		rv := reflect.ValueOf(v)
		if v == nil || rv.Kind() != reflect.Slice {
			wrong()
			return
		}
		for i := range rv.Len() {
			if !fits(rv.Index(i).Interface(), t.Elem()) {
				wrong()
				return
			}
		}
	case t.Kind() == reflect.Interface:
		// Read and checked where it is used (a header's value).
	default:
		if !fits(v, t) {
			wrong()
		}
	}
}

// fits reports whether v, a TOML value, is one the scalar type t reads.
func fits(v any, t reflect.Type) bool {
	switch v.(type) {
	case string:
		return t.Kind() == reflect.String
	case bool:
		return t.Kind() == reflect.Bool
	case int64:
		return t.Kind() == reflect.Int || t.Kind() == reflect.Float64
	case float64:
		return t.Kind() == reflect.Float64
	}
	return false
}

// wanted says what the Go type t reads, for an error.
func wanted(t reflect.Type) string {
	switch {
	case t == reflect.TypeFor[time.Duration]():
		return "a duration in double quotes"
	case t.Kind() == reflect.Slice:
		return "a list of " + map[reflect.Kind]string{reflect.String: "strings", reflect.Int: "whole numbers"}[t.Elem().Kind()]
	case t.Kind() == reflect.Struct, t.Kind() == reflect.Map:
		return "a table"
	}
	return map[reflect.Kind]string{reflect.String: "a string in double quotes", reflect.Bool: "true or false", reflect.Int: "a whole number", reflect.Float64: "a number"}[t.Kind()]
}

// kindOf says what TOML value v is, for an error (not the value: it could
// be a secret).
func kindOf(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case bool:
		return "true or false"
	case int64:
		return "a whole number"
	case float64:
		return "a number with a fraction"
	case map[string]any:
		return "a table"
	case []any, []map[string]any:
		return "a list"
	}
	return "a date or time"
}

// eg is what to write for the key k of type t, its example being example:
// ", e.g. key = value", or for a table its header.
func eg(k key, t reflect.Type, example string) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() == reflect.Struct || t.Kind() == reflect.Map && example == "" {
		return fmt.Sprintf(": write %s and its keys below it", k.table())
	}
	if example == "" {
		return ""
	}
	if t.Kind() == reflect.String || t == reflect.TypeFor[time.Duration]() {
		example = strconv.Quote(example)
	}
	return fmt.Sprintf(", e.g. %s = %s", toml.Key{k[len(k)-1]}, example)
}

// unknownKey is the problem of the key k, which the struct type t of its
// table does not have: the key it may be a typo of, and the valid keys.
func unknownKey(k key, t reflect.Type) problem {
	valid := tags(t)
	msg := fmt.Sprintf("unknown key %s", k)
	if s := closest(k[len(k)-1], valid); s != "" {
		msg += fmt.Sprintf(": did you mean %s?", key(k[:len(k)-1]).with(s))
	} else if in := tableOf(t, k[len(k)-1]); in != "" {
		msg += fmt.Sprintf(": did you mean %s, in %s?", key(k[:len(k)-1]).with(in, k[len(k)-1]), key(k[:len(k)-1]).with(in).table())
	}
	in := "the top-level keys"
	if len(k) > 1 {
		in = "the keys of " + key(k[:len(k)-1]).table()
	}
	return problem{k, false, fmt.Sprintf("%s (%s are %s)", msg, in, and(valid))}
}

// tableOf is the key of the table of struct type t (one level down) that
// has a key name, or "".
func tableOf(t reflect.Type, name string) string {
	for f := range t.Fields() {
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if _, ok := fieldByTag(ft, name); ok {
			return f.Tag.Get("toml")
		}
	}
	return ""
}

// closest is the one of valid that name may be a typo of: the nearest in
// edit distance (case, - and _ aside), within 2 edits and less than half
// its length, or the one name is the first word of (or that starts name);
// "" if none.
func closest(name string, valid []string) string {
	norm := func(s string) string { return strings.ReplaceAll(strings.ToLower(s), "-", "_") }
	n := norm(name)
	best, bestD := "", 3
	for _, v := range valid {
		d := distance(n, norm(v))
		if d < bestD && 2*d < len(v) {
			best, bestD = v, d
		}
	}
	if best != "" {
		return best
	}
	for _, v := range valid {
		w := norm(v)
		if strings.HasPrefix(w, n+"_") || len(n) >= 3 && strings.HasPrefix(w, n) || len(w) >= 3 && strings.HasPrefix(n, w) {
			return v
		}
	}
	return ""
}

// distance is the optimal string alignment distance of a and b: the
// insertions, deletions, substitutions and swaps of neighbours that make
// one the other.
func distance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

// and lists names: "a", "a and b", "a, b and c".
func and(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// admission refuses, at its key, an [admission] value that
// activities.Admission.Validate refuses (each key alone, then min_rate
// with initial_rate), saying what to write.
func (l *loader) admission(at key, t *admissionTable) error {
	if s, ok := t.outOfRange(); ok {
		k := at.with(s.key...)
		off := "; off = true turns admission off"
		switch {
		case s.key[len(s.key)-1] == "throttles":
			off = ""
		case s.key[0] == "breaker":
			off = "; off = true in " + at.with("breaker").table() + " turns the breaker off"
		}
		return l.fail(k, true, "%s: out of range: %s%s%s", k, admissionAdvice(s.key[len(s.key)-1]), eg(k, s.field.Type, s.field.Tag.Get("example")), off)
	}
	if t.minAboveInitial() {
		return l.fail(at.with("min_rate"), true, "%s %g is above initial_rate %g: write a lowest rate at most the first", at.with("min_rate"), *t.MinRate, *t.InitialRate)
	}
	return nil
}

// admissionAdvice says what to write for the [admission] key name whose
// value is out of range.
func admissionAdvice(name string) string {
	switch name {
	case "failure_ratio":
		return "write a share above 0 and at most 1 (0 takes the default 0.5)"
	case "throttles":
		return "list HTTP error statuses from 400 to 599"
	}
	return "write a value of 0 or more (0 takes the default)"
}

// origin adds the settings of the table t of the origin o, at the key k,
// to s.
func (l *loader) origin(s *originSettings, k key, o string, t originTable) error {
	if t.Convention != "" || t.KeyHeader != "" || t.KeyQuoted || t.KeyIn != "" || t.Reconcile != nil || t.LongRunning != "" || t.MaxRetryAfter != 0 {
		c, err := l.convention(k, o, t)
		if err != nil {
			return err
		}
		s.Conventions[o] = c
	}
	if err := l.admission(k.with("admission"), t.Admission); err != nil {
		return err
	}
	if t.Admission != nil {
		s.OriginAdmission[o] = t.Admission
	}
	var cred activities.Credential
	var err error
	if cred.Header, cred.HeaderFiles, err = l.headers(k.with("headers"), t.Headers); err != nil {
		return err
	}
	if t.OAuth2 != nil {
		if cred.OAuth2, err = l.oauth2(k.with("oauth2"), *t.OAuth2); err != nil {
			return err
		}
		if t.OAuth2.ClientSecretFile != "" {
			// Read again by the activity when it changes (checked here
			// so that a missing file is reported with its key).
			cred.ClientSecretFile, cred.OAuth2.ClientSecret = t.OAuth2.ClientSecretFile, ""
		}
		if tt := t.OAuth2.TLS; tt != nil {
			if (tt.CertFile == "") != (tt.KeyFile == "") {
				return l.fail(k.with("oauth2", "tls"), false, `oauth2.tls: cert_file and key_file go together (the token endpoint's client certificate and its key), or leave both out for none: e.g. tls = { cert_file = "/run/secrets/login.crt", key_file = "/run/secrets/login.key" }`)
			}
			cred.TokenTLS = &activities.TLSFiles{CertFile: tt.CertFile, KeyFile: tt.KeyFile, CAFile: tt.CAFile}
		}
	}
	if t.TLS != nil {
		if t.TLS.CertFile == "" || t.TLS.KeyFile == "" {
			return l.fail(k.with("tls"), false, `tls: cert_file and key_file are both required: write the PEM files' paths, e.g. tls = { cert_file = "/run/secrets/bank.crt", key_file = "/run/secrets/bank.key" }`)
		}
		cred.CertFile, cred.KeyFile, cred.CAFile = t.TLS.CertFile, t.TLS.KeyFile, t.TLS.CAFile
	}
	if t.SigV4 != nil {
		if cred.SigV4, err = l.sigV4(k.with("aws_sigv4"), *t.SigV4); err != nil {
			return err
		}
	}
	cred.RetryRefused = defaultRetryRefused
	if t.RetryRefused != nil {
		if *t.RetryRefused < 0 {
			return l.fail(k.with("retry_refused"), true, "retry_refused = %q: write how long a refused credential is asked again, e.g. retry_refused = \"5m\", or \"0s\" to fail at the first refusal", t.RetryRefused.String())
		}
		cred.RetryRefused = *t.RetryRefused
	}
	if c := cred; !reflect.ValueOf(func() activities.Credential { c.RetryRefused = 0; return c }()).IsZero() {
		s.Credentials[o] = l.named(k, cred, t)
	}
	return nil
}

// defaultRetryRefused is how long a call asks again for a credential its
// origin or token endpoint refused (activities.Credential.RetryRefused)
// when the origin's table does not say: minutes for an operator to fix
// the file, not so long that a business workflow waits in silence.
const defaultRetryRefused = 5 * time.Minute

// credentialFields names the fields of activities.Credential an origin's
// table sets by the keys that set them (the first named when none is
// written), for the credential's errors.
var credentialFields = []struct {
	field string
	keys  []string
}{
	{"OAuth2", []string{"oauth2"}},
	{"OAuth2.TokenURL", []string{"oauth2.token_url"}},
	{"OAuth2.ClientID", []string{"oauth2.client_id", "oauth2.client_id_env"}},
	{"OAuth2.ClientSecret", []string{"oauth2.client_secret_env", "oauth2.client_secret", "oauth2.client_secret_file"}},
	{"ClientSecretFile", []string{"oauth2.client_secret_file"}},
	{"OAuth2.Scopes", []string{"oauth2.scopes"}},
	{"OAuth2.EndpointParams", []string{"oauth2.endpoint_params", "oauth2.audience"}},
	{"OAuth2.AuthStyle", []string{"oauth2.auth_style"}},
	{"TokenTLS", []string{"oauth2.tls"}},
	{"TokenTLS.CertFile", []string{"oauth2.tls.cert_file"}},
	{"TokenTLS.KeyFile", []string{"oauth2.tls.key_file"}},
	{"TokenTLS.CAFile", []string{"oauth2.tls.ca_file"}},
	{"CertFile", []string{"tls.cert_file"}},
	{"KeyFile", []string{"tls.key_file"}},
	{"CAFile", []string{"tls.ca_file"}},
	{"SigV4", []string{"aws_sigv4"}},
	{"SigV4.Service", []string{"aws_sigv4.service"}},
	{"SigV4.Region", []string{"aws_sigv4.region"}},
	{"SigV4.Credentials", []string{"aws_sigv4.profile"}},
}

// nameCredential sets the names a credential's errors give its settings
// (activities registers it: it is no part of the package's API).
type nameCredential = func(activities.Credential, credential.Names) activities.Credential

// named is cred, read from the table t of the origin at k, naming its
// settings in its errors by the file's keys, where they are written.
func (l *loader) named(k key, cred activities.Credential, t originTable) activities.Credential {
	n := credential.Names{Credential: fmt.Sprintf("--origins %s: origin %q", l.path, k.origin()), Fields: map[string]string{}}
	for _, f := range credentialFields {
		var names []string
		for _, rel := range f.keys {
			if fk := k.with(strings.Split(rel, ".")...); l.written(fk) {
				names = append(names, l.name(fk))
			}
		}
		switch table := k.with(strings.Split(f.keys[0], ".")[0]); {
		case len(names) > 0:
			n.Fields[f.field] = strings.Join(names, " and ")
		case l.written(table): // not set, in a table that is
			n.Fields[f.field] = l.name(k.with(strings.Split(f.keys[0], ".")...))
		}
	}
	n.Fields["RetryRefused"] = "retry_refused (default " + defaultRetryRefused.String() + ")"
	if rk := k.with("retry_refused"); l.written(rk) {
		n.Fields["RetryRefused"] = l.name(rk)
	}
	for name := range t.Headers {
		hk := k.with("headers", name)
		n.Fields["Header["+http.CanonicalHeaderKey(name)+"]"] = l.name(hk)
		n.Fields["HeaderFiles["+name+"]"] = l.name(hk)
	}
	set, ok := named.Lookup[nameCredential]("credential-names")
	if !ok {
		return cred // the Go fields' names, then
	}
	return set(cred, n)
}

// convention is the convention the table t of the origin o at k names,
// as --convention would read ORIGIN=PRESET[+quoted][+LONG-RUNNING][:KEY-HEADER].
func (l *loader) convention(k key, o string, t originTable) (activities.Convention, error) {
	preset := t.Convention
	if preset == "" {
		preset = "ietf"
	}
	p, ok := named.Lookup[conventionPreset](preset)
	if !ok {
		return activities.Convention{}, l.fail(k.with("convention"), true, "convention = %s: want %s (and key_header = \"PayPal-Request-Id\", say, for another key header)", shown(t.Convention), named.OneOf[conventionPreset]())
	}
	c := p()
	if t.LongRunning != "" {
		lro, ok := named.Lookup[longRunningPreset](t.LongRunning)
		if !ok {
			return c, l.fail(k.with("long_running"), true, "long_running = %s: want %s, or leave it out for a 202 with Location", shown(t.LongRunning), named.OneOf[longRunningPreset]())
		}
		c.LongRunning = lro(o)
	}
	if t.KeyHeader != "" {
		h := http.CanonicalHeaderKey(t.KeyHeader)
		switch {
		case !httpheader.ValidName(h):
			return c, l.fail(k.with("key_header"), true, "key_header = %s: not a header name: write the name of the header the server reads the key from, e.g. key_header = \"PayPal-Request-Id\"", shown(t.KeyHeader))
		case redact.IsCredential(h):
			return c, l.fail(k.with("key_header"), true, "key_header = %q: a header named like a credential: the key is written to Temporal's history and logged; write the header the server reads the key from, e.g. key_header = \"PayPal-Request-Id\"", h)
		}
		c.KeyHeader = t.KeyHeader
	}
	c.KeyQuoted = t.KeyQuoted
	if t.KeyIn != "" {
		place, err := keyplace.Parse(t.KeyIn)
		if err != nil {
			return c, l.fail(k.with("key_in"), true, "key_in = %q: %v", t.KeyIn, err)
		}
		if place.In == keyplace.Header && t.KeyHeader != "" {
			return c, l.fail(k.with("key_in"), true, "key_in = %s and key_header = %s both name the key's header: keep one", shown(t.KeyIn), shown(t.KeyHeader))
		}
		c.KeyIn = t.KeyIn
	}
	if r := t.Reconcile; r != nil {
		c.Reconcile = workflows.Reconcile{Lookup: r.Lookup, Items: r.Items, AtMostOnce: r.AtMostOnce}
		if err := c.Reconcile.Validate("reconcile", o); err != nil {
			return c, l.fail(k.with("reconcile"), false, "%s: %v", k.with("reconcile"), err)
		}
		place, _ := keyplace.Parse(c.KeyIn)
		if err := c.Reconcile.CheckPlace("reconcile", place); err != nil {
			return c, l.fail(k.with("reconcile"), false, "%s: %v (key_in = \"body:client_reference\", say)", k.with("reconcile"), err)
		}
	}
	if t.MaxRetryAfter < 0 {
		return c, l.fail(k.with("max_retry_after"), true, "max_retry_after = %q: write the longest Retry-After of this origin to honour, e.g. max_retry_after = \"1h\", or leave it out for the worker's --max-retry-after", t.MaxRetryAfter.String())
	}
	c.MaxRetryAfter = t.MaxRetryAfter
	return c, nil
}

// headers reads the headers table t of an origin, at k: static values into
// Header, { file = … } into HeaderFiles.
func (l *loader) headers(k key, t map[string]any) (http.Header, map[string]string, error) {
	var h http.Header
	var files map[string]string
	seen := map[string]string{} // canonical name → the key that set it
	for _, name := range l.inFileOrder(k, slices.Collect(maps.Keys(t))) {
		hk := k.with(name)
		canon := http.CanonicalHeaderKey(name)
		if !httpheader.ValidName(canon) {
			return nil, nil, l.fail(hk, false, "%s: not a header name: write the name the server reads, e.g. headers.X-Api-Key or headers.Authorization", hk)
		}
		if other, twice := seen[canon]; twice {
			return nil, nil, l.fail(hk, false, "%s: the header %s a second time (%s is at %s): give each header one value", hk, canon, k.with(other), l.at(k.with(other), false))
		}
		seen[canon] = name
		switch v := t[name].(type) {
		case string:
			if err := l.inline(hk, `{ env = "VAR", prefix = "Bearer " } or { file = "/run/secrets/NAME" }`); err != nil {
				return nil, nil, err
			}
			h = addHeader(h, name, v)
			l.secrets = append(l.secrets, v)
		case map[string]any:
			ref, err := l.headerRef(hk, v)
			if err != nil {
				return nil, nil, err
			}
			if ref.file != "" {
				if files == nil {
					files = map[string]string{}
				}
				files[name] = ref.file
				continue
			}
			val, err := l.getenv(hk.with("env"), ref.env, `{ file = "/run/secrets/NAME" } (a file that holds the whole value)`)
			if err != nil {
				return nil, nil, err
			}
			if err := httpheader.CheckValue(name, ref.prefix+val); err != nil {
				return nil, nil, l.fail(hk.with("env"), true, "%s: $%s: %v; fix the variable's value", hk, ref.env, err)
			}
			h = addHeader(h, name, ref.prefix+val)
			l.secrets = append(l.secrets, val)
		default:
			return nil, nil, l.fail(hk, true, `%s: want { env = "VAR", prefix = "Bearer " } or { file = "/run/secrets/NAME" }, not %s`, hk, kindOf(v))
		}
	}
	return h, files, nil
}

// headerValue is a header value by reference: { env, prefix } or { file }.
type headerValue struct{ env, prefix, file string }

// headerRef reads { env = …, prefix = … } or { file = … }, the value of
// the header at k.
func (l *loader) headerRef(k key, v map[string]any) (headerValue, error) {
	var r headerValue
	for _, name := range l.inFileOrder(k, slices.Collect(maps.Keys(v))) {
		s, ok := v[name].(string)
		switch {
		case name != "env" && name != "prefix" && name != "file":
			msg := fmt.Sprintf("%s: unknown key %s", k, toml.Key{name})
			if c := closest(name, []string{"env", "prefix", "file"}); c != "" {
				msg += fmt.Sprintf(": did you mean %s?", c)
			}
			return r, l.fail(k.with(name), false, "%s (the keys of a header's value are env, prefix and file)", msg)
		case !ok:
			return r, l.fail(k.with(name), true, "%s.%s: want a string in double quotes, not %s", k, name, kindOf(v[name]))
		case name == "env":
			r.env = s
		case name == "prefix":
			r.prefix = s
		case name == "file":
			r.file = s
		}
	}
	switch {
	case r.env != "" && r.file != "":
		return r, l.fail(k.with("file"), false, `%s: env and file both: write one, { env = "VAR", prefix = "Bearer " } or { file = "/run/secrets/NAME" }`, k)
	case r.env == "" && r.file == "":
		return r, l.fail(k, true, `%s: want one of env and file: { env = "VAR", prefix = "Bearer " } or { file = "/run/secrets/NAME" }`, k)
	case r.file != "" && r.prefix != "":
		return r, l.fail(k.with("prefix"), false, "%s: prefix goes with env only: the file holds the header's whole value (e.g. \"Bearer sk_live_…\")", k)
	}
	return r, nil
}

// oauth2 reads an origin's oauth2 table t, at k.
func (l *loader) oauth2(k key, t oauth2Table) (*clientcredentials.Config, error) {
	if t.TokenURL == "" {
		return nil, l.fail(k, false, `oauth2: token_url is required: write the token endpoint's URL, e.g. token_url = "https://api-m.paypal.com/v1/oauth2/token"`)
	}
	if u, err := url.Parse(t.TokenURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
		return nil, l.fail(k.with("token_url"), true, `oauth2.token_url = %s: not an http(s) URL without user information: write the token endpoint's URL, e.g. token_url = "https://api-m.paypal.com/v1/oauth2/token"`, shown(t.TokenURL))
	}
	c := &clientcredentials.Config{TokenURL: t.TokenURL, Scopes: t.Scopes}
	var err error
	switch {
	case t.ClientID != "" && t.ClientIDEnv != "":
		return nil, l.fail(k.with("client_id_env"), false, "oauth2: client_id and client_id_env both: write one")
	case t.ClientIDEnv != "":
		if c.ClientID, err = l.getenv(k.with("client_id_env"), t.ClientIDEnv, `client_id = "…" (a client ID is no secret)`); err != nil {
			return nil, err
		}
	case t.ClientID == "":
		return nil, l.fail(k, false, `oauth2: client_id is required: write client_id = "…" or client_id_env = "VAR"`)
	default:
		c.ClientID = t.ClientID
	}
	if c.ClientSecret, err = l.clientSecret(k, t); err != nil {
		return nil, err
	}
	l.secrets = append(l.secrets, c.ClientSecret)
	styles := map[string]oauth2.AuthStyle{"": oauth2.AuthStyleAutoDetect, "auto": oauth2.AuthStyleAutoDetect, "header": oauth2.AuthStyleInHeader, "params": oauth2.AuthStyleInParams}
	style, ok := styles[t.AuthStyle]
	if !ok {
		return nil, l.fail(k.with("auth_style"), true, `oauth2.auth_style = %s: want "header" (HTTP Basic), "params" (in the body) or "auto" (the default)`, shown(t.AuthStyle))
	}
	c.AuthStyle = style
	if t.Audience != "" || len(t.EndpointParams) > 0 {
		c.EndpointParams = url.Values{}
		for k, v := range t.EndpointParams {
			c.EndpointParams.Set(k, v)
		}
		if t.Audience != "" {
			c.EndpointParams.Set("audience", t.Audience)
		}
	}
	return c, nil
}

// clientSecret reads the client secret from exactly one of client_secret
// (inline), client_secret_env and client_secret_file of the oauth2 table t
// at k.
func (l *loader) clientSecret(k key, t oauth2Table) (string, error) {
	var given []string
	for _, g := range []struct{ key, v string }{{"client_secret", t.ClientSecret}, {"client_secret_env", t.ClientSecretEnv}, {"client_secret_file", t.ClientSecretFile}} {
		if g.v != "" {
			given = append(given, g.key)
		}
	}
	switch {
	case len(given) == 0:
		return "", l.fail(k, false, `oauth2: no client secret: write client_secret_env = "VAR" or client_secret_file = "/run/secrets/NAME" (client_secret inline only in a file of mode 0600)`)
	case len(given) > 1:
		last := l.inFileOrder(k, given)[len(given)-1]
		return "", l.fail(k.with(last), false, "oauth2: %s both: write one", and(given))
	case t.ClientSecretEnv != "":
		return l.getenv(k.with("client_secret_env"), t.ClientSecretEnv, `client_secret_file = "/run/secrets/NAME"`)
	case t.ClientSecretFile != "":
		b, err := os.ReadFile(t.ClientSecretFile)
		var pe *os.PathError
		if errors.As(err, &pe) {
			// The path as a path may be quoted; a secret written in its
			// place may not.
			return "", l.fail(k.with("client_secret_file"), true, "oauth2.client_secret_file: %s %s: %v: write the path of a file that holds the client secret", pe.Op, shownPath(t.ClientSecretFile), pe.Err)
		} else if err != nil {
			return "", l.fail(k.with("client_secret_file"), true, "oauth2.client_secret_file: %v: write the path of a file that holds the client secret", err)
		}
		if s := strings.TrimSpace(string(b)); s != "" {
			return s, nil
		}
		return "", l.fail(k.with("client_secret_file"), true, "oauth2.client_secret_file: %s is empty: write the client secret in it", shownPath(t.ClientSecretFile))
	}
	return t.ClientSecret, l.inline(k.with("client_secret"), `client_secret_env = "VAR" or client_secret_file = "/run/secrets/NAME"`)
}

// sigV4 reads an origin's aws_sigv4 table t, at k.
func (l *loader) sigV4(k key, t sigV4Table) (*activities.SigV4, error) {
	if t.Service == "" || t.Region == "" {
		return nil, l.fail(k, false, `aws_sigv4: service and region are required, e.g. aws_sigv4 = { service = "execute-api", region = "eu-west-1" }`)
	}
	s := &activities.SigV4{Service: t.Service, Region: t.Region}
	if t.Profile != "" {
		cfg, err := awsconfig.LoadDefaultConfig(context.Background(), awsconfig.WithSharedConfigProfile(t.Profile))
		if err != nil {
			return nil, l.fail(k.with("profile"), true, "aws_sigv4.profile = %q: %v: name a profile of the shared AWS config or credentials file (AWS_CONFIG_FILE, AWS_SHARED_CREDENTIALS_FILE), or leave profile out for the default chain", t.Profile, err)
		}
		s.Credentials = cfg.Credentials
	}
	return s, nil
}

// getenv reads the environment variable name that the key k names;
// instead is what may be written in its place.
func (l *loader) getenv(k key, name, instead string) (string, error) {
	v, ok := l.env(name)
	if v = strings.TrimSpace(v); !ok || v == "" {
		if !envName.MatchString(name) {
			// A secret written where its variable's name goes, maybe.
			return "", l.fail(k, true, "%s: the environment variable %s is not set (or empty): write the name of the variable that holds the value (the value goes in the worker's environment), e.g. %s = \"API_KEY\", or write %s instead", k, shown(name), toml.Key{k[len(k)-1]}, instead)
		}
		return "", l.fail(k, true, "%s: the environment variable %s is not set (or empty): set it in the worker's environment, or write %s instead", k, name, instead)
	}
	return v, nil
}

// envName matches the name of an environment variable as it is written
// conventionally: one an error may quote whole.
var envName = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`)

// inline refuses a secret written in the file, at k, unless only the
// worker's user can read the file; instead is what to write.
func (l *loader) inline(k key, instead string) error {
	if l.private {
		return nil
	}
	return l.fail(k, true, `%s is a secret written inline in a file that users other than the worker's may read (or that the worker's user does not own): write %s instead, or chmod 600 %s`, k, instead, l.path)
}

// privateFile reports whether path is readable and writable by its owner
// only (0600 or stricter) and the worker's user owns it.
func privateFile(path string) (bool, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return false, fmt.Errorf("--origins: %w", err)
	}
	return fi.Mode().Perm()&0o077 == 0 && ownedByMe(fi), nil
}

// apply sets the [admission] table's settings on a.
func (s originSettings) apply(a *activities.Admission) {
	s.admission.apply(a)
}

// admissions are the origins' own admissions: each origin's table laid
// over worker, the worker's (activities.Config.OriginAdmission).
func (s originSettings) admissions(worker activities.Admission) (map[string]activities.Admission, error) {
	if len(s.OriginAdmission) == 0 {
		return nil, nil
	}
	out := map[string]activities.Admission{}
	for _, o := range slices.Sorted(maps.Keys(s.OriginAdmission)) {
		a := worker
		a.Throttles = slices.Clone(worker.Throttles)
		s.OriginAdmission[o].apply(&a)
		if err := a.Validate(); err != nil && !a.Off {
			return nil, fmt.Errorf("origin %s: its [origin.%q.admission] laid over the worker's admission (flags, variables, [admission]) is out of range: %s", o, o,
				strings.TrimPrefix(strings.TrimPrefix(err.Error(), "Config.Admission"), ": "))
		}
		out[o] = a
	}
	return out, nil
}

// apply sets on a what t sets (nil: nothing), field by field of the same
// name.
func (t *admissionTable) apply(a *activities.Admission) {
	for _, s := range t.each() {
		dst := reflect.ValueOf(a).Elem()
		for _, name := range s.path {
			dst = dst.FieldByName(name)
		}
		if s.value.Kind() == reflect.Pointer {
			dst.Set(s.value.Elem())
		} else {
			dst.Set(s.value)
		}
	}
}

// tableSetting is one setting an admissionTable sets: its field, the
// field names from the table down to it (path: "Breaker", "OpenTime"),
// its key in the table ("breaker", "open_time") and its value.
type tableSetting struct {
	field reflect.StructField
	path  []string
	key   []string
	value reflect.Value
}

// each lists the settings t sets (a pointer or a list that is not nil),
// in the order they are declared.
func (t *admissionTable) each() []tableSetting {
	var out []tableSetting
	var walk func(v reflect.Value, path, key []string)
	walk = func(v reflect.Value, path, key []string) {
		for i, f := range reflectFields(v.Type()) {
			fv := v.Field(i)
			if fv.IsNil() {
				continue
			}
			p, k := append(slices.Clone(path), f.Name), append(slices.Clone(key), f.Tag.Get("toml"))
			if f.Type.Kind() == reflect.Pointer && f.Type.Elem().Kind() == reflect.Struct {
				walk(fv.Elem(), p, k)
				continue
			}
			out = append(out, tableSetting{field: f, path: p, key: k, value: fv})
		}
	}
	if t != nil {
		walk(reflect.ValueOf(t).Elem(), nil, nil)
	}
	return out
}

// set sets s on t, making the breaker's table when s is in it.
func (t *admissionTable) set(s tableSetting) {
	v := reflect.ValueOf(t).Elem()
	for _, name := range s.path[:len(s.path)-1] {
		f := v.FieldByName(name)
		if f.IsNil() {
			f.Set(reflect.New(f.Type().Elem()))
		}
		v = f.Elem()
	}
	v.FieldByName(s.path[len(s.path)-1]).Set(s.value)
}

// outOfRange is the first setting of t that activities.Admission.Validate
// refuses on its own, if any.
func (t *admissionTable) outOfRange() (tableSetting, bool) {
	for _, s := range t.each() {
		var only admissionTable
		only.set(s)
		var a activities.Admission
		only.apply(&a)
		if a.Validate() != nil {
			return s, true
		}
	}
	return tableSetting{}, false
}

// minAboveInitial reports whether t sets a min_rate above its
// initial_rate (both above 0: 0 takes the default).
func (t *admissionTable) minAboveInitial() bool {
	return t != nil && t.MinRate != nil && t.InitialRate != nil && *t.MinRate > 0 && *t.InitialRate > 0 && *t.MinRate > *t.InitialRate
}

// fieldByTag returns the field of struct type typ whose toml tag is name.
func fieldByTag(typ reflect.Type, name string) (reflect.StructField, bool) {
	if typ.Kind() != reflect.Struct {
		return reflect.StructField{}, false
	}
	for f := range typ.Fields() {
		if f.Tag.Get("toml") == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// tags lists the toml tags of struct type typ.
func tags(typ reflect.Type) []string {
	var out []string
	if typ.Kind() == reflect.Struct {
		for f := range typ.Fields() {
			out = append(out, f.Tag.Get("toml"))
		}
	}
	return out
}

func addHeader(h http.Header, name, v string) http.Header {
	if h == nil {
		h = http.Header{}
	}
	h.Add(name, v)
	return h
}
