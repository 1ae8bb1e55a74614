package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/harness/itest"
)

// Options configures [Start]. The zero value of each field has a default.
type Options struct {
	// BinDir holds temporal-server, temporal-sql-tool and temporal, as
	// built by [BuildTools]. Default: [DefaultBinDir].
	BinDir string
	// WorkDir receives the server's configuration, the logs and the CLI's
	// home. Default: a new temporary directory, removed by Stop. A given
	// WorkDir is left in place (the test's t.TempDir(), say). PostgreSQL's
	// data directory is always a temporary directory of its own.
	WorkDir string
	// Logf, if not nil, gets progress lines (t.Logf, say).
	Logf func(format string, args ...any)
	// Namespace is created and waited for (default "default").
	Namespace string
	// NumHistoryShards is the number of history shards (default 4).
	NumHistoryShards int
	// ServerLogLevel is the server's log level (default "info"); its log
	// is the file [Cluster.ServerLogPath].
	ServerLogLevel string
	// DynamicConfig is YAML added to the server's dynamic configuration,
	// e.g. [OnePartitionPerQueue].
	DynamicConfig string
}

// Cluster is a running Temporal service on PostgreSQL, started by [Start].
// Its methods are safe for concurrent use.
type Cluster struct {
	opts       Options
	workDir    string
	ownWorkDir bool
	pg         *Postgres
	server     *itest.Process
	serverSpec itest.Spec // how server was started: RestartServer starts it again
	serverMu   sync.Mutex // guards server across RestartServer
	frontend   string
	httpAddr   string

	stopOnce sync.Once
	stopErr  error
}

// Start brings up PostgreSQL (installing it with scripts/install-postgres.sh
// when missing), creates the temporal and temporal_visibility databases and
// their schemas with temporal-sql-tool, starts temporal-server with all four
// services, creates the namespace and returns once a client can use it.
// The binaries must already be in opts.BinDir (see [BuildTools]). On error,
// everything started so far is stopped again. ctx bounds the start-up only.
func Start(ctx context.Context, opts Options) (_ *Cluster, err error) {
	if opts.BinDir == "" {
		if opts.BinDir, err = DefaultBinDir(); err != nil {
			return nil, err
		}
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	if opts.Namespace == "" {
		opts.Namespace = "default"
	}
	if opts.NumHistoryShards <= 0 {
		opts.NumHistoryShards = 4
	}
	if opts.ServerLogLevel == "" {
		opts.ServerLogLevel = "info"
	}
	for _, tool := range Tools {
		p := filepath.Join(opts.BinDir, tool.Binary)
		if fi, err := os.Stat(p); err != nil || fi.Mode()&0o111 == 0 {
			return nil, fmt.Errorf("cluster: %s is missing or not executable: build the tools first with cluster.BuildTools (or: cd tools && go build -o %s %s)", p, p, tool.Package)
		}
	}
	begin := time.Now()
	c := &Cluster{opts: opts, workDir: opts.WorkDir}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.Stop())
		}
	}()
	if c.workDir == "" {
		if c.workDir, err = os.MkdirTemp("", "idemhttp-temporal-"); err != nil {
			return nil, fmt.Errorf("cluster: %w", err)
		}
		c.ownWorkDir = true
	}
	for _, d := range []string{"config", "logs", "home"} {
		if err := os.MkdirAll(filepath.Join(c.workDir, d), 0o755); err != nil {
			return nil, fmt.Errorf("cluster: %w", err)
		}
	}

	pgBin, err := EnsurePostgres(ctx, opts.Logf)
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(10)
	if err != nil {
		return nil, err
	}
	if c.pg, err = StartPostgres(ctx, pgBin, ports[0], opts.Logf); err != nil {
		return nil, err
	}
	if err := c.setupSchemas(ctx); err != nil {
		return nil, err
	}

	cfg := serverConfig{
		Postgres:          c.pg.HostPort(),
		User:              PostgresUser,
		Password:          PostgresPassword,
		NumHistoryShards:  opts.NumHistoryShards,
		LogLevel:          opts.ServerLogLevel,
		DynamicConfigPath: filepath.Join(c.workDir, "config", "dynamicconfig.yaml"),
		Frontend:          servicePorts{ports[1], ports[2]},
		History:           servicePorts{ports[3], ports[4]},
		Matching:          servicePorts{ports[5], ports[6]},
		Worker:            servicePorts{ports[7], ports[8]},
		FrontendHTTPPort:  ports[9],
	}
	c.frontend = itest.HostPort(cfg.Frontend.GRPC)
	c.httpAddr = itest.HostPort(cfg.FrontendHTTPPort)
	yml, err := renderServerConfig(cfg)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(c.workDir, "config", "development.yaml"), yml, 0o644); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	if err := os.WriteFile(cfg.DynamicConfigPath, []byte(dynamicConfig+c.opts.DynamicConfig), 0o644); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}

	serverStart := time.Now()
	c.serverSpec = itest.Spec{
		Name: "temporal-server",
		Path: filepath.Join(opts.BinDir, ServerBinary),
		Args: []string{
			"--root", c.workDir, "--config", "config", "--env", "development", "--allow-no-auth",
			"start",
		},
		Dir:        c.workDir,
		Env:        cleanEnv(filepath.Join(c.workDir, "home")),
		ReplaceEnv: true,
		LogPath:    c.ServerLogPath(),
	}
	c.server, err = itest.Start(c.serverSpec)
	if err != nil {
		return nil, err
	}
	if err := c.waitHealthy(ctx); err != nil {
		return nil, err
	}
	opts.Logf("cluster: temporal-server healthy on %s in %s", c.frontend, time.Since(serverStart).Round(time.Millisecond))
	if err := c.createNamespace(ctx); err != nil {
		return nil, err
	}
	opts.Logf("cluster: namespace %q ready; cluster up in %s (work dir %s)", opts.Namespace, time.Since(begin).Round(time.Millisecond), c.workDir)
	return c, nil
}

