package request

import (
	"crypto/sha256"
	"encoding/base64"
	"net/url"

	"github.com/google/uuid"
)

// keyNamespace is the UUID namespace of derived keys (a UUIDv5 of the name
// "temporal-idempotent-http" in the URL namespace). It is recorded in every
// history through the keys: it must never change.
var keyNamespace = uuid.NewSHA1(uuid.NameSpaceURL, []byte("temporal-idempotent-http"))

// DeriveKey is the idempotency key of operation in the workflow workflowID
// of namespace (workflows.Key inside a workflow): a UUIDv5 of the three.
// Tools and tests use it to predict the key of a workflow ID. Keys are
// recorded in histories: the derivation must never change.
func DeriveKey(namespace, workflowID, operation string) string {
	return uuid.NewSHA1(keyNamespace, []byte(namespace+"\x00"+workflowID+"\x00"+operation)).String()
}

// KeyDigest names the call with idempotency key key in a webhook's
// delivery, without the key: the first 96 bits of its SHA-256 (under a
// label of this use), base64url, 16 characters, as a callback URL's path
// segment and WebhookMetadata's "key_digest" carry it
// (workflows.Notification.KeyDigest); "" for "". Digests are recorded in
// histories and in URLs providers hold: the derivation must never change.
func KeyDigest(key string) string {
	if key == "" {
		return ""
	}
	sum := sha256.Sum256([]byte("idemhttp-key-digest/v1\x00" + key))
	return base64.RawURLEncoding.EncodeToString(sum[:12])
}

// Summary is the activity's one-line summary in the Web UI, e.g.
// "POST api.example.com/payments (charge)".
func Summary(method, rawURL, operation string) string {
	s := method + " " + rawURL
	if u, err := url.Parse(rawURL); err == nil {
		s = method + " " + u.Host + u.Path
	}
	if operation != "" {
		s += " (" + operation + ")"
	}
	return s
}
