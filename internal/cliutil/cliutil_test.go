package cliutil

import (
	"errors"
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
