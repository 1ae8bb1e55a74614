package host

import (
	"bytes"
	"encoding/base64"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReadSealKeys: --seal-keys-file gives its keys in order, skipping
// comments and blank lines; a file others may read, a line that is no
// 32-byte key, a key listed twice or no key is refused with the line
// and what to write, never the key.
func TestReadSealKeys(t *testing.T) {
	k1 := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{1}, 32))
	k2 := base64.RawStdEncoding.EncodeToString(bytes.Repeat([]byte{2}, 32))
	short := base64.StdEncoding.EncodeToString([]byte("0123456789abcdef"))
	tests := []struct {
		name, text string
		mode       os.FileMode
		want       int
		err        []string
	}{
		{"two keys, the new first", "# new\n" + k2 + "\n\n# old\n" + k1 + "\n", 0o600, 2, nil},
		{"readable by others", k1 + "\n", 0o644, 0, []string{"chmod 600"}},
		{"not base64", "not a key at all\n", 0o600, 0, []string{"line 1", "openssl rand -base64 32"}},
		{"16 bytes", "# c\n" + short + "\n", 0o600, 0, []string{"line 2", "32 bytes"}},
		{"twice", k1 + "\n" + k1 + "\n", 0o600, 0, []string{"key 2 is key 1 again"}},
		{"empty", "# nothing\n", 0o600, 0, []string{"holds no key"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "seal-keys")
			require.NoError(t, os.WriteFile(path, []byte(tt.text), tt.mode))
			require.NoError(t, os.Chmod(path, tt.mode))
			keys, err := readSealKeys(path)
			if tt.err == nil {
				require.NoError(t, err)
				require.Len(t, keys, tt.want)
				assert.Equal(t, bytes.Repeat([]byte{2}, 32), keys[0])
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), path)
			for _, w := range tt.err {
				assert.Contains(t, err.Error(), w)
			}
			assert.NotContains(t, err.Error(), short)
			assert.NotContains(t, err.Error(), k1)
		})
	}
}
