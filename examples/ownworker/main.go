// Command ownworker is the README's worker of your own, compiled and
// tested against a Temporal dev server: the README's Charge workflow
// (examples/payment) on a worker this main creates, with everything the
// worker binary has, from package host: the settings (the binary's flags
// and environment, the --origins file) with every origin's credential
// checked at start, the origins' own task queues, the shared rate, the
// webhook receiver and the metrics endpoint, each on when its setting is.
//
//	ORIGINS_FILE=origins.toml go run ./examples/ownworker --task-queue payments
package main

import (
	"errors"
	"flag"
	"log"
	"os"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/idemhttp/temporal-idempotent-http/examples/payment"
	"github.com/idemhttp/temporal-idempotent-http/host"
)

func main() {
	if err := run(); err != nil && !errors.Is(err, flag.ErrHelp) {
		log.Fatal(err)
	}
}

// README: main

// run runs your own worker with the worker binary's settings and wiring.
func run() error {
	h, err := host.Load(os.Args[1:]) // flags, environment, origins file; credentials checked
	if err != nil || h.Checked() {
		return err
	}
	c, err := client.Dial(h.ClientOptions())
	if err != nil {
		return err
	}
	defer c.Close()
	if err := h.Start(c); err != nil { // origin queues, shared rate, webhook receiver
		return err
	}
	defer h.Close()
	w := worker.New(c, h.TaskQueue(), h.WorkerOptions())
	h.Register(w)                      // the HTTP activities and the ready workflow
	w.RegisterWorkflow(payment.Charge) // and your own workflows
	return w.Run(worker.InterruptCh())
}

// README: end
