package itest

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
)

// DevServerOptions configures [StartDevServer].
type DevServerOptions struct {
	// CLI is the Temporal CLI binary ([Binaries].Temporal). Required: nothing
	// is downloaded.
	CLI string
	// Namespace is registered on start (default "default").
	Namespace string
	// Port is the frontend (gRPC) port on 127.0.0.1 (default: a free one).
	Port int
	// UI enables the Web UI, on UIPort (default: a free one).
	UI     bool
	UIPort int
	// DBFilename persists to this SQLite file (default: in memory).
	DBFilename string
	// LogLevel is the server's log level (default "warn").
	LogLevel string
	// ExtraArgs are added to `temporal server start-dev`, e.g.
	// "--dynamic-config-value", "key=value".
	ExtraArgs []string
	// Output receives the server's stdout and stderr (default: a temporary
	// file, see [DevServer.LogPath]).
	Output io.Writer
	// Logger is the SDK client's logger (default: warnings and errors to stderr).
	Logger sdklog.Logger
}

// withDefaults checks that o names a CLI and fills in the defaults of
// Namespace, LogLevel and Logger.
func (o DevServerOptions) withDefaults() (DevServerOptions, error) {
	if o.CLI == "" {
		return o, errors.New("itest: DevServerOptions.CLI is required (build it with itest.Build or itest.BuildCLI)")
	}
	if _, err := os.Stat(o.CLI); err != nil {
		return o, fmt.Errorf("itest: Temporal CLI: %w", err)
	}
	o.Namespace = cmp.Or(o.Namespace, "default")
	o.LogLevel = cmp.Or(o.LogLevel, "warn")
	if o.Logger == nil {
		o.Logger = QuietLogger()
	}
	return o, nil
}

// DevServer is a running `temporal server start-dev` process, started with
// the SDK's [testsuite.StartDevServer].
type DevServer struct {
	// HostPort is the frontend address, "127.0.0.1:port".
	HostPort string
	// Namespace is the registered namespace.
	Namespace string
	// UIURL is the Web UI's base URL ("http://127.0.0.1:port"), or "" without UI.
	UIURL string
	// LogPath is the file with the server's output, when Options.Output was nil.
	LogPath string

	srv      *testsuite.DevServer
	logFile  *os.File
	stopOnce sync.Once
	stopErr  error
}

// StartDevServer starts a dev server on free loopback ports (unless opts
// names them) and returns once its frontend answers and the namespace is
// registered. Stop it with [DevServer.Stop].
func StartDevServer(ctx context.Context, opts DevServerOptions) (*DevServer, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	need := 0
	if opts.Port == 0 {
		need++
	}
	if opts.UI && opts.UIPort == 0 {
		need++
	}
	ports, err := FreePorts(need)
	if err != nil {
		return nil, err
	}
	if opts.Port == 0 {
		opts.Port, ports = ports[0], ports[1:]
	}
	if opts.UI && opts.UIPort == 0 {
		opts.UIPort = ports[0]
	}
	d := &DevServer{HostPort: HostPort(opts.Port), Namespace: opts.Namespace}
	out := opts.Output
	if out == nil {
		f, err := os.CreateTemp("", "temporal-dev-server-*.log")
		if err != nil {
			return nil, fmt.Errorf("itest: %w", err)
		}
		d.logFile, d.LogPath, out = f, f.Name(), f
	}
	so := testsuite.DevServerOptions{
		ExistingPath:  opts.CLI,
		ClientOptions: &client.Options{HostPort: d.HostPort, Namespace: opts.Namespace, Logger: opts.Logger},
		DBFilename:    opts.DBFilename,
		EnableUI:      opts.UI,
		LogLevel:      opts.LogLevel,
		ExtraArgs:     opts.ExtraArgs,
		Stdout:        out,
		Stderr:        out,
	}
	if opts.UI {
		so.UIPort = strconv.Itoa(opts.UIPort)
		d.UIURL = "http://" + HostPort(opts.UIPort)
	}
	start := time.Now()
	d.srv, err = testsuite.StartDevServer(ctx, so)
	if err != nil {
		d.closeLog()
		return nil, fmt.Errorf("itest: starting the Temporal dev server (%s) on %s after %s: %w%s",
			opts.CLI, d.HostPort, time.Since(start).Round(time.Millisecond), err, d.logNote())
	}
	return d, nil
}

