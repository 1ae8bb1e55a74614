package governor_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/idemhttp/temporal-idempotent-http/harness/itest"
	"github.com/idemhttp/temporal-idempotent-http/internal/governor"
)

// startDevServer builds the Temporal CLI pinned by tools/go.mod into
// <repo>/bin (up to date in seconds on a warm build cache; nothing is
// skipped when it is missing) and starts a dev server for t.
func startDevServer(t *testing.T) *itest.DevServer {
	t.Helper()
	root, err := itest.RepoRoot()
	require.NoError(t, err)
	cli := filepath.Join(root, "bin", "temporal")
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	start := time.Now()
	require.NoError(t, itest.BuildCLI(ctx, cli), "building the Temporal CLI")
	t.Logf("Temporal CLI ready in %s", time.Since(start).Round(100*time.Millisecond))
	return itest.StartDevServerT(t, itest.DevServerOptions{CLI: cli})
}

// queueLimit reads the queue rate limit of an activity task queue.
func queueLimit(ctx context.Context, c client.Client, ns, tq string) (*taskqueuepb.RateLimitConfig, error) {
	resp, err := c.WorkflowService().DescribeTaskQueue(ctx, &workflowservice.DescribeTaskQueueRequest{
		Namespace:     ns,
		TaskQueue:     &taskqueuepb.TaskQueue{Name: tq, Kind: enumspb.TASK_QUEUE_KIND_NORMAL},
		TaskQueueType: enumspb.TASK_QUEUE_TYPE_ACTIVITY,
		ReportConfig:  true,
	})
	if err != nil {
		return nil, err
	}
	return resp.GetConfig().GetQueueRateLimit(), nil
}

// awaitQueueLimit reads tq's queue rate limit every period until one is
// in force, and returns it; it fails t when ctx ends first.
func awaitQueueLimit(ctx context.Context, t *testing.T, c client.Client, ns, tq string, period time.Duration) *taskqueuepb.RateLimitConfig {
	t.Helper()
	var limit *taskqueuepb.RateLimitConfig
	require.NoError(t, itest.Eventually(ctx, period, func() error {
		var err error
		if limit, err = queueLimit(ctx, c, ns, tq); err != nil {
			return err
		}
		if limit.GetRateLimit() == nil {
			return errors.New("no queue rate limit yet")
		}
		return nil
	}))
	return limit
}

func queryState(ctx context.Context, c client.Client, tq string) (governor.State, error) {
	var st governor.State
	v, err := c.QueryWorkflow(ctx, governor.WorkflowID(tq), "", governor.QueryName)
	if err != nil {
		return st, err
	}
	return st, v.Get(&st)
}

const (
	touchName = "gov-test-touch"
	burstName = "gov-test-burst"
)

// touch is a trivial activity: it returns when it started.
func touch(context.Context) (time.Time, error) { return time.Now(), nil }

// burst schedules n touch activities on queue at once and returns when the
// workflow scheduled them and when each started.
func burst(ctx workflow.Context, queue string, n int) ([]time.Time, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:             queue,
		StartToCloseTimeout:   10 * time.Second,
		DisableEagerExecution: true,
	})
	var scheduled time.Time
	if err := workflow.SideEffect(ctx, func(workflow.Context) any { return time.Now() }).Get(&scheduled); err != nil {
		return nil, err
	}
	futures := make([]workflow.Future, n)
	for i := range futures {
		futures[i] = workflow.ExecuteActivity(ctx, touchName)
	}
	out := []time.Time{scheduled}
	for _, f := range futures {
		var at time.Time
		if err := f.Get(ctx, &at); err != nil {
			return nil, err
		}
		out = append(out, at)
	}
	return out, nil
}

