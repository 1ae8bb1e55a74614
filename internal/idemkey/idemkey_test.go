package idemkey

import (
	"testing"
)

func TestDerive(t *testing.T) {
	k := Derive("ns", "order-1", "charge")
	if len(k) != 36 {
		t.Fatalf("key %q: want a UUID of 36 characters", k)
	}
	if again := Derive("ns", "order-1", "charge"); again != k {
		t.Errorf("not stable: %q then %q", k, again)
	}
	for _, other := range []struct{ ns, id, op string }{
		{"prod", "order-1", "charge"},
		{"ns", "order-2", "charge"},
		{"ns", "order-1", "refund"},
		{"ns", "order-1charge", ""},
	} {
		if got := Derive(other.ns, other.id, other.op); got == k {
			t.Errorf("DeriveKey%v = %q, the same as another call's", other, got)
		}
	}
}

// TestDeriveKeyRecorded: keys are recorded in histories and in the APIs'
// stores, so the derivation never changes (a periodic operation names its
// period in the operation: one key per period).
func TestDeriveRecorded(t *testing.T) {
	for _, tt := range []struct{ period, want string }{
		{"2026-11", "c522b263"},
		{"2026-12", "328237d4"},
	} {
		if got := Derive("default", "subscription-42", "charge-"+tt.period)[:8]; got != tt.want {
			t.Errorf("%s: key starts %q, want %q", tt.period, got, tt.want)
		}
	}
}

// TestKeyDigestRecorded: a key's digest is in the callback URLs providers
// hold and in the events' metadata, for days, and in histories, so the
// derivation never changes; it is one URL path segment, and no key has
// none. The wants were computed apart from this package (Python's
// hashlib and base64.urlsafe_b64encode, padding stripped).
func TestDigestRecorded(t *testing.T) {
	for _, tt := range []struct{ key, want string }{
		{"refund-order-7-first", "pDdJ5dS5yXNJC67K"},
		{"c522b263-0000", "nI2-Wzw2yME9x_pt"},
		{"", ""},
	} {
		if got := Digest(tt.key); got != tt.want {
			t.Errorf("KeyDigest(%q) = %q, want %q", tt.key, got, tt.want)
		}
	}
}

// TestQuoteKey: RFC 8941 section 4.1.6, String serialization.
func TestQuote(t *testing.T) {
	for key, want := range map[string]string{
		"8e03978e-40d5-43e8-bc93-6894a57f9324": `"8e03978e-40d5-43e8-bc93-6894a57f9324"`,
		`a"b\c`:                                `"a\"b\\c"`,
		`"`:                                    `"\""`,
		`\`:                                    `"\\"`,
		"":                                     `""`,
		"!#$%&'()*+,-./:;<=>?@[]^_{|}~":        `"!#$%&'()*+,-./:;<=>?@[]^_{|}~"`,
	} {
		if got := Quote(key); got != want {
			t.Errorf("QuoteKey(%q) = %s, want %s", key, got, want)
		}
	}
}
