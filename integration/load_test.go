package integration_test

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// SoakEnv sets TestLoad's number of workflows (default defaultLoadN).
const SoakEnv = "SOAK_N"

const defaultLoadN = 200

// TestLoad runs N workflows at once through the worker binary (built
// without the race detector, as it would be deployed) against a reference
// API that answers 30 % of requests 503: every workflow succeeds, and the API
// did the work exactly N times, once per key. It logs its figures (time,
// requests per record, workflows/s); SOAK_N=1000 makes it the soak test.
func TestLoad(t *testing.T) {
	n := defaultLoadN
	if s := os.Getenv(SoakEnv); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			t.Fatalf("%s=%q: want a positive number of workflows", SoakEnv, s)
		}
		n = v
	}
	srv := testsuite.StartServer(t, testsuite.Options{FailureRate: 0.3})
	tq := uniqueName(t, "tq")
	startWorker(t, workerOptions{TaskQueue: tq, Origins: []string{srv.URL}})
	prefix := uniqueName(t, "wf")
	ctx := ctxT(t, 10*time.Minute)
	req := workflows.Request{
		Operation: "charge", URL: srv.URL + "/charges", Body: body,
		// 0.3^20: no workflow runs out of attempts.
		Retry:                  workflows.RetryOptions{MaximumAttempts: 20},
		ScheduleToCloseTimeout: 5 * time.Minute,
	}

	type outcome struct {
		resp    workflows.Response
		err     error
		latency time.Duration
	}
	results := make([]outcome, n)
	began := time.Now()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64) // bounded concurrent starts
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			t0 := time.Now()
			run, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
				ID: fmt.Sprintf("%s-%04d", prefix, i), TaskQueue: tq, WorkflowExecutionTimeout: 10 * time.Minute,
			}, workflows.WorkflowName, req)
			<-sem
			if err == nil {
				err = run.Get(ctx, &results[i].resp)
			}
			results[i].err, results[i].latency = err, time.Since(t0)
		})
	}
	wg.Wait()
	took := time.Since(began)

	failed := 0
	want := map[string]bool{}
	latencies := make([]time.Duration, 0, n)
	for i, r := range results {
		key := keyOf(fmt.Sprintf("%s-%04d", prefix, i), "charge")
		want[key] = true
		latencies = append(latencies, r.latency)
		switch {
		case r.err != nil:
			failed++
			if failed <= 5 {
				t.Errorf("workflow %d failed: %v", i, r.err)
			}
		case r.resp.Status != 201 || r.resp.IdempotencyKey != key:
			t.Errorf("workflow %d: status %d key %s, want 201 with key %s", i, r.resp.Status, r.resp.IdempotencyKey, key)
		}
	}
	if failed > 0 {
		t.Errorf("%d of %d workflows failed", failed, n)
	}
	st := checkEachOnce(t, srv, want)

	slices.Sort(latencies)
	pct := func(p float64) time.Duration {
		return latencies[min(len(latencies)-1, int(p*float64(len(latencies))))].Round(time.Millisecond)
	}
	t.Logf("load: %d workflows in %s = %.1f workflows/s; API: %d requests for %d records = %.2f requests/record (%d answered 503, %.1f %%), %d replays; latency p50 %s, p95 %s, max %s",
		n, took.Round(time.Millisecond), float64(n)/took.Seconds(),
		st.Requests, st.Records, float64(st.Requests)/float64(max(st.Records, 1)),
		st.Failures, 100*float64(st.Failures)/float64(max(st.Requests, 1)), st.Replays,
		pct(0.50), pct(0.95), latencies[len(latencies)-1].Round(time.Millisecond))
}
