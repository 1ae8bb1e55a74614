package itest

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
)

// RestartableDevServer is a Temporal CLI dev server that keeps its state
// in a SQLite file (--db-filename) and runs as a [Process] of ours, in its
// own process group, so that a test can kill it with SIGKILL, as a crash
// would, and start it again on the same file and port: workflows in flight
// carry on (TEMPORAL-NOTES.md). [StartDevServer]'s server, started by the
// SDK, can only be stopped politely.
type RestartableDevServer struct {
	// HostPort is the frontend address, "127.0.0.1:port", the same across
	// restarts.
	HostPort string
	// Namespace is the registered namespace.
	Namespace string
	// DBPath is the SQLite file.
	DBPath string
	// LogPath is the file every start's output is appended to.
	LogPath string

	cli    string
	args   []string
	logger sdklog.Logger
	proc   *Process
	starts int
}

// StartRestartableDevServer starts a dev server as opts say (the fields
// [StartDevServer] reads, but for UI and Output: it is headless, and its
// output goes to a file in dir) with its state in dir/temporal.db unless
// opts.DBFilename names a file, and returns once its frontend answers and
// the namespace is registered. Stop it with Stop.
func StartRestartableDevServer(ctx context.Context, dir string, opts DevServerOptions) (*RestartableDevServer, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if opts.DBFilename == "" {
		opts.DBFilename = filepath.Join(dir, "temporal.db")
	}
	if opts.Port == 0 {
		if opts.Port, err = FreePort(); err != nil {
			return nil, err
		}
	}
	d := &RestartableDevServer{
		HostPort: HostPort(opts.Port), Namespace: opts.Namespace, DBPath: opts.DBFilename,
		LogPath: filepath.Join(dir, "temporal-dev-server.log"), cli: opts.CLI,
		logger: opts.Logger,
	}
	// The arguments the SDK's testsuite.StartDevServer passes.
	d.args = append([]string{
		"server", "start-dev", "--ip", "127.0.0.1", "--port", fmt.Sprint(opts.Port),
		"--namespace", opts.Namespace, "--headless", "--db-filename", opts.DBFilename,
		"--log-level", opts.LogLevel,
		"--dynamic-config-value", "frontend.enableServerVersionCheck=false",
	}, opts.ExtraArgs...)
	if err := d.Start(ctx); err != nil {
		return nil, err
	}
	return d, nil
}

// StartRestartableDevServerT starts a [RestartableDevServer] for one
// test, its files in a temporary directory of the test: it fails tb if the
// server cannot start, and stops it when tb ends, writing the end of its
// log to the test log if tb failed.
func StartRestartableDevServerT(tb testing.TB, opts DevServerOptions) *RestartableDevServer {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	d, err := StartRestartableDevServer(ctx, tb.TempDir(), opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := d.Stop(); err != nil {
			tb.Error(err)
		}
		if tb.Failed() {
			tb.Logf("Temporal dev server log (end, %s):\n%s", d.LogPath, d.LogTail(32<<10))
		}
	})
	return d
}

// Start starts the server again (on the same file and port) after
// [RestartableDevServer.Kill] or Stop, and returns once its frontend
// answers and the namespace is there. StartRestartableDevServer calls it
// for the first start.
func (d *RestartableDevServer) Start(ctx context.Context) error {
	if d.proc != nil && !d.proc.Exited() {
		return fmt.Errorf("itest: the dev server on %s is running", d.HostPort)
	}
	d.starts++
	p, err := Start(Spec{
		Name: fmt.Sprintf("temporal dev server %s (start %d)", d.HostPort, d.starts),
		Path: d.cli, Args: d.args, LogPath: d.LogPath,
		// As the SDK stops it.
		StopSignal: syscall.SIGINT,
	})
	if err != nil {
		return err
	}
	d.proc = p
	began := time.Now()
	if err := d.waitReady(ctx); err != nil {
		_ = p.Kill()
		return fmt.Errorf("itest: the dev server on %s (start %d) not ready after %s: %w\nits output (end):\n%s",
			d.HostPort, d.starts, time.Since(began).Round(time.Millisecond), err, p.Tail(8<<10))
	}
	return nil
}

// waitReady waits until a client connects and the namespace is described,
// or the process exits.
func (d *RestartableDevServer) waitReady(ctx context.Context) error {
	return Eventually(ctx, 100*time.Millisecond, func() error {
		if d.proc.Exited() {
			return fmt.Errorf("%s %s", d.proc.Name, d.proc.State())
		}
		tctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		c, err := d.Dial(tctx, client.Options{})
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.WorkflowService().DescribeNamespace(tctx, &workflowservice.DescribeNamespaceRequest{Namespace: d.Namespace})
		return err
	})
}

// Kill kills the server with SIGKILL, as a crash would, and waits for it
// to exit. Its file keeps what it had committed.
func (d *RestartableDevServer) Kill() error { return d.proc.Kill() }

// Stop stops the server (SIGINT, then SIGKILL after 10 s). Calling it
// again, or after Kill, does nothing.
func (d *RestartableDevServer) Stop() error { return d.proc.Stop(10 * time.Second) }

// Pid returns the process id of the current start.
func (d *RestartableDevServer) Pid() int { return d.proc.Pid() }

// Dial returns a new client for the server, which reconnects by itself
// across restarts: opts with HostPort and Namespace set to the server's
// (and DevServerOptions.Logger if opts has none). Close it.
func (d *RestartableDevServer) Dial(ctx context.Context, opts client.Options) (client.Client, error) {
	opts.HostPort, opts.Namespace = d.HostPort, d.Namespace
	if opts.Logger == nil {
		opts.Logger = d.logger
	}
	return client.DialContext(ctx, opts)
}

// Env returns the environment that points a process at the server, as
// [DevServer.Env] does.
func (d *RestartableDevServer) Env() []string { return clientEnv(d.HostPort, d.Namespace) }

// LogTail returns the last n bytes of the log of every start.
func (d *RestartableDevServer) LogTail(n int64) string { return FileTail(d.LogPath, n) }
