package activities

import (
	"context"
	"net/http"
	"reflect"
	"testing"
)

// TestNewRequestFromCacheIsNewRequestWithContext: the first hop's request
// built from the URL cache's parse (parsedURL.wire) is the one
// http.NewRequestWithContext builds from the URL as sent.
func TestNewRequestFromCacheIsNewRequestWithContext(t *testing.T) {
	var c urlCache
	for _, s := range []string{
		"http://127.0.0.1:8081/charges", "https://API.example.com/v1/charges?a=1&b=%2F#frag", "http://example.com:/p",
		"http://[::1]:8080/a%2Fb/c d", "https://example.com/p?", "https://example.com", "https://example.com:443/ü?q=ü",
		"  https://example.com/trim  ", "https://example.com/a/../b;x=1",
	} {
		pu, err := c.parse(s)
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		if pu.wire == nil {
			t.Fatalf("%q: no wire URL", s)
		}
		ctx := context.Background()
		got, err := newRequest(ctx, http.MethodPost, pu.raw, pu.wire, 0)
		if err != nil {
			t.Fatal(err)
		}
		want, err := http.NewRequestWithContext(ctx, http.MethodPost, pu.raw, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.URL, want.URL) || got.Host != want.Host || got.Method != want.Method || got.Proto != want.Proto ||
			!reflect.DeepEqual(got.Header, want.Header) || got.Body != nil || got.ContentLength != 0 {
			t.Errorf("%q: got %#v host %q, want %#v host %q", s, got.URL, got.Host, want.URL, want.Host)
		}
		if got.URL == pu.wire {
			t.Errorf("%q: the request shares the cache's URL", s)
		}
	}
}
