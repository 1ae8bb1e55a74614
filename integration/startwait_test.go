package integration_test

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// TestFollowStartWaitWorkerKilled kills (SIGKILL) the worker binary while
// the start request's attempt waits the start answer's Retry-After (1 s)
// before it returns, the wait that takes no workflow timer. The 202 is
// lost with the attempt; Temporal retries the start after its
// StartToClose, a new worker sends it again with the same key, the
// reference API replays the stored 202, and that attempt waits the
// Retry-After in its turn: the call ends with the final result, one key,
// one record, one operation, and no timer in its history.
//
// StartToClose is 6 s: a fifth of what is left of it after the request
// must hold the 1 s wait (admission.Limiter.WaitInside). Measured: the
// retried start answered 6.7 s after the kill (its StartToClose and a
// backoff), the first poll about 6 s after that (its 1 s wait, then the
// workflow task that schedules the poll goes first to the killed
// worker's sticky queue, 5 s), in each of three runs.
func TestFollowStartWaitWorkerKilled(t *testing.T) {
	t.Parallel()
	token := "tok_" + randomHex(16)
	_, base := startDemoAPI(t, "--async", string(testsuite.AsyncLocation), "--async-duration", "3s",
		"--async-retry-after", "1", "--require-token", token)
	target, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(target)
		pr.Out.Host = pr.In.Host // demoapi names its monitors after it
	}}
	var (
		mu       sync.Mutex
		keys     []string // of the start requests
		answered = make(chan struct{})
		once     sync.Once
		firstGet time.Time
		starts   []time.Time // when each start's answer went back
	)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rp.ServeHTTP(w, r)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case r.Method == http.MethodPost:
			keys, starts = append(keys, r.Header.Get("Idempotency-Key")), append(starts, time.Now())
			once.Do(func() { close(answered) })
		case strings.HasPrefix(r.URL.Path, "/operations/") && firstGet.IsZero():
			firstGet = time.Now()
		}
	}))
	t.Cleanup(proxy.Close)

	tq := uniqueName(t, "tq")
	doomed := startWorker(t, workerOptions{TaskQueue: tq, Origins: []string{proxy.URL}, Token: token})
	ctx := ctxT(t, 2*time.Minute)
	wid := uniqueName(t, "order")
	req := workflows.Request{Operation: opOperation, URL: proxy.URL + "/orders", Body: body,
		Follow: &workflows.FollowOptions{Timeout: time.Minute}, StartToCloseTimeout: 6 * time.Second}
	run := start(t, ctx, tq, wid, req)
	select {
	case <-answered:
	case <-ctx.Done():
		t.Fatal("no start request reached the API")
	}
	// The 202 went back: the attempt reads it and waits its Retry-After
	// (1 s), well inside which the worker dies.
	time.Sleep(300 * time.Millisecond)
	if err := doomed.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	startWorker(t, workerOptions{TaskQueue: tq, Origins: []string{proxy.URL}, Token: token})

	var resp workflows.Response
	if err := run.Get(ctx, &resp); err != nil {
		t.Fatalf("workflow failed after the worker was killed in the start's wait: %v", err)
	}
	key := keyOf(wid, opOperation)
	if resp.Status != http.StatusOK || resp.IdempotencyKey != key {
		t.Errorf("result: status %d, key %s; want 200 (the monitor's final answer), key %s", resp.Status, resp.IdempotencyKey, key)
	}
	checkRecord(t, resp.Body, key)
	if resp.Accepted == nil || resp.Accepted.Waited != time.Second {
		t.Errorf("Accepted %+v: want the start's 1 s Retry-After waited in the start (Waited 1s)", resp.Accepted)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(keys) != 2 || keys[0] != key || keys[1] != key {
		t.Errorf("start requests' keys %q: want two, the killed attempt's and its retry's, both %s", keys, key)
	}
	// The API: one key, one record, one operation; the retried start got
	// the stored 202.
	st := apiStats(t, base)
	checkStats(t, st, testsuite.Stats{Requests: -1, DistinctKeys: 1, Records: 1, Replays: 1, InFlight: 0, Failures: 0})
	if st.Operations != 1 {
		t.Errorf("reference API: %d operations, want 1 (all stats: %+v)", st.Operations, st)
	}
	// The proxy notes an answer once it is written, which the worker may
	// read a moment before: 50 ms of room.
	if len(starts) == 2 && !firstGet.IsZero() && firstGet.Sub(starts[1]) < 950*time.Millisecond {
		t.Errorf("the first poll came %s after the retried start's answer, less than its Retry-After (1s)", firstGet.Sub(starts[1]))
	}
	for _, ev := range history(t, ctx, wid, run.GetRunID()) {
		if ev.GetEventType() == enumspb.EVENT_TYPE_TIMER_STARTED {
			t.Errorf("the history holds a timer (%v): the start's wait takes none", ev.GetTimerStartedEventAttributes())
		}
	}
	if len(starts) > 0 {
		t.Logf("worker killed in the start's wait; the retried start answered %s later, the first poll %s after it",
			starts[len(starts)-1].Sub(killed).Round(10*time.Millisecond), firstGet.Sub(starts[len(starts)-1]).Round(10*time.Millisecond))
	}
}
