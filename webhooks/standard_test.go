package webhooks_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/internal/signature"
	"github.com/idemhttp/temporal-idempotent-http/webhooks"
)

// The test secrets: Standard Webhooks keys, and the same as whsec_ secrets.
var (
	stdKey1    = []byte("0123456789abcdef0123456789abcdef")
	stdKey2    = []byte("another key, rotated in: 32 byte")
	stdSecret1 = "whsec_" + base64.StdEncoding.EncodeToString(stdKey1)
	stdSecret2 = base64.StdEncoding.EncodeToString(stdKey2) // bare base64
	stdWrong   = "whsec_" + base64.StdEncoding.EncodeToString([]byte("not the endpoint's key, 32 bytes"))
)

const stdBody = `{"type":"payment.succeeded","id":"ignored","data":{"amount":1200,"note":"café ✓"}}`

// stdHeaders signs body as a Standard Webhooks sender does, with one
// signature per key.
func stdHeaders(id string, ts int64, body string, keys ...[]byte) http.Header {
	h := http.Header{}
	h.Set("webhook-id", id)
	h.Set("webhook-timestamp", strconv.FormatInt(ts, 10))
	var sigs []string
	for _, k := range keys {
		sigs = append(sigs, signature.Standard(k, id, ts, []byte(body)))
	}
	h.Set("webhook-signature", strings.Join(sigs, " "))
	return h
}

// independentStd is the "v1,<base64>" of a message, computed here rather
// than by package signature.
func independentStd(key []byte, id, ts string, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + ts + "."))
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

