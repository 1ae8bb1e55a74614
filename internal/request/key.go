package request

import (
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
