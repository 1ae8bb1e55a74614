package integration_test

import (
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/internal/itest"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// TestDemoScript runs scripts/demo.sh (make demo) end to end on free ports,
// with the binaries TestMain built (the script's own build step finds them
// up to date), and checks what it prints: it keeps the README's demo honest.
// It runs once non-interactively (--no-wait) and once interactively, stopped
// with SIGINT to its process group as Ctrl-C in a terminal would.
func TestDemoScript(t *testing.T) {
	t.Parallel()
	root, err := itest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(root, "scripts", "demo.sh")
	tests := []struct {
		name     string
		args     []string
		ctrlC    bool
		wantCode int
	}{
		{name: "no-wait", args: []string{"--no-wait"}, wantCode: 0},
		{name: "ctrl-c", ctrlC: true, wantCode: 130},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ports, err := itest.FreePorts(3)
			if err != nil {
				t.Fatal(err)
			}
			temporalPort, uiPort, apiPort := ports[0], ports[1], ports[2]
			p := itest.StartT(t, itest.Spec{
				Name: "demo.sh " + tt.name, Path: "bash", Args: append([]string{script}, tt.args...), Dir: root,
				Env: []string{
					"BIN_DIR=" + bins.Dir, "DEMO_EXIT=",
					"TEMPORAL_PORT=" + strconv.Itoa(temporalPort),
					"TEMPORAL_UI_PORT=" + strconv.Itoa(uiPort),
					"API_PORT=" + strconv.Itoa(apiPort),
				},
			})
			ctx := ctxT(t, 5*time.Minute)
			if tt.ctrlC {
				if err := p.WaitOutput(ctx, "press Ctrl-C"); err != nil {
					t.Fatal(err)
				}
				// Still up: the Web UI answers.
				if err := itest.WaitHTTP(ctx, fmt.Sprintf("http://127.0.0.1:%d/", uiPort)); err != nil {
					t.Fatal(err)
				}
				if err := p.Signal(syscall.SIGINT); err != nil {
					t.Fatal(err)
				}
			}
			_ = p.Wait(ctx)
			out := p.Output()
			if got := p.ExitCode(); got != tt.wantCode {
				t.Fatalf("demo.sh %s, want exit status %d; output:\n%s", p.State(), tt.wantCode, out)
			}
			checkDemoOutput(t, out, uiPort)
			for _, name := range []string{"worker", "reference API", "Temporal dev server"} {
				if !strings.Contains(out, "stopped "+name) {
					t.Errorf("the demo did not report stopping the %s", name)
				}
			}
			for _, port := range ports {
				l, err := net.Listen("tcp", itest.HostPort(port))
				if err != nil {
					t.Errorf("port %d still in use after the demo exited: %v", port, err)
					continue
				}
				l.Close()
			}
			if t.Failed() {
				t.Logf("demo output:\n%s", out)
			}
		})
	}
}

// checkDemoOutput checks the three steps of the demo's scenario.
func checkDemoOutput(t *testing.T, out string, uiPort int) {
	t.Helper()
	type result struct {
		WorkflowID     string `json:"workflow_id"`
		IdempotencyKey string `json:"idempotency_key"`
		Status         int    `json:"status"`
		Attempts       int    `json:"attempts"`
		Replayed       bool   `json:"replayed"`
	}
	var results []result
	for line := range strings.Lines(out) {
		if j, ok := strings.CutPrefix(strings.TrimSpace(line), "result: "); ok {
			var r result
			if err := json.Unmarshal([]byte(j), &r); err != nil {
				t.Fatalf("result line %q: %v", line, err)
			}
			results = append(results, r)
		}
	}
	if len(results) != 2 {
		t.Fatalf("%d results printed, want 2 (steps 1 and 3)", len(results))
	}
	key := workflows.DeriveKey("default", "demo-payment", "charge")
	want := []result{
		{WorkflowID: "demo-payment", IdempotencyKey: key, Status: 201, Attempts: 3, Replayed: false},
		{WorkflowID: "demo-payment", IdempotencyKey: key, Status: 201, Attempts: 1, Replayed: true},
	}
	for i := range want {
		if results[i] != want[i] {
			t.Errorf("result %d: %+v, want %+v", i+1, results[i], want[i])
		}
	}
	for _, s := range []string{
		"3 requests, 1 distinct idempotency key(s), 1 record(s), 0 replay(s)",
		"type=HTTPClientError last_status=400 attempts=1 ",
		"4 requests, 1 distinct idempotency key(s), 1 record(s)",
		"5 requests, 1 distinct idempotency key(s), 1 record(s), 1 replay(s)",
		fmt.Sprintf("Web UI: http://127.0.0.1:%d/namespaces/default/workflows/demo-payment/", uiPort),
		fmt.Sprintf("Web UI: http://127.0.0.1:%d/namespaces/default/workflows\n", uiPort),
	} {
		if !strings.Contains(out, s) {
			t.Errorf("the demo's output lacks %q", s)
		}
	}
}
