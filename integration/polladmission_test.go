package integration_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// TestMonitorOutageBreaker: polls go through the same admission as the
// start requests. 20 long-running operations are accepted by the
// reference API (demoapi --async location, 5 s each, Retry-After 1); its
// status monitor then answers 503 for 20 s from its first poll. The
// worker's breaker for the origin opens after the first failures, and
// during the outage the monitor gets about one probe a second, not the
// polls of every operation; every operation then completes. Measured:
// 37-39 requests in three runs before the breaker's trip margin (the
// first second's 18-20, then one a second; once five in one second, most
// likely after a start held by the breaker went as the probe and was
// answered), all 20 operations completed; 47 in a run with it (36 in the
// first two seconds: with the starts' 20 answers in the window, the
// margin asks 35 failures, not 20).
//
// Before polls were admitted the monitor got 102 requests in such an
// outage (every poll, each retried at the poll backoff).
func TestMonitorOutageBreaker(t *testing.T) {
	const (
		operations = 20
		outage     = 20 * time.Second
		// The failures that open the breaker: Breaker.Trips (at least
		// MinFailures, and half of the origin's answers within 10 s by
		// admission.TripMargin standard errors), the answers including
		// the operations' starts (202s): up to one per operation.
		// One probe a second over the outage, and one more opening: a
		// start that comes late (held by the breaker) is the probe the
		// origin answers, which closes the breaker until MinFailures
		// polls fail again.
		probes = int(outage/time.Second) + 5
	)
	opening := 0
	for !(activities.Breaker{}).Trips(operations+opening, opening) {
		opening++
	}
	_, base := startDemoAPI(t, "--async", string(testsuite.AsyncLocation), "--async-duration", "5s", "--async-retry-after", "1")
	target, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(target)
		// demoapi names its monitors after the Host it was asked at.
		pr.Out.Host = pr.In.Host
	}}
	var (
		mu      sync.Mutex
		began   time.Time       // the first request to a monitor or result
		at      []time.Duration // every such request, from began
		statusN = map[int]int{}
	)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/operations/") && !strings.HasPrefix(r.URL.Path, "/results/") {
			rp.ServeHTTP(w, r)
			return
		}
		mu.Lock()
		now := time.Now()
		if began.IsZero() {
			began = now
		}
		since := now.Sub(began)
		at = append(at, since)
		down := since < outage
		if down {
			statusN[http.StatusServiceUnavailable]++
		}
		mu.Unlock()
		if down {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close)

	tq := uniqueName(t, "tq")
	w := startWorker(t, workerOptions{TaskQueue: tq, Origins: []string{proxy.URL}})
	ctx := ctxT(t, 4*time.Minute)
	var wg sync.WaitGroup
	errs := make([]error, operations)
	results := make([]*workflows.Response, operations)
	for i := range operations {
		wg.Go(func() {
			_, resp, err := call(t, ctx, tq, uniqueName(t, fmt.Sprint("order-", i)), workflows.Request{
				Operation: opOperation, URL: proxy.URL + "/orders", Body: body,
				Follow: &workflows.FollowOptions{Timeout: 3 * time.Minute},
			})
			errs[i], results[i] = err, resp
		})
	}
	wg.Wait()

	failed := 0
	for i, err := range errs {
		switch {
		case err != nil:
			failed++
			t.Errorf("operation %d failed: %v", i, err)
		case results[i].Status != http.StatusOK:
			t.Errorf("operation %d ended with status %d, want 200", i, results[i].Status)
		}
	}
	if failed > 0 {
		t.Logf("worker output:\n%s", w.Tail(8<<10))
	}
	mu.Lock()
	defer mu.Unlock()
	during, after := 0, 0
	perSecond := make([]int, int(outage/time.Second))
	for _, d := range at {
		if d < outage {
			during++
			perSecond[d/time.Second]++
		} else {
			after++
		}
	}
	t.Logf("the monitor got %d requests during the %s outage (per second: %v), %d after it", during, outage, perSecond, after)
	if want := opening + probes; during > want {
		t.Errorf("the monitor got %d requests while it answered 503, want at most %d (the failures that open the breaker, %d, and one probe a second)",
			during, want, opening)
	}
}