// FrontendHostPort returns the frontend's gRPC address (127.0.0.1:port),
// for client.Options.HostPort or a worker's --address.
func (c *Cluster) FrontendHostPort() string { return c.frontend }

// FrontendHTTPHostPort returns the frontend's HTTP API address.
func (c *Cluster) FrontendHTTPHostPort() string { return c.httpAddr }

// Namespace returns the namespace that Start created.
func (c *Cluster) Namespace() string { return c.opts.Namespace }

// PostgresHostPort returns the PostgreSQL address (127.0.0.1:port); the
// user and password are [PostgresUser] and [PostgresPassword].
func (c *Cluster) PostgresHostPort() string { return c.pg.HostPort() }

// ServerPID returns the process ID of the temporal-server running now
// (the one [Cluster.RestartServer] started last), for reading its CPU
// time and memory from /proc.
func (c *Cluster) ServerPID() int {
	c.serverMu.Lock()
	defer c.serverMu.Unlock()
	return c.server.Pid()
}

// PostgresPID returns the process ID of PostgreSQL's postmaster; its
// backends are its children.
func (c *Cluster) PostgresPID() int { return c.pg.proc.Pid() }

// WorkDir returns the directory with the server's config and logs.
func (c *Cluster) WorkDir() string { return c.workDir }

// ServerLogPath returns the temporal-server log file.
func (c *Cluster) ServerLogPath() string {
	return filepath.Join(c.workDir, "logs", "temporal-server.log")
}

// PostgresLogPath returns the PostgreSQL log file.
func (c *Cluster) PostgresLogPath() string { return c.pg.LogPath() }

// CLI runs the temporal CLI against the cluster (--address is added) and
// returns its standard output; the error carries its standard error.
func (c *Cluster) CLI(ctx context.Context, args ...string) ([]byte, error) {
	args = append(args, "--address", c.frontend)
	cmd := exec.CommandContext(ctx, filepath.Join(c.opts.BinDir, CLIBinary), args...)
	cmd.Dir = c.workDir
	cmd.Env = cleanEnv(filepath.Join(c.workDir, "home"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("temporal %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return out, nil
}

// ClientEnv returns the environment for a process that connects to the
// cluster the way this repository's commands do (Temporal's envconfig):
// this process's environment without TEMPORAL_* variables, HOME in the work
// directory (so no user's profile is read), TEMPORAL_ADDRESS and
// TEMPORAL_NAMESPACE set to the cluster's, then extra ("NAME=value").
func (c *Cluster) ClientEnv(extra ...string) []string {
	env := cleanEnv(filepath.Join(c.workDir, "home"))
	env = append(env, "TEMPORAL_ADDRESS="+c.frontend, "TEMPORAL_NAMESPACE="+c.opts.Namespace)
	return append(env, extra...)
}

// Stop stops temporal-server and PostgreSQL (each with its whole process
// group: a polite signal, then SIGKILL) and removes the temporary
// directories that Start created. It is safe to call more than once.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() {
		var errs []error
		if p := c.serverProcess(); p != nil {
			errs = append(errs, p.Stop(20*time.Second))
		}
		if c.pg != nil {
			errs = append(errs, c.pg.Stop())
		}
		if c.ownWorkDir {
			errs = append(errs, os.RemoveAll(c.workDir))
		}
		c.stopErr = errors.Join(errs...)
	})
	return c.stopErr
}