// StartDevServerT starts a dev server for one test (or benchmark): it fails
// tb if the server cannot start and stops it when tb ends, writing the end of
// its log to the test log if tb failed.
func StartDevServerT(tb testing.TB, opts DevServerOptions) *DevServer {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	d, err := StartDevServer(ctx, opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if tb.Failed() && d.LogPath != "" {
			tb.Logf("Temporal dev server log (end, %s):\n%s", d.LogPath, d.LogTail(32<<10))
		}
		if err := d.Stop(); err != nil {
			tb.Error(err)
		}
	})
	return d
}

// Client returns the server's client (closed by Stop).
func (d *DevServer) Client() client.Client { return d.srv.Client() }

// Dial returns a new client for the server: opts with HostPort and
// Namespace set to the server's (and a quiet logger if none). Close it.
func (d *DevServer) Dial(opts client.Options) (client.Client, error) {
	opts.HostPort, opts.Namespace = d.HostPort, d.Namespace
	if opts.Logger == nil {
		opts.Logger = QuietLogger()
	}
	return client.Dial(opts)
}

// Env returns the environment that points a process (the worker, the
// starter) at the server through Temporal's envconfig, ignoring any
// Temporal config file or profile of the user running the tests.
func (d *DevServer) Env() []string { return clientEnv(d.HostPort, d.Namespace) }

// clientEnv is the environment of a process that connects to hostPort and
// namespace through Temporal's envconfig, and to nothing else.
func clientEnv(hostPort, namespace string) []string {
	return []string{
		"TEMPORAL_ADDRESS=" + hostPort, "TEMPORAL_NAMESPACE=" + namespace,
		"TEMPORAL_CONFIG_FILE=" + os.DevNull, "TEMPORAL_PROFILE=",
	}
}

// LogTail returns the last n bytes of the server's log file ("" without one).
func (d *DevServer) LogTail(n int64) string {
	if d.LogPath == "" {
		return ""
	}
	b, _ := readTail(d.LogPath, n)
	return string(b)
}

// Stop closes the client, stops the server (SIGINT, as the SDK does) and
// waits for it to exit; the log file is removed. Calling it again does nothing.
func (d *DevServer) Stop() error {
	d.stopOnce.Do(func() {
		d.srv.Client().Close()
		err := d.srv.Stop()
		// SIGINT ends the CLI with a non-zero status on some versions: only a
		// failure to deliver the signal is an error.
		var ee interface{ ExitCode() int }
		if errors.As(err, &ee) {
			err = nil
		}
		d.stopErr = err
		d.closeLog()
		if d.LogPath != "" {
			_ = os.Remove(d.LogPath)
		}
	})
	return d.stopErr
}

func (d *DevServer) closeLog() {
	if d.logFile != nil {
		_ = d.logFile.Close()
	}
}

func (d *DevServer) logNote() string {
	if t := d.LogTail(8 << 10); t != "" {
		return "\nserver output (end):\n" + t
	}
	return ""
}

// QuietLogger is an SDK logger that writes only warnings and errors, to stderr.
func QuietLogger() sdklog.Logger {
	return sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
}

// BeforeTestTimeout calls f margin before the test binary's -timeout
// expires (if it has one). Call it from TestMain just before m.Run, which
// is when the -timeout clock starts. A timeout panics and exits without
// running deferred calls, so f is the last chance to stop what the SDK
// started outside a process group of ours (the dev server). The returned
// function cancels it.
func BeforeTestTimeout(margin time.Duration, f func()) (cancel func()) {
	fl := flag.Lookup("test.timeout")
	if fl == nil {
		return func() {}
	}
	g, ok := fl.Value.(flag.Getter)
	if !ok {
		return func() {}
	}
	timeout, _ := g.Get().(time.Duration)
	if timeout <= 0 {
		return func() {}
	}
	t := time.AfterFunc(max(timeout-margin, timeout/2), f)
	return func() { t.Stop() }
}
