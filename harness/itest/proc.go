package itest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// VerboseEnv, when set to a non-empty value, makes [StartT] stream every
// process's output to stderr as it comes, each line prefixed with the
// process's name. Without it the output is written to the test log only when
// the test fails.
const VerboseEnv = "ITEST_VERBOSE"

// maxOutput bounds the output a Process keeps; beyond it the oldest half goes.
const maxOutput = 32 << 20

// Spec describes a process for [Start].
type Spec struct {
	// Name labels the process in errors and logs (default: the base name of Path).
	Name string
	// Path is the program; Args its arguments (without argv[0]).
	Path string
	Args []string
	// Dir is the working directory (default: the test's, i.e. the package directory).
	Dir string
	// Env is added to this process's environment; for a duplicated key the
	// last entry wins, so Env overrides what the test process has.
	Env []string
	// ReplaceEnv makes Env the program's whole environment instead: nothing
	// of the test process's is passed on (but a nil Env, as for exec.Cmd,
	// means the test process's environment).
	ReplaceEnv bool
	// Credential, if not nil, runs the program as another user (needs root).
	Credential *syscall.Credential
	// Output, if not nil, also receives the process's stdout and stderr.
	Output io.Writer
	// LogPath, if set, is a file (created if needed) that the process's
	// stdout and stderr are also appended to; see [FileTail].
	LogPath string
	// StopSignal is what [Process.Stop] sends first (default SIGTERM).
	StopSignal syscall.Signal
}

// Process is a running program started by [Start], in a process group of
// its own, with stdout and stderr captured together. It is killed by the
// kernel if the test binary dies first (parent-death signal), so an aborted
// test run leaves nothing behind.
type Process struct {
	// Name labels the process.
	Name string

	cmd     *exec.Cmd
	out     *output
	stopSig syscall.Signal
	done    chan struct{}
	err     error // set before done is closed
}

// Start starts spec's program in a new process group.
func Start(spec Spec) (*Process, error) {
	if spec.Name == "" {
		spec.Name = filepath.Base(spec.Path)
	}
	p := &Process{Name: spec.Name, out: newOutput(), stopSig: spec.StopSignal, done: make(chan struct{})}
	if p.stopSig == 0 {
		p.stopSig = syscall.SIGTERM
	}
	var logFile *os.File
	if spec.LogPath != "" {
		f, err := os.OpenFile(spec.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, fmt.Errorf("itest: %s log: %w", spec.Name, err)
		}
		logFile = f
	}
	closeLog := func() {
		if logFile != nil {
			logFile.Close()
		}
	}
	ws := []io.Writer{p.out}
	if logFile != nil {
		ws = append(ws, logFile)
	}
	if spec.Output != nil {
		ws = append(ws, spec.Output)
	}
	w := io.MultiWriter(ws...)
	// The output goes through a pipe of our own rather than exec's copying,
	// so that Wait returns when the program exits even if a child it left
	// behind still holds the pipe; that child's output is still captured.
	pr, pw, err := os.Pipe()
	if err != nil {
		closeLog()
		return nil, fmt.Errorf("itest: starting %s: %w", spec.Name, err)
	}
	cmd := exec.Command(spec.Path, spec.Args...)
	cmd.Dir = spec.Dir
	cmd.Env = append(os.Environ(), spec.Env...)
	if spec.ReplaceEnv {
		cmd.Env = spec.Env
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	cmd.SysProcAttr = sysProcAttr(spec.Credential)
	err = cmd.Start()
	pw.Close()
	if err != nil {
		pr.Close()
		closeLog()
		return nil, fmt.Errorf("itest: starting %s (%s): %w", spec.Name, spec.Path, err)
	}
	p.cmd = cmd
	copied := make(chan struct{})
	go func() {
		_, _ = io.Copy(w, pr)
		pr.Close()
		closeLog()
		close(copied)
	}()
	go func() {
		err := cmd.Wait()
		select {
		case <-copied: // the usual case: the output ended with the program
		case <-time.After(time.Second):
		}
		p.err = err
		close(p.done)
	}()
	return p, nil
}

// StartT starts spec's program for the test: it fails tb if the program
// cannot start, and when tb ends stops it (SIGTERM, then SIGKILL after 10 s)
// and, if tb failed, writes the end of its output to the test log.
func StartT(tb testing.TB, spec Spec) *Process {
	tb.Helper()
	if spec.Name == "" {
		spec.Name = filepath.Base(spec.Path)
	}
	if os.Getenv(VerboseEnv) != "" {
		pw := &prefixWriter{prefix: "[" + spec.Name + "] ", w: os.Stderr}
		if spec.Output != nil {
			spec.Output = io.MultiWriter(spec.Output, pw)
		} else {
			spec.Output = pw
		}
	}
	p, err := Start(spec)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := p.Stop(10 * time.Second); err != nil {
			tb.Error(err)
		}
		if tb.Failed() {
			tb.Logf("%s (pid %d) %s; its output (end):\n%s", p.Name, p.Pid(), p.State(), p.Tail(64<<10))
		}
	})
	return p
}

// Pid returns the process id, which is also its process group id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Done is closed once the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Err returns how the process ended (nil for exit status 0, an
// *exec.ExitError otherwise), or nil while it runs.
func (p *Process) Err() error {
	if !p.Exited() {
		return nil
	}
	return p.err
}

// ExitCode returns the exit status, or -1 while running or when a signal
// ended the process.
func (p *Process) ExitCode() int {
	if !p.Exited() {
		return -1
	}
	return p.cmd.ProcessState.ExitCode()
}

// State describes the process for messages: "running", "exited with status
// 1", "killed by signal: killed".
func (p *Process) State() string {
	if !p.Exited() {
		return "running"
	}
	if p.err == nil {
		return "exited with status 0"
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) && ee.ExitCode() >= 0 {
		return fmt.Sprintf("exited with status %d", ee.ExitCode())
	}
	return p.err.Error()
}

