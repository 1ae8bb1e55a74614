package webhooks_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/idemhttp/temporal-idempotent-http/webhooks"
)

// updates is a client.Client whose UpdateWorkflow records each call and
// answers as told; every other method is unimplemented (nil embedded), so
// a receiver that touched Temporal otherwise would panic.
type updates struct {
	client.Client
	mu    sync.Mutex
	calls []client.UpdateWorkflowOptions
	// err is UpdateWorkflow's error; reject the update's outcome error.
	err, reject error
}

func (u *updates) UpdateWorkflow(_ context.Context, o client.UpdateWorkflowOptions) (client.WorkflowUpdateHandle, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.calls = append(u.calls, o)
	if u.err != nil {
		return nil, u.err
	}
	return handle{o, u.reject}, nil
}

func (u *updates) count() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.calls)
}

// handle is a completed update.
type handle struct {
	o   client.UpdateWorkflowOptions
	err error
}

func (h handle) WorkflowID() string { return h.o.WorkflowID }
func (h handle) RunID() string      { return "" }
func (h handle) UpdateID() string   { return h.o.UpdateID }

func (h handle) Get(_ context.Context, v any) error {
	if h.err != nil {
		return h.err
	}
	*(v.(*string)) = "ended: succeeded"
	return nil
}

const secret = "a-test-secret-of-the-provider"

// sign is the hex HMAC-SHA256 of body, computed here and not by the
// package, so a wrong shared rule would fail.
func sign(key, body string) string {
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte(body))
	return hex.EncodeToString(m.Sum(nil))
}

// event is a fixed endpoint's event of workflow wf, operation op.
func event(id, wf, op string) string {
	return `{"id":"` + id + `","type":"charge.succeeded","data":{"object":{"client_secret":"pi_secret_123","metadata":{"workflow_id":"` + wf + `","operation":"` + op + `"}}}}`
}

func post(t *testing.T, h http.Handler, path, body, sig string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	if sig != "" {
		r.Header.Set("X-Signature", sig)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func newReceiver(t *testing.T, cfg webhooks.Config) *webhooks.Receiver {
	t.Helper()
	r, err := webhooks.NewReceiver(cfg)
	require.NoError(t, err)
	return r
}

// t0 is the tests' now.
var t0 = time.Unix(1_767_000_000, 0)

// assertClean fails t if err's text holds any of the secret values (a
// secret, an expected MAC, a received signature).
func assertClean(t testing.TB, err error, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		s = strings.TrimPrefix(s, "whsec_")
		if len(s) >= 4 && strings.Contains(err.Error(), s) {
			t.Fatalf("the error %q holds a secret value", err)
		}
	}
}
