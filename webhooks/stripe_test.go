package webhooks_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/internal/signature"
	"github.com/idemhttp/temporal-idempotent-http/webhooks"
)

const (
	stripeSecret1 = "whsec_test_4eC39HqLyjWDarjtT1zdp7dc"
	stripeSecret2 = "whsec_rotated_Jq8bS0mF7wUe2Lk9aXc3"
	stripeBody    = `{"id":"evt_1Q","object":"event","type":"payment_intent.succeeded","data":{"object":{"amount":1200,"description":"naïve ☕"}}}`
)

func stripeHeader(ts int64, body string, secrets ...string) http.Header {
	h := http.Header{}
	h.Set("Stripe-Signature", signature.Stripe(ts, []byte(body), secrets...))
	return h
}

// independentStripe is the hex v1 signature, computed here rather than by
// package signature.
func independentStripe(secret, ts string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts + "."))
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

func TestStripe(t *testing.T) {
	v, err := webhooks.StripeVerifier(stripeSecret1, stripeSecret2)
	if err != nil {
		t.Fatal(err)
	}
	if v.Scheme() != "stripe" || v.RejectStatus() != 400 {
		t.Fatalf("Scheme %q, RejectStatus %d", v.Scheme(), v.RejectStatus())
	}
	ts := t0.Unix()
	tss := strconv.FormatInt(ts, 10)
	good := independentStripe(stripeSecret1, tss, []byte(stripeBody))
	hdr := func(s string) http.Header { return http.Header{"Stripe-Signature": {s}} }
	tests := []struct {
		name string
		h    http.Header
		body string
		now  time.Time
		want error
	}{
		{"valid", stripeHeader(ts, stripeBody, stripeSecret1), stripeBody, t0, nil},
		{"valid, the rotated-in secret", stripeHeader(ts, stripeBody, stripeSecret2), stripeBody, t0, nil},
		{"both secrets", stripeHeader(ts, stripeBody, stripeSecret2, stripeSecret1), stripeBody, t0, nil},
		{"v0 and a wrong v1 before the valid one", hdr("t=" + tss + ",v0=" + good + ",v1=" + strings.Repeat("0", 64) + ",v1=" + good), stripeBody, t0, nil},
		{"unknown items ignored", hdr("t=" + tss + ",scheme=x,novalue,v1=" + good), stripeBody, t0, nil},
		{"the last t= wins", hdr("t=1,v1=" + good + ",t=" + tss), stripeBody, t0, nil},
		{"tampered body", stripeHeader(ts, stripeBody, stripeSecret1), strings.Replace(stripeBody, "1200", "1300", 1), t0, webhooks.ErrSignature},
		{"tampered t", hdr("t=" + strconv.FormatInt(ts-1, 10) + ",v1=" + good), stripeBody, t0, webhooks.ErrSignature},
		{"wrong secret", stripeHeader(ts, stripeBody, "whsec_someone_else"), stripeBody, t0, webhooks.ErrSignature},
		{"the secret decoded is not Stripe's key", stripeHeader(ts, stripeBody, strings.TrimPrefix(stripeSecret1, "whsec_")), stripeBody, t0, webhooks.ErrSignature},
		{"upper-case hex", hdr("t=" + tss + ",v1=" + strings.ToUpper(good)), stripeBody, t0, webhooks.ErrSignature},
		{"v0 only", hdr("t=" + tss + ",v0=" + good), stripeBody, t0, webhooks.ErrSignature},
		{"a space after the comma", hdr("t=" + tss + ", v1=" + good), stripeBody, t0, webhooks.ErrSignature},
		{"valid past the 16th v1", hdr("t=" + tss + strings.Repeat(",v1=00", 16) + ",v1=" + good), stripeBody, t0, webhooks.ErrSignature},
		{"valid as the 16th v1", hdr("t=" + tss + strings.Repeat(",v1=00", 15) + ",v1=" + good), stripeBody, t0, nil},
		{"header too long", hdr("t=" + tss + ",v1=" + good + strings.Repeat(",x", 4<<10)), stripeBody, t0, webhooks.ErrSignature},
		{"missing header", http.Header{}, stripeBody, t0, webhooks.ErrSignature},
		{"no t", hdr("v1=" + good), stripeBody, t0, webhooks.ErrTimestamp},
		{"t not a number", hdr("t=now,v1=" + good), stripeBody, t0, webhooks.ErrTimestamp},
		{"t with trailing junk", hdr("t=" + tss + "x,v1=" + good), stripeBody, t0, webhooks.ErrTimestamp},
		{"300 s old: the edge, accepted", stripeHeader(ts, stripeBody, stripeSecret1), stripeBody, t0.Add(300 * time.Second), nil},
		{"300.9 s old: accepted (whole seconds)", stripeHeader(ts, stripeBody, stripeSecret1), stripeBody, t0.Add(300*time.Second + 900*time.Millisecond), nil},
		{"301 s old", stripeHeader(ts, stripeBody, stripeSecret1), stripeBody, t0.Add(301 * time.Second), webhooks.ErrTimestamp},
		{"301 s ahead: accepted, as stripe-node does", stripeHeader(ts, stripeBody, stripeSecret1), stripeBody, t0.Add(-301 * time.Second), nil},
		{"a day ahead: accepted, as stripe-node does", stripeHeader(ts, stripeBody, stripeSecret1), stripeBody, t0.AddDate(0, 0, -1), nil},
		{"no id", stripeHeader(ts, `{"type":"x"}`, stripeSecret1), `{"type":"x"}`, t0, webhooks.ErrEvent},
		{"id not a string", stripeHeader(ts, `{"id":{"a":1}}`, stripeSecret1), `{"id":{"a":1}}`, t0, webhooks.ErrEvent},
		{"body not JSON", stripeHeader(ts, "id=evt_1", stripeSecret1), "id=evt_1", t0, webhooks.ErrEvent},
		{"empty body", stripeHeader(ts, "", stripeSecret1), "", t0, webhooks.ErrEvent},
		{"body a JSON array", stripeHeader(ts, `[{"id":"evt_1"}]`, stripeSecret1), `[{"id":"evt_1"}]`, t0, webhooks.ErrEvent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev, err := v.Verify(tt.h, []byte(tt.body), tt.now)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Verify: %v", err)
				}
				if ev != (webhooks.Event{ID: "evt_1Q", Type: "payment_intent.succeeded", Time: time.Unix(ts, 0)}) {
					t.Fatalf("event %+v", ev)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("Verify: %v, want %v", err, tt.want)
			}
			assertClean(t, err, stripeSecret1, stripeSecret2, good)
		})
	}
}

