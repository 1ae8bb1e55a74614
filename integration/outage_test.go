package integration_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/idemhttp/temporal-idempotent-http/harness/itest"
	"github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// outageAPI is an itest.Outage in front of a reference server.
type outageAPI struct {
	*httptest.Server
	*itest.Outage
	api *testsuite.Server
}

// startOutageAPI starts an outageAPI in front of a reference server with
// opts; both are stopped when the test ends.
func startOutageAPI(t testing.TB, outage time.Duration, opts testsuite.Options) *outageAPI {
	o := &outageAPI{api: testsuite.NewServer(opts)}
	o.Outage = &itest.Outage{Next: o.api, Duration: outage}
	o.Server = httptest.NewServer(o.Outage)
	t.Cleanup(func() { o.api.Close(); o.Close() })
	return o
}

// fetchMetrics is scrape for a goroutine other than the test's: it returns
// the error instead of failing the test.
func fetchMetrics(url string) (map[string]*dto.MetricFamily, error) {
	return itest.ScrapeMetrics(context.Background(), url)
}

// breakerMetrics are the breaker's metrics of one origin in one scrape.
type breakerMetrics struct {
	// Gauges are the values of idempotent_http_circuit_open (one per
	// series with the origin's label).
	Gauges []float64
	// Delays sums idempotent_http_admission_delays_total with
	// reason="circuit_open".
	Delays float64
}

func breakerMetricsOf(fams map[string]*dto.MetricFamily, origin string) breakerMetrics {
	var bm breakerMetrics
	for _, m := range series(fams, "idempotent_http_circuit_open", map[string]string{"origin": origin}) {
		bm.Gauges = append(bm.Gauges, m.GetGauge().GetValue())
	}
	for _, m := range series(fams, "idempotent_http_admission_delays_total", map[string]string{"origin": origin, "reason": "circuit_open"}) {
		bm.Delays += m.GetCounter().GetValue()
	}
	return bm
}

// open reports whether some gauge of the origin says open.
func (bm breakerMetrics) open() bool {
	for _, g := range bm.Gauges {
		if g == 1 {
			return true
		}
	}
	return false
}

// charges is a herd of workflows, each charging an API once under its own
// key, started at once.
type charges struct {
	ids []string
	wg  sync.WaitGroup

	mu       sync.Mutex
	errs     []error
	finished []time.Time // when each one that succeeded ended
}

// startCharges starts n workflows on tq, each charging url+"/charges"
// once (retried up to 1000 attempts within 5 min), named after what.
func startCharges(t *testing.T, ctx context.Context, tq, url, what string, n int) *charges {
	c := &charges{ids: make([]string, n)}
	for i := range n {
		c.ids[i] = uniqueName(t, fmt.Sprint(what, "-", i))
		c.wg.Go(func() {
			body, _ := json.Marshal(map[string]int{"order": i})
			_, _, err := call(t, ctx, tq, c.ids[i], workflows.Request{
				Operation: "charge", URL: url + "/charges", Body: body,
				Retry:                  workflows.RetryOptions{MaximumAttempts: 1000},
				ScheduleToCloseTimeout: 5 * time.Minute,
			})
			c.mu.Lock()
			defer c.mu.Unlock()
			c.errs = append(c.errs, err)
			if err == nil {
				c.finished = append(c.finished, time.Now())
			}
		})
	}
	return c
}

