package signature

import (
	"encoding/hex"
	"testing"
)

// The schemes' published test vectors.
func TestVectors(t *testing.T) {
	// Standard Webhooks' and Svix's libraries' own test.
	key, err := StandardKey("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := Standard(key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, []byte(`{"test": 2432232314}`)), "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; got != want {
		t.Errorf("Standard = %s, want %s", got, want)
	}
	// GitHub's documentation of X-Hub-Signature-256.
	if got, want := hex.EncodeToString(HMAC("It's a Secret to Everybody", "", []byte("Hello, World!"))), "757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"; got != want {
		t.Errorf("HMAC = %s, want %s", got, want)
	}
	if HMAC("s", "1", []byte("b")) == nil || string(HMAC("s", "1", []byte("b"))) != string(MAC([]byte("s"), []byte("1.b"))) {
		t.Error(`HMAC with a timestamp is not the MAC of "ts.body"`)
	}
	if got, want := Stripe(1, []byte("{}"), "a", "b"), "t=1,v1="+hex.EncodeToString(MAC([]byte("a"), []byte("1.{}")))+",v1="+hex.EncodeToString(MAC([]byte("b"), []byte("1.{}"))); got != want {
		t.Errorf("Stripe = %s, want %s", got, want)
	}
}

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
