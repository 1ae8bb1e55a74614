package activities_test

import (
	"encoding/json"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/workflow"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// TestRetryAfterCapPerOriginAndCall: a 72-hour operation whose monitor
// asks for an hour between polls is polled about 72 times when the call
// (FollowOptions.MaxRetryAfter) or its origin (Convention.MaxRetryAfter)
// allows an hour, the call's cap winning; the worker's 5 minutes poll it
// 864 times.
func TestRetryAfterCapPerOriginAndCall(t *testing.T) {
	tests := []struct {
		name         string
		call, origin time.Duration
		minPolls     int32
		maxPolls     int32
	}{
		{"the worker's 5 minutes", 0, 0, 860, 870},
		{"the origin's hour", 0, time.Hour, 72, 74},
		{"the call's hour", time.Hour, 0, 72, 74},
		{"the call's 30 minutes over the origin's hour", 30 * time.Minute, time.Hour, 144, 146},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := testsuite.NewEnv(t)
			var polls atomic.Int32
			var done time.Time
			api := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Retry-After", "3600")
				if r.Method == http.MethodPost {
					done = env.Now().Add(72 * time.Hour)
					w.Header().Set("Location", "/operations/1")
					w.WriteHeader(http.StatusAccepted)
					return
				}
				polls.Add(1)
				if env.Now().Before(done) {
					w.WriteHeader(http.StatusAccepted)
					return
				}
				_, _ = w.Write([]byte(`{"id":"op_1"}`))
			})
			c := activities.IETFConvention()
			c.MaxRetryAfter = tt.origin
			testsuite.Register(t, env, &testsuite.Server{URL: api.URL}, activities.Config{Conventions: map[string]activities.Convention{api.URL: c}})
			env.RegisterWorkflowWithOptions(func(ctx workflow.Context) (*workflows.Response, error) {
				return workflows.Call(ctx, workflows.Request{Operation: "export", URL: api.URL + "/exports", Body: json.RawMessage(`{}`),
					Follow: &workflows.FollowOptions{Timeout: 100 * time.Hour, MaxRetryAfter: tt.call}})
			}, workflow.RegisterOptions{Name: "export"})
			env.ExecuteWorkflow("export")
			require.NoError(t, env.GetWorkflowError())
			assert.GreaterOrEqual(t, polls.Load(), tt.minPolls)
			assert.LessOrEqual(t, polls.Load(), tt.maxPolls)
		})
	}
}
