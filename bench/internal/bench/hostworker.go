package bench

import (
	"io"
	"log/slog"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"

	"github.com/idemhttp/temporal-idempotent-http/host"
)

// hostWorker is a worker wired as package host wires one on its
// defaults (the shared rate on): host.Load's settings, a client dialed
// with Host.ClientOptions (the dev server's address put in), Host.Start,
// and a worker of Host.WorkerOptions with Host.Register.
type hostWorker struct {
	h *host.Host
	c client.Client
	w worker.Worker
}

// startHostWorker starts a host worker against the dev server at
// hostPort with args, the worker binary's flags (host.Load); the SDK's
// log (at Warn) goes to log.
func startHostWorker(hostPort string, log io.Writer, args ...string) (*hostWorker, error) {
	h, err := host.Load(args)
	if err != nil {
		return nil, err
	}
	opts := h.ClientOptions()
	opts.HostPort = hostPort
	// The SDK logs each failed attempt at Error: to the section's log
	// rather than the terminal.
	opts.Logger = sdklog.NewStructuredLogger(slog.New(slog.NewJSONHandler(log, &slog.HandlerOptions{Level: slog.LevelWarn})))
	c, err := client.Dial(opts)
	if err != nil {
		h.Close()
		return nil, err
	}
	if err := h.Start(c); err != nil {
		h.Close()
		c.Close()
		return nil, err
	}
	w := worker.New(c, h.TaskQueue(), h.WorkerOptions())
	h.Register(w)
	if err := w.Start(); err != nil {
		h.Close()
		c.Close()
		return nil, err
	}
	return &hostWorker{h: h, c: c, w: w}, nil
}

func (a *hostWorker) stop() {
	a.w.Stop()
	a.h.Close()
	a.c.Close()
}
