package integration_test

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/harness/itest"
	"github.com/idemhttp/temporal-idempotent-http/internal/idemkey"
)

// TestDemoScript runs scripts/demo.sh (make demo) end to end on free ports,
// with the binaries TestMain built, and checks what it prints: it keeps the
// README's demo honest.
//
//   - no-wait: the script as the test suite runs it (--no-wait). Its build
//     step finds the binaries up to date and stays quiet.
//   - make-ctrl-c: `make demo 2>&1 | cat` in a terminal (a pseudo-terminal
//     of util-linux's script) as a newcomer runs it, with a stand-in build
//     (DEMO_FAKE_BUILD) that compiles for a few seconds: the progress lines
//     appear; then Ctrl-C is typed, and make exits 0 after one line saying
//     everything is down.
//   - ctrl-c-during-build: SIGINT to the script's process group, as Ctrl-C
//     in a terminal sends it, while the stand-in build runs: it stops the
//     build, starts nothing and exits 0 with the one line.
//
// In every case no process the demo started outlives it.
func TestDemoScript(t *testing.T) {
	t.Parallel()
	root, err := itest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(root, "scripts", "demo.sh")
	const (
		cli      = "the Temporal CLI"
		commands = "the worker, the starter and the reference API"
	)
	tests := []struct {
		name string
		// viaMake runs `make demo` in a terminal; otherwise bash runs the
		// script with args.
		viaMake bool
		args    []string
		env     []string
		// interruptAt is the output after which Ctrl-C is typed (SIGINT to
		// the process group without a terminal); "" for none.
		interruptAt string
		// scenario: the demo got as far as running the scenario.
		scenario bool
		// progress: the builds that print progress, with the stand-in's
		// package count ("of at most").
		progress map[string]int
		// lastLine is the last line printed, if not "".
		lastLine string
	}{
		{
			name: "no-wait", args: []string{"--no-wait"}, scenario: true,
		},
		{
			name: "make-ctrl-c", viaMake: true, env: []string{"DEMO_FAKE_BUILD=4", "DEMO_PROGRESS_EVERY=1"},
			interruptAt: "press Ctrl-C", scenario: true, progress: map[string]int{cli: 40, commands: 40},
			lastLine: "demo: stopped (Ctrl-C); everything it started is down: worker, webhook provider, reference API and Temporal dev server",
		},
		{
			name: "ctrl-c-during-build", env: []string{"DEMO_FAKE_BUILD=120", "DEMO_PROGRESS_EVERY=1"},
			interruptAt: "packages compiled so far", progress: map[string]int{cli: 1200},
			lastLine: "demo: stopped (Ctrl-C); everything it started is down: the build of the Temporal CLI",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ports, err := itest.FreePorts(6)
			if err != nil {
				t.Fatal(err)
			}
			temporalPort, uiPort, apiPort, metricsPort := ports[0], ports[1], ports[2], ports[3]
			// Every process the demo starts inherits this variable.
			marker := fmt.Sprintf("IDEMHTTP_DEMO_TEST=%s-%d-%d", tt.name, os.Getpid(), time.Now().UnixNano())
			env := append([]string{
				"BIN_DIR=" + bins.Dir, "DEMO_EXIT=", marker,
				"TEMPORAL_PORT=" + strconv.Itoa(temporalPort),
				"TEMPORAL_UI_PORT=" + strconv.Itoa(uiPort),
				"API_PORT=" + strconv.Itoa(apiPort),
				"METRICS_PORT=" + strconv.Itoa(metricsPort),
				"PROVIDER_PORT=" + strconv.Itoa(ports[4]),
				"WEBHOOK_PORT=" + strconv.Itoa(ports[5]),
			}, tt.env...)
			spec := itest.Spec{
				Name: "demo.sh " + tt.name, Path: "bash", Args: append([]string{script}, tt.args...), Dir: root, Env: env,
			}
			var keyboard *os.File
			if tt.viaMake {
				// script(1) gives make a terminal and copies its own stdin,
				// a FIFO the test writes to, to the terminal: a typed Ctrl-C.
				fifo := filepath.Join(t.TempDir(), "keyboard")
				if err := syscall.Mkfifo(fifo, 0o600); err != nil {
					t.Fatal(err)
				}
				// O_RDWR: opening does not wait for the reader, and script
				// never reads an end of file.
				keyboard, err = os.OpenFile(fifo, os.O_RDWR, 0)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { keyboard.Close() })
				spec.Name = "make demo " + tt.name
				// The output goes to a pipe, as with make demo | tee log:
				// make has no terminal on stdout and stderr, only on stdin.
				spec.Args = []string{"-c", `exec script -qefc 'bash -o pipefail -c "make demo 2>&1 | cat"' /dev/null <"$1"`, "bash", fifo}
				// Not a sub-make of a make running this test.
				spec.Env = append(spec.Env, "MAKEFLAGS=", "MFLAGS=", "MAKELEVEL=")
			}
			p := itest.StartT(t, spec)
			ctx := ctxT(t, 5*time.Minute)
			if tt.interruptAt != "" {
				if err := p.WaitOutput(ctx, tt.interruptAt); err != nil {
					t.Fatal(err)
				}
				if tt.progress != nil {
					// The progress lines that checkBuildProgress wants, first.
					err := itest.Eventually(ctx, 100*time.Millisecond, func() error {
						out := strings.ReplaceAll(p.Output(), "\r", "")
						if n := len(progressLine.FindAllString(out, -1)); n < 2 {
							return fmt.Errorf("%d progress lines", n)
						}
						return nil
					})
					if err != nil {
						t.Fatal(err)
					}
				}
				if tt.scenario {
					// Still up: the Web UI answers.
					if err := itest.WaitHTTP(ctx, fmt.Sprintf("http://127.0.0.1:%d/", uiPort)); err != nil {
						t.Fatal(err)
					}
				}
				if tt.viaMake {
					_, err = keyboard.Write([]byte{3}) // Ctrl-C
				} else {
					err = p.Signal(syscall.SIGINT)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			_ = p.Wait(ctx)
			out := strings.ReplaceAll(p.Output(), "\r", "")
			if got := p.ExitCode(); got != 0 {
				t.Fatalf("%s %s, want exit status 0; output:\n%s", spec.Name, p.State(), out)
			}
			if left := processesWith(marker); len(left) > 0 {
				t.Errorf("still running after the demo exited: %q", left)
			}
			for _, port := range ports {
				l, err := net.Listen("tcp", itest.HostPort(port))
				if err != nil {
					t.Errorf("port %d still in use after the demo exited: %v", port, err)
					continue
				}
				l.Close()
			}
			if strings.Contains(out, "make: ***") {
				t.Errorf("make reported an error")
			}
			if tt.scenario {
				checkDemoOutput(t, out, uiPort, metricsPort)
			} else if strings.Contains(out, "Starting the Temporal dev server") {
				t.Errorf("the demo went on after Ctrl-C during the build")
			}
			for _, what := range []string{cli, commands} {
				total, ok := tt.progress[what]
				checkBuildProgress(t, out, what, ok, total)
			}
			if tt.lastLine != "" {
				// After the line Ctrl-C was typed at (and the progress
				// lines printed before it arrived): the terminal's echo of
				// it, then one line.
				_, after, _ := strings.Cut(out, tt.interruptAt)
				_, after, _ = strings.Cut(after, "\n")
				var lines []string
				for line := range strings.Lines(after) {
					if progressLine.MatchString(strings.TrimSuffix(line, "\n")) && len(lines) == 0 {
						continue
					}
					if line = strings.TrimSpace(line); line != "" && line != "^C" {
						lines = append(lines, line)
					}
				}
				if !slices.Equal(lines, []string{tt.lastLine}) {
					t.Errorf("after Ctrl-C the demo printed %q, want one line: %q", lines, tt.lastLine)
				}
			} else {
				for _, name := range []string{"worker", "reference API", "Temporal dev server"} {
					if !strings.Contains(out, "stopped "+name) {
						t.Errorf("the demo did not report stopping the %s", name)
					}
				}
			}
			if t.Failed() {
				t.Logf("demo output:\n%s", out)
			}
		})
	}
}

