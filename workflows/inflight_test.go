package workflows_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	idemtest "github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// slowPayments is an API whose idempotency layer answers a bare 409
// "Conflict" (no Retry-After, nothing in the body that says "in flight", as
// express-idempotency does in production) while the first request with a
// key is processed, and the stored 201 afterwards. Its processing outlasts
// the first attempt (the request is held until the client gives up) and then
// the next busy requests: counted in requests, not in time, because
// Temporal's test environment skips the time between attempts.
type slowPayments struct {
	busy      int
	mu        sync.Mutex
	state     map[string]int // key → conflicts answered; -1 once done
	requests  int
	records   int
	conflicts int
}

func (s *slowPayments) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key")
	_, _ = io.Copy(io.Discard, r.Body) // so the server notices a client that gives up
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests++
	n, seen := s.state[key]
	switch {
	case !seen:
		s.state[key] = 0
		s.mu.Unlock()
		<-r.Context().Done() // the work goes on after the client gave up
		s.mu.Lock()
		return
	case n >= 0 && n < s.busy:
		s.state[key]++
		s.conflicts++
		http.Error(w, "Conflict", http.StatusConflict)
		return
	case n >= 0:
		s.state[key] = -1 // the first request's work completes
		s.records++
	}
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write([]byte(`{"id":"pay_1"}`))
}

func (s *slowPayments) stats() (requests, records, conflicts int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests, s.records, s.conflicts
}

// TestInFlightIsWaitedOut: a server slower than every attempt, and slower
// than MaximumAttempts × backoff, still ends in one success and one record:
// the 409s that follow an attempt without an answer are our own request in
// flight, waited out with the same key and not counted as failures. Before
// the fix the first 409 failed the workflow as a non-retryable client error
// while the server went on to charge.
func TestInFlightIsWaitedOut(t *testing.T) {
	tests := []struct {
		name   string
		server func(t *testing.T) (url string, stats func() (int, int, int))
	}{
		{"bare 409, known only from the timed-out attempt", func(t *testing.T) (string, func() (int, int, int)) {
			s := &slowPayments{busy: 6, state: map[string]int{}}
			hs := httptest.NewServer(s)
			t.Cleanup(hs.Close)
			return hs.URL, s.stats
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url, stats := tt.server(t)
			h := newHarness(t, nil, activities.Config{AllowedOrigins: []string{url}}, "order-inflight")
			resp, err := h.call(workflows.Request{
				Operation: "charge", URL: url + "/payments", Body: []byte(`{"amount":4200}`),
				StartToCloseTimeout:    time.Second,
				ScheduleToCloseTimeout: time.Minute,
				Retry:                  workflows.RetryOptions{MaximumAttempts: 2, InitialInterval: 100 * time.Millisecond, MaximumInterval: 200 * time.Millisecond},
			})
			require.NoError(t, err)
			assert.Equal(t, 201, resp.Status)
			requests, records, conflicts := stats()
			assert.Equal(t, 1, records, "exactly one record")
			assert.GreaterOrEqual(t, conflicts, 1, "the server answered in flight at least once")
			assert.Greater(t, requests, 2, "more requests than MaximumAttempts: the waits were not counted")
		})
	}
}

// TestConflictOnFirstAttemptIsNotWaited: a 409 on the first attempt of a key,
// with nothing that says the key is in flight, is a conflict with the
// server's state: it fails at once.
func TestConflictOnFirstAttemptIsNotWaited(t *testing.T) {
	var n int
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		n++
		http.Error(w, `{"error":"order already exists"}`, http.StatusConflict)
	}))
	t.Cleanup(hs.Close)
	h := newHarness(t, nil, activities.Config{AllowedOrigins: []string{hs.URL}}, "order-conflict")
	_, err := h.call(workflows.Request{Operation: "charge", URL: hs.URL + "/payments"})
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "got %v", err)
	assert.Equal(t, workflows.ErrTypeHTTPClientError, appErr.Type())
	assert.Contains(t, appErr.Message(), "no sign that a request with this key is in flight")
	assert.Equal(t, 1, n)
}

// TestStuckKeyFailsBeforeTheDeadline: a first request whose lock is
// orphaned at the server (it never completes; 409 forever after) fails with
// IdempotencyKeyLocked before the schedule-to-close deadline, saying since
// when and how often, and never with another key.
func TestStuckKeyFailsBeforeTheDeadline(t *testing.T) {
	srv := idemtest.StartServer(t, idemtest.Options{Orphan: func(string) bool { return true }})
	h := newHarness(t, srv, activities.Config{}, "order-stuck")
	start := h.env.Now()
	req := charge(srv)
	req.StartToCloseTimeout = time.Second // the first request waits 4/5 of it unanswered: room for -race on a loaded machine
	req.ScheduleToCloseTimeout = 20 * time.Second
	_, err := h.call(req)
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "got %v", err)
	assert.Equal(t, workflows.ErrTypeIdempotencyKeyLocked, appErr.Type())
	assert.True(t, appErr.NonRetryable())
	assert.Contains(t, appErr.Message(), "still locked at the server")
	assert.Contains(t, appErr.Message(), "run the same workflow ID again")
	assert.Contains(t, appErr.Message(), "never retry with a new key")
	d, ok := workflows.AsFailure(err)
	require.True(t, ok)
	assert.Greater(t, d.InFlightCount, int32(1))
	assert.False(t, d.InFlightSince.IsZero())
	assert.Less(t, h.env.Now().Sub(start), 20*time.Second, "failed before the deadline")
	assert.Greater(t, d.InFlightCount, int32(10), "more waits than Temporal's test environment allows an unlimited MaximumAttempts")
	for _, k := range h.keys {
		assert.Equal(t, h.keys[0], k, "one key throughout")
	}
	assert.Equal(t, 0, srv.Stats().Records)
}

// TestBudgetCountsFailuresNotWaits: the attempt budget counts failures only.
// Five in-flight answers and then 503s with MaximumAttempts 3: 5 + 3 requests.
func TestBudgetCountsFailuresNotWaits(t *testing.T) {
	srv := idemtest.StartServer(t, idemtest.Options{})
	steps := []idemtest.Step{}
	for range 5 {
		steps = append(steps, idemtest.Fail(409, "1"))
	}
	for range 5 {
		steps = append(steps, idemtest.Fail(503))
	}
	srv.Script(steps...)
	h := newHarness(t, srv, activities.Config{}, "order-budget")
	req := charge(srv)
	req.Retry.MaximumAttempts = 3
	_, err := h.call(req)
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "got %v", err)
	assert.Equal(t, workflows.ErrTypeHTTPRetryableStatus, appErr.Type())
	assert.True(t, appErr.NonRetryable(), "final on the last attempt of the budget")
	assert.Contains(t, appErr.Message(), "last of 3 attempts")
	assert.Equal(t, 8, srv.Stats().Requests)
}
