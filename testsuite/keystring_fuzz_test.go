package testsuite

import (
	"strings"
	"testing"

	"github.com/idemhttp/temporal-idempotent-http/internal/idemkey"
)

// TestParseKeyString: RFC 8941 sections 4.2 and 4.2.5 for a field value that
// is one String Item without parameters.
func TestParseKeyString(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{`"8e03978e-40d5-43e8-bc93-6894a57f9324"`, "8e03978e-40d5-43e8-bc93-6894a57f9324", true},
		{`"k1"`, "k1", true},
		{`""`, "", true},
		{`"a\"b\\c"`, `a"b\c`, true},
		{`"\\"`, `\`, true},
		{`"\""`, `"`, true},
		{`"k 1"`, "k 1", true},
		{`"'~!#$%&()*+,-./:;<=>?@[]^_{|}` + "`" + `"`, `'~!#$%&()*+,-./:;<=>?@[]^_{|}` + "`", true},
		{`   "k1"   `, "k1", true},
		{``, "", false},
		{`   `, "", false},
		{`k1`, "", false},
		{`"k1`, "", false},
		{`"`, "", false},
		{`"k1\`, "", false},
		{`"k1\"`, "", false},
		{`"k\n1"`, "", false},
		{`"k\'1"`, "", false},
		{`"k1";a=1`, "", false},
		{`"k1";a`, "", false},
		{`"k1" ;a=1`, "", false},
		{`"k1" x`, "", false},
		{`"k1""k2"`, "", false},
		{`"k1", "k2"`, "", false},
		{"\t\"k1\"", "", false},
		{"\"k1\"\t", "", false},
		{"\"k\t1\"", "", false},
		{"\"k\x00\"", "", false},
		{"\"k\x1f\"", "", false},
		{"\"k\x7f\"", "", false},
		{"\"k\xc3\xa9\"", "", false},
	}
	for _, tt := range tests {
		got, err := parseKeyString(tt.in)
		if tt.ok {
			if err != nil || got != tt.want {
				t.Errorf("parseKeyString(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
			}
		} else if err == nil {
			t.Errorf("parseKeyString(%q) = %q; want an error", tt.in, got)
		}
	}
}

// FuzzParseKeyString: parseKeyString never panics; what it accepts is
// printable ASCII and quotes back to a string it reads the same; every
// printable-ASCII key, quoted as the activity quotes it (idemkey.Quote),
// with or without spaces around, parses back to the key, and the IETF
// dialect reads the quoted and the bare key as the same key.
func FuzzParseKeyString(f *testing.F) {
	for _, s := range []string{
		`"8e03978e-40d5-43e8-bc93-6894a57f9324"`, `"a\"b\\c"`, `""`, `"k1`, `"k1";a=1`,
		` "k1" `, `k1`, `"\k"`, "\"k\x00\"", `"k1", "k2"`, `\`, `"`, `"\`,
	} {
		f.Add(s)
	}
	ietf := IETFDialect()
	f.Fuzz(func(t *testing.T, s string) {
		if got, err := parseKeyString(s); err == nil {
			for i := 0; i < len(got); i++ {
				if got[i] < 0x20 || got[i] > 0x7e {
					t.Fatalf("parseKeyString(%q) = %q: byte %#x outside printable ASCII", s, got, got[i])
				}
			}
			if again, err := parseKeyString(idemkey.Quote(got)); err != nil || again != got {
				t.Fatalf("parseKeyString(%q) = %q, which quotes to %q and parses back to %q, %v", s, got, idemkey.Quote(got), again, err)
			}
		}

		// A printable-ASCII key made from s, as idemkey.Check accepts.
		b := []byte(s)
		for i := range b {
			b[i] = 0x21 + b[i]%(0x7e-0x21+1)
		}
		key := string(b)
		if key == "" {
			return
		}
		if err := idemkey.Check(key); err != nil && len(key) <= idemkey.MaxBytes {
			t.Fatalf("made-up key %q is not a key: %v", key, err)
		}
		for _, v := range []string{idemkey.Quote(key), " " + idemkey.Quote(key) + "  "} {
			if got, err := parseKeyString(v); err != nil || got != key {
				t.Fatalf("parseKeyString(%q) = %q, %v; want %q", v, got, err, key)
			}
			if got, err := ietf.headerKey(v); err != nil || got != key {
				t.Fatalf("IETF headerKey(%q) = %q, %v; want %q", v, got, err, key)
			}
		}
		if !strings.HasPrefix(key, `"`) {
			if got, err := ietf.headerKey(key); err != nil || got != key {
				t.Fatalf("IETF headerKey(bare %q) = %q, %v; want the key itself", key, got, err)
			}
		}
		if got, err := StripeDialect().headerKey(idemkey.Quote(key)); err != nil || got != idemkey.Quote(key) {
			t.Fatalf("Stripe headerKey(%q) = %q, %v; want it as written", idemkey.Quote(key), got, err)
		}
	})
}
