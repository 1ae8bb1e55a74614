package activities_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/internal/input"
	"github.com/idemhttp/temporal-idempotent-http/internal/poll"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// TestPollAdmission: every request the worker sends an origin (the start,
// a poll of the monitor, a cancel request, the read of the result) asks
// the same limiter and breaker first and tells them what it got: polls
// answered 503 open the breaker; an open breaker stops polls, cancel
// requests and starts alike, but for the probe; the result read waits for
// the rate; every answer is reported to the shared rate. A request not
// admitted sends nothing and ends the attempt with a retryable NotAdmitted
// carrying the operation.
func TestPollAdmission(t *testing.T) {
	const openTime = 10 * time.Second
	type step struct {
		advance time.Duration // on the fake clock, before the attempt
		kind    string        // "start", "poll", "cancel"
		sent    []string      // the requests it sends, "METHOD /path"
		errType string        // "" for success
	}
	polled := func(errType string, sent ...string) step { return step{kind: "poll", sent: sent, errType: errType} }
	start := func(errType string, sent ...string) step { return step{kind: "start", sent: sent, errType: errType} }
	const (
		mon     = "GET /v1/operations/1"
		cancel  = "POST /v1/operations/1:cancel"
		result  = "GET /results/1"
		charges = "POST /charges"
	)
	notAdmitted := workflows.ErrTypeNotAdmitted
	failing := workflows.ErrTypeHTTPRetryableStatus
	tests := []struct {
		name      string
		admission activities.Admission
		// status answers a request; n counts the requests to its path.
		status func(path string, n int) int
		steps  []step
	}{
		{
			name:      "polls answered 503 open the breaker, for polls and starts",
			admission: activities.Admission{Breaker: activities.Breaker{OpenTime: openTime}},
			status:    func(string, int) int { return 503 },
			steps: []step{
				polled(failing, mon), polled(failing, mon), polled(failing, mon), polled(failing, mon), polled(failing, mon),
				polled(notAdmitted), start(notAdmitted), {kind: "cancel", errType: notAdmitted},
			},
		},
		{
			name:      "an open breaker sends polls nothing but the probe",
			admission: activities.Admission{Breaker: activities.Breaker{OpenTime: openTime}},
			status: func(path string, n int) int {
				if path == "/charges" {
					return 503
				}
				return 200 // {"done": true, …}
			},
			steps: []step{
				start(failing, charges), start(failing, charges), start(failing, charges), start(failing, charges), start(failing, charges),
				polled(notAdmitted), polled(notAdmitted), {kind: "cancel", errType: notAdmitted},
				{advance: openTime, kind: "poll", sent: []string{mon}}, // the probe: it closes the breaker
				polled("", mon),
			},
		},
		{
			name:      "a failed probe keeps polls out",
			admission: activities.Admission{Breaker: activities.Breaker{OpenTime: openTime}},
			status:    func(string, int) int { return 502 },
			steps: []step{
				polled(failing, mon), polled(failing, mon), polled(failing, mon), polled(failing, mon), polled(failing, mon),
				polled(notAdmitted),
				{advance: openTime, kind: "poll", sent: []string{mon}, errType: failing}, // the probe
				polled(notAdmitted), {kind: "cancel", errType: notAdmitted},
			},
		},
		{
			name:      "the cancel request is admitted and observed",
			admission: activities.Admission{Breaker: activities.Breaker{OpenTime: openTime}},
			status:    func(string, int) int { return 503 },
			steps: []step{
				{kind: "cancel", sent: []string{cancel}, errType: failing}, {kind: "cancel", sent: []string{cancel}, errType: failing},
				{kind: "cancel", sent: []string{cancel}, errType: failing}, {kind: "cancel", sent: []string{cancel}, errType: failing},
				{kind: "cancel", sent: []string{cancel}, errType: failing},
				{kind: "cancel", errType: notAdmitted}, polled(notAdmitted),
			},
		},
		{
			// One request a second, none saved up: the monitor's poll
			// takes the turn, the result's read must wait for the next.
			name:      "the result read waits for its turn",
			admission: activities.Admission{InitialRate: 1, MaxWait: time.Millisecond, Breaker: activities.Breaker{Off: true}},
			status:    func(string, int) int { return 200 },
			steps: []step{
				{kind: "result", sent: []string{mon}, errType: notAdmitted},
				{advance: 5 * time.Second, kind: "result", sent: []string{mon, result}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			perPath := map[string]int{}
			srv := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				perPath[r.URL.Path]++
				n := perPath[r.URL.Path]
				mu.Unlock()
				st := tt.status(r.URL.Path, n)
				if st == 200 && strings.HasPrefix(r.URL.Path, "/v1/operations/") {
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(st)
					_, _ = w.Write([]byte(`{"name":"operations/1","done":true,"response":{"id":"rec_1"}}`))
					return
				}
				w.WriteHeader(st)
			})
			clock := &fakeClock{now: time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)}
			sr := &sharedRate{queue: "none"}
			conv := activities.IETFConvention()
			conv.LongRunning = activities.GoogleOperation(srv.URL + "/v1/")
			a, err := activities.New(activities.Config{AllowedOrigins: []string{srv.URL}, Now: clock.Now, SharedRate: sr,
				Conventions: map[string]activities.Convention{srv.URL: conv}, Admission: tt.admission})
			require.NoError(t, err)
			var sent []string
			for i, st := range tt.steps {
				clock.add(st.advance)
				var s testsuite.WorkflowTestSuite
				env := s.NewTestActivityEnvironment()
				a.Register(env)
				in := poll.Monitor{Accepted: poll.Accepted{Operation: "transfer", IdempotencyKey: "key-op", Method: http.MethodPost, URL: srv.URL + "/charges",
					Monitor: srv.URL + "/v1/operations/1", StatusDocument: true}}
				switch st.kind {
				case "start":
					r := req(srv.URL + "/charges")
					r.IdempotencyKey = fmt.Sprintf("key-%d", i)
					_, err = env.ExecuteActivity(input.ActivityName, r)
				case "poll":
					_, err = env.ExecuteActivity(poll.ActivityName, in)
				case "cancel":
					in.Cancel = true
					_, err = env.ExecuteActivity(poll.ActivityName, in)
				case "result":
					in.ResultURL = srv.URL + "/results/1"
					_, err = env.ExecuteActivity(poll.ActivityName, in)
				}
				sent = append(sent, st.sent...)
				var got []string
				srv.mu.Lock()
				for _, r := range srv.requests {
					got = append(got, r.Method+" "+r.URL.Path)
				}
				srv.mu.Unlock()
				require.Equal(t, sent, got, "step %d (%s): the requests the server got", i, st.kind)
				if st.errType == "" {
					require.NoError(t, err, "step %d (%s)", i, st.kind)
					continue
				}
				appErr := appError(t, err)
				require.Equal(t, st.errType, appErr.Type(), "step %d (%s): %v", i, st.kind, err)
				assert.False(t, appErr.NonRetryable(), "step %d (%s): %v", i, st.kind, err)
				if st.errType != notAdmitted {
					continue
				}
				assert.Positive(t, appErr.NextRetryDelay(), "step %d: NotAdmitted comes back at its turn", i)
				d, ok := workflows.AsFailure(err)
				require.True(t, ok)
				assert.Zero(t, d.Status, "step %d: nothing was sent", i)
				assert.True(t, strings.HasPrefix(d.Reason, "waiting for admission: "), "step %d: %s", i, d.Reason)
				if st.kind != "start" {
					require.NotNil(t, d.Accepted, "step %d: a poll's failure carries the operation", i)
					assert.Equal(t, in.Monitor, d.Accepted.Monitor)
				}
			}
			// Every answer, to a poll as to a start, is reported to the
			// shared rate.
			assert.Len(t, sr.records, len(sent), "answers reported to the shared rate: %v", sr.records)
		})
	}
}