// progressLine is one progress line of a build that compiles.
var progressLine = regexp.MustCompile(`(?m)^    building (.+): (\d+)s, (\d+) packages compiled so far \(of at most (\d+)\)$`)

// checkBuildProgress checks the build of what in the demo's output: when
// compiling, a first line saying so, progress lines at least each second
// (DEMO_PROGRESS_EVERY=1) with the time and packages growing, and a last
// line; otherwise (everything cached) none of these.
func checkBuildProgress(t *testing.T, out, what string, compiling bool, total int) {
	t.Helper()
	header := "    compiling " + what + ": not in Go's build cache yet"
	if !compiling {
		if strings.Contains(out, header) {
			t.Errorf("the build of %s found everything cached but printed %q", what, header)
		}
		return
	}
	if !strings.Contains(out, header) {
		t.Errorf("the build of %s printed no %q", what, header)
	}
	var secs, pkgs []int
	for _, m := range progressLine.FindAllStringSubmatch(out, -1) {
		if m[1] != what {
			continue
		}
		s, _ := strconv.Atoi(m[2])
		n, _ := strconv.Atoi(m[3])
		if of, _ := strconv.Atoi(m[4]); of != total {
			t.Errorf("progress line %q: want of at most %d", m[0], total)
		}
		secs, pkgs = append(secs, s), append(pkgs, n)
	}
	if len(secs) < 2 {
		t.Fatalf("the build of %s printed %d progress lines, want at least 2", what, len(secs))
	}
	for i := 1; i < len(secs); i++ {
		if secs[i] < secs[i-1] || pkgs[i] < pkgs[i-1] { // whole seconds: two lines may share one
			t.Errorf("progress of %s: %ds with %d packages after %ds with %d", what, secs[i], pkgs[i], secs[i-1], pkgs[i-1])
		}
	}
	if pkgs[len(pkgs)-1] == 0 {
		t.Errorf("progress of %s: no package compiled", what)
	}
}

