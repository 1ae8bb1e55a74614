package governor_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/worker"

	"github.com/idemhttp/temporal-idempotent-http/harness/itest"
	"github.com/idemhttp/temporal-idempotent-http/internal/governor"
)

// TestShareOnDevServer: the reporter reads the workers polling a queue
// from the dev server in the call that reads its limit: two workers
// (two identities, several pollers each) poll the queue, so each one's
// share of a 6/s limit is 3/s.
func TestShareOnDevServer(t *testing.T) {
	dev := startDevServer(t)
	c := dev.Client()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	actTQ := fmt.Sprintf("share-test-%08x", rand.Uint32())
	for _, id := range []string{"worker-a", "worker-b"} {
		w := worker.New(c, actTQ, worker.Options{Identity: id, MaxConcurrentActivityTaskPollers: 8})
		w.RegisterActivityWithOptions(touch, activity.RegisterOptions{Name: touchName})
		require.NoError(t, w.Start())
		defer w.Stop()
	}
	_, err := c.WorkflowService().UpdateTaskQueueConfig(ctx, &workflowservice.UpdateTaskQueueConfigRequest{
		Namespace: dev.Namespace, Identity: "operator", TaskQueue: actTQ, TaskQueueType: enumspb.TASK_QUEUE_TYPE_ACTIVITY,
		UpdateQueueRateLimit: &workflowservice.UpdateTaskQueueConfigRequest_RateLimitUpdate{
			RateLimit: &taskqueuepb.RateLimit{RequestsPerSecond: 6}, Reason: "test",
		},
	})
	require.NoError(t, err)

	rep := governor.NewReporter(c, "unused", dev.Namespace, "worker-a", governor.ReporterConfig{
		LimitInterval: 200 * time.Millisecond, Logger: itest.QuietLogger(),
	})
	rep.Start(ctx)
	defer rep.Close()
	require.NoError(t, itest.Eventually(ctx, 100*time.Millisecond, func() error {
		limit, ok := rep.Limit(actTQ)
		if share, n := rep.Share(actTQ), rep.Pollers(actTQ); !ok || limit != 6 || n != 2 || share != 3 {
			return fmt.Errorf("limit %v (%v), pollers %d, share %v; want 6, 2, 3", limit, ok, n, share)
		}
		return nil
	}))
}
