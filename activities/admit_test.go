package activities_test

import (
	"errors"
	"math"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/internal/admission"
	"github.com/idemhttp/temporal-idempotent-http/internal/backoff"
	"github.com/idemhttp/temporal-idempotent-http/internal/input"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// TestAdmissionPacesThrottles: with admission on (the default), a throttle
// (429, or a status listed in Admission.Throttles) without Retry-After is
// retried as soon as the limiter admits it (the NextRetryDelay floor), a
// Retry-After is still honoured, and other retryable statuses, 503 included
// unless listed, keep the backoff.
func TestAdmissionPacesThrottles(t *testing.T) {
	with503 := activities.Admission{Throttles: []int{429, 503}}
	tests := []struct {
		name      string
		handler   http.HandlerFunc
		admission activities.Admission
		wantDelay time.Duration // 0: the backoff's, in (0, 200 ms]
		wantMsg   string
	}{
		{"429", status(429, ""), activities.Admission{}, backoff.MinRetryDelay, "adaptive admission after a throttle"},
		{"429 Retry-After", status(429, "", "Retry-After", "7"), activities.Admission{}, 7 * time.Second, `Retry-After "7"`},
		{"503 keeps the backoff by default", status(503, ""), activities.Admission{}, 0, "full jitter"},
		{"503 listed in Throttles", status(503, ""), with503, backoff.MinRetryDelay, "adaptive admission after a throttle"},
		{"502 keeps the backoff", status(502, ""), with503, 0, "full jitter"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newRecorder(t, tt.handler)
			r := req(srv.URL)
			r.Backoff = backoff.Backoff{InitialInterval: 200 * time.Millisecond}
			_, _, err := run(t, activities.Config{AllowedOrigins: []string{srv.URL}, Admission: tt.admission}, r)
			appErr := appError(t, err)
			assert.Equal(t, workflows.ErrTypeHTTPRetryableStatus, appErr.Type())
			assert.False(t, appErr.NonRetryable())
			assert.Contains(t, appErr.Message(), tt.wantMsg)
			if tt.wantDelay > 0 {
				assert.Equal(t, tt.wantDelay, appErr.NextRetryDelay())
			} else {
				assert.Greater(t, appErr.NextRetryDelay(), time.Duration(0))
				assert.LessOrEqual(t, appErr.NextRetryDelay(), 200*time.Millisecond)
			}
			assert.Equal(t, 1, srv.count())
		})
	}
}

// TestOriginAdmission (issue 40, item 3): Config.OriginAdmission gives an
// origin its own admission, in place of Config.Admission for it alone:
// one origin's 503 is a throttle (paced) where the worker's admission
// keeps the backoff for every other origin's; an origin's admission off
// sends its attempts while the others' stay paced; a bad one is refused
// with the origin named, as is an origin that is not allowed.
func TestOriginAdmission(t *testing.T) {
	own := newRecorder(t, status(503, ""))
	other := newRecorder(t, status(503, ""))
	cfg := activities.Config{
		AllowedOrigins:  []string{own.URL, other.URL},
		OriginAdmission: map[string]activities.Admission{own.URL: {Throttles: []int{429, 503}}},
	}
	tests := []struct {
		name    string
		srv     *recorder
		wantMsg string
	}{
		{"the origin's own: 503 is a throttle", own, "adaptive admission after a throttle"},
		{"another origin: the worker's, 503 keeps the backoff", other, "full jitter"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := req(tt.srv.URL)
			r.Backoff = backoff.Backoff{InitialInterval: 200 * time.Millisecond}
			_, _, err := run(t, cfg, r)
			appErr := appError(t, err)
			assert.Equal(t, workflows.ErrTypeHTTPRetryableStatus, appErr.Type())
			assert.Contains(t, appErr.Message(), tt.wantMsg)
		})
	}

	for _, tt := range []struct {
		name string
		oa   map[string]activities.Admission
		want string
	}{
		{"a bad origin admission", map[string]activities.Admission{own.URL: {InitialRate: 1, MinRate: 2}},
			"Config.OriginAdmission[" + own.URL + "]: MinRate 2 is above InitialRate 1"},
		{"an origin not allowed", map[string]activities.Admission{"https://elsewhere.example": {}},
			"Config.OriginAdmission names https://elsewhere.example, which is not in Config.AllowedOrigins"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := activities.New(activities.Config{AllowedOrigins: []string{own.URL}, OriginAdmission: tt.oa})
			require.ErrorContains(t, err, tt.want)
		})
	}
}

