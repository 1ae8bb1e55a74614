package workflows_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/internal/idemkey"
	idemtest "github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// TestSecondCallWithTheSameOperationFails: a second Post with the same
// operation name in one run would get the first call's stored response and
// its charge would never happen: it fails instead, before anything is sent,
// unless the caller says the repeat is meant.
func TestSecondCallWithTheSameOperationFails(t *testing.T) {
	tests := []struct {
		name     string
		repeat   bool // the second call sets Request.Repeat
		wantErr  string
		requests int
	}{
		{"repeat without saying so", false, "already completed a call with the same idempotency key", 1},
		{"repeat meant", true, "", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := idemtest.StartServer(t, idemtest.Options{})
			h := newHarness(t, srv, activities.Config{}, "order-repeat")
			wf := func(ctx workflow.Context) (bool, error) {
				if _, err := workflows.Post(ctx, "charge", srv.URL+"/payments", map[string]int{"amount": 1}); err != nil {
					return false, err
				}
				resp, err := workflows.Call(ctx, workflows.Request{Operation: "charge", URL: srv.URL + "/payments",
					Body: json.RawMessage(`{"amount":1}`), Repeat: tt.repeat})
				if err != nil {
					return false, err
				}
				return resp.Replayed, nil
			}
			h.env.RegisterWorkflowWithOptions(wf, workflow.RegisterOptions{Name: "twice"})
			h.env.ExecuteWorkflow("twice")
			err := h.env.GetWorkflowError()
			if tt.wantErr != "" {
				var appErr *temporal.ApplicationError
				require.True(t, errors.As(err, &appErr), "got %v", err)
				assert.Equal(t, workflows.ErrTypeInvalidRequest, appErr.Type())
				assert.Contains(t, appErr.Message(), tt.wantErr)
				assert.Contains(t, appErr.Message(), `"charge-2"`)
			} else {
				require.NoError(t, err)
				var replayed bool
				require.NoError(t, h.env.GetWorkflowResult(&replayed))
				assert.True(t, replayed)
			}
			assert.Equal(t, tt.requests, srv.Stats().Requests)
			assert.Equal(t, 1, srv.Stats().Records)
		})
	}
}

// TestOptionsOnCtxCombine: fields of the Request win, then the activity
// options already on ctx, then the defaults. A caller's MaximumAttempts 1
// on ctx makes one request (before, Call replaced it with 5).
func TestOptionsOnCtxCombine(t *testing.T) {
	srv := idemtest.StartServer(t, idemtest.Options{FailureRate: 1})
	h := newHarness(t, srv, activities.Config{}, "order-ctx")
	wf := func(ctx workflow.Context) error {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout: 3 * time.Second,
			RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 1},
		})
		_, err := workflows.Post(ctx, "charge", srv.URL+"/payments", nil)
		return err
	}
	h.env.RegisterWorkflowWithOptions(wf, workflow.RegisterOptions{Name: "ctx"})
	h.env.ExecuteWorkflow("ctx")
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(h.env.GetWorkflowError(), &appErr))
	assert.Contains(t, appErr.Message(), "last of 1 attempts")
	assert.Equal(t, 1, srv.Stats().Requests)
}

