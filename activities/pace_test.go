package activities_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/internal/input"
)

// TestSharedRatePacesBursts: matching hands a worker a burst of attempts
// at once on a queue whose limit is in force (its release of a second's
// tokens after an idle moment); the worker sends them spread at its share
// of the limit (SharedRate.Limit's share), one at once and each next one
// 1/share later, inside the attempts: every attempt succeeds, none is
// sent back to the server. A share of 0 paces nothing (the server's
// limit alone, as before). The waits are read on the fake clock the
// activity runs by (it stands still: each attempt asks at the same
// moment), not timed.
func TestSharedRatePacesBursts(t *testing.T) {
	const queue = "default-test-taskqueue"
	tests := []struct {
		name         string
		limit, share float64
		burst        int
		wantWaits    []time.Duration
	}{
		// Paced at 1.5 × the share (sharePaceHeadroom): 15/s.
		{"two workers share 20/s", 20, 10, 4, []time.Duration{66666667, 133333334, 200000001}},
		{"alone at 25/s", 25, 25, 3, []time.Duration{40 * time.Millisecond, 80 * time.Millisecond}},
		{"no share: the server's limit alone", 20, 0, 4, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := &fakeClock{now: time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)}
			sr := &sharedRate{queue: queue, limit: tt.limit, share: tt.share}
			// The worker's own rate would hold a burst back far longer:
			// while the limit is in force it does not apply.
			assertBurstWaits(t, activities.Config{Now: clock.Now, SharedRate: sr,
				Admission: activities.Admission{InitialRate: 0.5}}, tt.burst, tt.wantWaits)
		})
	}
}

// TestSharedRateStartsAtShare: before any limit is in force on a queue
// that N workers poll (SharedRate.Workers), the worker starts its own
// rate for the origin at its share of Admission.InitialRate, its burst
// as much: of 4 attempts handed to it at once with InitialRate 6, three
// workers' share (2/s) sends 2 at once and spreads the others 0.5 s
// apart inside their attempts; alone, or on another queue, all 4 go at
// once. Every attempt succeeds. The waits are read on the fake clock.
func TestSharedRateStartsAtShare(t *testing.T) {
	const queue = "default-test-taskqueue"
	tests := []struct {
		name      string
		queue     string // the queue the shared rate knows
		workers   int
		wantWaits []time.Duration
	}{
		{"three workers", queue, 3, []time.Duration{500 * time.Millisecond, time.Second}},
		{"alone", queue, 1, nil},
		{"another queue", "other", 3, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := &fakeClock{now: time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)}
			sr := &sharedRate{queue: tt.queue, workers: tt.workers}
			assertBurstWaits(t, activities.Config{Now: clock.Now, SharedRate: sr,
				Admission: activities.Admission{InitialRate: 6}}, 4, tt.wantWaits)
		})
	}
}

// assertBurstWaits runs burst attempts at once of the activity made with
// cfg against a server of its own that answers 201, each with a key of
// its own, and asserts that every one succeeds, each sends one request,
// and the waits inside the attempts (the admission wait timer) are want,
// within a millisecond, in order. The server holds its answers until
// every attempt that waits has asked: an answer grows the slow start's
// rate, which would shorten the waits of attempts that ask after it (the
// attempts start in no set order; under -race the first ones had been
// answered before the last asked).
func assertBurstWaits(t *testing.T, cfg activities.Config, burst int, want []time.Duration) {
	t.Helper()
	m := newCounting()
	waits := func() []time.Duration {
		_, timers := m.snapshot()
		var ws []time.Duration
		for k, v := range timers {
			if strings.HasPrefix(k, "idempotent_http_admission_wait_seconds") {
				ws = append(ws, v...)
			}
		}
		slices.Sort(ws)
		return ws
	}
	srv := newRecorder(t, func(w http.ResponseWriter, _ *http.Request) {
		for deadline := time.Now().Add(10 * time.Second); len(waits()) < len(want) && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		w.WriteHeader(http.StatusCreated)
	})
	cfg.AllowedOrigins = []string{srv.URL}
	a, err := activities.New(cfg)
	require.NoError(t, err)
	errs := make([]error, burst)
	var wg sync.WaitGroup
	for i := range burst {
		wg.Go(func() {
			var s testsuite.WorkflowTestSuite
			s.SetMetricsHandler(m)
			env := s.NewTestActivityEnvironment()
			a.Register(env)
			r := req(srv.URL)
			r.IdempotencyKey = fmt.Sprintf("key-%d", i)
			_, errs[i] = env.ExecuteActivity(input.ActivityName, r)
		})
	}
	wg.Wait()
	for i, err := range errs {
		assert.NoError(t, err, "attempt %d", i)
	}
	assert.Equal(t, burst, srv.count(), "requests sent")
	got := waits()
	require.Len(t, got, len(want), "waits inside the attempts: %v", got)
	for i, w := range got {
		assert.InDelta(t, want[i], w, float64(time.Millisecond), "wait %d of %v", i, got)
	}
}
