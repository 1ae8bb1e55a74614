// Package cliutil holds what the worker, starter and demo API commands share:
// a logger that redacts secrets and environment-backed flag defaults.
package cliutil

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
)

// Env returns the environment variable name, or def when it is unset or empty.
func Env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// SplitList splits a comma-separated list, dropping blanks.
func SplitList(s string) []string {
	var out []string
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// ListVar defines a list flag on fs whose value is written to *p as a
// comma-separated list, value (an environment default, say) until the
// flag is given: each use of the flag adds its items, commas splitting
// them too, so "--name A --name B,C" is "A,B,C" (Go's flag package would
// keep the last). Every comma-separated flag of the commands is one;
// read *p with SplitList.
func ListVar(fs *flag.FlagSet, p *string, name, value, usage string) {
	*p = value
	fs.Var(&list{p: p}, name, usage+"; repeat the flag or separate items with commas, both add")
}

// list is the flag.Value of ListVar.
type list struct {
	p   *string
	set bool // given on the command line: the default is replaced
}

func (l *list) String() string {
	if l == nil || l.p == nil {
		return ""
	}
	return *l.p
}

func (l *list) Set(s string) error {
	items := SplitList(s)
	if !l.set {
		l.set, *l.p = true, ""
	}
	if *l.p != "" && len(items) > 0 {
		*l.p += ","
	}
	*l.p += strings.Join(items, ",")
	return nil
}

// NewLogger returns a JSON slog logger on stderr at level ("debug", "info",
// "warn", "error") that replaces every occurrence of each secret in messages
// and attribute values with [REDACTED].
func NewLogger(level string, secrets ...string) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log level %q: use debug, info, warn or error", level)
	}
	var keep []string
	for _, s := range secrets {
		if s = strings.TrimSpace(s); s != "" {
			keep = append(keep, s)
		}
	}
	return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{
		Level:       lvl,
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr { return Redact(a, keep) },
	})), nil
}

// Redact returns a with every secret in its value replaced by [REDACTED].
func Redact(a slog.Attr, secrets []string) slog.Attr {
	if len(secrets) == 0 {
		return a
	}
	v := a.Value.Resolve()
	var s string
	switch v.Kind() {
	case slog.KindString:
		s = v.String()
	case slog.KindAny:
		s = fmt.Sprint(v.Any())
	default:
		return a
	}
	changed := false
	for _, sec := range secrets {
		if strings.Contains(s, sec) {
			s, changed = strings.ReplaceAll(s, sec, "[REDACTED]"), true
		}
	}
	if !changed {
		return a
	}
	return slog.String(a.Key, s)
}
