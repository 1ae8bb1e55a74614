package credential

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// secrets is a Redactor that records what it was told.
type secrets struct {
	mu   sync.Mutex
	seen map[string]int
}

func (s *secrets) Add(secret string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen == nil {
		s.seen = map[string]int{}
	}
	s.seen[secret]++
}

func (s *secrets) count(secret string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen[secret]
}

func apply(t *testing.T, src Source) http.Header {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "https://api.example.com/x", nil)
	require.NoError(t, err)
	require.NoError(t, src.Apply(context.Background(), req, nil))
	return req.Header
}

// TestStatic: the headers are sent canonical and trimmed, their secrets
// told to the redactor at once and with every request (so that they stay
// redacted while in use), and values too short to redact are refused.
func TestStatic(t *testing.T) {
	tests := []struct {
		name    string
		h       http.Header
		want    http.Header
		secrets []string
		err     string
	}{
		{"bearer", http.Header{"authorization": {" Bearer tok_live_0123456789 "}}, http.Header{"Authorization": {"Bearer tok_live_0123456789"}}, []string{"tok_live_0123456789"}, ""},
		{"api key", http.Header{"x-api-key": {"ak_live_7c1f9e2d4b"}}, http.Header{"X-Api-Key": {"ak_live_7c1f9e2d4b"}}, []string{"ak_live_7c1f9e2d4b"}, ""},
		{"basic", http.Header{"Authorization": {"Basic dXNlcjpwYXNzd29yZDEyMw=="}}, http.Header{"Authorization": {"Basic dXNlcjpwYXNzd29yZDEyMw=="}}, []string{"dXNlcjpwYXNzd29yZDEyMw==", "password123"}, ""},
		{"short bearer", http.Header{"Authorization": {"Bearer abc"}}, nil, nil, "shorter than 8 bytes"},
		{"short key", http.Header{"X-Api-Key": {"abc"}}, nil, nil, "shorter than 8 bytes"},
		{"bad name", http.Header{"X Api": {"ak_live_7c1f9e2d4b"}}, nil, nil, "invalid header name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &secrets{}
			src, err := NewStatic(tt.h, r, Names{})
			if tt.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.err)
				return
			}
			require.NoError(t, err)
			for _, s := range tt.secrets {
				assert.Equal(t, 1, r.count(s), "told at New: %s", s)
			}
			assert.Equal(t, tt.want, apply(t, src))
			for _, s := range tt.secrets {
				assert.Equal(t, 2, r.count(s), "told again with the request: %s", s)
			}
		})
	}
}

// TestHeaderFiles: a file's whole value is sent; a rewritten file is read
// again (and its new value told to the redactor before it is sent); a file
// that becomes unreadable or too short keeps the last value, logged; at
// New, either is an error naming HeaderFiles[name].
func TestHeaderFiles(t *testing.T) {
	old := checkEvery
	checkEvery = 0 // look at the file with every request
	t.Cleanup(func() { checkEvery = old })
	dir := t.TempDir()
	path := filepath.Join(dir, "key")
	write := func(v string) { require.NoError(t, os.WriteFile(path, []byte(v), 0o600)) }
	write("ak_live_first_0123456789\n")
	r := &secrets{}
	var logs []string
	var mu sync.Mutex
	logf := func(msg string, kv ...any) {
		mu.Lock()
		defer mu.Unlock()
		logs = append(logs, fmt.Sprint(msg, kv))
	}
	src, err := NewHeaderFiles(map[string]string{"x-api-key": path}, r, logf, Names{})
	require.NoError(t, err)
	// Each write below is settled (a freed inode may be reused by the
	// next file, which then looks like an in-place write).
	src.(*headerFiles).now = func() time.Time { return time.Now().Add(settle) }
	assert.Equal(t, []string{"ak_live_first_0123456789"}, apply(t, src)["X-Api-Key"])

	steps := []struct {
		name, content string // "" removes the file
		want          string
		logged        string
	}{
		{"rotated", "ak_live_second_9876543210\n", "ak_live_second_9876543210", ""},
		{"same size, new content", "ak_live_third__9876543210\n", "ak_live_third__9876543210", ""},
		{"removed", "", "ak_live_third__9876543210", "cannot be read"},
		{"too short", "abc\n", "ak_live_third__9876543210", "shorter than 8 bytes"},
		{"two lines", "ak_live_fourth_0123456789\nmore\n", "ak_live_third__9876543210", "more than one line"},
		{"back", "ak_live_fifth__0123456789", "ak_live_fifth__0123456789", ""},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			mu.Lock()
			logs = nil
			mu.Unlock()
			if st.content == "" {
				require.NoError(t, os.Remove(path))
			} else {
				// A new inode, as a rename over the file makes.
				tmp := path + ".new"
				require.NoError(t, os.WriteFile(tmp, []byte(st.content), 0o600))
				require.NoError(t, os.Rename(tmp, path))
			}
			assert.Equal(t, []string{st.want}, apply(t, src)["X-Api-Key"])
			assert.Positive(t, r.count(st.want), "told to the redactor")
			mu.Lock()
			defer mu.Unlock()
			if st.logged == "" {
				assert.Empty(t, logs)
				return
			}
			require.Len(t, logs, 1)
			assert.Contains(t, logs[0], st.logged)
			assert.Contains(t, logs[0], path)
			assert.NotContains(t, logs[0], "ak_live", "no secret logged")
		})
	}

	for _, tt := range []struct{ name, content, want string }{
		{"missing", "", "no such file"},
		{"too short", "Bearer abc", "shorter than 8 bytes"},
	} {
		t.Run("at New: "+tt.name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "-"))
			if tt.content != "" {
				require.NoError(t, os.WriteFile(p, []byte(tt.content), 0o600))
			}
			_, err := NewHeaderFiles(map[string]string{"Authorization": p}, &secrets{}, logf, Names{})
			require.Error(t, err)
			assert.Contains(t, err.Error(), "HeaderFiles[Authorization]: ")
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}