// check fails t unless every workflow succeeded and api holds one record
// under each one's own key.
func (c *charges) check(t *testing.T, api *outageAPI, w *itest.Process) {
	t.Helper()
	c.wg.Wait()
	failed := 0
	for _, err := range c.errs {
		if err != nil {
			if failed == 0 {
				t.Errorf("a workflow failed: %v", err)
			}
			failed++
		}
	}
	if failed > 0 {
		t.Errorf("%d of %d workflows failed; worker output:\n%s", failed, len(c.ids), w.Tail(8<<10))
	}
	st := api.api.Stats()
	if st.Records != len(c.ids) || st.DistinctKeys != len(c.ids) {
		t.Errorf("records %d, distinct keys %d; want %d each (one key per workflow, one record each)", st.Records, st.DistinctKeys, len(c.ids))
	}
	perKey := map[string]int{}
	for _, r := range api.api.Records() {
		perKey[r.IdempotencyKey]++
	}
	for _, id := range c.ids {
		if n := perKey[keyOf(id, "charge")]; n != 1 {
			t.Errorf("workflow %s: %d records under its key, want 1", id, n)
		}
	}
}

// successTimes returns when each of the API's successes came, since its
// first request, in order.
func successTimes(log []itest.OutageEntry) []time.Duration {
	var out []time.Duration
	for _, e := range log {
		if e.Status >= 200 && e.Status <= 299 {
			out = append(out, e.At)
		}
	}
	slices.Sort(out)
	return out
}

// herdTimes is how long a herd took to succeed from a moment: the time
// by which nine in ten had (each its one success), and the last.
type herdTimes struct{ p90, last time.Duration }

// herdTimesOf returns herdTimes for n workflows from their API's
// successes, since from (on the API's time); zero when fewer than n
// succeeded after it.
func herdTimesOf(succ []time.Duration, from time.Duration, n int) herdTimes {
	var after []time.Duration
	for _, at := range succ {
		if at >= from {
			after = append(after, at-from)
		}
	}
	if len(after) < n {
		return herdTimes{}
	}
	return herdTimes{p90: after[(9*n+9)/10-1], last: after[n-1]}
}

func (h herdTimes) String() string {
	return fmt.Sprintf("nine in ten %s, the last %s", h.p90.Round(10*time.Millisecond), h.last.Round(10*time.Millisecond))
}

