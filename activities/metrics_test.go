package activities_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/internal/backoff"
	"github.com/idemhttp/temporal-idempotent-http/internal/input"
)

// runMetrics runs one attempt of r against cfg in Temporal's activity test
// environment with a counting metrics handler.
func runMetrics(t *testing.T, cfg activities.Config, r input.Input) *counting {
	t.Helper()
	m := newCounting()
	var s testsuite.WorkflowTestSuite
	s.SetMetricsHandler(m)
	env := s.NewTestActivityEnvironment()
	a, err := activities.New(cfg)
	require.NoError(t, err)
	a.Register(env)
	_, _ = env.ExecuteActivity(input.ActivityName, r)
	return m
}

func TestAttemptCounters(t *testing.T) {
	tests := []struct {
		status int
		url    string
		want   string
	}{
		{201, "", "idempotent_http_attempts_total{error_type=none,operation=charge,origin=ORIGIN,outcome=success}"},
		{503, "", "idempotent_http_attempts_total{error_type=HTTPRetryableStatus,operation=charge,origin=ORIGIN,outcome=retryable}"},
		{400, "", "idempotent_http_attempts_total{error_type=HTTPClientError,operation=charge,origin=ORIGIN,outcome=non_retryable}"},
		// Refused before sending: an origin not allowed is no label value.
		{0, "http://127.0.0.3:1/x", "idempotent_http_attempts_total{error_type=OriginNotAllowed,operation=charge,origin=other,outcome=non_retryable}"},
		{0, "http://:1/x", "idempotent_http_attempts_total{error_type=InvalidRequest,operation=charge,origin=other,outcome=non_retryable}"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.status, tt.url), func(t *testing.T) {
			srv := newRecorder(t, status(tt.status, "{}"))
			r := req(srv.URL)
			if tt.url != "" {
				r.URL = tt.url
			}
			m := runMetrics(t, activities.Config{AllowedOrigins: []string{srv.URL}}, r)
			counts, timers := m.snapshot()
			want := strings.ReplaceAll(tt.want, "ORIGIN", srv.URL)
			assert.Equal(t, map[string]int64{want: 1}, counts)
			if tt.status == 0 {
				assert.Empty(t, timers, "nothing was sent: no duration")
				return
			}
			d := timers["idempotent_http_attempt_duration_seconds{operation=charge,origin="+srv.URL+"}"]
			if assert.Len(t, d, 1, "timers: %v", timers) {
				assert.Positive(t, d[0])
			}
		})
	}
}

// TestRetryMetrics: the waits handed to Temporal are recorded: every
// NextRetryDelay, the ones Retry-After chose, and waits for a key in
// flight; a final failure hands none.
func TestRetryMetrics(t *testing.T) {
	tests := []struct {
		name    string
		handler http.HandlerFunc
		req     func(input.Input) input.Input
		// retryAfter: the Retry-After wait recorded (0: none); delay: a
		// NextRetryDelay recorded; inFlight: an in-flight wait counted.
		retryAfter time.Duration
		delay      bool
		inFlight   bool
	}{
		{name: "429 Retry-After 2", handler: status(429, "", "Retry-After", "2"), retryAfter: 2 * time.Second, delay: true},
		{name: "503 backoff", handler: status(503, ""), delay: true},
		{name: "503 without jitter leaves the delay to Temporal", handler: status(503, ""), req: func(r input.Input) input.Input {
			r.Backoff.Jitter = backoff.JitterNone
			return r
		}},
		{name: "409 in flight", handler: status(409, "", "Retry-After", "1"), retryAfter: time.Second, delay: true, inFlight: true},
		{name: "400 final", handler: status(400, "")},
		{name: "201", handler: status(201, "{}")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newRecorder(t, tt.handler)
			r := req(srv.URL)
			if tt.req != nil {
				r = tt.req(r)
			}
			// Admission off: the waits recorded here are the backoff's.
			m := runMetrics(t, activities.Config{AllowedOrigins: []string{srv.URL}, Admission: activities.Admission{Off: true}}, r)
			counts, timers := m.snapshot()
			labels := "{operation=charge,origin=" + srv.URL + "}"
			if tt.retryAfter > 0 {
				assert.Equal(t, []time.Duration{tt.retryAfter}, timers["idempotent_http_retry_after_seconds"+labels])
			} else {
				assert.NotContains(t, timers, "idempotent_http_retry_after_seconds"+labels)
			}
			if tt.delay {
				d := timers["idempotent_http_retry_delay_seconds"+labels]
				if assert.Len(t, d, 1, "timers: %v", timers) && tt.retryAfter > 0 {
					assert.Equal(t, tt.retryAfter, d[0])
				}
			} else {
				assert.NotContains(t, timers, "idempotent_http_retry_delay_seconds"+labels)
			}
			if tt.inFlight {
				assert.Equal(t, int64(1), counts["idempotent_http_in_flight_waits_total"+labels])
			} else {
				assert.NotContains(t, counts, "idempotent_http_in_flight_waits_total"+labels)
			}
		})
	}
}

// TestOperationLabelBounded: operation names are caller-chosen; a worker
// keeps the first 100 short ones as label values and counts every other
// under "other", so its series stay bounded. No label value ever holds the
// key, a credential or the URL.
func TestOperationLabelBounded(t *testing.T) {
	srv := newRecorder(t, status(201, "{}"))
	m := newCounting()
	var s testsuite.WorkflowTestSuite
	s.SetMetricsHandler(m)
	env := s.NewTestActivityEnvironment()
	a, err := activities.New(activities.Config{
		AllowedOrigins: []string{srv.URL},
		Credentials:    map[string]activities.Credential{srv.URL: {Header: http.Header{"Authorization": {"Bearer " + token}}}},
	})
	require.NoError(t, err)
	a.Register(env)
	run := func(op string) {
		r := req(srv.URL + "/payments?customer=cus_query_value_77")
		r.Operation, r.IdempotencyKey = op, "key-"+op
		_, err := env.ExecuteActivity(input.ActivityName, r)
		require.NoError(t, err)
	}
	for i := range 101 {
		run(fmt.Sprintf("charge-%03d", i))
	}
	run("charge-000")                 // seen: keeps its label
	run(strings.Repeat("x", 65))      // too long
	run("refund-after-the-first-100") // one too many
	counts, _ := m.snapshot()
	perOp := map[string]int64{}
	for k, n := range counts {
		if op, ok := strings.CutPrefix(k, "idempotent_http_attempts_total{error_type=none,operation="); ok {
			op, _, _ = strings.Cut(op, ",")
			perOp[op] += n
		}
	}
	assert.Len(t, perOp, 101, "100 operations and other")
	assert.Equal(t, int64(2), perOp["charge-000"])
	assert.Equal(t, int64(1), perOp["charge-099"])
	assert.Equal(t, int64(3), perOp["other"], "charge-100, the long one and refund-…")
	m.mu.Lock()
	defer m.mu.Unlock()
	for v := range m.values {
		for _, secret := range []string{token, "key-", "cus_query_value_77", "/payments"} {
			assert.NotContains(t, v, secret, "label value %q", v)
		}
	}
}
