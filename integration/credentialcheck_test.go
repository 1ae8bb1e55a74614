package integration_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemhttp/temporal-idempotent-http/harness/itest"
)

// TestWorkerChecksCredentialsAtStart: the worker binary asks every
// origin's credential before it takes work. `--check` validates the
// origins file and its credentials and exits: 0 with a good client
// secret, 1 with a wrong one (naming the origin and the token endpoint's
// refusal, never the secret); a worker started with the wrong secret
// stops before polling; one whose token endpoint is down starts, with a
// warning.
func TestWorkerChecksCredentialsAtStart(t *testing.T) {
	const good, wrong = "cs_good_3f1e9d8c7b6a5f4e", "cs_wrong_0a1b2c3d4e5f6a7b"
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, pass, _ := r.BasicAuth()
		w.Header().Set("Content-Type", "application/json")
		if pass != good {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":"invalid_client"}`))
			return
		}
		_, _ = w.Write([]byte(`{"access_token":"at_Vq8Rz2Lm5Np7Kx4Jw","token_type":"Bearer","expires_in":3600}`))
	}))
	t.Cleanup(tokens.Close)
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	const api = "https://api-m.paypal.example"
	file := func(tokenURL string) string {
		path := filepath.Join(t.TempDir(), "origins.toml")
		require.NoError(t, os.WriteFile(path, fmt.Appendf(nil, "[origin.%q.oauth2]\ntoken_url = %q\nclient_id = \"c1\"\nclient_secret_env = \"CLIENT_SECRET\"\nauth_style = \"header\"\n", api, tokenURL), 0o600))
		return path
	}
	tests := []struct {
		name, secret, tokenURL string
		check                  bool
		exit                   int
		want                   []string
	}{
		{"--check, good secret", good, tokens.URL, true, 0, []string{"every origin's credential are good"}},
		{"--check, wrong secret", wrong, tokens.URL, true, 1, []string{"credentials refused at start", "origin " + api, "invalid_client"}},
		{"start, wrong secret", wrong, tokens.URL, false, 1, []string{"credentials refused at start", "origin " + api}},
		{"--check, token endpoint down", good, down.URL, true, 0, []string{"credential not available at start", "origin " + api}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := slices.Concat(dev.Env(), []string{"CLIENT_SECRET=" + tt.secret, "API_TOKEN=", "ALLOW_ORIGINS=", "TASK_QUEUE=", "METRICS_ADDR="})
			args := []string{"--origins", file(tt.tokenURL), "--task-queue", uniqueName(t, "check")}
			if tt.check {
				args = append(args, "--check")
			}
			p := itest.StartT(t, itest.Spec{Name: "worker " + tt.name, Path: bins.Worker, Env: env, Args: args})
			_ = p.Wait(ctxT(t, 60*time.Second))
			require.True(t, p.Exited(), "the worker exits: %s", p.Tail(4<<10))
			out := p.Output()
			assert.Equal(t, tt.exit, p.ExitCode(), out)
			for _, w := range tt.want {
				assert.Contains(t, out, w)
			}
			assert.False(t, strings.Contains(out, tt.secret[8:]), "no secret in the output")
		})
	}
}
