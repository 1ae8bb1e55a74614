package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/harness/itest"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// EnsureCLI returns the path of the Temporal CLI: path if it is set, else
// <repo>/bin/temporal, which it builds from the tools module with
// itest.BuildCLI (minutes on a cold build cache, seconds on a warm one) when
// it is missing. logf reports a build.
func EnsureCLI(ctx context.Context, path string, logf func(string, ...any)) (string, error) {
	if path != "" {
		if _, err := os.Stat(path); err != nil {
			return "", fmt.Errorf("temporal CLI: %w", err)
		}
		return path, nil
	}
	root, err := itest.RepoRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(root, "bin", "temporal")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	logf("building the Temporal CLI into %s (go build %s in tools/; minutes on a cold build cache)", bin, itest.CLIPackage)
	start := time.Now()
	if err := itest.BuildCLI(ctx, bin); err != nil {
		return "", fmt.Errorf("building the Temporal CLI: %w", err)
	}
	logf("built the Temporal CLI in %s", time.Since(start).Round(time.Second))
	return bin, nil
}

// targetServer is a loopback HTTP server whose handler can be swapped
// between experiments, so one worker (which allows one origin) serves them all.
type targetServer struct {
	URL string
	srv *http.Server
	h   atomic.Pointer[http.Handler]
}

// startTarget listens on a free loopback port.
func startTarget() (*targetServer, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	t := &targetServer{URL: "http://" + l.Addr().String()}
	t.Set(http.NotFoundHandler())
	t.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		(*t.h.Load()).ServeHTTP(w, r)
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = t.srv.Serve(l) }()
	return t, nil
}

// Set makes h answer every following request.
func (t *targetServer) Set(h http.Handler) { t.h.Store(&h) }

// Close stops the server.
func (t *targetServer) Close() error { return t.srv.Close() }

// newTransport is the worker's HTTP transport, as cmd/worker builds it:
// http.DefaultTransport with up to 64 idle connections per host.
func newTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.ResponseHeaderTimeout = 60 * time.Second
	t.MaxIdleConnsPerHost = 64
	return t
}

// harness is a dev server, one worker (harnessOptions.Worker) polling TaskQueue
// (the HTTP activity and ready workflow, plus the minimal baseline workflow
// of the throughput run) and a targetServer it calls.
type harness struct {
	Dev       *itest.DevServer
	Client    client.Client
	Worker    worker.Worker
	Target    *targetServer
	TaskQueue string
	// OriginQueue: the ready workflow's requests run on their origin's
	// own task queue (workflows.Request.OriginQueue).
	OriginQueue bool
	// procs are the worker processes of a harness on the cluster
	// (startClusterWorkers), for reading their CPU time and memory.
	procs    []*itest.Process
	logFiles []*os.File
	stopOnce sync.Once
}

// harnessOptions configures startHarness.
type harnessOptions struct {
	// CLI is the Temporal CLI binary.
	CLI string
	// Name labels the task queue and the log files, which go to LogDir.
	Name, LogDir string
	// ServerArgs are extra `temporal server start-dev` arguments.
	ServerArgs []string
	// Worker are the worker's options (the zero value is the SDK's defaults).
	Worker worker.Options
}

// startHarness starts a dev server, a target and a worker.
func startHarness(ctx context.Context, o harnessOptions) (*harness, error) {
	h := &harness{TaskQueue: "bench-" + o.Name}
	fail := func(err error) (*harness, error) {
		h.Stop()
		return nil, err
	}
	devLog, err := os.Create(filepath.Join(o.LogDir, o.Name+"-devserver.log"))
	if err != nil {
		return nil, err
	}
	h.logFiles = append(h.logFiles, devLog)
	if h.Dev, err = itest.StartDevServer(ctx, itest.DevServerOptions{
		CLI: o.CLI, LogLevel: "error", ExtraArgs: o.ServerArgs, Output: devLog,
		Logger: sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(devLog, &slog.HandlerOptions{Level: slog.LevelWarn}))),
	}); err != nil {
		return fail(err)
	}
	if h.Target, err = startTarget(); err != nil {
		return fail(err)
	}
	workerLog, err := os.Create(filepath.Join(o.LogDir, o.Name+"-worker.log"))
	if err != nil {
		return fail(err)
	}
	h.logFiles = append(h.logFiles, workerLog)
	logger := sdklog.NewStructuredLogger(slog.New(slog.NewJSONHandler(workerLog, &slog.HandlerOptions{Level: slog.LevelInfo})))
	if h.Client, err = h.Dev.Dial(client.Options{Logger: logger}); err != nil {
		return fail(err)
	}
	// The main worker's activity runs without adaptive admission: the
	// strategies it measures are the retry policy's alone.
	acts, err := activities.New(activities.Config{
		AllowedOrigins: []string{h.Target.URL},
		HTTPClient:     &http.Client{Transport: newTransport()},
		Admission:      activities.Admission{Off: true},
	})
	if err != nil {
		return fail(err)
	}
	h.Worker = worker.New(h.Client, h.TaskQueue, o.Worker)
	acts.Register(h.Worker)
	workflows.Register(h.Worker)
	registerMinimal(h.Worker, &http.Client{Transport: newTransport()})
	registerPeers(h.Worker, newPeerActivities())
	if err := h.Worker.Start(); err != nil {
		return fail(fmt.Errorf("starting the worker: %w", err))
	}
	return h, nil
}

// admissionWorker starts a second worker on task queue tq, with the HTTP
// activity's adaptive admission on (its defaults) and a limiter of its own:
// every run that measures admission gets a worker that has not yet seen
// the target. It returns a copy of h that starts workflows on tq, and the
// function that stops the worker.
func (h *harness) admissionWorker(tq string) (*harness, func(), error) {
	acts, err := activities.New(activities.Config{
		AllowedOrigins: []string{h.Target.URL},
		HTTPClient:     &http.Client{Transport: newTransport()},
	})
	if err != nil {
		return nil, nil, err
	}
	w := worker.New(h.Client, tq, workerOptions)
	acts.Register(w)
	workflows.Register(w)
	if err := w.Start(); err != nil {
		return nil, nil, fmt.Errorf("starting the admission worker: %w", err)
	}
	return &harness{Dev: h.Dev, Client: h.Client, Target: h.Target, TaskQueue: tq}, w.Stop, nil
}

// Stop stops the worker, the client, the target and the dev server.
func (h *harness) Stop() error {
	var errs []error
	h.stopOnce.Do(func() {
		if h.Worker != nil {
			h.Worker.Stop()
		}
		if h.Client != nil {
			h.Client.Close()
		}
		if h.Target != nil {
			errs = append(errs, h.Target.Close())
		}
		if h.Dev != nil {
			if err := h.Dev.Stop(); err != nil {
				errs = append(errs, fmt.Errorf("stopping the dev server: %w", err))
			}
		}
		for _, f := range h.logFiles {
			errs = append(errs, f.Close())
		}
	})
	return errors.Join(errs...)
}
