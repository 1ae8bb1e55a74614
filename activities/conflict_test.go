package activities_test

import (
	"net/http"
	"regexp"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/workflow"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// refunded is refund's result.
type refunded struct {
	Result string
	// Message and OutcomeUnknown are the failure's the workflow handled.
	Message        string
	OutcomeUnknown bool
}

// refund is a user's workflow: it refunds once and handles the API's
// "already refunded" answer itself.
func refund(ctx workflow.Context, url string) (refunded, error) {
	_, err := workflows.Post(ctx, "refund", url, map[string]int{"cents": 4200})
	if f, ok := workflows.AsFailure(err); ok && f.Type == workflows.ErrTypeHTTPClientError && !f.Retryable && f.Status == http.StatusConflict && f.Body == `{"error":"already refunded"}` {
		return refunded{Result: "already refunded", Message: f.Message, OutcomeUnknown: f.OutcomeUnknown}, nil
	}
	if err != nil {
		return refunded{}, err
	}
	return refunded{Result: "refunded"}, nil
}

// refundAPI answers its first request with first (a status, or 0 to drop
// the connection without an answer), then every request after with a 409
// whose body is conflict.
func refundAPI(first int, conflict string) (http.HandlerFunc, *atomic.Int32) {
	var n atomic.Int32
	return func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			if first == 0 {
				conn, _, err := w.(http.Hijacker).Hijack()
				if err == nil {
					_ = conn.Close()
				}
				return
			}
			w.WriteHeader(first)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusConflict)
		_, _ = w.Write([]byte(conflict))
	}, &n
}

// conflictEnd is how a run of refund against a refundAPI ended.
type conflictEnd struct {
	result    string
	errType   string
	retryable bool
	unknown   bool
	body      string
	requests  int32
	message   string
}

// runRefund runs refund against a fresh refundAPI in Temporal's test
// environment, registered the README's way ("readme": activities.New
// and Register on the environment, as a user's own Register does) or
// with testsuite.Register (the environment's clock, admission off).
func runRefund(t *testing.T, way string, first int, conflict string, conv func() activities.Convention) conflictEnd {
	t.Helper()
	h, n := refundAPI(first, conflict)
	srv := newRecorder(t, h)
	env := testsuite.NewEnv(t)
	cfg := activities.Config{Uniform: func() float64 { return 0.5 }}
	if conv != nil {
		cfg.Conventions = map[string]activities.Convention{srv.URL: conv()}
	}
	switch way {
	case "readme":
		cfg.AllowedOrigins = []string{srv.URL}
		a, err := activities.New(cfg)
		require.NoError(t, err)
		a.Register(env)
	case "testsuite.Register":
		cfg.AllowedOrigins = []string{srv.URL}
		testsuite.Register(t, env, nil, cfg)
	}
	env.RegisterWorkflow(refund)
	env.ExecuteWorkflow(refund, srv.URL+"/refunds")
	require.True(t, env.IsWorkflowCompleted())
	end := conflictEnd{requests: n.Load()}
	if err := env.GetWorkflowError(); err != nil {
		f, ok := workflows.AsFailure(err)
		require.True(t, ok, "%v", err)
		end.errType, end.retryable, end.unknown, end.body, end.message = f.Type, f.Retryable, f.OutcomeUnknown, f.Body, f.Message
		return end
	}
	var r refunded
	require.NoError(t, env.GetWorkflowResult(&r))
	end.result, end.message, end.unknown = r.Result, r.Message, r.OutcomeUnknown
	return end
}

// TestBusinessConflictAfterUnknownOutcome (issue 30, item 12): a refund
// API answers 503, then 409 "already refunded" to every retry. A bare
// 409 after an attempt of unknown outcome is waited out as the key in
// flight only for the origin's Convention.BareConflictWait; then (at
// once, for a Convention.SignalsInFlight origin such as Stripe's) it is
// the final HTTPClientError the workflow handles, with its body and
// OutcomeUnknown. The message names what the earlier attempt got. Both
// ways of testing a workflow (the README's and testsuite.Register) end
// each scenario the same way.
func TestBusinessConflictAfterUnknownOutcome(t *testing.T) {
	const business = `{"error":"already refunded"}`
	const inUse = `{"error":{"code":"idempotency_key_in_use","message":"There is currently another in-progress request using this Idempotent Key"}}`
	tests := []struct {
		name      string
		first     int
		conflict  string
		conv      func() activities.Convention
		wantType  string // "" for the workflow's own result
		wantBody  string
		wantGot   string // what the message says the earlier attempt got
		wantTries int32  // 0: more than 2, the same both ways
	}{
		{"IETF: 503, then a business 409", 503, business, nil, "", "", "got 503 Service Unavailable", 0},
		{"Stripe: 503, then a business 409 is final at once", 503, business, activities.StripeConvention, "", "", "got 503 Service Unavailable", 2},
		{"IETF: no answer, then a business 409", 0, business, nil, "", "", "ended without an answer", 0},
		{"IETF: 503, then a signalled key in flight to the deadline", 503, inUse, nil, workflows.ErrTypeIdempotencyKeyLocked, inUse, "the key is still locked at the server", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ends := map[string]conflictEnd{}
			for _, way := range []string{"readme", "testsuite.Register"} {
				end := runRefund(t, way, tt.first, tt.conflict, tt.conv)
				ends[way] = end
				if tt.wantType == "" {
					assert.Equal(t, "already refunded", end.result, "%s: %+v", way, end)
				} else {
					assert.Equal(t, tt.wantType, end.errType, "%s: %s", way, end.message)
					assert.False(t, end.retryable, "%s: %s", way, end.message)
					assert.Equal(t, tt.wantBody, end.body, way)
				}
				assert.True(t, end.unknown, "%s: %s", way, end.message)
				assert.Contains(t, end.message, tt.wantGot, way)
				if tt.wantTries != 0 {
					assert.Equal(t, tt.wantTries, end.requests, way)
				} else {
					assert.Greater(t, end.requests, int32(2), way)
				}
			}
			r, s := ends["readme"], ends["testsuite.Register"]
			assert.Equal(t, []any{r.result, r.errType, r.retryable, r.body, r.requests}, []any{s.result, s.errType, s.retryable, s.body, s.requests},
				"the README's way and testsuite.Register end the same scenario differently")
			// How long the key has been in flight is counted in the waits
			// Temporal was asked for, whichever clock Config.Now reads.
			ago := regexp.MustCompile(`\(([0-9.hms]+) ago\)`)
			assert.Equal(t, ago.FindString(s.message), ago.FindString(r.message))
			if tt.wantType == workflows.ErrTypeIdempotencyKeyLocked {
				assert.NotEmpty(t, ago.FindString(r.message), r.message)
			}
		})
	}
}
