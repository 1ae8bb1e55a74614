package cluster

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
	"syscall"
	"time"
)

// ModulePath is the import path of this repository's root module.
const ModulePath = "github.com/idemhttp/temporal-idempotent-http"

// Names of the binaries [BuildTools] puts in the bin directory.
const (
	ServerBinary  = "temporal-server"
	SQLToolBinary = "temporal-sql-tool"
	CLIBinary     = "temporal"
)

// Tool is one Go tool of the tools module: the binary name it is built as
// and its package path.
type Tool struct {
	Binary  string
	Package string
}

// Tools are the binaries a [Cluster] runs, as pinned by tools/go.mod.
var Tools = []Tool{
	{Binary: ServerBinary, Package: "go.temporal.io/server/cmd/server"},
	{Binary: SQLToolBinary, Package: "go.temporal.io/server/cmd/tools/sql"},
	{Binary: CLIBinary, Package: "github.com/temporalio/cli/cmd/temporal"},
}

// ServerModule is the module that holds the server and its SQL schemas.
const ServerModule = "go.temporal.io/server"

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
			if isRootModule(filepath.Join(dir, "go.mod")) {
				return dir, nil
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
	}
	return "", fmt.Errorf("cluster: cannot find the repository root (a go.mod declaring module %s) above %v", ModulePath, starts)
}

func isRootModule(goMod string) bool {
	f, err := os.Open(goMod)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if rest, ok := strings.CutPrefix(line, "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`) == ModulePath
		}
	}
	return false
}

// DefaultBinDir returns <repo>/bin, where [StartForTest] builds the tools
// (the directory is ignored by git).
func DefaultBinDir() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "bin"), nil
}

// BuildTools builds every binary of [Tools] from the tools module into
// binDir, creating it if needed. It runs `go build`, so a warm Go build cache
// makes it a matter of seconds (nothing is rewritten when a binary is up to
// date); a cold one compiles the Temporal server and CLI (minutes on two
// cores). Concurrent calls (test packages run in parallel) take turns on a
// lock file in binDir: the second finds the binaries up to date rather than
// rewriting one that the first has started. logf, if not nil, gets one line
// per binary.
func BuildTools(ctx context.Context, binDir string, logf func(string, ...any)) error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	toolsDir := filepath.Join(root, "tools")
	if _, err := os.Stat(filepath.Join(toolsDir, "go.mod")); err != nil {
		return fmt.Errorf("cluster: tools module missing: %w", err)
	}
	targets := make([]buildTarget, len(Tools))
	for i, tool := range Tools {
		targets[i] = buildTarget{binary: tool.Binary, pkg: tool.Package}
	}
	return goBuild(ctx, toolsDir, binDir, targets, logf)
}

type buildTarget struct{ binary, pkg string }

func goBuild(ctx context.Context, moduleDir, binDir string, targets []buildTarget, logf func(string, ...any)) error {
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("cluster: the go command is needed to build %s: %w", targets[0].pkg, err)
	}
	unlock, err := lockFile(ctx, filepath.Join(binDir, ".build.lock"))
	if err != nil {
		return err
	}
	defer unlock()
	for _, tg := range targets {
		start := time.Now()
		out := filepath.Join(binDir, tg.binary)
		cmd := exec.CommandContext(ctx, gobin, "build", "-o", out, tg.pkg)
		cmd.Dir = moduleDir
		cmd.Env = append(os.Environ(), "GOWORK=off")
		var buf bytes.Buffer
		cmd.Stdout, cmd.Stderr = &buf, &buf
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("cluster: go build -o %s %s (in %s): %w\n%s", out, tg.pkg, moduleDir, err, buf.Bytes())
		}
		if logf != nil {
			logf("cluster: built %s in %s", out, time.Since(start).Round(10*time.Millisecond))
		}
	}
	return nil
}

// lockFile takes an exclusive flock on path, waiting until ctx is done.
func lockFile(ctx context.Context, path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("cluster: lock %s: %w", path, err)
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
			return nil, fmt.Errorf("cluster: lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("cluster: waiting for the build lock %s: %w", path, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// ModuleDir returns the directory of module (for example [ServerModule]) in
// the module cache, as resolved by the tools module.
func ModuleDir(ctx context.Context, module string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", module)
	cmd.Dir = filepath.Join(root, "tools")
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("cluster: go list -m %s (in tools/): %w\n%s", module, err, stderr.Bytes())
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		// Not in the module cache yet: download it and ask again.
		dl := exec.CommandContext(ctx, "go", "mod", "download", module)
		dl.Dir = cmd.Dir
		dl.Env = cmd.Env
		if b, err := dl.CombinedOutput(); err != nil {
			return "", fmt.Errorf("cluster: go mod download %s: %w\n%s", module, err, b)
		}
		again := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", module)
		again.Dir = cmd.Dir
		again.Env = cmd.Env
		if out, err = again.Output(); err != nil || strings.TrimSpace(string(out)) == "" {
			return "", fmt.Errorf("cluster: module %s not in the module cache after go mod download (%v)", module, err)
		}
		dir = strings.TrimSpace(string(out))
	}
	return dir, nil
}

// SchemaDirs returns the versioned PostgreSQL (v12 plugin) schema
// directories of the Temporal server module: the main store's and the
// visibility store's.
func SchemaDirs(ctx context.Context) (temporal, visibility string, err error) {
	dir, err := ModuleDir(ctx, ServerModule)
	if err != nil {
		return "", "", err
	}
	base := filepath.Join(dir, "schema", "postgresql", "v12")
	temporal = filepath.Join(base, "temporal", "versioned")
	visibility = filepath.Join(base, "visibility", "versioned")
	for _, d := range []string{temporal, visibility} {
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
			return "", "", errors.Join(fmt.Errorf("cluster: schema directory %s missing", d), err)
		}
	}
	return temporal, visibility, nil
}
