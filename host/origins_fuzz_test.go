package host

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// placed matches what follows "--origins FILE" in an error about a place
// in the file.
var placed = regexp.MustCompile(`^:[0-9]+:[0-9]+: `)

// FuzzLoadOrigins: whatever else an origins file holds, an inline secret
// (a header value, an OAuth 2.0 client secret) never stands in the error
// that loading it gives: no 8-byte piece of it that the same file with
// the secret masked would not give too (the error's own words); and the
// error says where in the file: --origins FILE:LINE:COLUMN.
func FuzzLoadOrigins(f *testing.F) {
	example, err := os.ReadFile(filepath.Join("testdata", "origins.toml"))
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []struct{ prefix, suffix string }{
		{"", ""},
		{string(example), ""},
		{"[origin.\"https://pay.example\"]\nconvention = \"stripe\"\n", "key = 1\n"},
		{"", "[origin.\"https://pay.example\".oauth2]\ntoken_url = 12\n"},
		{"[admission]\nmax_wait = \"1x\"\n", ""},
		{"x = [\n", ""},
		{"", "Authorization = 'Bearer s\n"},
		{"[origin.\"https://pay.example\".oauth2]\ntokn_url = \"https://pay.example/t\"\n", ""},
		{"[admission]\ninitial_rate = -1\n", ""},
		{"[origin.\"https://pay.example\"\n", ""},
		{"", "[origin.\"https://bank.example\".oauth2]\nauth_style = \"basic\"\n"},
	} {
		f.Add(s.prefix, s.suffix, "sk_live_4eC39HqLyjWDarjtT1zdp7dc", true)
		f.Add(s.prefix, s.suffix, "Zq8pLm2Xw9", false)
	}
	f.Fuzz(func(t *testing.T, prefix, suffix, secret string, private bool) {
		if len(secret) < 8 || len(secret) > 256 || strings.Trim(secret, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") != "" {
			return // a secret written as a plain TOML string
		}
		mode := os.FileMode(0o644)
		if private {
			mode = 0o600
		}
		load := func(s string) string {
			text := prefix + "\n[origin.\"https://pay.example\".headers]\nAuthorization = \"Bearer " + s + "\"\n" +
				"[origin.\"https://bank.example\".oauth2]\ntoken_url = \"https://bank.example/token\"\nclient_id = \"worker\"\nclient_secret = \"" + s + "\"\n" + suffix
			path := filepath.Join(t.TempDir(), "origins.toml")
			if err := os.WriteFile(path, []byte(text), mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, mode); err != nil {
				t.Fatal(err)
			}
			_, err := loadOrigins(path, envOf(nil))
			if err == nil {
				return ""
			}
			if !placed.MatchString(strings.TrimPrefix(err.Error(), "--origins "+path)) {
				t.Fatalf("the error does not begin with --origins %s:LINE:COLUMN: %v", path, err)
			}
			return err.Error()
		}
		got, masked := load(secret), load(strings.Repeat("Q", len(secret)))
		for i := 0; i+8 <= len(secret); i++ {
			if w := secret[i : i+8]; strings.Contains(got, w) && !strings.Contains(masked, w) && !strings.Contains(prefix+suffix, w) {
				t.Fatalf("the error quotes %q of the secret: %s", w, got)
			}
		}
	})
}
