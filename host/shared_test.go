package host

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/grpc"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/internal/admission"
	"github.com/idemhttp/temporal-idempotent-http/internal/governor"
)

// TestSharedRateFlags: the shared rate is on by default; --shared-rate=false
// or SHARED_RATE=off turns it off; a fixed queue rate turns the default
// off, and is refused only beside a --shared-rate (or SHARED_RATE) the
// user set.
func TestSharedRateFlags(t *testing.T) {
	tests := []struct {
		name    string
		env     string // SHARED_RATE, "" for unset
		args    []string
		want    bool
		wantErr bool
	}{
		{"default", "", nil, true, false},
		{"--shared-rate=false", "", []string{"--shared-rate=false"}, false, false},
		{"SHARED_RATE=off", "off", nil, false, false},
		{"SHARED_RATE=on", "on", nil, true, false},
		{"a fixed queue rate alone", "", []string{"--task-queue-activities-per-second", "5"}, false, false},
		{"a fixed queue rate with the default off", "", []string{"--task-queue-activities-per-second", "5", "--shared-rate=false"}, false, false},
		{"both set on the command line", "", []string{"--shared-rate", "--task-queue-activities-per-second", "5"}, false, true},
		{"SHARED_RATE=on and a fixed queue rate", "on", []string{"--task-queue-activities-per-second", "5"}, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.env != "" {
				t.Setenv("SHARED_RATE", tt.env)
			}
			cfg, err := parseArgsErr(t, append([]string{"--allow-origin", "http://a.example"}, tt.args...)...)
			if tt.wantErr {
				require.Error(t, err)
				assert.Contains(t, err.Error(), "--shared-rate")
				assert.Contains(t, err.Error(), "--task-queue-activities-per-second")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, cfg.SharedRate)
			_, queues, err := newActivities(cfg)
			require.NoError(t, err)
			assert.Equal(t, map[string]string{"idempotent-http@http://a.example": "http://a.example"}, queues.queues,
				"the origins' queues are polled either way")
		})
	}
}

// configWriter answers UpdateTaskQueueConfig with err and keeps the request.
type configWriter struct {
	client.Client
	err error
	req *workflowservice.UpdateTaskQueueConfigRequest
}

func (c *configWriter) WorkflowService() workflowservice.WorkflowServiceClient {
	return configService{c: c}
}

type configService struct {
	workflowservice.WorkflowServiceClient
	c *configWriter
}

func (s configService) UpdateTaskQueueConfig(_ context.Context, req *workflowservice.UpdateTaskQueueConfigRequest, _ ...grpc.CallOption) (*workflowservice.UpdateTaskQueueConfigResponse, error) {
	s.c.req = req
	return &workflowservice.UpdateTaskQueueConfigResponse{}, s.c.err
}

// TestSharedRateAllowed: the worker checks at start that it may write the
// task-queue config with an update of the governors' queue that changes
// nothing; a refusal (no permission, a server without the call) turns
// the shared rate off with one log line naming what is missing; an error
// that says nothing about it keeps the shared rate on.
func TestSharedRateAllowed(t *testing.T) {
	tests := []struct {
		name    string
		err     error
		want    bool
		wantLog []string
	}{
		{"allowed", nil, true, nil},
		{"no permission", serviceerror.NewPermissionDenied("no write access", ""), false, []string{"shared rate off", "write access to namespace ns"}},
		{"an older server", serviceerror.NewUnimplemented("unknown method UpdateTaskQueueConfig"), false, []string{"shared rate off", "upgrade"}},
		{"unreachable for a moment", serviceerror.NewUnavailable("connection refused"), true, []string{"could not check", "keeping the shared rate on"}},
		{"another error", errors.New("boom"), true, []string{"could not check"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			logger := slog.New(slog.NewTextHandler(&buf, nil))
			c := &configWriter{err: tt.err}
			got := sharedRateAllowed(t.Context(), c, "ns", "orders", logger)
			assert.Equal(t, tt.want, got)
			req := c.req
			require.NotNil(t, req, "no UpdateTaskQueueConfig call")
			assert.Equal(t, "ns", req.GetNamespace())
			assert.Equal(t, "orders@governor", req.GetTaskQueue(), "the governors' own queue: no activity runs on it")
			assert.Equal(t, enumspb.TASK_QUEUE_TYPE_ACTIVITY, req.GetTaskQueueType())
			assert.Equal(t, governor.Identity, req.GetIdentity())
			assert.Nil(t, req.GetUpdateQueueRateLimit(), "the check changes nothing")
			assert.Nil(t, req.GetUpdateFairnessKeyRateLimitDefault(), "the check changes nothing")
			lines := strings.Count(buf.String(), "\n")
			if tt.wantLog == nil {
				assert.Zero(t, lines, "log: %s", buf.String())
			} else {
				assert.Equal(t, 1, lines, "one log line: %s", buf.String())
			}
			for _, w := range tt.wantLog {
				assert.Contains(t, buf.String(), w)
			}
		})
	}
}

// TestGovernorConfig: each origin queue's governor starts with that
// origin's breaker settings (the flags, the origins file's [admission],
// its own [origin."…".admission]), so that --breaker=false, or an
// origin's breaker turned off, turns the cluster's breaker off too, and
// its open time and trip rule are the worker's.
func TestGovernorConfig(t *testing.T) {
	const psp, ledger = "idempotent-http@https://psp.example", "idempotent-http@https://ledger.example"
	file := `
[origin."https://psp.example".admission.breaker]
open_time = "3s"
min_failures = 8
[origin."https://ledger.example"]
`
	tests := []struct {
		name string
		args []string
		want map[string]governor.Config // queue → the governor's Breaker as set (defaults filled in)
	}{
		{"defaults", nil, map[string]governor.Config{
			psp:    {Breaker: activities.Breaker{OpenTime: 3 * time.Second, MinFailures: 8}},
			ledger: {Breaker: activities.Breaker{}},
		}},
		{"--breaker=false", []string{"--breaker=false"}, map[string]governor.Config{
			psp:    {Breaker: activities.Breaker{Off: true, OpenTime: 3 * time.Second, MinFailures: 8}},
			ledger: {Breaker: activities.Breaker{Off: true}},
		}},
		{"--admission=false", []string{"--admission=false"}, map[string]governor.Config{
			psp:    {Breaker: activities.Breaker{Off: true, OpenTime: 3 * time.Second, MinFailures: 8}},
			ledger: {Breaker: activities.Breaker{Off: true}},
		}},
		{"--breaker-open-time", []string{"--breaker-open-time", "2s", "--breaker-restart-rate", "3"}, map[string]governor.Config{
			psp:    {Breaker: activities.Breaker{OpenTime: 3 * time.Second, MinFailures: 8, RestartRate: 3}},
			ledger: {Breaker: activities.Breaker{OpenTime: 2 * time.Second, RestartRate: 3}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("ORIGINS_FILE", writeOrigins(t, file, 0o644))
			t.Setenv("API_TOKEN", "")
			cfg := parseArgs(t, tt.args...)
			_, queues, err := newActivities(cfg)
			require.NoError(t, err)
			for tq, want := range tt.want {
				// The worker's breaker, with admission's defaults.
				want.Breaker = want.Breaker.WithDefaults(admission.DefaultInitialRate)
				assert.Equal(t, want, queues.governors[tq], "queue %s", tq)
			}
			assert.Len(t, queues.governors, len(tt.want), "a governor's config per origin queue")
		})
	}
}
