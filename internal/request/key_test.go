package request

import "testing"

func TestDeriveKey(t *testing.T) {
	k := DeriveKey("ns", "order-1", "charge")
	if len(k) != 36 {
		t.Fatalf("key %q: want a UUID of 36 characters", k)
	}
	if again := DeriveKey("ns", "order-1", "charge"); again != k {
		t.Errorf("not stable: %q then %q", k, again)
	}
	for _, other := range []struct{ ns, id, op string }{
		{"prod", "order-1", "charge"},
		{"ns", "order-2", "charge"},
		{"ns", "order-1", "refund"},
		{"ns", "order-1charge", ""},
	} {
		if got := DeriveKey(other.ns, other.id, other.op); got == k {
			t.Errorf("DeriveKey%v = %q, the same as another call's", other, got)
		}
	}
}

// TestDeriveKeyRecorded: keys are recorded in histories and in the APIs'
// stores, so the derivation never changes (a periodic operation names its
// period in the operation: one key per period).
func TestDeriveKeyRecorded(t *testing.T) {
	for _, tt := range []struct{ period, want string }{
		{"2026-11", "c522b263"},
		{"2026-12", "328237d4"},
	} {
		if got := DeriveKey("default", "subscription-42", "charge-"+tt.period)[:8]; got != tt.want {
			t.Errorf("%s: key starts %q, want %q", tt.period, got, tt.want)
		}
	}
}

func TestSummary(t *testing.T) {
	tests := []struct{ method, url, op, want string }{
		{"POST", "https://api.example.com/payments?x=1", "charge", "POST api.example.com/payments (charge)"},
		{"PUT", "http://127.0.0.1:8081/orders/7", "", "PUT 127.0.0.1:8081/orders/7"},
	}
	for _, tt := range tests {
		if got := Summary(tt.method, tt.url, tt.op); got != tt.want {
			t.Errorf("Summary(%q, %q, %q) = %q, want %q", tt.method, tt.url, tt.op, got, tt.want)
		}
	}
}

// TestKeyDigestRecorded: a key's digest is in the callback URLs providers
// hold and in the events' metadata, for days, and in histories, so the
// derivation never changes; it is one URL path segment, and no key has
// none. The wants were computed apart from this package (Python's
// hashlib and base64.urlsafe_b64encode, padding stripped).
func TestKeyDigestRecorded(t *testing.T) {
	for _, tt := range []struct{ key, want string }{
		{"refund-order-7-first", "pDdJ5dS5yXNJC67K"},
		{"c522b263-0000", "nI2-Wzw2yME9x_pt"},
		{"", ""},
	} {
		if got := KeyDigest(tt.key); got != tt.want {
			t.Errorf("KeyDigest(%q) = %q, want %q", tt.key, got, tt.want)
		}
	}
}