// TestAdmissionHoldsBack: an attempt that the origin's limiter does not
// admit sends nothing and ends with the retryable ErrTypeNotAdmitted,
// coming back shortly before its turn; a retry over the retry budget waits
// the same way; with admission off, every attempt is sent.
func TestAdmissionHoldsBack(t *testing.T) {
	// A first answer st, then 201s.
	failOnce := func(st int) http.HandlerFunc {
		n := 0
		return func(w http.ResponseWriter, r *http.Request) {
			if n++; n == 1 {
				w.WriteHeader(st)
				return
			}
			w.WriteHeader(201)
		}
	}
	tests := []struct {
		name      string
		handler   http.HandlerFunc
		admission activities.Admission
		// sent: the progress of earlier attempts says a request was sent
		// (each attempt is then a retry).
		sent      bool
		wantSent  int    // requests the server got from the two attempts
		wantInMsg string // in the second attempt's error ("" : no error)
		wantDelay time.Duration
	}{
		// 0.5 requests/s saves up one request; the 429 keeps the rate
		// there (MinRate) and spends what was saved: the second waits 2 s,
		// longer than MaxWait (1 s), so it comes back MaxWait/2 before its turn.
		{"rate", failOnce(429), activities.Admission{InitialRate: 0.5}, false, 1,
			"its rate is 0.5 requests/s, learned from its throttles (Config.Admission.Throttles: [429])); its turn is in ", 1500 * time.Millisecond},
		// After a 201 the slow start's rate is 1.5/s: the second waits
		// 667 ms inside its attempt and is sent.
		{"short wait inside the attempt", status(201, `{}`), activities.Admission{InitialRate: 0.5}, false, 2, "", 0},
		{"retry budget", status(201, `{}`), activities.Admission{MinRetries: 1, RetryRatio: 0.01}, true, 1, "retry budget", 0},
		// A 503 is not a throttle by default: it does not cut the rate
		// (the rate is not "learned from its throttles"), nor grow it as
		// an answer does: the second waits 2 s at 0.5/s.
		{"503 is not a throttle", failOnce(503), activities.Admission{InitialRate: 0.5}, false, 1,
			"its rate is 0.5 requests/s); its turn is in ", 1500 * time.Millisecond},
		{"503 listed in Throttles", failOnce(503), activities.Admission{InitialRate: 0.5, Throttles: []int{503}}, false, 1, "its turn is in ", 1500 * time.Millisecond},
		{"off", failOnce(429), activities.Admission{Off: true, InitialRate: 0.5}, false, 2, "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newRecorder(t, tt.handler)
			a, err := activities.New(activities.Config{AllowedOrigins: []string{srv.URL}, Admission: tt.admission})
			require.NoError(t, err)
			var errs []error
			for _, key := range []string{"key-1", "key-2"} {
				var s testsuite.WorkflowTestSuite
				env := s.NewTestActivityEnvironment()
				a.Register(env)
				if tt.sent {
					env.SetHeartbeatDetails(map[string]any{"attempt": 0, "sent": 1})
				}
				r := req(srv.URL)
				r.IdempotencyKey = key
				_, err := env.ExecuteActivity(input.ActivityName, r)
				errs = append(errs, err)
			}
			var appErr *temporal.ApplicationError
			if errors.As(errs[0], &appErr) {
				require.Equal(t, workflows.ErrTypeHTTPRetryableStatus, appErr.Type(), "the first request is admitted")
			}
			assert.Equal(t, tt.wantSent, srv.count(), "requests sent")
			if tt.wantInMsg == "" {
				assert.NoError(t, errs[1])
				return
			}
			appErr = appError(t, errs[1])
			assert.Equal(t, workflows.ErrTypeNotAdmitted, appErr.Type())
			assert.False(t, appErr.NonRetryable(), "a wait for admission is retried")
			assert.Contains(t, appErr.Message(), tt.wantInMsg)
			assert.Contains(t, appErr.Message(), "not sent yet")
			if tt.wantDelay > 0 {
				// Less by the real time the test took since the 429 (a loaded machine).
				assert.InDelta(t, tt.wantDelay, appErr.NextRetryDelay(), float64(500*time.Millisecond))
			} else {
				assert.Greater(t, appErr.NextRetryDelay(), time.Duration(0))
				assert.LessOrEqual(t, appErr.NextRetryDelay(), 10*time.Second)
			}
			d, ok := workflows.AsFailure(errs[1])
			require.True(t, ok)
			assert.Equal(t, "key-2", d.IdempotencyKey)
			assert.Zero(t, d.Status, "nothing was sent")
			assert.Equal(t, appErr.NextRetryDelay(), d.NextRetryDelay)
		})
	}
}

// TestAdmissionIsOneDeclaration: Admission and Breaker are the limiter's
// own configuration types, declared once (no copy to drift from them).
func TestAdmissionIsOneDeclaration(t *testing.T) {
	assert.Equal(t, reflect.TypeFor[admission.Config]().String(), reflect.TypeFor[activities.Admission]().String())
	assert.Equal(t, reflect.TypeFor[admission.Breaker]().String(), reflect.TypeFor[activities.Breaker]().String())
}

func TestAdmissionRejectsBadConfig(t *testing.T) {
	tests := []struct {
		name string
		adm  activities.Admission
		want string
	}{
		{"negative rate", activities.Admission{InitialRate: -1}, "may not be negative"},
		{"NaN rate (it admitted nothing)", activities.Admission{InitialRate: math.NaN()}, "not NaN or infinite"},
		{"infinite failure ratio", activities.Admission{Breaker: activities.Breaker{FailureRatio: math.Inf(1)}}, "not NaN or infinite"},
		{"negative wait", activities.Admission{MaxWait: -time.Second}, "may not be negative"},
		{"min above initial", activities.Admission{InitialRate: 1, MinRate: 2}, "MinRate 2 is above InitialRate 1"},
		{"throttle not an error status", activities.Admission{Throttles: []int{429, 200}}, "200 is not an HTTP error status"},
		{"failure ratio above 1", activities.Admission{Breaker: activities.Breaker{FailureRatio: 1.5}}, "FailureRatio 1.5 is not a share"},
		{"negative open time", activities.Admission{Breaker: activities.Breaker{OpenTime: -time.Second}}, "Breaker: MinFailures, FailureWindow, OpenTime, MaxOpenTime and RestartRate may not be negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := activities.New(activities.Config{Admission: tt.adm})
			require.Error(t, err)
			assert.Contains(t, err.Error(), "Config.Admission")
			assert.Contains(t, err.Error(), tt.want)
			_, err = activities.New(activities.Config{Admission: activities.Admission{Off: true, InitialRate: tt.adm.InitialRate}})
			assert.NoError(t, err, "parameters of an admission that is off are not checked")
		})
	}
}
