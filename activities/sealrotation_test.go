package activities_test

import (
	"bytes"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// TestSealKeyRotationDuringARollingDeploy: the documented rotation ("list
// a new key first and keep the old one after it") rolled out one worker
// at a time: a worker already on [new, old] seals an operation's monitor
// with the new key; the next poll lands on a worker still on [old]. The
// following must not fail for good (MonitorNotFollowed is final) while
// the operation goes on at the server: it should wait for a worker that
// holds the key, or the procedure must be two-phase.
func TestSealKeyRotationDuringARollingDeploy(t *testing.T) {
	const secret = "sk_live_51HxQeKZ0aBcDeFgHiJkLmNo"
	oldKey, newKey := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	var polls atomic.Int32
	api := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			w.Header().Set("Location", "/operations/"+secret)
			w.WriteHeader(http.StatusAccepted)
			return
		}
		if polls.Add(1) < 3 {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		_, _ = w.Write([]byte(`{"id":"tr_1"}`))
	})
	cfg := func(keys ...[]byte) activities.Config {
		return activities.Config{SealKeys: keys, Credentials: map[string]activities.Credential{api.URL: {Header: http.Header{"Authorization": {"Bearer " + secret}}}}}
	}
	// A worker already rotated starts the operation and follows it briefly.
	env := testsuite.Register(t, nil, &testsuite.Server{URL: api.URL}, cfg(newKey, oldKey))
	env.RegisterWorkflow(followWorkflow)
	env.ExecuteWorkflow(followWorkflow, api.URL+"/transfers", workflows.FollowOptions{Timeout: 3 * time.Second})
	f, ok := workflows.AsFailure(env.GetWorkflowError())
	require.True(t, ok, "%v", env.GetWorkflowError())
	require.Equal(t, workflows.ErrTypeOperationStillRunning, f.Type)
	// The poll lands on a worker not rotated yet.
	env = testsuite.Register(t, nil, &testsuite.Server{URL: api.URL}, cfg(oldKey))
	env.RegisterWorkflow(workflows.FollowAccepted)
	env.ExecuteWorkflow(workflows.FollowAccepted, *f.Accepted, workflows.FollowOptions{Timeout: time.Minute})
	f, _ = workflows.AsFailure(env.GetWorkflowError())
	require.NotEqual(t, workflows.ErrTypeMonitorNotFollowed, f.Type, "a routine key rotation failed the following for good: %v", env.GetWorkflowError())
}
