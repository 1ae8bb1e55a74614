package workflows_test

import (
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// TestRetryAfterDateOnTheEnvironmentClock (class 12): under time skipping,
// Retry-After dates and the schedule-to-close deadline are read on the test
// environment's clock (testsuite.Register wires env.Now): a date beyond the
// deadline fails at once with RetryWouldExceedDeadline; a date within it is
// waited out exactly, whatever the environment's start time, and also
// after the workflow's clock has been skipped ahead by a timer or by an
// earlier operation's retries. (The environment's ScheduledTime is the
// wall clock: before the fix in activities/retry.go, a call after a skip
// failed its first retry at once, "only 0s remain".)
func TestRetryAfterDateOnTheEnvironmentClock(t *testing.T) {
	past := time.Date(2024, 2, 29, 12, 0, 0, 0, time.UTC)
	date := func(d time.Duration) func(now time.Time) string {
		return func(now time.Time) string { return now.Add(d).UTC().Format(http.TimeFormat) }
	}
	seconds := func(s string) func(time.Time) string { return func(time.Time) string { return s } }
	tests := []struct {
		name         string
		start        time.Time     // zero: the wall clock
		sleep        time.Duration // the workflow sleeps before the call
		earlier      bool          // an earlier operation waits out Retry-After: 600 first
		retryAfter   func(now time.Time) string
		wantDeadline bool
		wantWait     time.Duration
	}{
		{name: "date beyond the deadline", retryAfter: date(3 * time.Minute), wantDeadline: true},
		{name: "date beyond the deadline, start in the past", start: past, retryAfter: date(3 * time.Minute), wantDeadline: true},
		{name: "date beyond the deadline after a day's timer", sleep: 24 * time.Hour, retryAfter: date(3 * time.Minute), wantDeadline: true},
		{name: "date within the deadline, start in the past", start: past, retryAfter: date(30 * time.Second), wantWait: 30 * time.Second},
		{name: "date within the deadline after a day's timer", sleep: 24 * time.Hour, retryAfter: date(30 * time.Second), wantWait: 30 * time.Second},
		{name: "seconds after a day's timer", sleep: 24 * time.Hour, retryAfter: seconds("1"), wantWait: time.Second},
		{name: "seconds after an earlier operation's long wait", earlier: true, retryAfter: seconds("1"), wantWait: time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var env *testsuite.TestWorkflowEnvironment
			var mu sync.Mutex
			var payAt []time.Time // env clock at each /pay request
			earlier := 0
			srv := newRawServer(t, func(w http.ResponseWriter, r *http.Request, _ int) {
				now := env.Now()
				mu.Lock()
				defer mu.Unlock()
				switch {
				case r.URL.Path == "/earlier":
					earlier++
					if earlier == 1 {
						w.Header().Set("Retry-After", "600")
						w.WriteHeader(503)
						return
					}
					w.WriteHeader(201)
				case len(payAt) == 0 || tt.wantDeadline:
					payAt = append(payAt, now)
					w.Header().Set("Retry-After", tt.retryAfter(now))
					w.WriteHeader(503)
				default:
					payAt = append(payAt, now)
					w.WriteHeader(201)
				}
			})
			env, _, _ = loggedEnv(t, activities.Config{AllowedOrigins: []string{srv.URL}, MaxRetryAfter: time.Hour})
			if !tt.start.IsZero() {
				env.SetStartTime(tt.start)
			}
			env.ExecuteWorkflow(func(ctx workflow.Context) error {
				if tt.sleep > 0 {
					if err := workflow.Sleep(ctx, tt.sleep); err != nil {
						return err
					}
				}
				if tt.earlier {
					if _, err := workflows.Call(ctx, workflows.Request{Operation: "earlier", URL: srv.URL + "/earlier", ScheduleToCloseTimeout: 15 * time.Minute}); err != nil {
						return err
					}
				}
				_, err := workflows.Call(ctx, workflows.Request{Operation: "charge", URL: srv.URL + "/pay", ScheduleToCloseTimeout: 2 * time.Minute})
				return err
			})
			err := env.GetWorkflowError()
			mu.Lock()
			defer mu.Unlock()
			if tt.wantDeadline {
				var appErr *temporal.ApplicationError
				require.True(t, errors.As(err, &appErr), "got %v", err)
				assert.Equal(t, workflows.ErrTypeRetryWouldExceedDeadline, appErr.Type(), appErr.Message())
				assert.Len(t, payAt, 1, "failed at once, without waiting")
				d, ok := workflows.AsFailure(err)
				require.True(t, ok)
				assert.InDelta(t, 3*time.Minute, d.RetryAfter, float64(time.Second), "the date read on the environment's clock")
				return
			}
			require.NoError(t, err)
			require.Len(t, payAt, 2)
			assert.InDelta(t, tt.wantWait, payAt[1].Sub(payAt[0]), float64(time.Second), "the wait, on the environment's clock")
		})
	}
}
