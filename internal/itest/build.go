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

// goBuild runs `go build args...` in dir (GOWORK=off, so a go.work above the
// repository changes nothing) and returns its output in the error.
func goBuild(ctx context.Context, dir string, args ...string) error {
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

// BuildCLI builds the Temporal CLI pinned by tools/go.mod to out (an absolute
// path). A cold Go build cache compiles the CLI and the Temporal server it
// embeds, which takes minutes; a warm one only links (seconds), and an
// up-to-date out is left alone.
func BuildCLI(ctx context.Context, out string) error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	tools := filepath.Join(root, "tools")
	if _, err := os.Stat(filepath.Join(tools, "go.mod")); err != nil {
		return fmt.Errorf("itest: the tools module (tools/go.mod), which pins the Temporal CLI, is missing: %w", err)
	}
	return goBuild(ctx, tools, "-o", out, CLIPackage)
}

// BuildCommands builds packages of this module (such as "./worker") into
// dir, one binary per package named after its directory.
func BuildCommands(ctx context.Context, dir string, pkgs ...string) error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	return goBuild(ctx, root, append([]string{"-o", dir + string(filepath.Separator)}, pkgs...)...)
}

// Build builds the Temporal CLI, the worker, demoapi and the starter into dir
// (created if needed), the CLI and the commands concurrently. logf, if not
// nil, gets how long each took.
func Build(ctx context.Context, dir string, logf func(format string, args ...any)) (Binaries, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return Binaries{}, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Binaries{}, fmt.Errorf("itest: %w", err)
	}
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
		if cliErr = BuildCLI(ctx, b.Temporal); cliErr == nil {
			logf("itest: built the Temporal CLI (%s) in %s", b.Temporal, time.Since(start).Round(100*time.Millisecond))
		}
	})
	wg.Go(func() {
		start := time.Now()
		if commandErr = BuildCommands(ctx, dir, "./worker", "./cmd/demoapi", "./cmd/starter"); commandErr == nil {
			logf("itest: built worker, demoapi and starter in %s", time.Since(start).Round(100*time.Millisecond))
		}
	})
	wg.Wait()
	if err := errors.Join(cliErr, commandErr); err != nil {
		return Binaries{}, err
	}
	return b, nil
}
