package integration_test

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// TestAdmissionUnderOverload: the worker binary, on a real dev server, with
// adaptive admission on (its default) and off (--admission=false). Each
// run starts 40 workflows at once against an API that accepts 5 requests
// per second and answers the rest 429 without Retry-After. With admission
// the worker learns the API's rate and holds the attempts back (attempts
// that send nothing), so it sends far fewer requests per success; every
// workflow succeeds either way, each with its own one key.
func TestAdmissionUnderOverload(t *testing.T) {
	const workflowsN = 40
	tests := []struct {
		name string
		args []string
		// maxPerSuccess and minPerSuccess bound requests per success.
		maxPerSuccess, minPerSuccess float64
		// heldBack: some successes came on a later attempt than the
		// requests they sent (attempts that waited for admission).
		heldBack bool
	}{
		{"admission on (default)", nil, 1.5, 1, true},
		{"admission off", []string{"--admission=false"}, 1e9, 2, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := testsuite.StartServer(t, testsuite.Options{Capacity: 5, CapacityWindow: time.Second})
			tq := uniqueName(t, "tq")
			startWorkerWith(t, workerOptions{TaskQueue: tq, Origins: []string{srv.URL}}, nil, tt.args...)
			ctx := ctxT(t, 4*time.Minute)
			var wg sync.WaitGroup
			var mu sync.Mutex
			var errs []error
			var resps []*workflows.Response
			for i := range workflowsN {
				wg.Go(func() {
					body, _ := json.Marshal(map[string]int{"order": i})
					_, resp, err := call(t, ctx, tq, uniqueName(t, fmt.Sprint("order-", i)), workflows.Request{
						Operation: "charge", URL: srv.URL + "/charges", Body: body,
						Retry:                  workflows.RetryOptions{InitialInterval: time.Second, MaximumInterval: 10 * time.Second, MaximumAttempts: 30},
						ScheduleToCloseTimeout: 3 * time.Minute,
					})
					mu.Lock()
					defer mu.Unlock()
					errs, resps = append(errs, err), append(resps, resp)
				})
			}
			wg.Wait()
			for _, err := range errs {
				if err != nil {
					t.Fatalf("a workflow failed: %v", err)
				}
			}
			st := srv.Stats()
			if st.Records != workflowsN || st.DistinctKeys != workflowsN {
				t.Fatalf("records %d, distinct keys %d; want %d each (one key per workflow, one record each)", st.Records, st.DistinctKeys, workflowsN)
			}
			perSuccess := float64(st.Requests) / float64(st.Records)
			t.Logf("%d requests for %d successes: %.2f per success", st.Requests, st.Records, perSuccess)
			if perSuccess > tt.maxPerSuccess || perSuccess < tt.minPerSuccess {
				t.Errorf("%.2f requests per success, want within [%g, %g]", perSuccess, tt.minPerSuccess, tt.maxPerSuccess)
			}
			// Attempts that waited for admission sent nothing: the sum of
			// the attempt numbers of the successes then passes the requests.
			var attempts int
			for _, r := range resps {
				attempts += int(r.Attempt)
			}
			if got := attempts > st.Requests; got != tt.heldBack {
				t.Errorf("attempts %d, requests %d: attempts held back = %v, want %v", attempts, st.Requests, got, tt.heldBack)
			}
		})
	}
}
