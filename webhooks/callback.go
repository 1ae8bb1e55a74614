package webhooks

import (
	"context"
	"crypto/hmac"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/worker"

	"github.com/idemhttp/temporal-idempotent-http/internal/idemkey"
	"github.com/idemhttp/temporal-idempotent-http/internal/input"
	"github.com/idemhttp/temporal-idempotent-http/internal/signature"
)

// minCallbackSecretBytes is the shortest callback token key Callbacks
// accepts.
const minCallbackSecretBytes = 32

// Callbacks makes and checks per-call callback URLs, for APIs that take
// one in the request ("callback_url", "notification_url"):
// BaseURL/{workflow ID}/{operation}/{key digest}/{token}, where the key
// digest names the call by its idempotency key and the token is an
// HMAC-SHA256 of the namespace, workflow ID, operation and key digest
// under a key the worker and the receiver hold (never in history); a URL
// made without a key is BaseURL/{workflow ID}/{operation}/{token}, as
// before keys were named, and is still taken. The receiver (with
// Config.Callbacks) takes the workflow, operation and key digest from the
// path and refuses a token that does not match, before anything reaches
// Temporal.
//
// Register it on the worker so that workflows.CallbackURL can build URLs.
type Callbacks struct {
	// BaseURL is where the receiver is reachable from the provider, e.g.
	// "https://hooks.example.com/callbacks". Required.
	BaseURL string
	// Secrets are the token keys, each at least 32 bytes
	// long: the first makes tokens, any of them is accepted (rotation: add
	// the new key first, drop the old one once no operation awaits a URL it
	// made). Required.
	Secrets []string
	// Namespace is the Temporal namespace of the workflows (default
	// "default"); a token is valid in its namespace only.
	Namespace string
}

// check validates c.
func (c *Callbacks) check() error {
	if c == nil {
		return errors.New("webhooks: no Callbacks configured")
	}
	u, err := url.Parse(c.BaseURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.RawQuery != "" {
		return fmt.Errorf("webhooks: Callbacks.BaseURL %q must be an absolute http(s) URL without user info or query", c.BaseURL)
	}
	if len(c.Secrets) == 0 {
		return errors.New("webhooks: Callbacks.Secrets is empty: give at least one token key of 32 bytes or more (e.g. from openssl rand -base64 32)")
	}
	for i, s := range c.Secrets {
		if len(s) < minCallbackSecretBytes {
			return fmt.Errorf("webhooks: Callbacks.Secrets[%d] is %d bytes: a token key needs at least %d", i, len(s), minCallbackSecretBytes)
		}
	}
	return nil
}

// namespace is c's namespace or the default.
func (c *Callbacks) namespace() string {
	if c.Namespace == "" {
		return "default"
	}
	return c.Namespace
}

// token is the callback token of (workflowID, operation, digest) under
// key: without a digest, the token of URLs made before keys were named
// (v1), unchanged.
func (c *Callbacks) token(key, workflowID, operation, digest string) string {
	msg := "idemhttp-callback/v1\x00" + c.namespace() + "\x00" + workflowID + "\x00" + operation
	if digest != "" {
		msg = "idemhttp-callback/v2\x00" + c.namespace() + "\x00" + workflowID + "\x00" + operation + "\x00" + digest
	}
	mac := signature.MAC([]byte(key), []byte(msg))
	return base64.RawURLEncoding.EncodeToString(mac[:24])
}

// URL is the callback URL of the call of operation in workflowID whose
// idempotency key is key (workflows.Request.IdempotencyKey): the URL names
// the call by the key's digest; "" names no call, only the operation.
func (c *Callbacks) URL(workflowID, operation, key string) (string, error) {
	return c.url(workflowID, operation, idemkey.Digest(key))
}

// url is the callback URL of the call of operation in workflowID whose
// key's digest is digest ("": none).
func (c *Callbacks) url(workflowID, operation, digest string) (string, error) {
	if err := c.check(); err != nil {
		return "", err
	}
	if workflowID == "" || operation == "" {
		return "", errors.New("webhooks: a callback URL needs a workflow ID and an operation")
	}
	u := strings.TrimSuffix(c.BaseURL, "/") + "/" + url.PathEscape(workflowID) + "/" + url.PathEscape(operation) + "/"
	if digest != "" {
		u += url.PathEscape(digest) + "/"
	}
	return u + c.token(c.Secrets[0], workflowID, operation, digest), nil
}

// route reads the workflow ID, operation and key digest from a callback
// URL's path and checks its token in constant time: its last four
// segments, …/{workflow ID}/{operation}/{key digest}/{token}, or, failing
// that, its last three, …/{workflow ID}/{operation}/{token} (a URL made
// without a key, digest "").
func (c *Callbacks) route(escapedPath string) (workflowID, operation, digest string, err error) {
	parts := strings.Split(strings.TrimSuffix(escapedPath, "/"), "/")
	if len(parts) >= 4 {
		if wf, op, d, ok := c.check4(parts[len(parts)-4:]); ok {
			return wf, op, d, nil
		}
	}
	if len(parts) < 3 {
		return "", "", "", errors.New("the path is not …/{workflow ID}/{operation}/{token}")
	}
	parts = parts[len(parts)-3:]
	if workflowID, err = url.PathUnescape(parts[0]); err == nil {
		operation, err = url.PathUnescape(parts[1])
	}
	if err != nil || workflowID == "" || operation == "" {
		return "", "", "", errors.New("the path is not …/{workflow ID}/{operation}/{token}")
	}
	if !c.matches(parts[2], workflowID, operation, "") {
		return "", "", "", errors.New("the callback token does not match")
	}
	return workflowID, operation, "", nil
}

// check4 reads and checks parts as {workflow ID}/{operation}/{key
// digest}/{token}.
func (c *Callbacks) check4(parts []string) (workflowID, operation, digest string, ok bool) {
	var err error
	if workflowID, err = url.PathUnescape(parts[0]); err == nil {
		if operation, err = url.PathUnescape(parts[1]); err == nil {
			digest, err = url.PathUnescape(parts[2])
		}
	}
	if err != nil || workflowID == "" || operation == "" || digest == "" {
		return "", "", "", false
	}
	return workflowID, operation, digest, c.matches(parts[3], workflowID, operation, digest)
}

// matches reports whether token is the token of (workflowID, operation,
// digest) under one of the keys.
func (c *Callbacks) matches(token, workflowID, operation, digest string) bool {
	ok := false
	for _, key := range c.Secrets {
		// Every key is tried, so the time does not say which matched.
		ok = hmac.Equal([]byte(c.token(key, workflowID, operation, digest)), []byte(token)) || ok
	}
	return ok
}

// Register registers the local activity that workflows.CallbackURL runs.
// Its input is the operation and the digest of the call's key: the
// workflow ID comes from the activity's info, so a workflow gets URLs for
// itself only.
func (c *Callbacks) Register(r worker.ActivityRegistry) {
	r.RegisterActivityWithOptions(func(ctx context.Context, operation, digest string) (string, error) {
		info := activity.GetInfo(ctx)
		if info.WorkflowNamespace != c.namespace() {
			return "", fmt.Errorf("webhooks: the workflow runs in namespace %q, but Callbacks.Namespace is %q: the receiver would refuse its token", info.WorkflowNamespace, c.namespace())
		}
		return c.url(info.WorkflowExecution.ID, operation, digest)
	}, activity.RegisterOptions{Name: input.CallbackActivityName})
}
