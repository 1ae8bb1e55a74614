package request

import (
	"strings"
	"testing"
)

func TestOrigin(t *testing.T) {
	tests := []struct{ in, want, err string }{
		{"https://API.Example.com/payments?x=1", "https://api.example.com", ""},
		{"https://api.example.com:443/", "https://api.example.com", ""},
		{"http://127.0.0.1:80", "http://127.0.0.1", ""},
		{"http://127.0.0.1:8081/x", "http://127.0.0.1:8081", ""},
		{"http://[::1]:8081/x", "http://[::1]:8081", ""},
		{"http://[::1]/x", "http://[::1]", ""},
		{"HTTPS://h", "https://h", ""},
		{"ftp://h", "", "unsupported scheme"},
		{"/relative", "", "not an absolute URL"},
		{"http:///nohost", "", "no host"},
		{"http://[::1", "", "missing ']'"},
		{"https://user:pass@h/x", "", "user info"},
		{"https://user@h/x", "", "user info"},
		{"https://bücher.example/x", "", "punycode"},
		{"https://xn--bcher-kva.example/x", "https://xn--bcher-kva.example", ""},
	}
	for _, tt := range tests {
		got, err := Origin(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("Origin(%q) error = %v, want it to contain %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("Origin(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

// FuzzOrigin: whatever the input, Origin either fails or returns a canonical
// http(s) origin that is its own origin, so an allow-list lookup cannot be
// fooled by spelling.
func FuzzOrigin(f *testing.F) {
	for _, s := range []string{"https://api.example.com/x", "http://127.0.0.1:8081", "http://[::1]:80/", "HTTP://A.B:443", "https://u:p@h/", "ftp://x", "//h/p", "http://h:/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		o, err := Origin(s)
		if err != nil {
			return
		}
		if !strings.HasPrefix(o, "http://") && !strings.HasPrefix(o, "https://") {
			t.Fatalf("Origin(%q) = %q: not http or https", s, o)
		}
		again, err := Origin(o)
		if err != nil || again != o {
			t.Fatalf("Origin(%q) = %q, but Origin(%q) = %q, %v", s, o, o, again, err)
		}
		if o != strings.ToLower(o) {
			t.Fatalf("Origin(%q) = %q: not lower case", s, o)
		}
	})
}
