package webhooks_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/webhooks"
)

const (
	hmacSecret1 = "It's a Secret to Everybody"
	hmacSecret2 = "rotated-in secret"
	hmacBody    = `{"id":"d-42","type":"push","zen":"Ünïcödé 🚀"}`
)

// independentHMAC is HMAC-SHA256 of the content, computed here.
func independentHMAC(secret string, content ...string) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	for _, c := range content {
		m.Write([]byte(c))
	}
	return m.Sum(nil)
}

func TestHMAC(t *testing.T) {
	ts := strconv.FormatInt(t0.Unix(), 10)
	github := webhooks.HMACOptions{Secrets: []string{hmacSecret1, hmacSecret2}, Header: "X-Hub-Signature-256", Prefix: "sha256=", IDHeader: "X-GitHub-Delivery", TypeField: "action"}
	githubTyped := webhooks.HMACOptions{Secrets: []string{hmacSecret1}, Header: "X-Hub-Signature-256", Prefix: "sha256=", IDHeader: "X-GitHub-Delivery", TypeHeader: "X-GitHub-Event"}
	shopify := webhooks.HMACOptions{Secrets: []string{hmacSecret1}, Header: "X-Shopify-Hmac-Sha256", Encoding: "base64", IDHeader: "X-Shopify-Webhook-Id", TypeHeader: "X-Shopify-Topic"}
	shopifySig := func(body string) string { return base64.StdEncoding.EncodeToString(independentHMAC(hmacSecret1, body)) }
	plain := webhooks.HMACOptions{Secrets: []string{hmacSecret1}}
	typedPlain := webhooks.HMACOptions{Secrets: []string{hmacSecret1}, TypeHeader: "X-Event-Type"}
	timed := webhooks.HMACOptions{Secrets: []string{hmacSecret1}, Encoding: "base64", TimestampHeader: "X-Timestamp", Tolerance: time.Minute}
	ghSig := func(secret, body string) string { return "sha256=" + hex.EncodeToString(independentHMAC(secret, body)) }
	plainSig := hex.EncodeToString(independentHMAC(hmacSecret1, hmacBody))
	timedSig := base64.StdEncoding.EncodeToString(independentHMAC(hmacSecret1, ts+".", hmacBody))
	h := func(kv ...string) http.Header {
		h := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			h.Add(kv[i], kv[i+1])
		}
		return h
	}
	ghBody := `{"action":"completed","zen":"ok"}`
	tests := []struct {
		name   string
		o      webhooks.HMACOptions
		h      http.Header
		body   string
		now    time.Time
		want   error
		wantEv webhooks.Event
	}{
		{"GitHub style", github, h("X-Hub-Signature-256", ghSig(hmacSecret1, ghBody), "X-GitHub-Delivery", "72d3162e"), ghBody, t0, nil, webhooks.Event{ID: "72d3162e", Type: "completed"}},
		{"GitHub style, rotated-in secret", github, h("X-Hub-Signature-256", ghSig(hmacSecret2, ghBody), "X-GitHub-Delivery", "72d3162e"), ghBody, t0, nil, webhooks.Event{ID: "72d3162e", Type: "completed"}},
		{"GitHub style, no delivery header", github, h("X-Hub-Signature-256", ghSig(hmacSecret1, ghBody)), ghBody, t0, webhooks.ErrEvent, webhooks.Event{}},
		{"GitHub style, no prefix", github, h("X-Hub-Signature-256", strings.TrimPrefix(ghSig(hmacSecret1, ghBody), "sha256="), "X-GitHub-Delivery", "1"), ghBody, t0, webhooks.ErrSignature, webhooks.Event{}},
		{"GitHub style, sha1= prefix", github, h("X-Hub-Signature-256", "sha1="+strings.TrimPrefix(ghSig(hmacSecret1, ghBody), "sha256="), "X-GitHub-Delivery", "1"), ghBody, t0, webhooks.ErrSignature, webhooks.Event{}},
		{"GitHub style, type from X-GitHub-Event", githubTyped, h("X-Hub-Signature-256", ghSig(hmacSecret1, ghBody), "X-GitHub-Delivery", "72d3162e", "X-GitHub-Event", "check_run"), ghBody, t0, nil, webhooks.Event{ID: "72d3162e", Type: "check_run"}},
		{"GitHub style, body not JSON", githubTyped, h("X-Hub-Signature-256", ghSig(hmacSecret1, "payload=%7B%7D"), "X-GitHub-Delivery", "72d3162e", "X-GitHub-Event", "push"), "payload=%7B%7D", t0, nil, webhooks.Event{ID: "72d3162e", Type: "push"}},
		{"GitHub style, no X-GitHub-Event: no type", githubTyped, h("X-Hub-Signature-256", ghSig(hmacSecret1, ghBody), "X-GitHub-Delivery", "72d3162e"), ghBody, t0, nil, webhooks.Event{ID: "72d3162e"}},
		{"GitHub style, X-GitHub-Event too long", githubTyped, h("X-Hub-Signature-256", ghSig(hmacSecret1, ghBody), "X-GitHub-Delivery", "72d3162e", "X-GitHub-Event", strings.Repeat("x", 8<<10+1)), ghBody, t0, webhooks.ErrEvent, webhooks.Event{}},
		{"GitHub style, forged: the type header does not help", githubTyped, h("X-Hub-Signature-256", ghSig("guess", ghBody), "X-GitHub-Delivery", "72d3162e", "X-GitHub-Event", "push"), ghBody, t0, webhooks.ErrSignature, webhooks.Event{}},
		{"Shopify style", shopify, h("X-Shopify-Hmac-Sha256", shopifySig(hmacBody), "X-Shopify-Webhook-Id", "b54557e4", "X-Shopify-Topic", "orders/paid"), hmacBody, t0, nil, webhooks.Event{ID: "b54557e4", Type: "orders/paid"}},
		{"Shopify style, hex instead of base64", shopify, h("X-Shopify-Hmac-Sha256", hex.EncodeToString(independentHMAC(hmacSecret1, hmacBody)), "X-Shopify-Webhook-Id", "b54557e4"), hmacBody, t0, webhooks.ErrSignature, webhooks.Event{}},
		{"ID from the body, type from a header", typedPlain, h("X-Signature", plainSig, "X-Event-Type", "refund.created"), hmacBody, t0, nil, webhooks.Event{ID: "d-42", Type: "refund.created"}},
		{"ID from the body, type header missing: not the body's", typedPlain, h("X-Signature", plainSig), hmacBody, t0, nil, webhooks.Event{ID: "d-42"}},
		{"plain, ID and type from the body", plain, h("X-Signature", plainSig), hmacBody, t0, nil, webhooks.Event{ID: "d-42", Type: "push"}},
		{"plain, upper-case hex", plain, h("X-Signature", strings.ToUpper(plainSig)), hmacBody, t0, nil, webhooks.Event{ID: "d-42", Type: "push"}},
		{"plain, a numeric ID", plain, h("X-Signature", hex.EncodeToString(independentHMAC(hmacSecret1, `{"id":123}`))), `{"id":123}`, t0, nil, webhooks.Event{ID: "123"}},
		{"plain, several signatures, one valid", plain, h("X-Signature", "00ff, zz,"+plainSig), hmacBody, t0, nil, webhooks.Event{ID: "d-42", Type: "push"}},
		{"plain, two header lines", plain, h("X-Signature", "00ff", "X-Signature", plainSig), hmacBody, t0, nil, webhooks.Event{ID: "d-42", Type: "push"}},
		{"plain, valid past the 16th", plain, h("X-Signature", strings.Repeat("00,", 16)+plainSig), hmacBody, t0, webhooks.ErrSignature, webhooks.Event{}},
		{"plain, tampered body", plain, h("X-Signature", plainSig), strings.Replace(hmacBody, "42", "43", 1), t0, webhooks.ErrSignature, webhooks.Event{}},
		{"plain, wrong secret", plain, h("X-Signature", hex.EncodeToString(independentHMAC("guess", hmacBody))), hmacBody, t0, webhooks.ErrSignature, webhooks.Event{}},
		{"plain, not hex", plain, h("X-Signature", "sha256="+plainSig), hmacBody, t0, webhooks.ErrSignature, webhooks.Event{}},
		{"plain, missing header", plain, h(), hmacBody, t0, webhooks.ErrSignature, webhooks.Event{}},
		{"plain, header too long", plain, h("X-Signature", plainSig+strings.Repeat(" ", 8<<10)), hmacBody, t0, webhooks.ErrSignature, webhooks.Event{}},
		{"plain, no id in the body", plain, h("X-Signature", hex.EncodeToString(independentHMAC(hmacSecret1, `{"type":"x","data":{"id":"nested"}}`))), `{"type":"x","data":{"id":"nested"}}`, t0, webhooks.ErrEvent, webhooks.Event{}},
		{"plain, body not JSON", plain, h("X-Signature", hex.EncodeToString(independentHMAC(hmacSecret1, "id=1"))), "id=1", t0, webhooks.ErrEvent, webhooks.Event{}},
		{"timed", timed, h("X-Signature", timedSig, "X-Timestamp", ts), hmacBody, t0, nil, webhooks.Event{ID: "d-42", Type: "push", Time: t0}},
		{"timed, 60 s old: the edge", timed, h("X-Signature", timedSig, "X-Timestamp", ts), hmacBody, t0.Add(time.Minute), nil, webhooks.Event{ID: "d-42", Type: "push", Time: t0}},
		{"timed, 61 s old", timed, h("X-Signature", timedSig, "X-Timestamp", ts), hmacBody, t0.Add(61 * time.Second), webhooks.ErrTimestamp, webhooks.Event{}},
		{"timed, 60 s ahead: the edge", timed, h("X-Signature", timedSig, "X-Timestamp", ts), hmacBody, t0.Add(-time.Minute), nil, webhooks.Event{ID: "d-42", Type: "push", Time: t0}},
		{"timed, 61 s ahead", timed, h("X-Signature", timedSig, "X-Timestamp", ts), hmacBody, t0.Add(-61 * time.Second), webhooks.ErrTimestamp, webhooks.Event{}},
		{"timed, the body alone signed", timed, h("X-Signature", base64.StdEncoding.EncodeToString(independentHMAC(hmacSecret1, hmacBody)), "X-Timestamp", ts), hmacBody, t0, webhooks.ErrSignature, webhooks.Event{}},
		{"timed, timestamp changed", timed, h("X-Signature", timedSig, "X-Timestamp", strconv.FormatInt(t0.Unix()+1, 10)), hmacBody, t0, webhooks.ErrSignature, webhooks.Event{}},
		{"timed, timestamp missing", timed, h("X-Signature", timedSig), hmacBody, t0, webhooks.ErrTimestamp, webhooks.Event{}},
		{"timed, timestamp signed", timed, h("X-Signature", timedSig, "X-Timestamp", "+"+ts), hmacBody, t0, webhooks.ErrTimestamp, webhooks.Event{}},
		{"timed, timestamp in ms", timed, h("X-Signature", timedSig, "X-Timestamp", ts+"000"), hmacBody, t0, webhooks.ErrTimestamp, webhooks.Event{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := webhooks.HMACVerifier(tt.o)
			if err != nil {
				t.Fatal(err)
			}
			if v.Scheme() != "hmac" || v.RejectStatus() != 401 {
				t.Fatalf("Scheme %q, RejectStatus %d", v.Scheme(), v.RejectStatus())
			}
			ev, err := v.Verify(tt.h, []byte(tt.body), tt.now)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Verify: %v", err)
				}
				if !ev.Time.Equal(tt.wantEv.Time) || ev.ID != tt.wantEv.ID || ev.Type != tt.wantEv.Type {
					t.Fatalf("event %+v, want %+v", ev, tt.wantEv)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("Verify: %v, want %v", err, tt.want)
			}
			assertClean(t, err, hmacSecret1, hmacSecret2, plainSig, timedSig)
		})
	}
}

