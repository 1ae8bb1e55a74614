// Package seal encrypts the values that a later activity needs but that
// must not be read in Temporal's history: a status monitor URL a server
// names with a credential in its path or a signature in its query. It
// works as Temporal's encrypting payload codecs do (AES-256-GCM, a key ID
// in each sealed value, several keys for rotation), for one field instead
// of every payload.
package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// KeyBytes is the length of a key: AES-256.
const KeyBytes = 32

// prefix starts every sealed value: its format's version.
const prefix = "seal1."

// Keys seal with the first of its keys and open with any of them.
type Keys struct {
	keys []key
}

type key struct {
	id   string
	aead cipher.AEAD
}

// New returns the keys ks (each KeyBytes long): the first seals, every
// one opens, so that a new key listed first takes over while values
// sealed with the old one, listed after it, can still be opened. Two
// equal keys, or none, are an error.
func New(ks [][]byte) (*Keys, error) {
	if len(ks) == 0 {
		return nil, errors.New("no key")
	}
	k := &Keys{}
	seen := map[string]int{}
	for i, b := range ks {
		if len(b) != KeyBytes {
			return nil, fmt.Errorf("key %d is %d bytes long, not %d: make one with `openssl rand -base64 32`", i+1, len(b), KeyBytes)
		}
		id := ID(b)
		if j, dup := seen[id]; dup {
			return nil, fmt.Errorf("key %d is key %d again: list each key once", i+1, j+1)
		}
		seen[id] = i
		block, err := aes.NewCipher(b)
		if err != nil {
			return nil, err
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, err
		}
		k.keys = append(k.keys, key{id: id, aead: aead})
	}
	return k, nil
}

// ID names key b in sealed values and errors: the first 4 bytes of a
// SHA-256 of it, in hex. It tells keys apart and says nothing of them.
func ID(b []byte) string {
	sum := sha256.Sum256(append([]byte("idemhttp seal key id\x00"), b...))
	return hex.EncodeToString(sum[:4])
}

// Sealed reports whether s is a sealed value (of any key).
func Sealed(s string) bool { return strings.HasPrefix(s, prefix) }

// Seal encrypts plain with the first key, bound to context (the same
// context must open it: a sealed value copied to another operation does
// not open there). The result is printable ASCII.
func (k *Keys) Seal(plain, context string) string {
	kk := k.keys[0]
	nonce := make([]byte, kk.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		panic(err) // crypto/rand never fails on a supported platform
	}
	out := kk.aead.Seal(nonce, nonce, []byte(plain), []byte(context))
	return prefix + kk.id + "." + base64.RawURLEncoding.EncodeToString(out)
}

// Open decrypts s, sealed by Seal with context. Its errors say which key
// it needs, never what it holds.
func (k *Keys) Open(s, context string) (string, error) {
	rest, ok := strings.CutPrefix(s, prefix)
	if !ok {
		return "", errors.New("not a sealed value")
	}
	id, enc, ok := strings.Cut(rest, ".")
	if !ok {
		return "", errors.New("a sealed value without its key ID")
	}
	for _, kk := range k.keys {
		if kk.id != id {
			continue
		}
		b, err := base64.RawURLEncoding.DecodeString(enc)
		if err != nil || len(b) < kk.aead.NonceSize() {
			return "", fmt.Errorf("the value sealed with key %s is not intact", id)
		}
		plain, err := kk.aead.Open(nil, b[:kk.aead.NonceSize()], b[kk.aead.NonceSize():], []byte(context))
		if err != nil {
			return "", fmt.Errorf("the value sealed with key %s does not open: it was altered, or sealed for another operation", id)
		}
		return string(plain), nil
	}
	return "", fmt.Errorf("it was sealed with key %s, %w", id, ErrKeyNotHeld)
}

// ErrKeyNotHeld is Open's error for a value sealed with a key the Keys do
// not hold (errors.Is): another worker may hold it (a rotation in
// progress), unlike a value that does not open with the key it names.
var ErrKeyNotHeld = errors.New("which this worker does not hold")
