package activities_test

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/internal/input"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// TestBreaker: five failures open the origin's breaker; then every attempt,
// a first one included, sends nothing and comes back when a probe may go;
// the probe's answer closes it (or a failure keeps it open); the answers
// that are not failures never open it.
func TestBreaker(t *testing.T) {
	const openTime = 10 * time.Second
	type attempt struct {
		advance  time.Duration // on the fake clock, before the attempt
		sent     bool          // the attempt reached the server
		errType  string        // "" for success
		delayMin time.Duration // NotAdmitted: NextRetryDelay at least
		delayMax time.Duration
	}
	failures := func(n int, errType string) []attempt {
		as := make([]attempt, n)
		for i := range as {
			as[i] = attempt{sent: true, errType: errType}
		}
		return as
	}
	refused := func(min, max time.Duration) attempt {
		return attempt{errType: workflows.ErrTypeNotAdmitted, delayMin: min, delayMax: max}
	}
	tests := []struct {
		name    string
		handler func(n int) (int, []string) // the n-th request's status and headers
		breaker activities.Breaker
		steps   []attempt
	}{
		{"five 503s open it: a first attempt sends nothing", func(int) (int, []string) { return 503, nil },
			activities.Breaker{OpenTime: openTime},
			append(failures(5, workflows.ErrTypeHTTPRetryableStatus),
				refused(openTime-time.Second, openTime),
				attempt{advance: 5 * time.Second, errType: workflows.ErrTypeNotAdmitted, delayMin: 4 * time.Second, delayMax: 5 * time.Second})},
		{"the probe's 201 closes it", func(n int) (int, []string) {
			if n <= 5 {
				return 503, nil
			}
			return 201, nil
		}, activities.Breaker{OpenTime: openTime},
			append(failures(5, workflows.ErrTypeHTTPRetryableStatus),
				refused(openTime-time.Second, openTime),
				attempt{advance: openTime, sent: true}, // the probe
				attempt{sent: true}, attempt{sent: true})},
		{"a failed probe keeps it open, twice as long", func(int) (int, []string) { return 502, nil },
			activities.Breaker{OpenTime: openTime, MaxOpenTime: time.Minute},
			append(failures(5, workflows.ErrTypeHTTPRetryableStatus),
				attempt{advance: openTime, sent: true, errType: workflows.ErrTypeHTTPRetryableStatus}, // the probe
				refused(2*openTime-time.Second, 2*openTime))},
		{"Retry-After on the 503 sets the open time", func(int) (int, []string) { return 503, []string{"Retry-After", "40"} },
			activities.Breaker{OpenTime: openTime},
			append(failures(5, workflows.ErrTypeHTTPRetryableStatus),
				refused(40*time.Second-time.Second, 40*time.Second))},
		{"no answer at all is a failure", nil, activities.Breaker{OpenTime: openTime},
			append(failures(5, workflows.ErrTypeNetworkError), refused(openTime-time.Second, openTime))},
		{"4xx answers are not failures", func(int) (int, []string) { return 400, nil },
			activities.Breaker{OpenTime: openTime},
			append(failures(6, workflows.ErrTypeHTTPClientError), attempt{sent: true, errType: workflows.ErrTypeHTTPClientError})},
		{"501 is about the request, not the origin", func(int) (int, []string) { return 501, nil },
			activities.Breaker{OpenTime: openTime},
			append(failures(6, workflows.ErrTypeHTTPNonRetryableStatus), attempt{sent: true, errType: workflows.ErrTypeHTTPNonRetryableStatus})},
		{"off", func(int) (int, []string) { return 503, nil }, activities.Breaker{Off: true},
			failures(8, workflows.ErrTypeHTTPRetryableStatus)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var n atomic.Int32
			srv := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
				st, h := tt.handler(int(n.Add(1)))
				for i := 0; i+1 < len(h); i += 2 {
					w.Header().Set(h[i], h[i+1])
				}
				w.WriteHeader(st)
			})
			url := srv.URL
			if tt.handler == nil {
				// Nothing listens there: every request fails to connect.
				srv.Close()
			}
			clock := &fakeClock{now: time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)}
			m := newCounting()
			a, err := activities.New(activities.Config{AllowedOrigins: []string{url}, Now: clock.Now,
				Admission: activities.Admission{Breaker: tt.breaker}})
			require.NoError(t, err)
			sent := 0
			for i, st := range tt.steps {
				clock.add(st.advance)
				var s testsuite.WorkflowTestSuite
				s.SetMetricsHandler(m)
				env := s.NewTestActivityEnvironment()
				a.Register(env)
				r := req(url + "/charges")
				r.IdempotencyKey = fmt.Sprintf("key-%d", i)
				_, err := env.ExecuteActivity(input.ActivityName, r)
				if tt.handler != nil {
					if st.sent {
						sent++
					}
					require.Equal(t, sent, srv.count(), "step %d: requests at the server", i)
				}
				if st.errType == "" {
					require.NoError(t, err, "step %d", i)
					continue
				}
				appErr := appError(t, err)
				require.Equal(t, st.errType, appErr.Type(), "step %d: %v", i, err)
				if st.errType != workflows.ErrTypeNotAdmitted {
					continue
				}
				assert.False(t, appErr.NonRetryable(), "step %d: an open breaker's wait is retried", i)
				assert.Contains(t, appErr.Message(), "circuit breaker is open")
				assert.GreaterOrEqual(t, appErr.NextRetryDelay(), st.delayMin, "step %d", i)
				assert.LessOrEqual(t, appErr.NextRetryDelay(), st.delayMax, "step %d", i)
				d, ok := workflows.AsFailure(err)
				require.True(t, ok)
				assert.Equal(t, "waiting for admission: circuit open", d.Reason)
				assert.Zero(t, d.Status, "nothing was sent")
			}
			counts, _ := m.snapshot()
			gauges := m.gaugeValues()
			open := gauges["idempotent_http_circuit_open{origin="+url+"}"]
			refusals := counts["idempotent_http_admission_delays_total{operation=charge,origin="+url+",reason=circuit_open}"]
			last := tt.steps[len(tt.steps)-1]
			if last.errType == workflows.ErrTypeNotAdmitted {
				assert.Equal(t, 1.0, open, "circuit gauge while open")
				assert.Positive(t, refusals)
			} else {
				assert.Equal(t, 0.0, open, "circuit gauge while closed")
			}
			if _, ok := gauges["idempotent_http_admission_rate{origin="+url+"}"]; !ok && !tt.breaker.Off {
				t.Errorf("no rate gauge: %v", gauges)
			}
		})
	}
}

