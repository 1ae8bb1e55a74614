package signature

import "testing"

// TestHMACHex checks HMACHex against RFC 4231's test case 2 and that the
// secret and the body both count.
func TestHMACHex(t *testing.T) {
	for _, tc := range []struct{ secret, body, want string }{
		{"Jefe", "what do ya want for nothing?", "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"},
		{"Jefe", "what do ya want for nothing!", ""},
		{"jefe", "what do ya want for nothing?", ""},
	} {
		got := HMACHex(tc.secret, []byte(tc.body))
		if tc.want != "" && got != tc.want {
			t.Errorf("HMACHex(%q, %q) = %s, want %s", tc.secret, tc.body, got, tc.want)
		}
		if tc.want == "" && got == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843" {
			t.Errorf("HMACHex(%q, %q): the signature of another message", tc.secret, tc.body)
		}
	}
}