func TestStandardWebhooks(t *testing.T) {
	v, err := webhooks.StandardWebhooksVerifier(stdSecret1, stdSecret2)
	if err != nil {
		t.Fatal(err)
	}
	if v.Scheme() != "standard-webhooks" || v.RejectStatus() != 400 {
		t.Fatalf("Scheme %q, RejectStatus %d", v.Scheme(), v.RejectStatus())
	}
	ts := t0.Unix()
	with := func(h http.Header, k, val string) http.Header {
		h = h.Clone()
		h.Set(k, val)
		return h
	}
	valid := stdHeaders("msg_1", ts, stdBody, stdKey1)
	good := signature.Standard(stdKey1, "msg_1", ts, []byte(stdBody))
	tests := []struct {
		name string
		h    http.Header
		body string
		now  time.Time
		want error // nil: verifies
	}{
		{"valid", valid, stdBody, t0, nil},
		{"valid, the rotated-in secret (bare base64)", stdHeaders("msg_1", ts, stdBody, stdKey2), stdBody, t0, nil},
		{"both secrets' signatures", stdHeaders("msg_1", ts, stdBody, stdKey1, stdKey2), stdBody, t0, nil},
		{"valid, body not JSON (the ID is a header)", stdHeaders("msg_1", ts, "plain text", stdKey1), "plain text", t0, nil},
		{"valid, empty body", stdHeaders("msg_1", ts, "", stdKey1), "", t0, nil},
		{"tampered body", valid, strings.Replace(stdBody, "1200", "1201", 1), t0, webhooks.ErrSignature},
		{"tampered id", with(valid, "webhook-id", "msg_2"), stdBody, t0, webhooks.ErrSignature},
		{"tampered timestamp", with(valid, "webhook-timestamp", strconv.FormatInt(ts+1, 10)), stdBody, t0, webhooks.ErrSignature},
		{"wrong secret", stdHeaders("msg_1", ts, stdBody, []byte("not the endpoint's key, 32 bytes")), stdBody, t0, webhooks.ErrSignature},
		{"one valid among others", with(valid, "webhook-signature", "v1,AAAA v1a,xyz "+good+" v2,abc"), stdBody, t0, nil},
		{"several spaces between", with(valid, "webhook-signature", "v1,AAAA   "+good), stdBody, t0, nil},
		{"valid signature past the 16th", with(valid, "webhook-signature", strings.Repeat("v1,AAAA ", 16)+good), stdBody, t0, webhooks.ErrSignature},
		{"valid signature as the 16th", with(valid, "webhook-signature", strings.Repeat("v1,AAAA ", 15)+good), stdBody, t0, nil},
		{"another version only", with(valid, "webhook-signature", "v1a,"+strings.TrimPrefix(good, "v1,")), stdBody, t0, webhooks.ErrSignature},
		{"trailing junk after the signature", with(valid, "webhook-signature", good+",x"), stdBody, t0, webhooks.ErrSignature},
		{"no version", with(valid, "webhook-signature", strings.TrimPrefix(good, "v1,")), stdBody, t0, webhooks.ErrSignature},
		{"header too long", with(valid, "webhook-signature", good+strings.Repeat(" ", 8<<10)), stdBody, t0, webhooks.ErrSignature},
		{"missing webhook-id", with(valid, "webhook-id", ""), stdBody, t0, webhooks.ErrSignature},
		{"missing webhook-signature", with(valid, "webhook-signature", ""), stdBody, t0, webhooks.ErrSignature},
		{"only spaces in webhook-signature", with(valid, "webhook-signature", "   "), stdBody, t0, webhooks.ErrSignature},
		{"missing webhook-timestamp", with(valid, "webhook-timestamp", ""), stdBody, t0, webhooks.ErrTimestamp},
		{"timestamp not a number", with(valid, "webhook-timestamp", "yesterday"), stdBody, t0, webhooks.ErrTimestamp},
		{"timestamp with a fraction", with(valid, "webhook-timestamp", strconv.FormatInt(ts, 10)+".5"), stdBody, t0, webhooks.ErrTimestamp},
		{"timestamp overflows", with(valid, "webhook-timestamp", "99999999999999999999"), stdBody, t0, webhooks.ErrTimestamp},
		{"300 s old: the edge, accepted", valid, stdBody, t0.Add(300 * time.Second), nil},
		{"300.999 s old: accepted (whole seconds)", valid, stdBody, t0.Add(300*time.Second + 999*time.Millisecond), nil},
		{"301 s old", valid, stdBody, t0.Add(301 * time.Second), webhooks.ErrTimestamp},
		{"300 s ahead: the edge, accepted", valid, stdBody, t0.Add(-300 * time.Second), nil},
		{"301 s ahead", valid, stdBody, t0.Add(-301 * time.Second), webhooks.ErrTimestamp},
		{"a year old", valid, stdBody, t0.AddDate(1, 0, 0), webhooks.ErrTimestamp},
		{"timestamp far in the past", stdHeaders("m", -1<<62, stdBody, stdKey1), stdBody, t0, webhooks.ErrTimestamp},
		{"timestamp far in the future", stdHeaders("m", 1<<62, stdBody, stdKey1), stdBody, t0, webhooks.ErrTimestamp},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev, err := v.Verify(tt.h, []byte(tt.body), tt.now)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Verify: %v", err)
				}
				wantType := ""
				if tt.body == stdBody {
					wantType = "payment.succeeded"
				}
				if ev.ID != tt.h.Get("webhook-id") || ev.Type != wantType || !ev.Time.Equal(time.Unix(ts, 0)) && tt.h.Get("webhook-timestamp") == strconv.FormatInt(ts, 10) {
					t.Fatalf("event %+v", ev)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("Verify: %v, want %v", err, tt.want)
			}
			assertClean(t, err, stdSecret1, stdSecret2, good)
		})
	}
}

func TestStandardWebhooksErrors(t *testing.T) {
	v, _ := webhooks.StandardWebhooksVerifier(stdSecret1, stdSecret2)
	h := stdHeaders("msg_1", t0.Unix(), stdBody, []byte("not the endpoint's key, 32 bytes"))
	_, err := v.Verify(h, []byte(stdBody), t0)
	if err == nil || !strings.Contains(err.Error(), "no signature matches any of the 2 secrets: check the endpoint's signing secret") {
		t.Errorf("wrong secret: %v", err)
	}
	_, err = v.Verify(stdHeaders("msg_1", t0.Unix(), stdBody, stdKey1), []byte(stdBody), t0.Add(7*time.Minute))
	if err == nil || !strings.Contains(err.Error(), "Webhook-Timestamp is 7m0s old, past the tolerance of 5m0s") {
		t.Errorf("old: %v", err)
	}
	_, err = v.Verify(stdHeaders("msg_1", t0.Unix(), stdBody, stdKey1), []byte(stdBody), t0.Add(-6*time.Minute))
	if err == nil || !strings.Contains(err.Error(), "6m0s in the future") {
		t.Errorf("new: %v", err)
	}
	h.Del("webhook-id")
	if _, err = v.Verify(h, []byte(stdBody), t0); err == nil || !strings.Contains(err.Error(), "Webhook-Id header is missing") {
		t.Errorf("no ID: %v", err)
	}
}

