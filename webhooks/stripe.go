package webhooks

import (
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/internal/named"
	"github.com/idemhttp/temporal-idempotent-http/internal/signature"
)

func init() { named.Register[newVerifier]("stripe", StripeVerifier) }

// stripeTolerance is how old a Stripe delivery's timestamp may be: 300
// seconds, the default of Stripe's official libraries.
const stripeTolerance = 300 * time.Second

// Stripe returns the Verifier of Stripe's scheme: a Stripe-Signature
// header "t=<unix>,v1=<hex>[,v1=<hex>...]" (other schemes, such as v0,
// are ignored), HMAC-SHA256 of "t.body" under the endpoint secret's bytes
// as written ("whsec_..." is not decoded). It applies the tolerance as
// Stripe's official library (stripe-node's webhooks.constructEvent) does:
// a timestamp more than 300 seconds before now, in whole seconds, is
// rejected; one in the future is not (Stripe signs its own clock's time,
// and a replay carries the original's). The event's ID and Type are the
// JSON body's top-level "id" and "type", its Time is t; a body without an
// "id" is rejected (ErrEvent). At most the first 16 v1 signatures are
// considered, and a header over 8 KiB is rejected unread.
//
// It fails when there is no secret or one is blank. Its RejectStatus is
// 400.
func StripeVerifier(secrets ...string) (Verifier, error) {
	if _, err := checkSecrets("StripeVerifier", secrets); err != nil {
		return nil, err
	}
	return &stripe{keys: secretBytes(secrets)}, nil
}

type stripe struct{ keys [][]byte }

func (v *stripe) Scheme() string    { return "stripe" }
func (v *stripe) RejectStatus() int { return http.StatusBadRequest }

func (v *stripe) Verify(h http.Header, body []byte, now time.Time) (Event, error) {
	const name = signature.StripeSignature
	header := h.Get(name)
	switch {
	case header == "":
		return Event{}, fmt.Errorf("%w: the %s header is missing", ErrSignature, name)
	case len(header) > maxHeaderBytes:
		return Event{}, fmt.Errorf("%w: the %s header is longer than %d bytes", ErrSignature, name, maxHeaderBytes)
	}
	// As stripe-node parses it: comma-separated key=value items, the last
	// t= wins, items of other keys (and with spaces) are ignored.
	ts, hasT := int64(0), false
	var received [][]byte
	for item := range strings.SplitSeq(header, ",") {
		k, val, ok := strings.Cut(item, "=")
		switch {
		case !ok:
		case k == "t":
			t, err := strconv.ParseInt(val, 10, 64)
			if err != nil || len(val) > 32 {
				return Event{}, fmt.Errorf("%w: t= in the %s header is not a Unix time in seconds", ErrTimestamp, name)
			}
			ts, hasT = t, true
		case k == "v1" && len(received) < maxSignatures:
			received = append(received, []byte(val))
		}
	}
	switch {
	case !hasT:
		return Event{}, fmt.Errorf("%w: the %s header has no t=<Unix time>", ErrTimestamp, name)
	case len(received) == 0:
		return Event{}, fmt.Errorf("%w: the %s header has no v1= signature (other schemes, such as v0, are not accepted)", ErrSignature, name)
	}
	// The received signature is compared as text with the lower-case hex
	// of the expected MAC, as stripe-node compares it.
	if !anyMatch(v.keys, received, func(s []byte) []byte {
		return []byte(hex.EncodeToString(signature.StripeMAC(string(s), ts, body)))
	}) {
		return Event{}, noMatch(len(v.keys))
	}
	if err := checkAge("t= in the "+name+" header", ts, now, int64(stripeTolerance/time.Second), -1); err != nil {
		return Event{}, err
	}
	id, typ := bodyFields(body, "id", "type")
	if id == "" {
		return Event{}, missingID("id")
	}
	return Event{ID: id, Type: typ, Time: time.Unix(ts, 0)}, nil
}

func secretBytes(secrets []string) [][]byte {
	b := make([][]byte, len(secrets))
	for i, s := range secrets {
		b[i] = []byte(s)
	}
	return b
}
