// Package cliutil holds what the worker, starter and demo API commands share:
// a logger that redacts secrets and environment-backed flag defaults.
package cliutil

import (
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
