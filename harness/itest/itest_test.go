package itest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

func sh(script string) Spec { return Spec{Name: "sh", Path: "/bin/sh", Args: []string{"-c", script}} }

func TestFreePorts(t *testing.T) {
	ports, err := FreePorts(20)
	if err != nil {
		t.Fatal(err)
	}
	checkPorts(t, "FreePorts", ports)
}

// checkPorts fails t unless ports are distinct and each can be bound by a
// server right away.
func checkPorts(t *testing.T, from string, ports []int) {
	t.Helper()
	seen := map[int]bool{}
	for _, p := range ports {
		if seen[p] {
			t.Fatalf("port %d returned twice in %v", p, ports)
		}
		seen[p] = true
		// Each must be bindable right away by a server.
		l, err := net.Listen("tcp", HostPort(p))
		if err != nil {
			t.Fatalf("port %d from %s cannot be bound: %v", p, from, err)
		}
		l.Close()
	}
}

func TestFreePortsIn(t *testing.T) {
	const lo, hi = 15000, 32767
	ports, err := FreePortsIn(lo, hi, 20)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ports {
		if p < lo || p > hi {
			t.Errorf("port %d outside [%d, %d]", p, lo, hi)
		}
	}
	checkPorts(t, "FreePortsIn", ports)
}

func TestProcessLogPath(t *testing.T) {
	log := filepath.Join(t.TempDir(), "run.log")
	for _, script := range []string{"echo first", "echo second; echo third >&2"} {
		spec := sh(script)
		spec.LogPath = log
		p := StartT(t, spec)
		if err := p.Wait(ctxT(t, 10*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := FileTail(log, 1<<10), "first\nsecond\nthird"; got != want {
		t.Errorf("FileTail = %q, want %q (both runs, appended)", got, want)
	}
	if got, want := FileTail(log, 8), "third"; got != want {
		t.Errorf("FileTail(8) = %q, want %q (from the first whole line)", got, want)
	}
	if got := FileTail(filepath.Join(t.TempDir(), "missing.log"), 1<<10); !strings.HasPrefix(got, "(no log: ") {
		t.Errorf("FileTail of a missing file = %q, want it to say so", got)
	}
}

func TestLockBuildDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "bin")
	unlock, err := LockBuildDir(ctxT(t, 10*time.Second), dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LockBuildDir(ctxT(t, 300*time.Millisecond), dir); err == nil || !strings.Contains(err.Error(), "build lock") {
		t.Fatalf("second lock while held: err = %v, want a timeout waiting for the build lock", err)
	}
	unlock()
	unlock2, err := LockBuildDir(ctxT(t, 10*time.Second), dir)
	if err != nil {
		t.Fatalf("lock after unlock: %v", err)
	}
	unlock2()
}

func TestProcessExit(t *testing.T) {
	tests := []struct {
		name     string
		spec     Spec
		code     int
		contains []string
	}{
		{"stdout and stderr", sh("echo out; echo err >&2"), 0, []string{"out\n", "err\n"}},
		{"exit status", sh("echo failing; exit 3"), 3, []string{"failing"}},
		{"env added", Spec{Path: "/bin/sh", Args: []string{"-c", `echo "FOO=$FOO"`}, Env: []string{"FOO=bar"}}, 0, []string{"FOO=bar"}},
		{"env overrides", Spec{Path: "/bin/sh", Args: []string{"-c", `echo "HOME=$HOME"`}, Env: []string{"HOME=/nowhere"}}, 0, []string{"HOME=/nowhere"}},
		{"env replaced", Spec{Path: "/bin/sh", Args: []string{"-c", `echo "FOO=$FOO HOME=$HOME."`}, Env: []string{"FOO=bar"}, ReplaceEnv: true}, 0, []string{"FOO=bar HOME=.\n"}},
		{"dir", Spec{Path: "/bin/sh", Args: []string{"-c", "pwd"}, Dir: "/"}, 0, []string{"/\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := StartT(t, tt.spec)
			err := p.Wait(ctxT(t, 10*time.Second))
			if tt.code == 0 && err != nil {
				t.Fatalf("Wait: %v", err)
			}
			if got := p.ExitCode(); got != tt.code {
				t.Errorf("ExitCode() = %d, want %d (%s)", got, tt.code, p.State())
			}
			for _, s := range tt.contains {
				if !strings.Contains(p.Output(), s) {
					t.Errorf("output %q does not contain %q", p.Output(), s)
				}
			}
		})
	}
}

func TestProcessStartError(t *testing.T) {
	_, err := Start(Spec{Path: filepath.Join(t.TempDir(), "missing")})
	if err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("Start of a missing program: err = %v, want one naming it", err)
	}
}

func TestProcessStop(t *testing.T) {
	tests := []struct {
		name   string
		script string
		grace  time.Duration
		// wantExit0: the program handled SIGTERM and exited 0; otherwise it
		// ignored it and was killed.
		wantExit0 bool
	}{
		{"graceful", `trap 'echo got TERM; exit 0' TERM; echo ready; while :; do sleep 0.05; done`, 10 * time.Second, true},
		{"ignores SIGTERM", `trap '' TERM; echo ready; while :; do sleep 0.05; done`, 300 * time.Millisecond, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := StartT(t, sh(tt.script))
			if err := p.WaitOutput(ctxT(t, 10*time.Second), "ready"); err != nil {
				t.Fatal(err)
			}
			if err := p.Stop(tt.grace); err != nil {
				t.Fatal(err)
			}
			if !p.Exited() {
				t.Fatal("Stop returned with the process running")
			}
			if tt.wantExit0 {
				if p.ExitCode() != 0 || !strings.Contains(p.Output(), "got TERM") {
					t.Errorf("%s, output %q: want a clean exit on SIGTERM", p.State(), p.Output())
				}
			} else if p.ExitCode() != -1 {
				t.Errorf("%s: want it killed by SIGKILL", p.State())
			}
			if err := p.Stop(tt.grace); err != nil {
				t.Errorf("second Stop: %v", err)
			}
		})
	}
}

