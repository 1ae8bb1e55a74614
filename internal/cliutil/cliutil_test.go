package cliutil

import (
	"errors"
	"flag"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRedact(t *testing.T) {
	secrets := []string{"tok_123456", "Bearer tok_123456"}
	tests := []struct {
		name string
		attr slog.Attr
		want string
	}{
		{"string", slog.String("h", "Authorization: Bearer tok_123456"), "Authorization: Bearer [REDACTED]"},
		{"error", slog.Any("err", errors.New("bad token tok_123456")), "bad token [REDACTED]"},
		{"clean", slog.String("k", "value"), "value"},
		{"int", slog.Int("n", 7), "7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Redact(tt.attr, secrets)
			assert.Equal(t, tt.want, got.Value.String())
			assert.Equal(t, tt.attr.Key, got.Key)
		})
	}
}

func TestSplitList(t *testing.T) {
	assert.Equal(t, []string{"http://a:1", "https://b"}, SplitList(" http://a:1, ,https://b,"))
	assert.Nil(t, SplitList(""))
}

func TestNewLoggerRejectsBadLevel(t *testing.T) {
	_, err := NewLogger("loud")
	assert.ErrorContains(t, err, "use debug, info, warn or error")
}

// TestListVar (issue 30, item 10): each use of a list flag adds its
// items; the first replaces the default.
func TestListVar(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{nil, "d1,d2"},
		{[]string{"-l", "a"}, "a"},
		{[]string{"-l", "a", "-l", "b, c", "-l=d"}, "a,b,c,d"},
		{[]string{"-l", "", "-l", "a"}, "a"},
		{[]string{"-l", ","}, ""},
	}
	for _, tt := range tests {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		var v string
		ListVar(fs, &v, "l", "d1,d2", "items")
		if err := fs.Parse(tt.args); err != nil {
			t.Fatal(err)
		}
		if v != tt.want {
			t.Errorf("%q: %q, want %q", tt.args, v, tt.want)
		}
	}
}