// processesWith returns the processes whose environment holds the variable
// assignment kv, as "pid command line".
func processesWith(kv string) []string {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	var found []string
	for _, dir := range dirs {
		environ, err := os.ReadFile(filepath.Join(dir, "environ"))
		if err != nil || !slices.Contains(strings.Split(string(environ), "\x00"), kv) {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join(dir, "cmdline"))
		found = append(found, filepath.Base(dir)+" "+strings.ReplaceAll(string(cmdline), "\x00", " "))
	}
	return found
}

// checkDemoOutput checks the three steps of the demo's scenario, and the
// worker's metrics it prints: 2 successes, the 503 and the 429 retried, the
// 400 final.
func checkDemoOutput(t *testing.T, out string, uiPort, metricsPort int) {
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
	if len(results) != 3 {
		t.Fatalf("%d results printed, want 3 (steps 1, 3 and 4)", len(results))
	}
	key := idemkey.Derive("default", "demo-payment", "charge")
	want := []result{
		{WorkflowID: "demo-payment", IdempotencyKey: key, Status: 201, Attempts: 3, Replayed: false},
		{WorkflowID: "demo-payment", IdempotencyKey: key, Status: 201, Attempts: 1, Replayed: true},
		{WorkflowID: "demo-capture", IdempotencyKey: idemkey.Derive("default", "demo-capture", "capture"), Status: 201, Attempts: 1},
	}
	for i := range want {
		if results[i] != want[i] {
			t.Errorf("result %d: %+v, want %+v", i+1, results[i], want[i])
		}
	}
	for _, s := range []string{
		"3 requests, 1 distinct idempotency key(s), 1 record(s), 0 replay(s)",
		"type=HTTPClientError last_status=400 attempts=1 ",
		"4 requests, 2 distinct idempotency key(s), 1 record(s)",
		"5 requests, 2 distinct idempotency key(s), 1 record(s), 1 replay(s)",
		fmt.Sprintf("Web UI: http://127.0.0.1:%d/namespaces/default/workflows/demo-payment/", uiPort),
		fmt.Sprintf("Web UI: http://127.0.0.1:%d/namespaces/default/workflows\n", uiPort),
		fmt.Sprintf("Metrics (Prometheus text, the SDK's and the activity's): http://127.0.0.1:%d/metrics\n", metricsPort),
		`idempotent_http_attempts_total{outcome="retryable",error_type="HTTPRetryableStatus"} 2` + "\n",
		`idempotent_http_attempts_total{outcome="non_retryable",error_type="HTTPClientError"} 1` + "\n",
		`idempotent_http_attempts_total{outcome="success",error_type="none"} 3` + "\n",
		`"outcome":{"state":"succeeded","source":"webhook"`,
		"provider: 1 record, 3 deliveries: 2 answered 2xx (the event, its duplicate), 1 refused (the forged copy, 400, never shown to Temporal)",
		`idempotent_http_webhooks_total{outcome="rejected"} 1` + "\n",
	} {
		if !strings.Contains(out, s) {
			t.Errorf("the demo's output lacks %q", s)
		}
	}
}