// Wait waits for the process to exit and returns [Process.Err], or ctx's
// error if ctx ends first.
func (p *Process) Wait(ctx context.Context) error {
	select {
	case <-p.done:
		return p.err
	case <-ctx.Done():
		return fmt.Errorf("itest: waiting for %s to exit: %w", p.Name, ctx.Err())
	}
}

// Signal sends sig to the process's whole group. It does nothing once the
// process has exited.
func (p *Process) Signal(sig syscall.Signal) error {
	if p.Exited() {
		return nil
	}
	err := syscall.Kill(-p.Pid(), sig)
	if errors.Is(err, syscall.ESRCH) {
		return nil // already gone
	}
	if err != nil {
		return fmt.Errorf("itest: signal %v to %s: %w", sig, p.Name, err)
	}
	return nil
}

// Kill kills the process group with SIGKILL, as a crash or the OOM killer
// would (nothing gets to clean up), and waits for the process to exit.
func (p *Process) Kill() error {
	if p.Exited() {
		p.killLeftovers()
		return nil
	}
	if err := p.Signal(syscall.SIGKILL); err != nil {
		return err
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("itest: %s (pid %d) still running 10 s after SIGKILL", p.Name, p.Pid())
	}
}

// Stop sends the stop signal (SIGTERM unless Spec.StopSignal says otherwise)
// to the process group, waits up to grace for the process to exit, then
// kills the group. It returns nil once the process is gone, whatever its
// exit status (see [Process.Err]); anything of its group still alive is
// killed too.
func (p *Process) Stop(grace time.Duration) error {
	defer p.killLeftovers()
	if p.Exited() {
		return nil
	}
	if err := p.Signal(p.stopSig); err != nil {
		return err
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
		return p.Kill()
	}
}

// killLeftovers kills what is left of the group once its leader has exited
// (a script's children, say). The group's id cannot have been reused while
// such a member lives, so only then is the group signalled.
func (p *Process) killLeftovers() {
	if groupHasOthers(p.Pid()) {
		_ = syscall.Kill(-p.Pid(), syscall.SIGKILL)
	}
}

// Output returns everything the process wrote so far (the last 32 MiB of it).
func (p *Process) Output() string { return p.out.String() }

// Tail returns the last n bytes of the output, starting at a line.
func (p *Process) Tail(n int) string {
	s := p.out.String()
	if len(s) > n {
		s = s[len(s)-n:]
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			s = s[i+1:]
		}
	}
	return strings.TrimRight(s, "\n")
}

// FileTail returns the last n bytes of the file at path, starting at a line,
// for error messages and test logs (such as a [Spec.LogPath]); if the file
// cannot be read, it says so instead.
func FileTail(path string, n int64) string {
	b, err := readTail(path, n)
	if pe := (*fs.PathError)(nil); errors.As(err, &pe) && pe.Op == "seek" {
		return fmt.Sprintf("(log unreadable: %v)", err)
	}
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	if i := bytes.IndexByte(b, '\n'); i >= 0 && int64(len(b)) == n {
		b = b[i+1:] // drop the partial first line
	}
	return strings.TrimRight(string(b), "\n")
}

// readTail returns the last n bytes of the file at path (all of it if
// shorter).
func readTail(path string, n int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > n {
		if _, err := f.Seek(-n, io.SeekEnd); err != nil {
			return nil, err
		}
	}
	b, _ := io.ReadAll(f)
	return b, nil
}

// WaitOutput waits until the output contains substr. It fails if the
// process exits first or ctx ends, with the end of the output in the error.
func (p *Process) WaitOutput(ctx context.Context, substr string) error {
	for {
		changed := p.out.changed()
		if strings.Contains(p.out.String(), substr) {
			return nil
		}
		select {
		case <-changed:
		case <-p.done:
			// The output has been read to its end (or for a second more): one last look.
			if strings.Contains(p.out.String(), substr) {
				return nil
			}
			return fmt.Errorf("itest: %s %s before writing %q; output (end):\n%s", p.Name, p.State(), substr, p.Tail(8<<10))
		case <-ctx.Done():
			return fmt.Errorf("itest: %s did not write %q: %w; output (end):\n%s", p.Name, substr, ctx.Err(), p.Tail(8<<10))
		}
	}
}

// output collects a process's output and signals each write.
type output struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	notify chan struct{}
}

func newOutput() *output { return &output{notify: make(chan struct{})} }

func (o *output) Write(b []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.buf.Write(b)
	if o.buf.Len() > maxOutput {
		keep := o.buf.Bytes()[o.buf.Len()-maxOutput/2:]
		o.buf = *bytes.NewBuffer(append([]byte(nil), keep...))
	}
	close(o.notify)
	o.notify = make(chan struct{})
	return len(b), nil
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// changed returns a channel closed by the next write.
func (o *output) changed() <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.notify
}

// prefixWriter writes complete lines to w, each starting with prefix.
type prefixWriter struct {
	mu      sync.Mutex
	prefix  string
	w       io.Writer
	partial []byte
}

func (pw *prefixWriter) Write(b []byte) (int, error) {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	pw.partial = append(pw.partial, b...)
	var lines bytes.Buffer
	for {
		i := bytes.IndexByte(pw.partial, '\n')
		if i < 0 {
			break
		}
		lines.WriteString(pw.prefix)
		lines.Write(pw.partial[:i+1])
		pw.partial = pw.partial[i+1:]
	}
	if lines.Len() > 0 {
		if _, err := pw.w.Write(lines.Bytes()); err != nil {
			return 0, err
		}
	}
	return len(b), nil
}
