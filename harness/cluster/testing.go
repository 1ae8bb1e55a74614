package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/harness/itest"
)

// BuildTimeout bounds [BuildTools] in [StartForTest]: a cold build of the
// server and the CLI on two cores takes a few minutes.
const BuildTimeout = 20 * time.Minute

// StartTimeout bounds [Start] in [StartForTest].
const StartTimeout = 3 * time.Minute

// StartForTest builds the tools into opts.BinDir (default [DefaultBinDir]),
// starts a cluster with [Start] and stops it when the test and its subtests
// end. Work files go to t.TempDir() unless opts.WorkDir is set, and progress
// to t.Logf unless opts.Logf is set. When the test has failed, the end of the
// server's and PostgreSQL's logs is logged before they are removed. Any
// error fails the test at once: nothing is skipped.
//
// The build counts against go test's -timeout: on a cold Go build cache it
// takes about four minutes on two cores (temporal-server), so run cluster
// tests on a fresh machine with -timeout 20m; a warm cache needs seconds.
func StartForTest(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	if opts.BinDir == "" {
		dir, err := DefaultBinDir()
		if err != nil {
			t.Fatal(err)
		}
		opts.BinDir = dir
	}
	if opts.WorkDir == "" {
		opts.WorkDir = t.TempDir()
	}
	bctx, cancel := context.WithTimeout(context.Background(), BuildTimeout)
	defer cancel()
	start := time.Now()
	if err := BuildTools(bctx, opts.BinDir, opts.Logf); err != nil {
		t.Fatal(err)
	}
	opts.Logf("cluster: tools ready in %s", time.Since(start).Round(10*time.Millisecond))

	sctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	defer cancel()
	c, err := Start(sctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	// A -timeout panic skips cleanups: stop the cluster just before it. (Its
	// processes would die with the test binary anyway, parent-death signal;
	// this also removes PostgreSQL's directory.)
	if dl, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if d, ok := dl.Deadline(); ok {
			timer := time.AfterFunc(time.Until(d)-5*time.Second, func() { _ = c.Stop() })
			t.Cleanup(func() { timer.Stop() })
		}
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("cluster: end of %s:\n%s", c.ServerLogPath(), itest.FileTail(c.ServerLogPath(), 16<<10))
			t.Logf("cluster: end of %s:\n%s", c.PostgresLogPath(), itest.FileTail(c.PostgresLogPath(), 4<<10))
		}
		if err := c.Stop(); err != nil {
			t.Errorf("cluster: stop: %v", err)
		}
	})
	return c
}
