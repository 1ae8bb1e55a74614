package integration_test

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/idemhttp/temporal-idempotent-http/harness/itest"
)

// Shared by every test of the package; set by TestMain.
var (
	// bins are the Temporal CLI, worker, demoapi and starter binaries.
	bins itest.Binaries
	// dev is the one dev server of the package.
	dev *itest.DevServer
	// tc is a client of dev.
	tc client.Client
)

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "idemhttp-integration-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	// Building the CLI on a cold cache takes minutes; it happens before the
	// test binary's -timeout starts counting.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	start := time.Now()
	bins, err = itest.Build(ctx, dir, log.Printf)
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration: building the binaries under test:", err)
		return 1
	}
	log.Printf("integration: binaries ready in %s", time.Since(start).Round(100*time.Millisecond))
	dev, err = itest.StartDevServer(ctx, itest.DevServerOptions{CLI: bins.Temporal})
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration:", err)
		return 1
	}
	// A -timeout panic skips deferred calls: stop the server just before.
	defer itest.BeforeTestTimeout(10*time.Second, func() { _ = dev.Stop() })()
	defer dev.Stop()
	tc = dev.Client()
	log.Printf("integration: Temporal dev server on %s", dev.HostPort)
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "integration: Temporal dev server log (end):\n%s\n", dev.LogTail(16<<10))
	}
	return code
}
