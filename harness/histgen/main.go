// Command histgen records the workflow history that the replay tests in
// package workflows check, by running the ready workflow against a Temporal
// dev server and the reference API, with the input format of today
// (durations as strings, a body that travels as its exact text). Run it from
// the repository root after a change to workflow code that is meant to
// change histories; seed_history.json, recorded with the format before,
// stays as it is. It also records declined_history_v2.json: a call the
// API declines with a 402, which fails the workflow with the activity's
// failure details; declined_history.json, recorded the same way with the
// code before API v1 (activities.FailureDetails), stays as it is. And it
// records follow_first_wait_history_v2.json: a followed call whose start
// answer's Retry-After (3 s) passes FollowOptions.Timeout (2 s), which
// records the "follow-timeout-bounds-first-wait" version marker and ends
// with OperationStillRunning at the timeout; follow_first_wait_history.json,
// the same call recorded the same way with the code before the timeout
// bounded the first wait (7500d85: it waits 3 s, then polls), stays as it
// is. And follow_cancel_no_time_history_v2.json (recordCancelNoTime): a
// cancelled call whose workflow's deadline leaves no time to ask the
// server to cancel; and webhook_two_keys_history_v2.json (recordTwoKeys):
// a run that awaits one operation's webhooks under two keys:
//
//	go build -C tools -o ../bin/temporal github.com/temporalio/cli/cmd/temporal
//	go run ./harness/histgen -temporal bin/temporal -out workflows/testdata
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"time"

	"go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	idemtest "github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

func main() {
	bin := flag.String("temporal", "bin/temporal", "path to the Temporal CLI")
	out := flag.String("out", "workflows/testdata", "directory for the history files")
	flag.Parse()
	if err := run(*bin, *out); err != nil {
		log.Fatal(err)
	}
}

func run(bin, out string) error {
	ctx := context.Background()
	srv, err := testsuite.StartDevServer(ctx, testsuite.DevServerOptions{ExistingPath: bin, LogLevel: "error"})
	if err != nil {
		return fmt.Errorf("starting the dev server: %w", err)
	}
	defer srv.Stop()
	c := srv.Client()

	api := idemtest.NewServer(idemtest.Options{})
	api.Script(idemtest.Fail(503), idemtest.Fail(429, "1"))
	hs := httptest.NewServer(api)
	defer hs.Close()

	acts, err := activities.New(activities.Config{AllowedOrigins: []string{hs.URL}})
	if err != nil {
		return err
	}
	w := worker.New(c, "histgen", worker.Options{})
	acts.Register(w)
	workflows.Register(w)
	if err := w.Start(); err != nil {
		return err
	}
	defer w.Stop()

	const id = "histgen-seed-order-1"
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: "histgen"}, workflows.WorkflowName, workflows.Request{
		Operation: "charge", URL: hs.URL + "/payments", Body: json.RawMessage(`{ "order": "order-1", "amount": 4200, "note": "<b>&</b>" }`),
		StartToCloseTimeout: 10 * time.Second,
		Retry:               workflows.RetryOptions{InitialInterval: time.Second},
	})
	if err != nil {
		return err
	}
	var resp workflows.Response
	if err := run.Get(ctx, &resp); err != nil {
		return err
	}
	if err := record(ctx, c, run, filepath.Join(out, "seed_history_v2.json")); err != nil {
		return err
	}
	fmt.Printf("attempt %d, key %s\n", resp.Attempt, resp.IdempotencyKey)

	api.Script(idemtest.Fail(402))
	run, err = c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "histgen-declined-order-2", TaskQueue: "histgen"}, workflows.WorkflowName, workflows.Request{
		Operation: "charge", URL: hs.URL + "/payments", Body: json.RawMessage(`{"order":"order-2","amount":100}`),
	})
	if err != nil {
		return err
	}
	err = run.Get(ctx, nil)
	f, ok := workflows.AsFailure(err)
	if !ok || f.Status != 402 {
		return fmt.Errorf("the declined call: want a 402 failure, got %v", err)
	}
	if err := record(ctx, c, run, filepath.Join(out, "declined_history_v2.json")); err != nil {
		return err
	}
	if err := recordFollow(ctx, c, out); err != nil {
		return err
	}
	if err := recordCancelNoTime(ctx, c, out); err != nil {
		return err
	}
	return recordTwoKeys(ctx, c, out)
}

// recordFollow records a call that follows an operation whose start
// answer's Retry-After (3 s) passes FollowOptions.Timeout (2 s); the
// operation has ended after 1 s, so a poll after the whole Retry-After
// (the code before the timeout bounded it) gets its result.
func recordFollow(ctx context.Context, c client.Client, out string) error {
	api := idemtest.NewServer(idemtest.Options{Async: &idemtest.Async{Style: idemtest.AsyncLocation, Duration: time.Second, RetryAfter: 3}})
	hs := httptest.NewServer(api)
	defer hs.Close()
	acts, err := activities.New(activities.Config{AllowedOrigins: []string{hs.URL}})
	if err != nil {
		return err
	}
	w := worker.New(c, "histgen-follow", worker.Options{})
	acts.Register(w)
	workflows.Register(w)
	if err := w.Start(); err != nil {
		return err
	}
	defer w.Stop()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "histgen-follow-order-3", TaskQueue: "histgen-follow"}, workflows.WorkflowName, workflows.Request{
		Operation: "export", URL: hs.URL + "/exports", Body: json.RawMessage(`{"order":"order-3"}`),
		Follow: &workflows.FollowOptions{Timeout: 2 * time.Second},
	})
	if err != nil {
		return err
	}
	err = run.Get(ctx, nil)
	if f, ok := workflows.AsFailure(err); !ok || f.Type != workflows.ErrTypeOperationStillRunning {
		return fmt.Errorf("the followed call: want an OperationStillRunning failure, got %v", err)
	}
	return record(ctx, c, run, filepath.Join(out, "follow_first_wait_history_v2.json"))
}

// record writes run's history to path as protojson.
func record(ctx context.Context, c client.Client, run client.WorkflowRun, path string) error {
	hist := &historypb.History{}
	it := c.GetWorkflowHistory(ctx, run.GetID(), run.GetRunID(), false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return err
		}
		hist.Events = append(hist.Events, ev)
	}
	b, err := protojson.MarshalOptions{Indent: "  "}.Marshal(hist)
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return err
	}
	fmt.Printf("wrote %s: %d events\n", path, len(hist.Events))
	return nil
}
