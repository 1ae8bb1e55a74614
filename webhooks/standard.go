package webhooks

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/internal/named"
	"github.com/idemhttp/temporal-idempotent-http/internal/signature"
)

func init() { named.Register[newVerifier]("standard-webhooks", StandardWebhooksVerifier) }

// StandardWebhooks returns the Verifier of the Standard Webhooks scheme
// (https://www.standardwebhooks.com/, Svix's): the secrets are "whsec_"
// and the key in base64 (or the base64 alone); a delivery carries
// Webhook-Id, Webhook-Timestamp (Unix seconds) and Webhook-Signature,
// space-separated "v1,<base64>" signatures of "id.timestamp.body"
// (signatures of other versions are ignored). It applies the tolerance
// as the official standardwebhooks library does: a timestamp more than
// signature.DefaultTolerance before or after now, in whole seconds, is
// rejected. The event's ID is Webhook-Id, its Type the JSON body's
// top-level "type" string, if any (the body need not be JSON), and its
// Time the timestamp. At most the first 16 signatures are considered, and
// a header over 8 KiB is rejected unread.
//
// It fails when there is no secret or one does not decode. Its
// RejectStatus is 400.
func StandardWebhooksVerifier(secrets ...string) (Verifier, error) {
	if _, err := checkSecrets("StandardWebhooksVerifier", secrets); err != nil {
		return nil, err
	}
	v := &standard{}
	for i, s := range secrets {
		key, err := signature.StandardKey(s)
		switch {
		case err != nil:
			return nil, fmt.Errorf("webhooks: StandardWebhooksVerifier: secret %d of %d is not %q and standard base64 (padded): copy it whole from the sender's settings", i+1, len(secrets), signature.StandardSecretPrefix)
		case len(key) == 0:
			return nil, fmt.Errorf("webhooks: StandardWebhooksVerifier: secret %d of %d is an empty key", i+1, len(secrets))
		}
		v.keys = append(v.keys, key)
	}
	return v, nil
}

type standard struct{ keys [][]byte }

func (v *standard) Scheme() string    { return "standard-webhooks" }
func (v *standard) RejectStatus() int { return http.StatusBadRequest }

func (v *standard) Verify(h http.Header, body []byte, now time.Time) (Event, error) {
	// In the official library's order: the headers, the timestamp, then
	// the signatures.
	id, sigs := h.Get(signature.StandardID), h.Get(signature.StandardSignature)
	switch {
	case id == "":
		return Event{}, fmt.Errorf("%w: the %s header is missing", ErrSignature, signature.StandardID)
	case len(id) > maxHeaderBytes:
		return Event{}, fmt.Errorf("%w: the %s header is longer than %d bytes", ErrSignature, signature.StandardID, maxHeaderBytes)
	case sigs == "":
		return Event{}, fmt.Errorf("%w: the %s header is missing", ErrSignature, signature.StandardSignature)
	case len(sigs) > maxHeaderBytes:
		return Event{}, fmt.Errorf("%w: the %s header is longer than %d bytes", ErrSignature, signature.StandardSignature, maxHeaderBytes)
	}
	ts, err := parseUnix(signature.StandardTimestamp, h.Get(signature.StandardTimestamp))
	if err != nil {
		return Event{}, err
	}
	tol := int64(signature.DefaultTolerance / time.Second)
	if err := checkAge(signature.StandardTimestamp, ts, now, tol, tol); err != nil {
		return Event{}, err
	}
	// Each entry must be exactly "v1,<base64>" of the expected MAC, as the
	// library compares it: another version never matches.
	var received [][]byte
	for entry := range strings.SplitSeq(sigs, " ") {
		if entry == "" {
			continue
		}
		if len(received) == maxSignatures {
			break
		}
		received = append(received, []byte(entry))
	}
	if len(received) == 0 {
		return Event{}, fmt.Errorf("%w: the %s header holds no signature (want space-separated \"v1,<base64>\")", ErrSignature, signature.StandardSignature)
	}
	if !anyMatch(v.keys, received, func(k []byte) []byte { return []byte(signature.Standard(k, id, ts, body)) }) {
		return Event{}, noMatch(len(v.keys))
	}
	_, typ := bodyFields(body, "", "type")
	return Event{ID: id, Type: typ, Time: time.Unix(ts, 0)}, nil
}