// TestSharedRate: with the server's limit in force on the attempt's queue
// the worker's own rate makes no attempt wait (the server paced it), the
// breaker still does, and every answer is recorded for the governor.
func TestSharedRate(t *testing.T) {
	const queue = "default-test-taskqueue"
	tests := []struct {
		name     string
		limit    float64
		queue    string
		statuses []int
		wantSent int
		wantLast string // the last attempt's error type, "" for success
	}{
		// A 429 cuts the worker's own rate to 0.5/s with nothing saved:
		// the next attempts would wait 2 s, longer than MaxWait; with the
		// server's limit in force they go.
		{"in force: the server paces", 5, queue, []int{429, 201, 201}, 3, ""},
		{"none in force: the worker's own rate", 0, queue, []int{429, 201, 201}, 1, workflows.ErrTypeNotAdmitted},
		{"another queue's limit", 5, "other", []int{429, 201, 201}, 1, workflows.ErrTypeNotAdmitted},
		{"the breaker still opens", 5, queue, []int{503, 503, 503, 503, 503, 503}, 5, workflows.ErrTypeNotAdmitted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var n atomic.Int32
			srv := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tt.statuses[min(int(n.Add(1))-1, len(tt.statuses)-1)])
			})
			sr := &sharedRate{queue: tt.queue, limit: tt.limit}
			a, err := activities.New(activities.Config{AllowedOrigins: []string{srv.URL}, SharedRate: sr,
				Admission: activities.Admission{InitialRate: 0.5, Breaker: activities.Breaker{OpenTime: time.Minute}}})
			require.NoError(t, err)
			var last error
			for i := range tt.statuses {
				var s testsuite.WorkflowTestSuite
				env := s.NewTestActivityEnvironment()
				a.Register(env)
				r := req(srv.URL)
				r.IdempotencyKey = fmt.Sprintf("key-%d", i)
				_, last = env.ExecuteActivity(input.ActivityName, r)
			}
			assert.Equal(t, tt.wantSent, srv.count(), "requests sent")
			if tt.wantLast == "" {
				assert.NoError(t, last)
			} else {
				assert.Equal(t, tt.wantLast, appError(t, last).Type())
			}
			// Every answer is recorded, whatever the queue: the
			// SharedRate decides which queues it governs.
			var want []string
			for _, st := range tt.statuses[:tt.wantSent] {
				want = append(want, fmt.Sprintf("%s throttled=%v failed=%v", queue, st == 429, st == 503))
			}
			assert.Equal(t, want, sr.records)
		})
	}
}
