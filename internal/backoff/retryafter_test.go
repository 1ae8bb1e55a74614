package backoff

import (
	"github.com/stretchr/testify/assert"
	"math"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		value  string
		want   time.Duration
		wantOK bool
	}{
		{"seconds", "1", time.Second, true},
		{"zero", "0", 0, true},
		{"padded", "  120 ", 2 * time.Minute, true},
		{"leading zeros", "007", 7 * time.Second, true},
		{"imf-fixdate", "Wed, 02 Dec 2026 12:00:30 GMT", 30 * time.Second, true},
		{"rfc850", "Wednesday, 02-Dec-26 12:01:00 GMT", time.Minute, true},
		{"asctime", "Wed Dec  2 12:00:05 2026", 5 * time.Second, true},
		{"past date", "Wed, 02 Dec 2026 11:00:00 GMT", 0, true},
		{"huge", "99999999999999999999999", time.Duration(math.MaxInt64), true},
		{"max int64 seconds", "9223372036854775807", time.Duration(math.MaxInt64), true},
		{"empty", "", 0, false},
		{"blank", "   ", 0, false},
		{"negative", "-5", 0, false},
		{"plus", "+5", 0, false},
		{"fraction", "1.5", 0, false},
		{"garbage", "soon", 0, false},
		{"unit", "5s", 0, false},
		{"two numbers", "1 2", 0, false},
		{"bad date", "Wed, 32 Dec 2026 12:00:00 GMT", 0, false},
		{"date without zone", "2026-12-02T12:00:00", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := RetryAfter(tt.value, now)
			assert.Equal(t, tt.wantOK, ok)
			assert.Equal(t, tt.want, got)
		})
	}
}

func FuzzParseRetryAfter(f *testing.F) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	for _, s := range []string{"1", "0", "-1", "120", "99999999999999999999", "Wed, 02 Dec 2026 12:00:30 GMT",
		"Wednesday, 02-Dec-26 12:01:00 GMT", "Wed Dec  2 12:00:05 2026", "garbage", "", " 5 "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, ok := RetryAfter(s, now)
		if d < 0 {
			t.Fatalf("ParseRetryAfter(%q) = %v: negative", s, d)
		}
		if !ok && d != 0 {
			t.Fatalf("ParseRetryAfter(%q) = %v, false: a rejected value must return 0", s, d)
		}
		if ok && isDigits(strings.TrimSpace(s)) && len(strings.TrimSpace(s)) < 10 {
			// Small delay-seconds round-trip exactly.
			var n int64
			for _, c := range strings.TrimSpace(s) {
				n = n*10 + int64(c-'0')
			}
			if d != time.Duration(n)*time.Second {
				t.Fatalf("ParseRetryAfter(%q) = %v, want %ds", s, d, n)
			}
		}
	})
}