// childPid starts script, which must print "child PID" for a background
// child, and returns the process and the child's pid.
func childPid(t *testing.T, script string) (*Process, int) {
	t.Helper()
	p := StartT(t, sh(script))
	if err := p.WaitOutput(ctxT(t, 10*time.Second), "\n"); err != nil {
		t.Fatal(err)
	}
	var pid int
	if _, err := fmt.Sscanf(p.Output(), "child %d", &pid); err != nil {
		t.Fatalf("output %q: %v", p.Output(), err)
	}
	return p, pid
}

// alive reports whether pid runs (a zombie does not count).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && !strings.HasPrefix(strings.TrimSpace(s[i+1:]), "Z")
}

func waitDead(t *testing.T, pid int) {
	t.Helper()
	err := Eventually(ctxT(t, 10*time.Second), 20*time.Millisecond, func() error {
		if alive(pid) {
			return fmt.Errorf("pid %d still alive", pid)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestProcessKillTakesTheGroup(t *testing.T) {
	p, child := childPid(t, `sleep 300 & echo "child $!"; wait`)
	if !alive(child) {
		t.Fatalf("child %d not running", child)
	}
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	if p.ExitCode() != -1 {
		t.Errorf("after Kill: %s, want killed by a signal", p.State())
	}
	waitDead(t, child)
}

func TestProcessStopKillsLeftovers(t *testing.T) {
	// The leader exits at once, leaving its child in its process group.
	p, child := childPid(t, `sleep 300 & echo "child $!"`)
	if err := p.Wait(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if !alive(child) {
		t.Fatalf("child %d not running after its parent exited", child)
	}
	if err := p.Stop(time.Second); err != nil {
		t.Fatal(err)
	}
	waitDead(t, child)
}

func TestWaitOutput(t *testing.T) {
	t.Run("written late", func(t *testing.T) {
		p := StartT(t, sh(`sleep 0.2; echo "listening on 1234"; sleep 5`))
		if err := p.WaitOutput(ctxT(t, 10*time.Second), "listening"); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("exits first", func(t *testing.T) {
		p := StartT(t, sh(`echo "bind: address in use"; exit 1`))
		err := p.WaitOutput(ctxT(t, 10*time.Second), "listening")
		if err == nil || !strings.Contains(err.Error(), "exited with status 1") || !strings.Contains(err.Error(), "address in use") {
			t.Fatalf("err = %v, want the exit status and the output", err)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		p := StartT(t, sh(`echo starting; sleep 5`))
		err := p.WaitOutput(ctxT(t, 200*time.Millisecond), "listening")
		if err == nil || !strings.Contains(err.Error(), "starting") {
			t.Fatalf("err = %v, want a timeout with the output", err)
		}
	})
}

func TestPrefixWriter(t *testing.T) {
	var b strings.Builder
	pw := &prefixWriter{prefix: "[w] ", w: &b}
	for _, s := range []string{"one\ntw", "o\n", "three"} {
		if _, err := pw.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := b.String(), "[w] one\n[w] two\n"; got != want {
		t.Errorf("got %q, want %q (an incomplete line waits for its end)", got, want)
	}
}

func TestEventually(t *testing.T) {
	var n atomic.Int32
	err := Eventually(ctxT(t, 5*time.Second), time.Millisecond, func() error {
		if n.Add(1) < 3 {
			return fmt.Errorf("try %d", n.Load())
		}
		return nil
	})
	if err != nil || n.Load() != 3 {
		t.Fatalf("err = %v after %d calls, want nil after 3", err, n.Load())
	}
	err = Eventually(ctxT(t, 50*time.Millisecond), 10*time.Millisecond, func() error { return fmt.Errorf("never") })
	if err == nil || !strings.Contains(err.Error(), "never") || !strings.Contains(err.Error(), "deadline") {
		t.Fatalf("err = %v, want the last error and the deadline", err)
	}
}

func TestWaitHTTP(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) < 3 {
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	if err := WaitHTTP(ctxT(t, 10*time.Second), srv.URL+"/healthz"); err != nil {
		t.Fatal(err)
	}
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	err = WaitHTTP(ctxT(t, 200*time.Millisecond), "http://"+HostPort(port)+"/healthz")
	if err == nil || !strings.Contains(err.Error(), "not ready") {
		t.Fatalf("err = %v, want not ready", err)
	}
}

func TestStartDevServerNeedsCLI(t *testing.T) {
	for _, cli := range []string{"", filepath.Join(t.TempDir(), "temporal")} {
		if _, err := StartDevServer(t.Context(), DevServerOptions{CLI: cli}); err == nil {
			t.Errorf("CLI %q: no error", cli)
		}
	}
}

// TestBuildAndRunDemoAPI builds a real command of this module, runs it on a
// free port and waits for it: the path every integration test takes.
func TestBuildAndRunDemoAPI(t *testing.T) {
	dir := t.TempDir()
	ctx := ctxT(t, 5*time.Minute)
	if err := BuildCommands(ctx, dir, "./cmd/demoapi"); err != nil {
		t.Fatal(err)
	}
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	p := StartT(t, Spec{Path: filepath.Join(dir, "demoapi"), Args: []string{"--addr", HostPort(port)}})
	if err := WaitHTTP(ctxT(t, 30*time.Second), "http://"+HostPort(port)+"/healthz"); err != nil {
		t.Fatalf("%v\n%s", err, p.Output())
	}
	if err := p.Stop(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if p.ExitCode() != 0 || !strings.Contains(p.Output(), "reference API stopped") {
		t.Errorf("demoapi %s on SIGTERM, output:\n%s", p.State(), p.Output())
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Errorf("Signal after exit: %v", err)
	}
}

func TestRepoRoot(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if !declares(filepath.Join(root, "go.mod"), ModulePath) {
		t.Errorf("RepoRoot() = %s, whose go.mod does not declare %s", root, ModulePath)
	}
}
