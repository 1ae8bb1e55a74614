package host

import (
	"cmp"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/internal/cliutil"
)

// A setting is declared once, as a field of settings (settings.go) or of
// a type it holds, by its tags:
//
//   - flag: the flag's name (none: the environment alone sets it, as
//     secrets are);
//   - env: the environment variable, which the flag replaces ("-": none);
//   - toml: its key in the origins file's [admission] tables (admission's
//     settings only);
//   - default: the default as --help and docs/settings.md show it; a
//     field starts at it, but a setting of the library's own (one with
//     a toml key, or a pointer) is unset until given, and the library's
//     default applies (TestSettingsDeclaredOnce checks that the two
//     agree);
//   - arg: the word of help that names the flag's argument in --help;
//   - help: what it does; {presets}, {modifiers} and {schemes} are the
//     names registered at run time;
//   - invert: a bool flag that sets the opposite of its field (--admission
//     on is [admission] off = false).
//
// The flags, the environment, the file's [admission] keys, --help and the
// docs' settings table all come from them.

// declared is one declared setting: its field's tags and its value.
type declared struct {
	field reflect.StructField
	v     reflect.Value
	// toml is the path of its key in an [admission] table, nil for none.
	toml []string
}

// flagName, envName and the rest read the declaration's tags.
func (d declared) flagName() string { return d.field.Tag.Get("flag") }

// name is the setting's name: its flag's, else its variable's.
func (d declared) name() string { return cmp.Or(d.flagName(), d.envName()) }

func (d declared) envName() string {
	if e := d.field.Tag.Get("env"); e != "-" {
		return e
	}
	return ""
}

// settingsOf lists the settings declared in the struct v points to, in
// the order of their fields, recursively.
func settingsOf(v reflect.Value) []declared {
	var out []declared
	var walk func(v reflect.Value, toml []string)
	walk = func(v reflect.Value, toml []string) {
		for i, f := range reflectFields(v.Type()) {
			fv := v.Field(i)
			key := toml
			if k := f.Tag.Get("toml"); k != "" {
				key = append(append([]string(nil), toml...), k)
			}
			inner := f.Type
			if inner.Kind() == reflect.Pointer {
				inner = inner.Elem()
			}
			if inner.Kind() == reflect.Struct && inner != reflect.TypeFor[time.Duration]() && f.Tag.Get("flag") == "" && f.Tag.Get("env") == "" {
				if fv.Kind() == reflect.Pointer {
					if fv.IsNil() {
						fv.Set(reflect.New(inner))
					}
					fv = fv.Elem()
				}
				walk(fv, key)
				continue
			}
			if f.Tag.Get("flag") == "" && f.Tag.Get("env") == "" {
				continue // not a setting
			}
			d := declared{field: f, v: fv}
			if f.Tag.Get("toml") != "" {
				d.toml = key
			}
			out = append(out, d)
		}
	}
	walk(v.Elem(), nil)
	return out
}

// reflectFields are the fields of the struct type t.
func reflectFields(t reflect.Type) []reflect.StructField {
	out := make([]reflect.StructField, t.NumField())
	for i := range out {
		out[i] = t.Field(i)
	}
	return out
}

// helpNames are the names help texts take from what is registered at
// run time.
var helpNames = func() *strings.Replacer {
	return strings.NewReplacer("{presets}", conventionPresets(), "{modifiers}", longRunningModifiers(), "{schemes}", schemeNames())
}

// help is what d does, with the names registered at run time.
func (d declared) help() string { return helpNames().Replace(d.field.Tag.Get("help")) }

// arg is the word --help names d's argument by: its arg tag, else one
// for its type ("" for a bool flag).
func (d declared) arg() string {
	if a := d.field.Tag.Get("arg"); a != "" {
		return a
	}
	t := d.field.Type
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == reflect.TypeFor[time.Duration]():
		return "DURATION"
	case t.Kind() == reflect.Bool:
		return ""
	case t.Kind() == reflect.Int, t.Kind() == reflect.Int64:
		return "N"
	case t.Kind() == reflect.Float64:
		return "NUMBER"
	case t.Kind() == reflect.Slice:
		return "LIST"
	}
	return "STRING"
}

