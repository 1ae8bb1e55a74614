package host

import (
	"flag"
	"testing"

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
			assert.Empty(t, h.WorkerOptions().Interceptors, "no routing before Start decides the shared rate")
			require.ErrorContains(t, h.Start(nil), "Start needs a client")
		})
	}
}