func TestStandardWebhooksSecrets(t *testing.T) {
	for _, tt := range []struct {
		name    string
		secrets []string
		want    string // substring of the error; "" for none
	}{
		{"whsec_ and bare", []string{stdSecret1, stdSecret2}, ""},
		{"none", nil, "no secret"},
		{"empty", []string{stdSecret1, ""}, "secret 2 of 2 is empty"},
		{"bad base64 after whsec_", []string{"whsec_not*base64"}, "secret 1 of 1 is not \"whsec_\" and standard base64"},
		{"only the prefix", []string{"whsec_"}, "empty key"},
		{"a newline", []string{stdSecret1 + "\n"}, "white space"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v, err := webhooks.StandardWebhooksVerifier(tt.secrets...)
			if tt.want == "" {
				if err != nil || v == nil {
					t.Fatalf("StandardWebhooks: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("StandardWebhooks: %v, want %q", err, tt.want)
			}
			assertClean(t, err, tt.secrets...)
		})
	}
}

func FuzzStandardWebhooks(f *testing.F) {
	ts := t0.Unix()
	f.Add("msg_1", strconv.FormatInt(ts, 10), signature.Standard(stdKey1, "msg_1", ts, []byte(stdBody)), []byte(stdBody), int64(0))
	f.Add("msg_1", strconv.FormatInt(ts, 10), "v1,AAAA "+signature.Standard(stdKey2, "msg_1", ts, nil), []byte{}, int64(-300))
	f.Add("x", "+0017", "v1,", []byte("{"), int64(301))
	f.Add("", "", "", []byte(nil), int64(0))
	v, err := webhooks.StandardWebhooksVerifier(stdSecret1, stdSecret2)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, id, tsHeader, sigs string, body []byte, skew int64) {
		skew %= 1 << 40
		h := http.Header{}
		h.Set("Webhook-Id", id)
		h.Set("Webhook-Timestamp", tsHeader)
		h.Set("Webhook-Signature", sigs)
		ev, err := v.Verify(h, body, t0.Add(time.Duration(skew)*time.Second))
		if err != nil {
			if !errors.Is(err, webhooks.ErrSignature) && !errors.Is(err, webhooks.ErrTimestamp) {
				t.Fatalf("error wraps no sentinel: %v", err)
			}
			assertClean(t, err, stdSecret1, stdSecret2,
				independentStd(stdKey1, id, tsHeader, body)[3:], independentStd(stdKey2, id, tsHeader, body)[3:])
			return
		}
		// Accepted: a v1 entry among the first 16 is the MAC of one key
		// over the timestamp the event carries.
		canon := strconv.FormatInt(ev.Time.Unix(), 10)
		if n, perr := strconv.ParseInt(tsHeader, 10, 64); perr != nil || n != ev.Time.Unix() {
			t.Fatalf("accepted with timestamp %q, event time %v", tsHeader, ev.Time)
		}
		want := []string{independentStd(stdKey1, id, canon, body), independentStd(stdKey2, id, canon, body)}
		found, i := false, 0
		for e := range strings.SplitSeq(sigs, " ") {
			if e == "" {
				continue
			}
			if i++; i <= 16 && (e == want[0] || e == want[1]) {
				found = true
			}
		}
		if !found || ev.ID != id || id == "" {
			t.Fatalf("accepted without a matching signature: id %q ts %q sigs %q: %+v", id, tsHeader, sigs, ev)
		}
		if d := ev.Time.Sub(t0.Add(time.Duration(skew) * time.Second)); d > 301*time.Second || d < -301*time.Second {
			t.Fatalf("accepted %v from now", d)
		}
	})
}
