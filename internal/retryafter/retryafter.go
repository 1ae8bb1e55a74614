// Package retryafter parses a Retry-After header value (RFC 9110
// §10.2.3), both of its forms.
package retryafter

import (
	"math"
	"net/http"
	"strings"
	"time"
)

// Parse reads a Retry-After header value (RFC 9110 §10.2.3) and
// returns how long to wait from now.
//
// Both forms are accepted: delay-seconds (one or more ASCII digits) and an
// HTTP-date in any of the three formats RFC 9110 §5.6.7 requires recipients to
// accept (IMF-fixdate, RFC 850, asctime). A date in the past means "retry now"
// and returns 0. A value that is neither, including a negative or fractional
// number, returns ok == false so the caller falls back to its own backoff.
// Digit strings too large for a time.Duration saturate at math.MaxInt64; the
// caller applies its own cap.
func Parse(value string, now time.Time) (d time.Duration, ok bool) {
	v := strings.TrimSpace(value)
	if v == "" {
		return 0, false
	}
	if isDigits(v) {
		const maxSeconds = math.MaxInt64 / int64(time.Second)
		var secs int64
		for i := 0; i < len(v); i++ {
			secs = secs*10 + int64(v[i]-'0')
			if secs > maxSeconds {
				return time.Duration(math.MaxInt64), true
			}
		}
		return time.Duration(secs) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	if d := t.Sub(now); d > 0 {
		return d, true
	}
	return 0, true
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
