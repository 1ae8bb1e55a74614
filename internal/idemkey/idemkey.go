// Package idemkey holds the idempotency key's rules: the check of a key,
// its quoting as an RFC 8941 String, its derivation from the namespace,
// workflow ID and operation, and its digest in webhook deliveries. The
// derivation and the digest are recorded in histories: they never change.
package idemkey

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"
)

// keyNamespace is the UUID namespace of derived keys (a UUIDv5 of the name
// "temporal-idempotent-http" in the URL namespace). It is recorded in every
// history through the keys: it must never change.
var keyNamespace = uuid.NewSHA1(uuid.NameSpaceURL, []byte("temporal-idempotent-http"))

// Derive is the idempotency key of operation in the workflow workflowID
// of namespace (workflows.Key inside a workflow): a UUIDv5 of the three.
// Tools and tests use it to predict the key of a workflow ID. Keys are
// recorded in histories: the derivation must never change.
func Derive(namespace, workflowID, operation string) string {
	return uuid.NewSHA1(keyNamespace, []byte(namespace+"\x00"+workflowID+"\x00"+operation)).String()
}

// Digest names the call with idempotency key key in a webhook's
// delivery, without the key: the first 96 bits of its SHA-256 (under a
// label of this use), base64url, 16 characters, as a callback URL's path
// segment and WebhookMetadata's "key_digest" carry it
// (workflows.Notification.KeyDigest); "" for "". Digests are recorded in
// histories and in URLs providers hold: the derivation must never change.
func Digest(key string) string {
	if key == "" {
		return ""
	}
	sum := sha256.Sum256([]byte("idemhttp-key-digest/v1\x00" + key))
	return base64.RawURLEncoding.EncodeToString(sum[:12])
}

// MaxBytes bounds an idempotency key (Stripe's limit; the IETF draft sets none).
const MaxBytes = 255

// Key checks an idempotency key: 1 to MaxBytes printable ASCII characters.
func Check(key string) error {
	if key == "" {
		return errors.New("missing idempotency key: name the operation (its key is derived from it) or set the request's IdempotencyKey")
	}
	if len(key) > MaxBytes {
		return fmt.Errorf("idempotency key is %d characters long: at most %d are allowed", len(key), MaxBytes)
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x21 || key[i] > 0x7e {
			return fmt.Errorf("idempotency key has a character (byte %#x at %d) outside printable ASCII", key[i], i)
		}
	}
	return nil
}

// Quote writes key as an RFC 8941 String (sf-string, section 3.3.3, as
// serialized by section 4.1.6), the form the IETF draft "The Idempotency-Key
// HTTP Header Field" gives the header: between double quotes, with \ and "
// escaped by a backslash. A key that passes Key (printable ASCII) is a valid
// sf-string's content.
func Quote(key string) string {
	var b strings.Builder
	b.Grow(len(key) + 2)
	b.WriteByte('"')
	for i := 0; i < len(key); i++ {
		if key[i] == '"' || key[i] == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(key[i])
	}
	b.WriteByte('"')
	return b.String()
}
