package workflows_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.temporal.io/sdk/temporal"

	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// TestAsFailure: AsFailure reads this package's failures, wrapped or not,
// and nothing else, without panicking on details of another shape.
func TestAsFailure(t *testing.T) {
	ours := temporal.NewNonRetryableApplicationError("402", workflows.ErrTypeHTTPClientError, nil, workflows.Failure{Status: 402, Attempt: 1})
	// Through the converter, as a workflow sees an activity's error.
	fc := temporal.GetDefaultFailureConverter()
	converted := fc.FailureToError(fc.ErrorToFailure(ours))
	tests := []struct {
		name       string
		err        error
		ok         bool
		wantStatus int
	}{
		{"ours", ours, true, 402},
		{"ours, wrapped", fmt.Errorf("charge: %w", ours), true, 402},
		{"ours, through the failure converter", converted, true, 402},
		{"another activity's type with a JSON detail", fc.FailureToError(fc.ErrorToFailure(
			temporal.NewApplicationError("boom", "SomeOtherType", map[string]any{"status": 500}))), false, 0},
		{"our type, a detail of another shape made in the workflow", temporal.NewApplicationError("x", workflows.ErrTypeHTTPClientError, map[string]any{"a": 1}), false, 0},
		{"our type, no details", temporal.NewApplicationError("x", workflows.ErrTypeHTTPClientError), false, 0},
		{"not an ApplicationError", errors.New("plain"), false, 0},
		{"nil", nil, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var f workflows.Failure
			var ok bool
			assert.NotPanics(t, func() { f, ok = workflows.AsFailure(tt.err) })
			assert.Equal(t, tt.ok, ok)
			assert.Equal(t, tt.wantStatus, f.Status)
			if ok {
				assert.Equal(t, workflows.ErrTypeHTTPClientError, f.Type)
				assert.False(t, f.Retryable)
			}
		})
	}
}