// printUsage prints the flags of decls to fs's output, in the order they
// are declared: each with its argument, help, variable and default.
func printUsage(fs *flag.FlagSet, decls []declared) {
	w := fs.Output()
	fmt.Fprintf(w, "Usage of %s (each flag's variable sets it too; a flag given replaces its variable):\n", fs.Name())
	for _, d := range decls {
		if d.flagName() == "" {
			continue
		}
		fmt.Fprintf(w, "  --%s", d.flagName())
		if a := d.arg(); a != "" {
			fmt.Fprintf(w, " %s", a)
		}
		fmt.Fprintf(w, "\n    \t%s", d.help())
		if e := d.envName(); e != "" {
			fmt.Fprintf(w, " (env %s)", e)
		}
		if def := d.field.Tag.Get("default"); def != "" {
			fmt.Fprintf(w, " (default %s)", def)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "Secrets come from the environment alone:")
	for _, d := range decls {
		if d.flagName() == "" {
			fmt.Fprintf(w, "  %s\n    \t%s\n", d.envName(), d.help())
		}
	}
}

// declare defines the flags of the settings s points to on fs, each
// starting at its default, and then sets those whose environment
// variable getenv has (not empty); given records who set each, by the
// setting's name (its flag's, else its variable's): the variable's name
// now, the flag's once fs parses it.
func declare(fs *flag.FlagSet, s any, args []string, getenv func(string) string) (given map[string]string, err error) {
	given = map[string]string{}
	decls := settingsOf(reflect.ValueOf(s))
	fs.Usage = func() { printUsage(fs, decls) }
	if fs.Output() == os.Stderr {
		// An error in the args is the caller's to print, once, without
		// the help; --help prints the help.
		fs.SetOutput(io.Discard)
		fs.Usage = func() {
			if helpAsked(args) {
				fs.SetOutput(os.Stderr)
				printUsage(fs, decls)
			}
		}
	}
	for _, d := range decls {
		fv := &fieldValue{v: d.v, invert: d.field.Tag.Get("invert") == "true", def: d.field.Tag.Get("default")}
		// A setting of the library's own (an [admission] key) is unset
		// until given: the library's default applies.
		if d.v.Kind() != reflect.Pointer && d.toml == nil && fv.def != "" {
			if err := fv.set(fv.def); err != nil {
				return nil, fmt.Errorf("the default of %s: %w", d.field.Name, err) // a declaration's mistake
			}
		}
		if e := d.envName(); e != "" {
			if val := getenv(e); val != "" {
				if err := fv.set(val); err != nil {
					return nil, fmt.Errorf("%s=%s: %w", e, quote(val), err)
				}
				given[d.name()] = e
				if f := d.flagName(); f != "" {
					given[d.name()] = e + " (--" + f + ")"
				}
			}
		}
		if name := d.flagName(); name != "" {
			fs.Var(&flagValue{fv: fv, given: given, name: name}, name, d.help())
		}
	}
	return given, nil
}

// helpAsked reports whether args ask for the help (-h, --help) before a
// "--".
func helpAsked(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "--h", "-help", "--help":
			return true
		}
	}
	return false
}

// quote quotes v for an error, unless it is long enough to be a secret.
func quote(v string) string {
	if len(v) > 40 {
		return "…"
	}
	return strconv.Quote(v)
}

// flagValue is the flag.Value of a declared setting: a flag replaces the
// environment's value; a list flag given again adds its items.
type flagValue struct {
	fv    *fieldValue
	given map[string]string
	name  string
	seen  bool
}

func (f *flagValue) String() string {
	if f == nil || f.fv == nil {
		return ""
	}
	return f.fv.String()
}