// TestDevServer runs the governor against a real server: a reporter's
// throttles make the governor set the queue rate limit, the server reports
// that limit, and matching paces the activity starts on the queue by it.
func TestDevServer(t *testing.T) {
	dev := startDevServer(t)
	c := dev.Client()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	suffix := fmt.Sprintf("%08x", rand.Uint32())
	govTQ, actTQ, wfTQ := "gov-governor-"+suffix, "gov-test-"+suffix, "gov-wf-"+suffix

	gw := worker.New(c, govTQ, worker.Options{})
	(&governor.Activities{Client: c}).Register(gw)
	// Four pollers or more, for the dev server's four partitions; and two
	// workers: a worker alone on a queue without a limit is its own client
	// of the API and does not report (Reporter).
	aw := worker.New(c, actTQ, worker.Options{MaxConcurrentActivityTaskPollers: 8})
	aw.RegisterActivityWithOptions(touch, activity.RegisterOptions{Name: touchName})
	aw2 := worker.New(c, actTQ, worker.Options{Identity: "worker-2", MaxConcurrentActivityTaskPollers: 4})
	aw2.RegisterActivityWithOptions(touch, activity.RegisterOptions{Name: touchName})
	ww := worker.New(c, wfTQ, worker.Options{})
	ww.RegisterWorkflowWithOptions(burst, workflow.RegisterOptions{Name: burstName})
	for _, w := range []worker.Worker{gw, aw, aw2, ww} {
		require.NoError(t, w.Start())
		defer w.Stop()
	}

	// The floor makes the learned rate exactly 2/s: 0.05 × the measured
	// rate (about 10/s) is below it.
	const rate = 2.0
	rep := governor.NewReporter(c, govTQ, dev.Namespace, "worker-1", governor.ReporterConfig{
		ReportInterval: 200 * time.Millisecond,
		LimitInterval:  300 * time.Millisecond,
		Governor:       governor.Config{Floor: rate, Beta: 0.05},
		Logger:         itest.QuietLogger(),
	})
	rep.Start(ctx)
	defer rep.Close()
	if _, ok := rep.Limit(actTQ); ok {
		t.Fatal("Limit reports a limit before any was set")
	}
	for range 15 {
		rep.Record(actTQ, false, false)
		time.Sleep(100 * time.Millisecond)
	}
	throttledAt := time.Now()
	rep.Record(actTQ, true, false)

	limit := awaitQueueLimit(ctx, t, c, dev.Namespace, actTQ, 50*time.Millisecond)
	t.Logf("queue rate limit in force %s after the throttle: %v", time.Since(throttledAt).Round(time.Millisecond), limit)
	st, err := queryState(ctx, c, actTQ)
	require.NoError(t, err)
	t.Logf("governor state: %+v", st)
	inForce := float64(limit.GetRateLimit().GetRequestsPerSecond())
	assert.Greater(t, inForce, 0.0)
	assert.Equal(t, st.InForce, inForce, "the governor reports what the server has")
	assert.Equal(t, st.Rate, inForce)
	assert.Equal(t, rate, inForce)
	assert.Equal(t, governor.StatusLimited, st.Status)
	assert.Equal(t, governor.Identity, limit.GetMetadata().GetUpdateIdentity())
	assert.Contains(t, limit.GetMetadata().GetReason(), "learned from throttles")

	// The reporter learns the limit in force.
	require.NoError(t, itest.Eventually(ctx, 50*time.Millisecond, func() error {
		if r, ok := rep.Limit(actTQ); !ok || r != rate {
			return fmt.Errorf("Limit = %v, %v", r, ok)
		}
		return nil
	}))

	// Matching paces the starts: 12 activities scheduled at once.
	const n = 12
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: wfTQ}, burstName, actTQ, n)
	require.NoError(t, err)
	var times []time.Time
	require.NoError(t, run.Get(ctx, &times))
	scheduled, starts := times[0], times[1:]
	slices.SortFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
	offsets := make([]string, len(starts))
	for i, s := range starts {
		offsets[i] = fmt.Sprintf("%.2f", s.Sub(scheduled).Seconds())
	}
	spread := starts[len(starts)-1].Sub(starts[0])
	last := starts[len(starts)-1].Sub(scheduled)
	maxIn1s := 0
	for i := range starts {
		j := i
		for j < len(starts) && starts[j].Sub(starts[i]) < time.Second {
			j++
		}
		maxIn1s = max(maxIn1s, j-i)
	}
	t.Logf("limit %.1f/s: %d starts at %s s after scheduling; first to last %.2f s (%.2f/s), at most %d in any 1 s",
		rate, n, strings.Join(offsets, " "), spread.Seconds(), float64(n-1)/spread.Seconds(), maxIn1s)
	// With 4 partitions each gets rate/4 with a burst of 1: a partition
	// holding k of the tasks starts them 2 s apart, and one holds at least 3.
	assert.GreaterOrEqual(t, last, 4*time.Second, "the last start comes at least 4 s after scheduling")
	assert.GreaterOrEqual(t, spread, 3800*time.Millisecond, "the starts spread over about 4 s or more")
	assert.LessOrEqual(t, maxIn1s, 6, "at most one burst per partition plus the rate in any second")
}

