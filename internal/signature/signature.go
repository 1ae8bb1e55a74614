// Package signature holds the signing rules of the webhook schemes package
// webhooks verifies, in one place: the signed content and the MAC of each
// scheme. The verifiers (webhooks) and the reference server's sender
// (testsuite) both use it, so a rule cannot differ between the two.
package signature

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Scheme is one webhook signature scheme: its name (the worker's
// --webhook-scheme, testsuite.Webhooks.Scheme, the Verifier's Scheme) and
// how the reference server signs with it. Package webhooks registers the
// verifier of each by Name (internal/named), so that a scheme added to
// Schemes, with its verifier, is one the worker and the reference server
// know with no other change.
type Scheme struct {
	Name string
	// Key returns the signing key of a secret, or what is wrong with the
	// secret.
	Key func(secret string) ([]byte, error)
	// Sign sets the signature headers of a delivery of body with event ID
	// id, sent at ts (Unix seconds), signed under key.
	Sign func(h http.Header, key []byte, id string, ts int64, body []byte)
}

// Schemes lists the webhook schemes, the default first.
var Schemes = []Scheme{
	{Name: "standard-webhooks", Key: standardKey, Sign: func(h http.Header, key []byte, id string, ts int64, body []byte) {
		h.Set(StandardID, id)
		h.Set(StandardTimestamp, strconv.FormatInt(ts, 10))
		h.Set(StandardSignature, Standard(key, id, ts, body))
	}},
	{Name: "stripe", Key: secretBytes, Sign: func(h http.Header, key []byte, _ string, ts int64, body []byte) {
		h.Set(StripeSignature, Stripe(ts, body, string(key)))
	}},
	{Name: "hmac", Key: secretBytes, Sign: func(h http.Header, key []byte, _ string, _ int64, body []byte) {
		h.Set(HMACSignature, HMACHex(string(key), body))
	}},
}

// Lookup returns the scheme named name.
func Lookup(name string) (Scheme, bool) {
	for _, s := range Schemes {
		if s.Name == name {
			return s, true
		}
	}
	return Scheme{}, false
}

// Names returns the names of the Schemes, in order.
func Names() []string {
	names := make([]string, len(Schemes))
	for i, s := range Schemes {
		names[i] = s.Name
	}
	return names
}

// standardKey is a Standard Webhooks secret's key: "whsec_" and base64.
func standardKey(secret string) ([]byte, error) {
	if key, err := StandardKey(secret); err == nil && len(key) > 0 {
		return key, nil
	}
	return nil, errors.New(`want a Standard Webhooks secret, "whsec_" and the key in base64`)
}

// secretBytes is the key of a scheme that signs under the secret's bytes
// as written.
func secretBytes(secret string) ([]byte, error) {
	if secret == "" {
		return nil, errors.New("required")
	}
	return []byte(secret), nil
}

// The headers of the schemes.
const (
	// Standard Webhooks (https://www.standardwebhooks.com/): the message
	// ID, its Unix time in seconds and space-separated "v1,<base64>"
	// signatures.
	StandardID        = "Webhook-Id"
	StandardTimestamp = "Webhook-Timestamp"
	StandardSignature = "Webhook-Signature"
	// StandardSecretPrefix starts a Standard Webhooks secret; the rest is
	// the key, base64.
	StandardSecretPrefix = "whsec_"
	// Stripe: "t=<unix>,v1=<hex>[,v1=<hex>...]".
	StripeSignature = "Stripe-Signature"
	// HMACSignature is the plain HMAC scheme's header: the lowercase hex
	// HMAC-SHA256 of the body (HMACHex).
	HMACSignature = "X-Signature"
)

// DefaultTolerance is the timestamp tolerance both Standard Webhooks' and
// Stripe's official libraries use: 5 minutes either way.
const DefaultTolerance = 5 * time.Minute

// MAC is HMAC-SHA256 of msg under key.
func MAC(key []byte, msg ...[]byte) []byte {
	m := hmac.New(sha256.New, key)
	for _, p := range msg {
		m.Write(p)
	}
	return m.Sum(nil)
}

// StandardKey decodes a Standard Webhooks secret ("whsec_" and base64, or
// base64 alone) into its key.
func StandardKey(secret string) ([]byte, error) {
	return base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, StandardSecretPrefix))
}

// StandardMAC is the Standard Webhooks MAC of a message: HMAC-SHA256 of
// "id.timestamp.body" under the decoded key.
func StandardMAC(key []byte, id string, ts int64, body []byte) []byte {
	return MAC(key, []byte(id), []byte{'.'}, []byte(strconv.FormatInt(ts, 10)), []byte{'.'}, body)
}

// Standard is the Webhook-Signature value of one signature: "v1,<base64>".
func Standard(key []byte, id string, ts int64, body []byte) string {
	return "v1," + base64.StdEncoding.EncodeToString(StandardMAC(key, id, ts, body))
}

// StripeMAC is Stripe's MAC: HMAC-SHA256 of "timestamp.body" under the
// endpoint secret's bytes ("whsec_..." as written, not decoded).
func StripeMAC(secret string, ts int64, body []byte) []byte {
	return MAC([]byte(secret), []byte(strconv.FormatInt(ts, 10)), []byte{'.'}, body)
}

// Stripe is a Stripe-Signature value for one or more secrets:
// "t=<ts>,v1=<hex>,v1=<hex>".
func Stripe(ts int64, body []byte, secrets ...string) string {
	var b strings.Builder
	b.WriteString("t=" + strconv.FormatInt(ts, 10))
	for _, s := range secrets {
		b.WriteString(",v1=" + hex.EncodeToString(StripeMAC(s, ts, body)))
	}
	return b.String()
}

// HMACHex is the plain HMAC scheme's signature as the reference server
// sends it: the lowercase hex of HMAC(secret, "", body).
func HMACHex(secret string, body []byte) string {
	return hex.EncodeToString(HMAC(secret, "", body))
}

// HMAC is the MAC of package webhooks' plain HMAC scheme: HMAC-SHA256 of
// the body, or of "timestamp.body" when the scheme has a timestamp header
// (ts, as sent, not empty), under the secret's bytes as written.
func HMAC(secret, ts string, body []byte) []byte {
	if ts == "" {
		return MAC([]byte(secret), body)
	}
	return MAC([]byte(secret), []byte(ts), []byte{'.'}, body)
}