func TestHMACOptions(t *testing.T) {
	for _, tt := range []struct {
		name string
		o    webhooks.HMACOptions
		want string
	}{
		{"no secret", webhooks.HMACOptions{}, "no secret"},
		{"an empty secret", webhooks.HMACOptions{Secrets: []string{hmacSecret1, ""}}, "secret 2 of 2 is empty"},
		{"an encoding", webhooks.HMACOptions{Secrets: []string{hmacSecret1}, Encoding: "base32"}, `Encoding "base32"`},
		{"a negative tolerance", webhooks.HMACOptions{Secrets: []string{hmacSecret1}, Tolerance: -time.Second}, "negative"},
		{"a tolerance under a second", webhooks.HMACOptions{Secrets: []string{hmacSecret1}, Tolerance: time.Millisecond}, "under a second"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := webhooks.HMACVerifier(tt.o)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("HMAC: %v, want %q", err, tt.want)
			}
		})
	}
	// The defaults: X-Signature, hex, 5 minutes, "id", "type".
	v, err := webhooks.HMACVerifier(webhooks.HMACOptions{Secrets: []string{hmacSecret1}, TimestampHeader: "X-T"})
	if err != nil {
		t.Fatal(err)
	}
	ts := strconv.FormatInt(t0.Unix(), 10)
	h := http.Header{"X-Signature": {hex.EncodeToString(independentHMAC(hmacSecret1, ts+".", hmacBody))}, "X-T": {ts}}
	for _, d := range []time.Duration{-300 * time.Second, 300 * time.Second} {
		if _, err := v.Verify(h, []byte(hmacBody), t0.Add(d)); err != nil {
			t.Errorf("at %v: %v", d, err)
		}
	}
	for _, d := range []time.Duration{-301 * time.Second, 301 * time.Second} {
		if _, err := v.Verify(h, []byte(hmacBody), t0.Add(d)); !errors.Is(err, webhooks.ErrTimestamp) {
			t.Errorf("at %v: %v", d, err)
		}
	}
}