// TestDevServerOverride: a limit an operator set (another identity) stops
// the governor, which reports it and leaves it alone.
func TestDevServerOverride(t *testing.T) {
	dev := startDevServer(t)
	c := dev.Client()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	suffix := fmt.Sprintf("%08x", rand.Uint32())
	govTQ, actTQ := "gov-governor-"+suffix, "gov-test-"+suffix

	_, err := c.WorkflowService().UpdateTaskQueueConfig(ctx, &workflowservice.UpdateTaskQueueConfigRequest{
		Namespace: dev.Namespace, Identity: "operator@cli", TaskQueue: actTQ,
		TaskQueueType: enumspb.TASK_QUEUE_TYPE_ACTIVITY,
		UpdateQueueRateLimit: &workflowservice.UpdateTaskQueueConfigRequest_RateLimitUpdate{
			RateLimit: &taskqueuepb.RateLimit{RequestsPerSecond: 3}, Reason: "set by hand"},
	})
	require.NoError(t, err)

	gw := worker.New(c, govTQ, worker.Options{})
	(&governor.Activities{Client: c}).Register(gw)
	require.NoError(t, gw.Start())
	defer gw.Stop()
	rep := governor.NewReporter(c, govTQ, dev.Namespace, "worker-1", governor.ReporterConfig{
		ReportInterval: 200 * time.Millisecond, Logger: itest.QuietLogger(),
	})
	rep.Start(ctx)
	defer rep.Close()
	rep.Record(actTQ, true, false)

	var st governor.State
	require.NoError(t, itest.Eventually(ctx, 100*time.Millisecond, func() error {
		if st, err = queryState(ctx, c, actTQ); err != nil {
			return err
		}
		if st.Status != governor.StatusOverridden {
			return fmt.Errorf("status %q", st.Status)
		}
		return nil
	}))
	assert.Equal(t, 3.0, st.InForce)
	assert.Zero(t, st.Rate, "nothing written")
	limit, err := queueLimit(ctx, c, dev.Namespace, actTQ)
	require.NoError(t, err)
	assert.Equal(t, float32(3), limit.GetRateLimit().GetRequestsPerSecond())
	assert.Equal(t, "operator@cli", limit.GetMetadata().GetUpdateIdentity())
}

// TestDevServerClusterBreaker: three workers' reporters report an origin
// failing; the governor (on the governors' own task queue) writes the
// origin queue's limit to one probe a second for the whole cluster; when
// the answers come back it ramps the limit up.
func TestDevServerClusterBreaker(t *testing.T) {
	dev := startDevServer(t)
	c := dev.Client()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	base := "gov-cb-" + fmt.Sprintf("%08x", rand.Uint32())
	actTQ := base + "@https://api.example.com"

	gw := worker.New(c, governor.TaskQueue(base), worker.Options{})
	(&governor.Activities{Client: c}).Register(gw)
	require.NoError(t, gw.Start())
	defer gw.Stop()
	var reps []*governor.Reporter
	for i := range 3 {
		rep := governor.NewReporter(c, "unused", dev.Namespace, fmt.Sprintf("worker-%d", i+1), governor.ReporterConfig{
			ReportInterval: 200 * time.Millisecond, Logger: itest.QuietLogger(),
		})
		rep.Start(ctx)
		defer rep.Close()
		reps = append(reps, rep)
	}
	// record has each worker record one answer every 50 ms until stop.
	record := func(failed bool, stop <-chan struct{}) {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				for _, r := range reps {
					r.Record(actTQ, false, failed)
				}
			}
		}
	}

	failing := make(chan struct{})
	go record(true, failing)
	limit := awaitQueueLimit(ctx, t, c, dev.Namespace, actTQ, 100*time.Millisecond)
	close(failing)
	assert.Equal(t, float32(1), limit.GetRateLimit().GetRequestsPerSecond(), "one probe a second for the cluster")
	assert.Contains(t, limit.GetMetadata().GetReason(), "breaker open")
	st, err := queryState(ctx, c, actTQ)
	require.NoError(t, err)
	assert.Equal(t, governor.StatusOpen, st.Status)
	assert.Equal(t, 1, st.Breaker.Opened)
	assert.Zero(t, st.Breaker.Before, "no limit before")
	t.Logf("open: %+v", st.Breaker)

	recovered := make(chan struct{})
	defer close(recovered)
	go record(false, recovered)
	require.NoError(t, itest.Eventually(ctx, 200*time.Millisecond, func() error {
		if st, err = queryState(ctx, c, actTQ); err != nil {
			return err
		}
		if st.Status != governor.StatusLimited || st.Rate < 8 {
			return fmt.Errorf("status %q, rate %v", st.Status, st.Rate)
		}
		return nil
	}))
	limit, err = queueLimit(ctx, c, dev.Namespace, actTQ)
	require.NoError(t, err)
	assert.Equal(t, float32(st.Rate), limit.GetRateLimit().GetRequestsPerSecond(), "the ramp's rate is in force")
	assert.Contains(t, limit.GetMetadata().GetReason(), "breaker closing")
	d, err := c.DescribeWorkflowExecution(ctx, governor.WorkflowID(actTQ), "")
	require.NoError(t, err)
	assert.Equal(t, governor.TaskQueue(base), d.GetWorkflowExecutionInfo().GetTaskQueue(), "the governor runs on its own task queue")
	t.Logf("ramped: rate %v, %+v", st.Rate, st.Breaker)
}