func (f *flagValue) Set(s string) error {
	if f.fv.isList() && f.seen {
		return f.fv.add(s)
	}
	f.seen = true
	f.given[f.name] = "--" + f.name
	return f.fv.set(s)
}

// IsBoolFlag is flag's: --check alone sets it.
func (f *flagValue) IsBoolFlag() bool { return f.fv.base().Kind() == reflect.Bool }

// fieldValue reads text into the field v (a pointer field is allocated
// when set).
type fieldValue struct {
	v      reflect.Value
	invert bool
	def    string
}

// base is the field's type, through its pointer.
func (f *fieldValue) base() reflect.Type {
	t := f.v.Type()
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

func (f *fieldValue) isList() bool { return f.base().Kind() == reflect.Slice }

// String is the value as --help shows it: the default while a pointer
// field is unset.
func (f *fieldValue) String() string {
	v := f.v
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return f.def
		}
		v = v.Elem()
	}
	switch x := v.Interface().(type) {
	case bool:
		return strconv.FormatBool(x != f.invert)
	case []string:
		return strings.Join(x, ",")
	case []int:
		s := make([]string, len(x))
		for i, n := range x {
			s[i] = strconv.Itoa(n)
		}
		return strings.Join(s, ",")
	}
	return fmt.Sprint(v.Interface())
}

// set replaces the field's value with s.
func (f *fieldValue) set(s string) error {
	x, err := parseSetting(f.base(), s, f.invert)
	if err != nil {
		return err
	}
	if f.v.Kind() == reflect.Pointer {
		p := reflect.New(f.base())
		p.Elem().Set(x)
		f.v.Set(p)
		return nil
	}
	f.v.Set(x)
	return nil
}

// add appends the items of s to a list field.
func (f *fieldValue) add(s string) error {
	x, err := parseSetting(f.base(), s, false)
	if err != nil {
		return err
	}
	cur := f.v
	if cur.Kind() == reflect.Pointer {
		cur = cur.Elem()
	}
	cur.Set(reflect.AppendSlice(cur, x))
	return nil
}

// parseSetting reads s as a value of t: a bool is also on or off (invert:
// its opposite); a list is comma-separated.
func parseSetting(t reflect.Type, s string, invert bool) (reflect.Value, error) {
	s = strings.TrimSpace(s)
	v := reflect.New(t).Elem()
	switch {
	case t == reflect.TypeFor[time.Duration]():
		d, err := time.ParseDuration(s)
		if err != nil {
			return v, fmt.Errorf("%s is not a duration: write a number and its unit, e.g. 30s or 5m", quote(s))
		}
		v.SetInt(int64(d))
	case t.Kind() == reflect.String:
		v.SetString(s)
	case t.Kind() == reflect.Bool:
		var b bool
		switch strings.ToLower(s) {
		case "on", "true", "1", "yes":
			b = true
		case "off", "false", "0", "no":
		default:
			return v, fmt.Errorf("%s: write on or off (true or false)", quote(s))
		}
		v.SetBool(b != invert)
	case t.Kind() == reflect.Int, t.Kind() == reflect.Int64:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return v, fmt.Errorf("%s is not a whole number", quote(s))
		}
		v.SetInt(n)
	case t.Kind() == reflect.Float64:
		n, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(n) || math.IsInf(n, 0) {
			return v, fmt.Errorf("%s is not a number", quote(s))
		}
		v.SetFloat(n)
	case t == reflect.TypeFor[[]string]():
		v.Set(reflect.ValueOf(cliutil.SplitList(s)))
	case t == reflect.TypeFor[[]int]():
		var out []int
		for _, item := range cliutil.SplitList(s) {
			n, err := strconv.Atoi(item)
			if err != nil {
				return v, fmt.Errorf("%s is not a whole number: list numbers such as 429,503", quote(item))
			}
			out = append(out, n)
		}
		v.Set(reflect.ValueOf(out))
	default:
		return v, fmt.Errorf("a setting of type %s cannot be read", t) // a declaration's mistake
	}
	return v, nil
}