func FuzzHMAC(f *testing.F) {
	ts := strconv.FormatInt(t0.Unix(), 10)
	f.Add("sha256="+hex.EncodeToString(independentHMAC(hmacSecret1, ts+".", hmacBody)), ts, []byte(hmacBody), int64(0), false)
	f.Add(base64.StdEncoding.EncodeToString(independentHMAC(hmacSecret2, ts+".", `{"id":1}`)), ts, []byte(`{"id":1}`), int64(60), true)
	f.Add("sha256=zz,,sha256=", "-1", []byte("{"), int64(-61), false)
	vs := map[bool]webhooks.Verifier{}
	for _, b64 := range []bool{false, true} {
		o := webhooks.HMACOptions{Secrets: []string{hmacSecret1, hmacSecret2}, Prefix: "sha256=", TimestampHeader: "X-Timestamp", Tolerance: time.Minute}
		if b64 {
			// The type from a header: the fuzzed timestamp, sent as X-Type too.
			o.Encoding, o.Prefix, o.TypeHeader = "base64", "", "X-Type"
		}
		v, err := webhooks.HMACVerifier(o)
		if err != nil {
			f.Fatal(err)
		}
		vs[b64] = v
	}
	f.Fuzz(func(t *testing.T, sig, tsHeader string, body []byte, skew int64, b64 bool) {
		skew %= 1 << 40
		now := t0.Add(time.Duration(skew) * time.Second)
		ev, err := vs[b64].Verify(http.Header{"X-Signature": {sig}, "X-Timestamp": {tsHeader}, "X-Type": {tsHeader}}, body, now)
		if err != nil {
			if !errors.Is(err, webhooks.ErrSignature) && !errors.Is(err, webhooks.ErrTimestamp) && !errors.Is(err, webhooks.ErrEvent) {
				t.Fatalf("error wraps no sentinel: %v", err)
			}
			assertClean(t, err, hmacSecret1, hmacSecret2)
			return
		}
		// Accepted: one of the first 16 entries decodes to the MAC of one
		// secret over "timestamp.body", the timestamp within a minute.
		found, n := false, 0
		for _, e := range strings.FieldsFunc(sig, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' }) {
			if n++; n > 16 {
				break
			}
			var got []byte
			if b64 {
				got, _ = base64.StdEncoding.DecodeString(e)
			} else if rest, ok := strings.CutPrefix(e, "sha256="); ok {
				got, _ = hex.DecodeString(rest)
			}
			for _, s := range []string{hmacSecret1, hmacSecret2} {
				if hmac.Equal(got, independentHMAC(s, tsHeader+".", string(body))) {
					found = true
				}
			}
		}
		if !found || ev.ID == "" {
			t.Fatalf("accepted without a matching signature or an ID: %q %q %q: %+v", sig, tsHeader, body, ev)
		}
		n64, perr := strconv.ParseInt(tsHeader, 10, 64)
		if d := now.Unix() - ev.Time.Unix(); d > 60 || d < -60 || perr != nil || n64 != ev.Time.Unix() {
			t.Fatalf("accepted timestamp %q, %d s from now", tsHeader, d)
		}
		if b64 && ev.Type != tsHeader {
			t.Fatalf("type %q, want X-Type's %q", ev.Type, tsHeader)
		}
	})
}
