package itest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ModulePath is the import path of this repository's root module.
const ModulePath = "github.com/idemhttp/temporal-idempotent-http"

// CLIPackage is the Temporal CLI's main package, pinned by tools/go.mod.
const CLIPackage = "github.com/temporalio/cli/cmd/temporal"

// Binaries are the programs [Build] puts in Dir.
type Binaries struct {
	// Dir is the directory holding them all.
	Dir string
	// Temporal is the Temporal CLI (for `temporal server start-dev`).
	Temporal string
	// Worker is ./worker, DemoAPI ./cmd/demoapi and Starter ./cmd/starter.
	Worker, DemoAPI, Starter string
}

// RepoRoot returns the directory of this repository's root module: the first
// directory, going up from the working directory (and, failing that, from
// this source file), whose go.mod declares [ModulePath].
func RepoRoot() (string, error) {
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		starts = append(starts, filepath.Dir(file))
	}
	for _, dir := range starts {
		for {
			if declares(filepath.Join(dir, "go.mod"), ModulePath) {
				return dir, nil
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
	}
	return "", fmt.Errorf("itest: no go.mod declaring module %s above %v", ModulePath, starts)
}

func declares(goMod, module string) bool {
	f, err := os.Open(goMod)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`) == module
		}
	}
	return false
}

// GoCommand returns the go command on PATH (`go test` puts its own
// toolchain's first).
func GoCommand() (string, error) {
	p, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("itest: the go command is needed to build the binaries under test: %w", err)
	}
	return p, nil
}

// GoBuild runs `go build args...` in dir (GOWORK=off, so a go.work above the
// repository changes nothing) and returns its output in the error.
func GoBuild(ctx context.Context, dir string, args ...string) error {
	gocmd, err := GoCommand()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, gocmd, append([]string{"build"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("itest: go build %s (in %s): %w\n%s", strings.Join(args, " "), dir, err, out.Bytes())
	}
	return nil
}

// ToolsDir returns the directory of the tools module (<repo>/tools), whose
// go.mod pins the Temporal CLI and server.
func ToolsDir() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	tools := filepath.Join(root, "tools")
	if _, err := os.Stat(filepath.Join(tools, "go.mod")); err != nil {
		return "", fmt.Errorf("itest: the tools module (tools/go.mod), which pins the Temporal CLI, is missing: %w", err)
	}
	return tools, nil
}

// Tool is a main package of the tools module and the file name it is built
// as.
type Tool struct {
	Binary  string
	Package string
}

// BuildTools builds tools from the tools module into binDir (created if
// needed), one after another. `go build` leaves an up-to-date binary alone,
// so a warm Go build cache makes it a matter of seconds; a cold one compiles
// the Temporal server and CLI (minutes on two cores). It holds binDir's
// build lock ([LockBuildDir]) throughout. logf, if not nil, gets one line per
// binary.
func BuildTools(ctx context.Context, binDir string, tools []Tool, logf func(format string, args ...any)) error {
	unlock, err := LockBuildDir(ctx, binDir)
	if err != nil {
		return err
	}
	defer unlock()
	return buildTools(ctx, binDir, tools, logf)
}

// buildTools is [BuildTools] without the lock.
func buildTools(ctx context.Context, binDir string, tools []Tool, logf func(format string, args ...any)) error {
	toolsDir, err := ToolsDir()
	if err != nil {
		return err
	}
	for _, tool := range tools {
		start := time.Now()
		out := filepath.Join(binDir, tool.Binary)
		if err := GoBuild(ctx, toolsDir, "-o", out, tool.Package); err != nil {
			return err
		}
		if logf != nil {
			logf("itest: built %s in %s", out, time.Since(start).Round(10*time.Millisecond))
		}
	}
	return nil
}

// BuildCLI builds the Temporal CLI pinned by tools/go.mod to out (an absolute
// path), holding the build lock of out's directory. A cold Go build cache
// compiles the CLI and the Temporal server it embeds, which takes minutes; a
// warm one only links (seconds), and an up-to-date out is left alone.
func BuildCLI(ctx context.Context, out string) error {
	return BuildTools(ctx, filepath.Dir(out), []Tool{{Binary: filepath.Base(out), Package: CLIPackage}}, nil)
}

// BuildCommands builds packages of this module (such as "./worker") into
// dir, one binary per package named after its directory, holding dir's
// build lock.
func BuildCommands(ctx context.Context, dir string, pkgs ...string) error {
	unlock, err := LockBuildDir(ctx, dir)
	if err != nil {
		return err
	}
	defer unlock()
	return buildCommands(ctx, dir, pkgs...)
}

// buildCommands is [BuildCommands] without the lock.
func buildCommands(ctx context.Context, dir string, pkgs ...string) error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	return GoBuild(ctx, root, append([]string{"-o", dir + string(filepath.Separator)}, pkgs...)...)
}

// LockBuildDir creates dir if needed and takes its build lock, an exclusive
// flock on dir/.build.lock, waiting until ctx is done. Test binaries of
// different packages run in parallel and may build into the same directory
// (<repo>/bin): taking turns, the second finds the binaries up to date
// rather than rewriting one that the first has started. Call unlock when
// done.
func LockBuildDir(ctx context.Context, dir string) (unlock func(), err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("itest: %w", err)
	}
	return lockFile(ctx, filepath.Join(dir, ".build.lock"))
}

// lockFile takes an exclusive flock on path, waiting until ctx is done.
func lockFile(ctx context.Context, path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("itest: lock %s: %w", path, err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				f.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("itest: lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("itest: waiting for the build lock %s: %w", path, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Build builds the Temporal CLI, the worker, demoapi and the starter into dir
// (created if needed), the CLI and the commands concurrently, holding dir's
// build lock ([LockBuildDir]). logf, if not nil, gets how long each took.
func Build(ctx context.Context, dir string, logf func(format string, args ...any)) (Binaries, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return Binaries{}, err
	}
	unlock, err := LockBuildDir(ctx, dir)
	if err != nil {
		return Binaries{}, err
	}
	defer unlock()
	b := Binaries{
		Dir:      dir,
		Temporal: filepath.Join(dir, "temporal"),
		Worker:   filepath.Join(dir, "worker"),
		DemoAPI:  filepath.Join(dir, "demoapi"),
		Starter:  filepath.Join(dir, "starter"),
	}
	if logf == nil {
		logf = func(string, ...any) {}
	}
	var (
		wg         sync.WaitGroup
		cliErr     error
		commandErr error
	)
	wg.Go(func() {
		start := time.Now()
		if cliErr = buildTools(ctx, dir, []Tool{{Binary: "temporal", Package: CLIPackage}}, nil); cliErr == nil {
			logf("itest: built the Temporal CLI (%s) in %s", b.Temporal, time.Since(start).Round(100*time.Millisecond))
		}
	})
	wg.Go(func() {
		start := time.Now()
		if commandErr = buildCommands(ctx, dir, "./worker", "./cmd/demoapi", "./cmd/starter"); commandErr == nil {
			logf("itest: built worker, demoapi and starter in %s", time.Since(start).Round(100*time.Millisecond))
		}
	})
	wg.Wait()
	if err := errors.Join(cliErr, commandErr); err != nil {
		return Binaries{}, err
	}
	return b, nil
}