// TestOutageBreaker: the worker binary, on a real dev server, with its
// circuit breaker on (the default) and off (--breaker=false). Each run
// starts 50 workflows at once against an API that answers 503 without
// Retry-After to every request for 30 s from its first request, then is
// the reference server accepting 6 requests per second (429 beyond).
// With the breaker the API that is down gets at most 100 requests (one
// probe at a time, every 1-2 s, beside the failures that open it);
// without, more: so the bound fails without the breaker. Every workflow
// succeeds either way, each with its own one key and one record. While it
// is open the worker's /metrics says so (the circuit gauge at 1, attempts
// delayed for reason circuit_open), and after the recovery the gauge is 0.
//
// With the breaker it recovers about as fast as a herd that never met the
// outage: nine in ten of the workflows have succeeded, from the end of
// the outage, within recoverySlow × the time nine in ten of a baseline
// took: the same 50 workflows on the same worker against a second API,
// up, 6/s, started when the outage ends (so both herds run on the
// machine as loaded as it is then), from its first request. A bound on
// wall-clock time alone (the last success within 1.5 × the 8.3 s the
// API's capacity needs) failed on a loaded machine while the breaker did
// what it should (1.53 × in CI beside other tests; 1.72 × here beside 16
// busy loops on two cores); nine in ten, not the last, because one
// straggler's wait in matching made the last success 7 s after the 49th
// in one run under load. The recovery took 0.82-1.27 × the baseline in
// six runs, idle to 16 busy loops; a breaker that probes every 20 s
// (--breaker-open-time) made it 2.08 × and 2.40 ×, and one that stops
// probing never recovers. The benchmark measures the recovery against
// the API's capacity.
func TestOutageBreaker(t *testing.T) {
	const (
		workflowsN   = 50
		outage       = 30 * time.Second
		capacity     = 6
		maxDuring    = 100
		recoverySlow = 1.5
	)
	// ideal is how long the API's capacity takes to serve every workflow.
	ideal := workflowsN * time.Second / capacity
	tests := []struct {
		name    string
		args    []string
		breaker bool
	}{
		// On the defaults: the shared rate is on, and a worker alone on
		// its origin's queue is its own client of the API (the reporter
		// sends its governor nothing), so its own breaker and rate
		// decide the recovery.
		{"breaker on (default)", nil, true},
		{"breaker off", []string{"--breaker=false"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			began := time.Now()
			apiOpts := testsuite.Options{Capacity: capacity, CapacityWindow: time.Second}
			api := startOutageAPI(t, outage, apiOpts)
			origins := []string{api.URL}
			// The baseline's API, up throughout (with the breaker only: the
			// recovery is bounded with the breaker only).
			var healthy *outageAPI
			if tt.breaker {
				healthy = startOutageAPI(t, 0, apiOpts)
				origins = append(origins, healthy.URL)
			}
			port, err := itest.FreePort()
			if err != nil {
				t.Fatal(err)
			}
			metricsURL := "http://" + itest.HostPort(port) + "/metrics"
			tq := uniqueName(t, "tq")
			w := startWorkerWith(t, workerOptions{TaskQueue: tq, Origins: origins}, nil,
				append([]string{"--metrics-addr", itest.HostPort(port)}, tt.args...)...)
			ctx := ctxT(t, 6*time.Minute)

			// Scrape the worker's metrics while the workflows run: the
			// breaker's metrics as seen during the outage.
			done := make(chan struct{})
			var (
				scrapeWG   sync.WaitGroup
				seenOpen   bool // the gauge at 1 during the outage
				seenDelays float64
				scrapeErr  error
				scrapes    int
			)
			scrapeWG.Go(func() {
				tick := time.NewTicker(250 * time.Millisecond)
				defer tick.Stop()
				for {
					select {
					case <-done:
						return
					case <-tick.C:
					}
					start := api.Began()
					if start.IsZero() || time.Since(start) >= outage {
						continue
					}
					fams, err := fetchMetrics(metricsURL)
					if err != nil {
						scrapeErr = err
						continue
					}
					// Only a scrape that ended within the outage counts.
					if time.Since(start) >= outage {
						continue
					}
					scrapes++
					bm := breakerMetricsOf(fams, api.URL)
					seenOpen = seenOpen || bm.open()
					seenDelays = max(seenDelays, bm.Delays)
				}
			})

			herd := startCharges(t, ctx, tq, api.URL, "order", workflowsN)
			// The baseline herd starts when the outage ends.
			var baseline *charges
			if healthy != nil {
				err := itest.Eventually(ctx, 10*time.Millisecond, func() error {
					if api.Began().IsZero() {
						return errors.New("no request has reached the API")
					}
					return nil
				})
				if err == nil {
					select {
					case <-ctx.Done():
						err = ctx.Err()
					case <-time.After(time.Until(api.Began().Add(outage))):
					}
				}
				if err != nil {
					t.Errorf("waiting for the outage to end to start the baseline: %v", err)
				} else {
					baseline = startCharges(t, ctx, tq, healthy.URL, "baseline", workflowsN)
				}
			}
			herd.wg.Wait()
			if baseline != nil {
				baseline.wg.Wait()
			}
			close(done)
			scrapeWG.Wait()
			// Every workflow succeeded, each with one record under its own
			// key.
			herd.check(t, api, w)
			if baseline != nil {
				baseline.check(t, healthy, w)
			}

			// The requests the API got, during the outage and after.
			var during, after, successes int
			var firstAfter time.Duration
			perSecond := make([]int, int(outage/time.Second))
			// afterPerSecond counts "successes/throttles" per second after
			// the outage.
			var okAfter, throttledAfter []int
			for _, e := range api.Log() {
				if e.At < outage {
					during++
					perSecond[e.At/time.Second]++
					continue
				}
				if after == 0 {
					firstAfter = e.At - outage
				}
				after++
				sec := int((e.At - outage) / time.Second)
				for len(okAfter) <= sec {
					okAfter, throttledAfter = append(okAfter, 0), append(throttledAfter, 0)
				}
				switch {
				case e.Status >= 200 && e.Status <= 299:
					successes++
					okAfter[sec]++
				case e.Status == http.StatusTooManyRequests:
					throttledAfter[sec]++
				}
			}
			t.Logf("%d requests during the %s outage (per second: %v); %d after it, %d of them successes; run took %s",
				during, outage, perSecond, after, successes, time.Since(began).Round(100*time.Millisecond))
			t.Logf("after the outage: first request at +%s; per second, successes %v, 429s %v",
				firstAfter.Round(10*time.Millisecond), okAfter, throttledAfter)
			if tt.breaker && during > maxDuring {
				t.Errorf("%d requests reached the API while it was down, want at most %d", during, maxDuring)
			}
			if !tt.breaker && during <= maxDuring {
				t.Errorf("without the breaker %d requests reached the API while it was down, want more than %d (else the bound tests nothing)", during, maxDuring)
			}

			if start := api.Began(); !start.IsZero() && len(herd.finished) > 0 {
				last := slices.MaxFunc(herd.finished, time.Time.Compare)
				t.Logf("last workflow completed %s after the outage ended", last.Sub(start.Add(outage)).Round(10*time.Millisecond))
			}
			recovery := herdTimesOf(successTimes(api.Log()), outage, workflowsN)
			t.Logf("recovery: successes after the outage ended: %s; %d workflows at %d/s need %s: %.2f × (the last)",
				recovery, workflowsN, capacity, ideal.Round(10*time.Millisecond), float64(recovery.last)/float64(ideal))

			// The breaker's metrics.
			fams, text := scrape(t, metricsURL)
			defer func() {
				if t.Failed() {
					t.Logf("/metrics after the run:\n%s", text)
				}
			}()
			final := breakerMetricsOf(fams, api.URL)
			t.Logf("metrics: %d scrapes during the outage: circuit gauge at 1 seen: %v, circuit_open delays up to %g; after: gauges %v, delays %g",
				scrapes, seenOpen, seenDelays, final.Gauges, final.Delays)
			if !tt.breaker {
				if seenOpen || final.open() || final.Delays > 0 {
					t.Errorf("breaker off: the metrics say it opened (gauge at 1 seen: %v, after %v; circuit_open delays %g)", seenOpen, final.Gauges, final.Delays)
				}
				return
			}
			base := herdTimesOf(successTimes(healthy.Log()), 0, workflowsN)
			ratio := float64(recovery.p90) / float64(base.p90)
			t.Logf("baseline: the same herd against the API up, started as the outage ended, after its first request: %s (%.2f × %s, the last); the recovery's nine in ten took %.2f × its, the last %.2f ×",
				base, float64(base.last)/float64(ideal), ideal.Round(10*time.Millisecond), ratio, float64(recovery.last)/float64(base.last))
			if recovery.p90 <= 0 || base.p90 <= 0 || ratio > recoverySlow {
				t.Errorf("nine in ten workflows had succeeded %s after the outage ended: %.2f × the %s the same herd took against the API up, in the same run; want at most %g ×",
					recovery.p90.Round(10*time.Millisecond), ratio, base.p90.Round(10*time.Millisecond), recoverySlow)
			}
			if !seenOpen || seenDelays <= 0 {
				t.Errorf("during the outage (%d scrapes; last error %v) /metrics showed circuit gauge at 1: %v, idempotent_http_admission_delays_total{reason=\"circuit_open\"} up to %g; want the gauge at 1 and delays > 0",
					scrapes, scrapeErr, seenOpen, seenDelays)
			}
			if len(final.Gauges) == 0 || final.open() {
				t.Errorf("after the recovery idempotent_http_circuit_open{origin=%q} = %v, want 0", api.URL, final.Gauges)
			}
			if final.Delays < seenDelays || final.Delays <= 0 {
				t.Errorf("after the recovery circuit_open delays = %g, want at least the %g seen during the outage", final.Delays, seenDelays)
			}
		})
	}
}
