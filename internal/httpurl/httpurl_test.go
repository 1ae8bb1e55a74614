package httpurl

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

func TestParseURL(t *testing.T) {
	tests := []struct {
		in, wantURL, wantOrigin, err string
	}{
		{"https://api.example.com/pay?x=1#frag", "https://api.example.com/pay?x=1", "https://api.example.com", ""},
		{"  http://127.0.0.1:8081/p  ", "http://127.0.0.1:8081/p", "http://127.0.0.1:8081", ""},
		{"https://u:hunter2hunter2@api.example.com/", "", "", "user info"},
		{"https://bücher.example/", "", "", "punycode"},
		{"https://b%C3%BCcher.example/", "", "", "punycode"},
		{"https://xn--bcher-kva.example/", "https://xn--bcher-kva.example/", "https://xn--bcher-kva.example", ""},
		{"mailto:a@example.com", "", "", "unsupported scheme"},
		{"http://[::1", "", "", "invalid URL"},
	}
	for _, tt := range tests {
		u, o, err := Parse(tt.in)
		if !errContains(err, tt.err) {
			t.Errorf("Parse(%q) error = %v, want %q", tt.in, err, tt.err)
			continue
		}
		if tt.err != "" {
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("Parse(%q) error repeats the password: %v", tt.in, err)
			}
			continue
		}
		if u.String() != tt.wantURL || o != tt.wantOrigin {
			t.Errorf("Parse(%q) = %q, %q; want %q, %q", tt.in, u, o, tt.wantURL, tt.wantOrigin)
		}
	}
}

// errContains reports whether err matches want: nil for "", else an error
// whose text contains want.
func errContains(err error, want string) bool {
	if want == "" {
		return err == nil
	}
	return err != nil && strings.Contains(err.Error(), want)
}
