package interop_test

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/idemhttp/temporal-idempotent-http/harness/interop"
	"github.com/idemhttp/temporal-idempotent-http/harness/itest"
)

var tableOut = flag.String("interop.table", "", "also write the results table (Markdown) to this file")

// Shared by every test; set by TestMain.
var (
	// dev is the package's Temporal dev server and tc its client.
	dev *itest.DevServer
	tc  client.Client
)

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	// The scenarios mostly wait (on timers, on slow servers, on Retry-After),
	// each with knobs of its own: run 12 at a time rather than GOMAXPROCS,
	// unless -parallel was given. More starve the attempts that must end
	// before their deadline on two cores under the race detector.
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		_ = flag.Set("test.parallel", "12")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	// The npm servers: installed here (not skipped) when node_modules is
	// missing or stale, so `go test ./...` works on a fresh clone.
	if err := interop.Install(ctx, log.Printf); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// The Temporal CLI, pinned by tools/go.mod, built into <repo>/bin (a
	// cold Go build cache takes minutes, before -timeout starts counting).
	root, err := itest.RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cli := filepath.Join(root, "bin", "temporal")
	start := time.Now()
	if err := itest.BuildCLI(ctx, cli); err != nil {
		fmt.Fprintln(os.Stderr, "interop: building the Temporal CLI:", err)
		return 1
	}
	log.Printf("interop: Temporal CLI ready in %s", time.Since(start).Round(100*time.Millisecond))
	dev, err = itest.StartDevServer(ctx, itest.DevServerOptions{CLI: cli})
	if err != nil {
		fmt.Fprintln(os.Stderr, "interop:", err)
		return 1
	}
	defer itest.BeforeTestTimeout(10*time.Second, func() { _ = dev.Stop() })()
	defer dev.Stop()
	tc = dev.Client()
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "interop: Temporal dev server log (end):\n%s\n", dev.LogTail(16<<10))
	}
	table := results.markdown() + lroResults.markdown() + webhookMarkdown() + oauthMarkdown() + sigv4Markdown() + mtlsMarkdown() + unkeyedMarkdown()
	fmt.Println(table)
	if *tableOut != "" {
		if err := os.WriteFile(*tableOut, []byte(table), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "interop:", err)
			return 1
		}
	}
	return code
}
