package cluster_test

import (
	"context"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/idemhttp/temporal-idempotent-http/harness/cluster"
)

func greetActivity(_ context.Context, name string) (string, error) {
	return "hello " + name, nil
}

func greetWorkflow(ctx workflow.Context, name string) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 30 * time.Second})
	var out string
	err := workflow.ExecuteActivity(ctx, greetActivity, name).Get(ctx, &out)
	return out, err
}

// TestClusterRunsWorkflow starts PostgreSQL and temporal-server, runs a
// workflow with one activity through an in-process worker, checks that the
// history went through the SQL store, kills the server with SIGKILL and
// restarts it (another workflow runs), then stops the cluster and checks that
// nothing of it is left listening or on disk.
func TestClusterRunsWorkflow(t *testing.T) {
	c := cluster.StartForTest(t, cluster.Options{DynamicConfig: cluster.OnePartitionPerQueue})

	cl, err := client.Dial(client.Options{HostPort: c.FrontendHostPort(), Namespace: c.Namespace()})
	if err != nil {
		t.Fatalf("dial %s: %v", c.FrontendHostPort(), err)
	}
	defer cl.Close()

	const taskQueue = "cluster-smoke"
	w := worker.New(cl, taskQueue, worker.Options{Identity: "smoke-worker"})
	w.RegisterWorkflow(greetWorkflow)
	w.RegisterActivity(greetActivity)
	if err := w.Start(); err != nil {
		t.Fatalf("worker start: %v", err)
	}
	defer w.Stop()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run, err := cl.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "cluster-smoke-1", TaskQueue: taskQueue}, greetWorkflow, "cluster")
	if err != nil {
		t.Fatalf("start workflow: %v", err)
	}
	var got string
	if err := run.Get(ctx, &got); err != nil {
		t.Fatalf("workflow: %v", err)
	}
	if got != "hello cluster" {
		t.Fatalf("workflow result = %q, want %q", got, "hello cluster")
	}

	// The activity ran on our worker, as the history (read back from
	// PostgreSQL through the frontend) says.
	var identity string
	iter := cl.GetWorkflowHistory(ctx, run.GetID(), run.GetRunID(), false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for iter.HasNext() {
		ev, err := iter.Next()
		if err != nil {
			t.Fatalf("history: %v", err)
		}
		if a := ev.GetActivityTaskStartedEventAttributes(); a != nil {
			identity = a.GetIdentity()
		}
	}
	if identity != "smoke-worker" {
		t.Errorf("ActivityTaskStarted identity = %q, want %q", identity, "smoke-worker")
	}

	// OnePartitionPerQueue is in force: the activity queue has one
	// partition (Server 1.29.1 matches a taskType constraint only beside a
	// taskQueueName, so one on taskType alone left every queue four).
	parts, err := cl.WorkflowService().ListTaskQueuePartitions(ctx, &workflowservice.ListTaskQueuePartitionsRequest{
		Namespace: c.Namespace(), TaskQueue: &taskqueue.TaskQueue{Name: taskQueue},
	})
	if err != nil {
		t.Fatalf("ListTaskQueuePartitions: %v", err)
	}
	if n := len(parts.GetActivityTaskQueuePartitions()); n != 1 {
		t.Errorf("activity task queue partitions = %d, want 1 (OnePartitionPerQueue)", n)
	}

	// Visibility (the temporal_visibility database, written asynchronously)
	// comes to list it as completed.
	query := "WorkflowId='" + run.GetID() + "' AND ExecutionStatus='Completed'"
	for {
		out, err := c.CLI(ctx, "workflow", "list", "--namespace", c.Namespace(), "--query", query, "--output", "json")
		if err != nil {
			t.Fatalf("list: %v", err)
		}
		if strings.Contains(string(out), run.GetRunID()) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("visibility never listed %s as completed; last answer: %s", run.GetID(), out)
		case <-time.After(200 * time.Millisecond):
		}
	}

	// A SIGKILLed server comes back on the same ports and store: the
	// client and the worker reconnect and a new workflow runs.
	pid := c.ServerPid()
	if err := c.RestartServer(ctx); err == nil {
		t.Errorf("RestartServer while the server (pid %d) runs: no error", pid)
	}
	if err := c.KillServer(); err != nil {
		t.Fatal(err)
	}
	if err := c.RestartServer(ctx); err != nil {
		t.Fatal(err)
	}
	if c.ServerPid() == pid {
		t.Errorf("server pid %d unchanged after a restart", pid)
	}
	again, err := cl.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "cluster-smoke-2", TaskQueue: taskQueue}, greetWorkflow, "again")
	if err != nil {
		t.Fatalf("start workflow after the restart: %v", err)
	}
	if err := again.Get(ctx, &got); err != nil || got != "hello again" {
		t.Fatalf("workflow after the restart: %q, %v; want %q", got, err, "hello again")
	}

	w.Stop()
	cl.Close()
	if err := c.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	for _, addr := range []string{c.FrontendHostPort(), c.PostgresHostPort()} {
		if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			conn.Close()
			t.Errorf("%s still accepts connections after Stop", addr)
		}
	}
	if _, err := os.Stat(c.PostgresLogPath()); !os.IsNotExist(err) {
		t.Errorf("PostgreSQL's directory still there after Stop (stat %s: %v)", c.PostgresLogPath(), err)
	}
}
