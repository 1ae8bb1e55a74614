package bench

import (
	"fmt"
	"net/http"
	"os"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/idemhttp/temporal-idempotent-http/host"
)

// scaleWorkerEnv, set to "1", makes the bench command a worker process of
// the scale section (ServeScaleWorker) instead of a measurement run.
const scaleWorkerEnv = "IDEMHTTP_BENCH_SCALE_WORKER"

// ScaleWorkerChild reports whether this process was started by the scale
// section as one of its workers; cmd/bench then calls ServeScaleWorker
// with its arguments instead of measuring.
func ScaleWorkerChild() bool { return os.Getenv(scaleWorkerEnv) == "1" }

// ServeScaleWorker runs a worker as the worker binary's main does (args
// are its flags, read by host.Load; the same client, host.Start, worker
// options and host.Register) and registers on the same worker the plain
// workflow and activities of the actions section (registerPlainActions):
// the scale section compares the package's calls per second with a plain
// activity doing the same POST on the same processes, so that both
// share the workers, their pollers and their warm-up. It returns when
// the process is interrupted (SIGINT or SIGTERM).
func ServeScaleWorker(args []string) error {
	h, err := host.Load(args)
	if err != nil {
		return err
	}
	opts := h.ClientOptions()
	c, err := client.Dial(opts)
	if err != nil {
		h.Close()
		return fmt.Errorf("connecting to Temporal at %q: %w", opts.HostPort, err)
	}
	defer c.Close()
	if err := h.Start(c); err != nil {
		return err
	}
	defer h.Close()
	w := worker.New(c, h.TaskQueue(), h.WorkerOptions())
	h.Register(w)
	registerPlainActions(w, &http.Client{Transport: newTransport()})
	if err := w.Run(worker.InterruptCh()); err != nil {
		return fmt.Errorf("worker stopped: %w", err)
	}
	return nil
}
