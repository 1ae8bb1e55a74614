package host

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"fmt"
	"os"
	"strings"

	"github.com/idemhttp/temporal-idempotent-http/internal/seal"
)

// readSealKeys reads --seal-keys-file: one key a line, 32 random bytes in
// base64 (`openssl rand -base64 32`), the first sealing, all opening
// (activities.Config.SealKeys); blank lines and lines starting with # are
// skipped. The file must be readable by the worker's user alone.
func readSealKeys(path string) ([][]byte, error) {
	if path == "" {
		return nil, nil
	}
	fail := func(format string, args ...any) error {
		return fmt.Errorf("--seal-keys-file %s: %s", path, fmt.Sprintf(format, args...))
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fail("%v", err)
	}
	if fi.Mode().Perm()&0o077 != 0 || !ownedByMe(fi) {
		return nil, fail("users other than the worker's may read it (or the worker's user does not own it): chmod 600 %s", path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fail("%v", err)
	}
	var keys [][]byte
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, err := base64.StdEncoding.DecodeString(line)
		if err != nil {
			k, err = base64.RawStdEncoding.DecodeString(line)
		}
		if err != nil || len(k) != seal.KeyBytes {
			// Never quoted: it is a key.
			return nil, fail("line %d is not %d bytes in base64: write one key a line, made with `openssl rand -base64 32`", n, seal.KeyBytes)
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, fail("it holds no key: write one a line, made with `openssl rand -base64 32`")
	}
	if _, err := seal.New(keys); err != nil {
		return nil, fail("%v", err)
	}
	return keys, nil
}