// setupSchemas creates both databases and brings their schemas to the
// server module's latest version, as the admin-tools image's setup does.
func (c *Cluster) setupSchemas(ctx context.Context) error {
	start := time.Now()
	mainDir, visDir, err := SchemaDirs(ctx)
	if err != nil {
		return err
	}
	tool := filepath.Join(c.opts.BinDir, SQLToolBinary)
	base := []string{
		"--plugin", "postgres12", "--ep", "127.0.0.1", "--port", strconv.Itoa(c.pg.Port),
		"--user", PostgresUser, "--password", PostgresPassword,
	}
	for _, db := range []struct{ name, dir string }{{"temporal", mainDir}, {"temporal_visibility", visDir}} {
		for _, sub := range [][]string{
			{"create-database"},
			{"setup-schema", "-v", "0.0"},
			{"update-schema", "-d", db.dir},
		} {
			args := append(append(append([]string{}, base...), "--db", db.name), sub...)
			err := runLogged(itest.Spec{
				Name: "temporal-sql-tool " + sub[0] + " " + db.name, Path: tool, Args: args,
				Dir: c.workDir, Env: cleanEnv(filepath.Join(c.workDir, "home")), ReplaceEnv: true,
				LogPath: filepath.Join(c.workDir, "logs", "sql-tool.log"),
			}, 2*time.Minute)
			if err != nil {
				return err
			}
		}
	}
	c.opts.Logf("cluster: schemas temporal and temporal_visibility set up in %s", time.Since(start).Round(time.Millisecond))
	return nil
}

// waitHealthy polls the frontend's health check until it answers SERVING.
func (c *Cluster) waitHealthy(ctx context.Context) error {
	var last error
	for {
		if c.serverProcess().Exited() {
			return fmt.Errorf("cluster: temporal-server exited during startup (%v); log %s:\n%s", c.serverProcess().Err(), c.ServerLogPath(), itest.FileTail(c.ServerLogPath(), 8192))
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		out, err := c.CLI(cctx, "operator", "cluster", "health")
		cancel()
		if err == nil && bytes.Contains(out, []byte("SERVING")) {
			return nil
		}
		last = errors.Join(err, fmt.Errorf("health: %s", bytes.TrimSpace(out)))
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster: temporal-server not healthy on %s: %w (last: %v); log %s:\n%s", c.frontend, ctx.Err(), last, c.ServerLogPath(), itest.FileTail(c.ServerLogPath(), 8192))
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// createNamespace registers the namespace (tolerating "already exists")
// and waits until the frontend serves requests in it.
func (c *Cluster) createNamespace(ctx context.Context) error {
	ns := c.opts.Namespace
	var last error
	created := false
	for {
		if c.serverProcess().Exited() {
			return fmt.Errorf("cluster: temporal-server exited (%v); log %s:\n%s", c.serverProcess().Err(), c.ServerLogPath(), itest.FileTail(c.ServerLogPath(), 8192))
		}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if !created {
			_, err := c.CLI(cctx, "operator", "namespace", "create", "--namespace", ns, "--retention", "24h")
			if err == nil || strings.Contains(err.Error(), "already") {
				created = true
			}
			last = err
		}
		if created {
			// A visibility query goes through the frontend's namespace
			// registry and the visibility store: when it works, a client can
			// start workflows in the namespace.
			_, last = c.CLI(cctx, "workflow", "list", "--namespace", ns, "--limit", "1")
		}
		cancel()
		if created && last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster: namespace %q not ready: %w (last: %v); log %s:\n%s", ns, ctx.Err(), last, c.ServerLogPath(), itest.FileTail(c.ServerLogPath(), 8192))
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// cleanEnv returns this process's environment without TEMPORAL_* variables
// (which the server and CLI would read as configuration) and with home as
// HOME, so no user's CLI configuration file is read.
func cleanEnv(home string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "TEMPORAL_") || k == "HOME" || k == "XDG_CONFIG_HOME" {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"))
}
