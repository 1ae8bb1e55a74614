package interop_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"regexp"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	sdktestsuite "go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/harness/itest"
	"github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// runner runs the ready workflow with a workflow ID, in Temporal's test
// environment or on the dev server, with a worker configured by cfg.
type runner interface {
	name() string
	// prepare readies the worker side for the test (cfg allows the server's origin).
	prepare(t *testing.T, cfg activities.Config) execFunc
}

// execFunc runs one workflow to its end.
type execFunc func(t *testing.T, workflowID string, req workflows.Request) result

// result is how one workflow ended.
type result struct {
	resp *workflows.Response
	err  error
	// activity is the time from the activity's scheduling to its end, all
	// attempts and waits included, as Temporal recorded them (0 where the
	// clock is not real: the test environment).
	activity time.Duration
}

// testEnv is Temporal's test environment (go.temporal.io/sdk/testsuite): a
// new environment per run, so a second run of a workflow ID is a new
// execution with the same ID (and key).
type testEnv struct{}

func (testEnv) name() string { return "Temporal test environment" }

func (testEnv) prepare(t *testing.T, cfg activities.Config) execFunc {
	return func(t *testing.T, workflowID string, req workflows.Request) result {
		t.Helper()
		var s sdktestsuite.WorkflowTestSuite
		s.SetLogger(itest.QuietLogger())
		env := s.NewTestWorkflowEnvironment()
		env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: workflowID})
		env.SetTestTimeout(2 * time.Minute)
		env.SetWorkerOptions(workerOptions(""))
		// The test environment measures StartToClose from the first
		// attempt's start, not each attempt's (SDK v1.51): the grace period
		// lets the retries after an attempt that timed out run.
		env.SetActivityTimeoutGracePeriod(time.Minute)
		testsuite.Register(t, env, nil, cfg)
		env.ExecuteWorkflow(workflows.HTTPCallWorkflow, req)
		if !env.IsWorkflowCompleted() {
			t.Fatal("the workflow did not complete")
		}
		if err := env.GetWorkflowError(); err != nil {
			return result{err: err}
		}
		var resp workflows.Response
		if err := env.GetWorkflowResult(&resp); err != nil {
			t.Fatal(err)
		}
		return result{resp: &resp}
	}
}

// devServer is the package's Temporal dev server with an in-process worker
// of the test's own (its own task queue).
type devServer struct{}

func (devServer) name() string { return "Temporal dev server" }

func (devServer) prepare(t *testing.T, cfg activities.Config) execFunc {
	t.Helper()
	acts, err := activities.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	queue := uniqueName(t, "tq")
	w := worker.New(tc, queue, workerOptions(queue))
	acts.Register(w)
	workflows.Register(w)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := itest.WaitForPollers(ctx, tc, queue, queue); err != nil {
		t.Fatal(err)
	}
	return func(t *testing.T, workflowID string, req workflows.Request) result {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		run, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: workflowID, TaskQueue: queue}, workflows.HTTPCallWorkflow, req)
		if err != nil {
			t.Fatal(err)
		}
		var r result
		var resp workflows.Response
		if err := run.Get(ctx, &resp); err != nil {
			if ctx.Err() != nil {
				t.Fatalf("workflow %s: %v", workflowID, err)
			}
			r.err = err
		} else {
			r.resp = &resp
		}
		r.activity = activitySpan(ctx, t, workflowID, run.GetRunID())
		return r
	}
}

// activitySpan reads the run's history: the time from the activity's
// ActivityTaskScheduled event to its completion, failure or timeout event.
func activitySpan(ctx context.Context, t *testing.T, workflowID, runID string) time.Duration {
	t.Helper()
	var scheduled, closed time.Time
	it := tc.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatalf("history of %s: %v", workflowID, err)
		}
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			scheduled = ev.GetEventTime().AsTime()
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED, enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED,
			enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT, enumspb.EVENT_TYPE_ACTIVITY_TASK_CANCELED:
			closed = ev.GetEventTime().AsTime()
		}
	}
	if scheduled.IsZero() || closed.IsZero() {
		return 0
	}
	return closed.Sub(scheduled)
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// uniqueName returns "<test name>-<what>-<random>", for workflow IDs and
// task queues.
func uniqueName(t testing.TB, what string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return unsafeChars.ReplaceAllString(t.Name(), "_") + "-" + what + "-" + hex.EncodeToString(b)
}

// errType returns the type of the ApplicationError in err's chain ("" if none).
func errType(err error) string {
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return app.Type()
	}
	return ""
}

// nonRetryable reports whether err's ApplicationError is non-retryable.
func nonRetryable(err error) bool {
	var app *temporal.ApplicationError
	return errors.As(err, &app) && app.NonRetryable()
}

// describe is the outcome column: "success", "success, replayed", or the
// failure's error type ("timeout (StartToClose)" for a timeout).
func describe(resp *workflows.Response, err error) string {
	if err == nil {
		if resp != nil && resp.Replayed {
			return "success, replayed"
		}
		return "success"
	}
	if typ := errType(err); typ != "" {
		return typ
	}
	var to *temporal.TimeoutError
	if errors.As(err, &to) {
		return "timeout (" + to.TimeoutType().String() + ")"
	}
	return err.Error()
}

// workerOptions are the worker's options: the deadlock detector gets more
// than its 1 s, since dozens of workflows start at once on two shared cores
// under the race detector.
func workerOptions(identity string) worker.Options {
	return worker.Options{Identity: identity, DeadlockDetectionTimeout: time.Minute}
}
