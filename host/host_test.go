package host

import (
	"errors"
	"flag"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLoad: Load reads the worker binary's flags from its args (not the
// process's command line), refuses what it cannot use with the flag
// named, and with --check stops after the check, before the client
// options (which would need a reachable Temporal only later).
func TestLoad(t *testing.T) {
	t.Setenv("ALLOW_ORIGINS", "")
	t.Setenv("API_TOKEN", "")
	t.Setenv("ORIGINS_FILE", "")
	tests := []struct {
		name    string
		args    []string
		wantErr string // "" for none
		checked bool
	}{
		{"--help", []string{"--help"}, flag.ErrHelp.Error(), false},
		{"an unknown flag", []string{"--alow-origin", "http://a.example"}, "flag provided but not defined: -alow-origin", false},
		{"a word that is not a flag", []string{"--allow-origin", "http://a.example", "payments"}, `"payments": the worker takes flags only`, false},
		{"no origin", nil, "no origin allowed", false},
		{"--check", []string{"--allow-origin", "http://a.example", "--check"}, "", true},
		{"a worker", []string{"--allow-origin", "http://a.example", "--task-queue", "payments"}, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := Load(tt.args)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			t.Cleanup(h.Close)
			assert.Equal(t, tt.checked, h.Checked())
			if tt.checked {
				return
			}
			assert.Equal(t, "payments", h.TaskQueue())
			assert.NotEmpty(t, h.ClientOptions().Interceptors, "the tracing interceptor")
			assert.Len(t, h.WorkerOptions().Interceptors, 1, "the routing, which routes once Start finds the shared rate in force")
			require.ErrorContains(t, h.Start(nil), "Start needs a client")
		})
	}
}

// TestLoadRefusesBadSettings (an adversarial review of host): a value out
// of range from a flag or variable is refused naming it, as the origins
// file names its keys (it named Go fields); NaN and infinite rates are
// refused wherever they come from (a NaN rate admitted nothing); broken
// webhook settings fail Load, so --check finds them (they failed only at
// Start, after dialling); an error in args says to read --help and exits
// 2, as Go's flag package does.
func TestLoadRefusesBadSettings(t *testing.T) {
	for _, v := range []string{"ALLOW_ORIGINS", "API_TOKEN", "ORIGINS_FILE", "WEBHOOK_SECRETS", "CALLBACK_SECRETS", "ADMISSION_MIN_RATE", "ADMISSION_INITIAL_RATE", "TASK_QUEUE_ACTIVITIES_PER_SECOND"} {
		t.Setenv(v, "")
	}
	origin := []string{"--allow-origin", "http://a.example", "--check"}
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"a negative rate from a variable", map[string]string{"ADMISSION_MIN_RATE": "-1"}, nil, "ADMISSION_MIN_RATE (--admission-min-rate) -1: out of range: write a value of 0 or more"},
		{"a failure ratio from a flag", nil, []string{"--breaker-failure-ratio", "2"}, "--breaker-failure-ratio 2: out of range: write a share above 0 and at most 1"},
		{"min above initial", nil, []string{"--admission-min-rate", "8", "--admission-initial-rate", "4"}, "--admission-min-rate 8 is above --admission-initial-rate 4"},
		{"NaN from a variable", map[string]string{"ADMISSION_INITIAL_RATE": "NaN"}, nil, `ADMISSION_INITIAL_RATE="NaN": "NaN" is not a number`},
		{"Inf from a flag", nil, []string{"--task-queue-activities-per-second", "+Inf"}, `"+Inf" is not a number`},
		{"webhook secrets without an address", map[string]string{"WEBHOOK_SECRETS": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}, nil, "WEBHOOK_SECRETS is set but --webhook-addr is not"},
		{"an unknown scheme", nil, []string{"--webhook-addr", "127.0.0.1:0", "--webhook-scheme", "nope"}, `--webhook-scheme "nope"`},
		{"short callback keys", map[string]string{"CALLBACK_SECRETS": "short"}, []string{"--callback-base-url", "https://h.example/cb"}, "--callback-base-url, CALLBACK_SECRETS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			_, err := Load(append(append([]string(nil), origin...), tt.args...))
			require.ErrorContains(t, err, tt.want)
			for _, v := range tt.env {
				if len(v) > 16 { // a secret
					assert.NotContains(t, err.Error(), v[8:], "no secret quoted")
				}
			}
		})
	}
	_, err := Load([]string{"--bogus"})
	var usage interface{ ExitCode() int }
	require.True(t, errors.As(err, &usage), "an error in args: %v", err)
	assert.Equal(t, 2, usage.ExitCode())
	assert.Contains(t, err.Error(), "--help lists the flags")
}

// TestHostCloseStopsAll (the review): Close waits for what it stops, also
// when called twice or concurrently (a second Close returned at once,
// and main's deferred client Close could run under stopping workers), and
// what a running Start pushes after Close is stopped at once (it ran on).
func TestHostCloseStopsAll(t *testing.T) {
	h := &Host{}
	var stopped atomic.Bool
	require.NoError(t, h.push(func() { time.Sleep(200 * time.Millisecond); stopped.Store(true) }))
	done := make(chan bool)
	go func() { h.Close(); done <- stopped.Load() }()
	time.Sleep(20 * time.Millisecond)
	h.Close() // the second or the first: either way it returns once all is stopped
	assert.True(t, stopped.Load(), "a Close returned before everything was stopped")
	select {
	case all := <-done:
		assert.True(t, all, "the other Close returned before everything was stopped")
	case <-time.After(10 * time.Second):
		t.Fatal("the other Close did not return")
	}
	ran := false
	err := h.push(func() { ran = true })
	assert.True(t, ran, "a stop pushed after Close runs at once")
	assert.ErrorContains(t, err, "Close was called while Start ran")
}
