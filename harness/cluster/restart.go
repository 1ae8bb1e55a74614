package cluster

import (
	"context"
	"fmt"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/harness/itest"
)

// serverProcess returns the running temporal-server process (the one
// [Cluster.RestartServer] started last).
func (c *Cluster) serverProcess() *itest.Process {
	c.serverMu.Lock()
	defer c.serverMu.Unlock()
	return c.server
}

// ServerPid returns the process ID of the running temporal-server.
func (c *Cluster) ServerPid() int { return c.serverProcess().Pid() }

// KillServer kills temporal-server with SIGKILL, as a crash or an
// out-of-memory kill would: nothing is flushed or deregistered. PostgreSQL
// keeps running; [Cluster.RestartServer] starts the server again.
func (c *Cluster) KillServer() error {
	p := c.serverProcess()
	if err := p.Kill(); err != nil {
		return fmt.Errorf("cluster: SIGKILL temporal-server (pid %d): %w", p.Pid(), err)
	}
	select {
	case <-p.Done():
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("cluster: temporal-server (pid %d) still running 10 s after SIGKILL", p.Pid())
	}
}

// RestartServer starts temporal-server again, after [Cluster.KillServer],
// with the same configuration, ports and log file (appended to), and
// returns once its frontend answers its health check. It refuses while the
// last server is still running: kill it first. The namespace and every
// workflow are in PostgreSQL and carry on. ctx bounds the wait.
func (c *Cluster) RestartServer(ctx context.Context) error {
	c.serverMu.Lock()
	if !c.server.Exited() {
		c.serverMu.Unlock()
		return fmt.Errorf("cluster: temporal-server (pid %d) is still running: KillServer first", c.server.Pid())
	}
	p, err := itest.Start(c.serverSpec)
	if err == nil {
		c.server = p
	}
	c.serverMu.Unlock()
	if err != nil {
		return fmt.Errorf("cluster: restarting temporal-server: %w", err)
	}
	start := time.Now()
	if err := c.waitHealthy(ctx); err != nil {
		return err
	}
	c.opts.Logf("cluster: temporal-server restarted (pid %d), healthy in %s", p.Pid(), time.Since(start).Round(time.Millisecond))
	return nil
}