func TestStripeErrors(t *testing.T) {
	v, _ := webhooks.StripeVerifier(stripeSecret1)
	_, err := v.Verify(stripeHeader(t0.Unix(), stripeBody, stripeSecret2), []byte(stripeBody), t0)
	if err == nil || !strings.Contains(err.Error(), "no signature matches the secret: check the endpoint's signing secret") {
		t.Errorf("wrong secret: %v", err)
	}
	_, err = v.Verify(stripeHeader(t0.Unix(), stripeBody, stripeSecret1), []byte(stripeBody), t0.Add(time.Hour))
	if err == nil || !strings.Contains(err.Error(), "is 1h0m0s old, past the tolerance of 5m0s") {
		t.Errorf("old: %v", err)
	}
	_, err = v.Verify(stripeHeader(t0.Unix(), `{"type":"x"}`, stripeSecret1), []byte(`{"type":"x"}`), t0)
	if err == nil || !strings.Contains(err.Error(), `no top-level "id"`) {
		t.Errorf("no id: %v", err)
	}
	for _, secrets := range [][]string{nil, {""}, {" "}, {stripeSecret1, "whsec_x\n"}} {
		if _, err := webhooks.StripeVerifier(secrets...); err == nil {
			t.Errorf("Stripe(%q): no error", secrets)
		}
	}
}

func FuzzStripe(f *testing.F) {
	ts := t0.Unix()
	f.Add(signature.Stripe(ts, []byte(stripeBody), stripeSecret1), []byte(stripeBody), int64(0))
	f.Add("t=1,v1=00,t="+strconv.FormatInt(ts, 10)+",v1="+independentStripe(stripeSecret2, strconv.FormatInt(ts, 10), []byte(`{"id":7}`)), []byte(`{"id":7}`), int64(300))
	f.Add("t=,v1=", []byte("{"), int64(-1000))
	f.Add(",,,=,t==,v1==", []byte(nil), int64(0))
	v, err := webhooks.StripeVerifier(stripeSecret1, stripeSecret2)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, header string, body []byte, skew int64) {
		skew %= 1 << 40
		now := t0.Add(time.Duration(skew) * time.Second)
		ev, err := v.Verify(http.Header{"Stripe-Signature": {header}}, body, now)
		if err != nil {
			if !errors.Is(err, webhooks.ErrSignature) && !errors.Is(err, webhooks.ErrTimestamp) && !errors.Is(err, webhooks.ErrEvent) {
				t.Fatalf("error wraps no sentinel: %v", err)
			}
			// Neither a secret nor a received signature of some length.
			values := []string{stripeSecret1, stripeSecret2}
			for item := range strings.SplitSeq(header, ",") {
				if _, val, _ := strings.Cut(item, "="); len(val) >= 16 {
					if _, herr := hex.DecodeString(val); herr == nil {
						values = append(values, val)
					}
				}
			}
			assertClean(t, err, values...)
			return
		}
		canon := strconv.FormatInt(ev.Time.Unix(), 10)
		want := []string{"v1=" + independentStripe(stripeSecret1, canon, body), "v1=" + independentStripe(stripeSecret2, canon, body)}
		found, n := false, 0
		for item := range strings.SplitSeq(header, ",") {
			if strings.HasPrefix(item, "v1=") {
				if n++; n <= 16 && (item == want[0] || item == want[1]) {
					found = true
				}
			}
		}
		if !found || ev.ID == "" {
			t.Fatalf("accepted without a matching signature or an ID: %q %q: %+v", header, body, ev)
		}
		if age := now.Unix() - ev.Time.Unix(); age > 300 {
			t.Fatalf("accepted %d s old", age)
		}
	})
}
