package rules

import (
	"testing"
)

// TestCallerHandles: a known 4xx answer is the workflow's to handle (Warn),
// but the credential ones; anything else is an operator's (Error).
func TestCallerHandles(t *testing.T) {
	for _, c := range []struct {
		name                 string
		status               int
		clientError, unknown bool
		want                 bool
	}{
		{"declined 402", 402, true, false, true},
		{"400", 400, true, false, true},
		{"404", 404, true, false, true},
		{"409 conflict", 409, true, false, true},
		{"422", 422, true, false, true},
		{"401 credentials", 401, true, false, false},
		{"403 permissions", 403, true, false, false},
		{"407 proxy credentials", 407, true, false, false},
		{"409 after an attempt of unknown outcome", 409, true, true, false},
		{"402 of another error type (key reused)", 402, false, false, false},
		{"501", 501, false, false, false},
		{"500 advised not to retry", 500, false, true, false},
		{"no answer", 0, false, true, false},
		{"a 5xx typed as a client error", 502, true, false, false},
	} {
		if got := CallerHandles(c.status, c.clientError, c.unknown); got != c.want {
			t.Errorf("%s: CallerHandles(%d, %v, %v) = %v, want %v", c.name, c.status, c.clientError, c.unknown, got, c.want)
		}
	}
}
