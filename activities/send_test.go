package activities

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"

	"github.com/idemhttp/temporal-idempotent-http/internal/httpurl"
	"github.com/idemhttp/temporal-idempotent-http/internal/redact"
)

// readAtMost reads what io.ReadAll(io.LimitReader(r, limit)) reads, with
// the same error, whatever the reader's chunks.
func TestReadAtMostAsReadAll(t *testing.T) {
	cut := errors.New("cut")
	for _, n := range []int{0, 1, 60, 4 << 10, 4<<10 + 1, 100 << 10} {
		body := bytes.Repeat([]byte("abcdefghij"), n/10+1)[:n]
		for _, limit := range []int64{0, 1, 59, 60, 61, 4 << 10, 1 << 20} {
			readers := map[string]func() io.Reader{
				"whole":    func() io.Reader { return bytes.NewReader(body) },
				"one byte": func() io.Reader { return iotest.OneByteReader(bytes.NewReader(body)) },
				"data+EOF": func() io.Reader { return iotest.DataErrReader(bytes.NewReader(body)) },
				"cut":      func() io.Reader { return io.MultiReader(bytes.NewReader(body), iotest.ErrReader(cut)) },
			}
			for name, r := range readers {
				want, wantErr := io.ReadAll(io.LimitReader(r(), limit))
				got, err := readAtMost(r(), limit)
				assert.Equal(t, want, got, "%d bytes, limit %d, %s", n, limit, name)
				assert.Equal(t, wantErr, err, "%d bytes, limit %d, %s", n, limit, name)
				assert.NotNil(t, got)
			}
		}
	}
}

// The URL cache answers as httpurl.Parse and redact.URL do, and
// forgets everything when it is full.
func TestURLCache(t *testing.T) {
	var c urlCache
	for _, s := range []string{"https://api.example.com/v1/charges?token=abc#frag", " http://127.0.0.1:8081/charges ", "HTTPS://API.example.com:443/x"} {
		for range 2 {
			pu, err := c.parse(s)
			assert.NoError(t, err)
			u, o, err := httpurl.Parse(s)
			assert.NoError(t, err)
			assert.Equal(t, u, pu.url)
			assert.Equal(t, o, pu.origin)
			assert.Equal(t, u.String(), pu.raw)
			assert.Equal(t, redact.URL(u.String()), pu.shown)
		}
	}
	_, err := c.parse("ftp://example.com/")
	assert.Error(t, err)
	for i := range maxCachedURLs + 1 {
		_, err := c.parse("https://example.com/" + strings.Repeat("x", i))
		assert.NoError(t, err)
	}
	assert.LessOrEqual(t, len(c.urls), maxCachedURLs)
}
