package seal_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemhttp/temporal-idempotent-http/internal/seal"
)

func key(b byte) []byte { return bytes.Repeat([]byte{b}, seal.KeyBytes) }

// TestSealOpens: a value sealed with the first key opens with the keys
// that hold it, in its context only; nothing of it shows in the sealed
// form; a key not held, a changed byte or another context does not open.
func TestSealOpens(t *testing.T) {
	const plain = "https://api.example.com/operations/tok_live_0123456789abcdef"
	oldKeys, err := seal.New([][]byte{key(1)})
	require.NoError(t, err)
	rotated, err := seal.New([][]byte{key(2), key(1)})
	require.NoError(t, err)
	other, err := seal.New([][]byte{key(3)})
	require.NoError(t, err)

	s := oldKeys.Seal(plain, "op-key-1")
	assert.True(t, seal.Sealed(s))
	assert.False(t, seal.Sealed(plain))
	assert.NotContains(t, s, "tok_live")
	assert.NotEqual(t, s, oldKeys.Seal(plain, "op-key-1"), "a new nonce each time")
	assert.Contains(t, s, seal.ID(key(1)))

	tests := []struct {
		name    string
		keys    *seal.Keys
		sealed  string
		context string
		want    string // "" for an error holding wantErr
		wantErr string
	}{
		{"the sealing key", oldKeys, s, "op-key-1", plain, ""},
		{"after rotation, the old key listed second", rotated, s, "op-key-1", plain, ""},
		{"another operation", oldKeys, s, "op-key-2", "", "another operation"},
		{"a key not held", other, s, "op-key-1", "", "which this worker does not hold"},
		{"a changed byte", oldKeys, s[:len(s)-2] + "AA", "op-key-1", "", "altered"},
		{"not sealed", oldKeys, plain, "op-key-1", "", "not a sealed value"},
		{"no key ID", oldKeys, "seal1.abc", "op-key-1", "", "without its key ID"},
		{"bad encoding", oldKeys, "seal1." + seal.ID(key(1)) + ".%%%", "op-key-1", "", "not intact"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.keys.Open(tt.sealed, tt.context)
			if tt.wantErr == "" {
				require.NoError(t, err)
				assert.Equal(t, tt.want, got)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
			assert.NotContains(t, err.Error(), "tok_live")
		})
	}
	// The new key seals after rotation.
	assert.True(t, strings.Contains(rotated.Seal(plain, "k"), seal.ID(key(2))))
}

func TestNewRefuses(t *testing.T) {
	tests := []struct {
		name string
		keys [][]byte
		want string
	}{
		{"none", nil, "no key"},
		{"short", [][]byte{make([]byte, 16)}, "not 32"},
		{"twice", [][]byte{key(1), key(1)}, "key 2 is key 1 again"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := seal.New(tt.keys)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

// FuzzOpen: Open never panics on any input, and opens only what was sealed.
func FuzzOpen(f *testing.F) {
	k, err := seal.New([][]byte{key(7)})
	require.NoError(f, err)
	f.Add(k.Seal("https://x.example/op/1", "c"), "c")
	f.Add("seal1.", "")
	f.Add("seal1."+seal.ID(key(7))+".", "c")
	f.Fuzz(func(t *testing.T, s, context string) {
		got, err := k.Open(s, context)
		if err == nil && k.Seal(got, context) == s {
			t.Fatalf("a nonce repeated")
		}
	})
}