// TestDurationsAreStrings: durations in workflow input read "10s" in the
// Web UI and may be written so in the CLI; numbers (histories written
// before) still decode.
func TestDurationsAreStrings(t *testing.T) {
	req := workflows.Request{
		Operation: "charge", URL: "https://pay.example.com/p",
		StartToCloseTimeout: 10 * time.Second,
		Retry:               workflows.RetryOptions{InitialInterval: 200 * time.Millisecond, MaximumInterval: time.Minute},
	}
	b, err := json.Marshal(req)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"start_to_close_timeout":"10s"`)
	assert.Contains(t, string(b), `"initial_interval":"200ms"`)
	assert.Contains(t, string(b), `"maximum_interval":"1m0s"`)
	assert.NotContains(t, string(b), "schedule_to_close_timeout")

	for _, in := range []string{
		`{"url":"u","start_to_close_timeout":"10s","retry":{"initial_interval":"200ms","maximum_interval":"1m"}}`,
		`{"url":"u","start_to_close_timeout":10000000000,"retry":{"initial_interval":200000000,"maximum_interval":60000000000}}`,
	} {
		var got workflows.Request
		require.NoError(t, json.Unmarshal([]byte(in), &got), in)
		assert.Equal(t, 10*time.Second, got.StartToCloseTimeout, in)
		assert.Equal(t, 200*time.Millisecond, got.Retry.InitialInterval, in)
		assert.Equal(t, time.Minute, got.Retry.MaximumInterval, in)
	}
	var bad workflows.Request
	assert.ErrorContains(t, json.Unmarshal([]byte(`{"start_to_close_timeout":"ten seconds"}`), &bad), `write it as a Go duration`)
}

// TestDecodeAndAsFailure: the two helpers a payment workflow reaches for.
func TestDecodeAndAsFailure(t *testing.T) {
	srv := idemtest.StartServer(t, idemtest.Options{Work: func(r *http.Request, body []byte) (int, []byte) {
		var in struct{ Card string }
		_ = json.Unmarshal(body, &in)
		if in.Card == "declined" {
			return http.StatusPaymentRequired, []byte(`{"error":"card_declined"}`)
		}
		return http.StatusCreated, []byte(`{"id":"pay_1"}`)
	}})
	h := newHarness(t, srv, activities.Config{}, "order-decode")
	resp, err := h.call(workflows.Request{Operation: "charge", URL: srv.URL + "/payments", Body: []byte(`{"card":"ok"}`)})
	require.NoError(t, err)
	var p struct{ ID string }
	require.NoError(t, resp.Decode(&p))
	assert.Equal(t, "pay_1", p.ID)
	omitted := workflows.Response{Status: 201, BodyOmitted: true, OmittedReason: "too large", BodyBytes: 9, BodySHA256: "abc"}
	assert.ErrorContains(t, omitted.Decode(&p), "omitted (too large; 9 bytes, sha256 abc)")

	h = newHarness(t, srv, activities.Config{}, "order-declined")
	_, err = h.call(workflows.Request{Operation: "charge", URL: srv.URL + "/payments", Body: []byte(`{"card":"declined"}`)})
	f, ok := workflows.AsFailure(err)
	require.True(t, ok, "got %v", err)
	assert.Equal(t, http.StatusPaymentRequired, f.Status)
	assert.Equal(t, workflows.ErrTypeHTTPClientError, f.Type)
	assert.False(t, f.Retryable)
	assert.Contains(t, f.Body, "card_declined")
	_, ok = workflows.AsFailure(errors.New("not ours"))
	assert.False(t, ok)
}

// TestCallAgainAfterAFailureIsARetry: calling again with the key of a call
// that failed retries the same operation with the same key, which is the
// safe thing to do: no Repeat needed, and never a new key.
func TestCallAgainAfterAFailureIsARetry(t *testing.T) {
	srv := idemtest.StartServer(t, idemtest.Options{})
	srv.Script(idemtest.Fail(400))
	h := newHarness(t, srv, activities.Config{}, "order-again")
	wf := func(ctx workflow.Context) (string, error) {
		if _, err := workflows.Post(ctx, "charge", srv.URL+"/payments", map[string]int{"amount": 1}); err == nil {
			return "", errors.New("the scripted 400 did not fail the first call")
		}
		resp, err := workflows.Post(ctx, "charge", srv.URL+"/payments", map[string]int{"amount": 1})
		if err != nil {
			return "", err
		}
		return resp.IdempotencyKey, nil
	}
	h.env.RegisterWorkflowWithOptions(wf, workflow.RegisterOptions{Name: "again"})
	h.env.ExecuteWorkflow("again")
	require.NoError(t, h.env.GetWorkflowError())
	var key string
	require.NoError(t, h.env.GetWorkflowResult(&key))
	assert.Equal(t, idemkey.Derive(testNamespace, "order-again", "charge"), key, "the same key")
	assert.Equal(t, 2, srv.Stats().Requests)
	assert.Equal(t, 1, srv.Stats().Records)
}
