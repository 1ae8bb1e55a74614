package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// Process is a child process started in its own process group, with its
// output going to a log file. It is killed, with its whole group, by Stop and
// by the kernel if the test process dies first (parent-death signal).
type Process struct {
	// Name labels the process in errors and logs.
	Name string
	// LogPath is the file that receives its stdout and stderr.
	LogPath string

	cmd     *exec.Cmd
	stopSig syscall.Signal
	done    chan struct{}
	err     error // set before done is closed
}

// ProcessSpec describes a process for [StartProcess].
type ProcessSpec struct {
	// Name labels the process in errors and logs.
	Name string
	// Path and Args are the program and its arguments (without argv[0]).
	Path string
	Args []string
	// Dir is the working directory.
	Dir string
	// Env is the environment; nil means this process's environment.
	Env []string
	// LogPath receives stdout and stderr (appended).
	LogPath string
	// Credential, if not nil, runs the process as another user (needs root).
	Credential *syscall.Credential
	// StopSignal is sent to the process group by Stop before SIGKILL
	// (default SIGTERM).
	StopSignal syscall.Signal
}

// StartProcess starts spec's program in a new process group.
func StartProcess(spec ProcessSpec) (*Process, error) {
	logf, err := os.OpenFile(spec.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("cluster: %s log: %w", spec.Name, err)
	}
	cmd := exec.Command(spec.Path, spec.Args...)
	cmd.Dir = spec.Dir
	cmd.Env = spec.Env
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid:    true,
		Pdeathsig:  syscall.SIGKILL,
		Credential: spec.Credential,
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("cluster: start %s (%s): %w", spec.Name, spec.Path, err)
	}
	p := &Process{Name: spec.Name, LogPath: spec.LogPath, cmd: cmd, stopSig: spec.StopSignal, done: make(chan struct{})}
	if p.stopSig == 0 {
		p.stopSig = syscall.SIGTERM
	}
	go func() {
		p.err = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	return p, nil
}

// Pid returns the process id (also its process group id).
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Exited reports whether the process has exited, and its Wait error then.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Kill sends sig to the whole process group.
func (p *Process) Kill(sig syscall.Signal) error {
	if exited, _ := p.Exited(); exited {
		return nil
	}
	err := syscall.Kill(-p.cmd.Process.Pid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

// Stop asks the process group to stop with its stop signal, waits up to
// grace for the process to exit, then kills the group with SIGKILL. It
// returns nil when the process is gone, whatever its exit status.
func (p *Process) Stop(grace time.Duration) error {
	if exited, _ := p.Exited(); exited {
		// The leader is gone; make sure nothing of its group lingers.
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		return nil
	}
	if err := syscall.Kill(-p.cmd.Process.Pid, p.stopSig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("cluster: stop %s: %w", p.Name, err)
	}
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			return fmt.Errorf("cluster: %s (pid %d) did not exit after SIGKILL", p.Name, p.Pid())
		}
	}
	// Children that outlived their leader (postgres backends, say).
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	return nil
}

// LogTail returns the last n bytes of the process's log, for error messages.
func (p *Process) LogTail(n int64) string { return fileTail(p.LogPath, n) }

func fileTail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > n {
		if _, err := f.Seek(-n, io.SeekEnd); err != nil {
			return fmt.Sprintf("(log unreadable: %v)", err)
		}
	}
	b, _ := io.ReadAll(f)
	if i := bytes.IndexByte(b, '\n'); i >= 0 && int64(len(b)) == n {
		b = b[i+1:] // drop the partial first line
	}
	return strings.TrimRight(string(b), "\n")
}

// runLogged runs a short-lived command to completion, appending its output
// to logPath and returning it in the error when it fails.
func runLogged(spec ProcessSpec, timeout time.Duration) error {
	p, err := StartProcess(spec)
	if err != nil {
		return err
	}
	select {
	case <-p.done:
	case <-time.After(timeout):
		_ = p.Stop(2 * time.Second)
		return fmt.Errorf("cluster: %s timed out after %s; log %s:\n%s", spec.Name, timeout, spec.LogPath, p.LogTail(4096))
	}
	if p.err != nil {
		return fmt.Errorf("cluster: %s %s: %w; log %s:\n%s", spec.Path, strings.Join(spec.Args, " "), p.err, spec.LogPath, p.LogTail(4096))
	}
	return nil
}
