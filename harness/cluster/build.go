package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/idemhttp/temporal-idempotent-http/harness/itest"
)

// Names of the binaries [BuildTools] puts in the bin directory.
const (
	ServerBinary  = "temporal-server"
	SQLToolBinary = "temporal-sql-tool"
	CLIBinary     = "temporal"
)

// Tool is one Go tool of the tools module: the binary name it is built as
// and its package path.
type Tool = itest.Tool

// Tools are the binaries a [Cluster] runs, as pinned by tools/go.mod.
var Tools = []Tool{
	{Binary: ServerBinary, Package: "go.temporal.io/server/cmd/server"},
	{Binary: SQLToolBinary, Package: "go.temporal.io/server/cmd/tools/sql"},
	{Binary: CLIBinary, Package: itest.CLIPackage},
}

// ServerModule is the module that holds the server and its SQL schemas.
const ServerModule = "go.temporal.io/server"

// DefaultBinDir returns <repo>/bin, where [StartForTest] builds the tools
// (the directory is ignored by git).
func DefaultBinDir() (string, error) {
	root, err := itest.RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "bin"), nil
}

// BuildTools builds every binary of [Tools] from the tools module into
// binDir, creating it if needed, with [itest.BuildTools]: `go build`, so a
// warm Go build cache makes it a matter of seconds (nothing is rewritten
// when a binary is up to date); a cold one compiles the Temporal server and
// CLI (minutes on two cores). Concurrent calls (test packages run in
// parallel) take turns on binDir's build lock ([itest.LockBuildDir]): the
// second finds the binaries up to date rather than rewriting one that the
// first has started. logf, if not nil, gets one line per binary.
func BuildTools(ctx context.Context, binDir string, logf func(string, ...any)) error {
	return itest.BuildTools(ctx, binDir, Tools, logf)
}

// ModuleDir returns the directory of module (for example [ServerModule]) in
// the module cache, as resolved by the tools module.
func ModuleDir(ctx context.Context, module string) (string, error) {
	root, err := itest.RepoRoot()
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
