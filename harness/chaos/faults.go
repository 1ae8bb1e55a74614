package chaos

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/harness/itest"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// workerSlot is one of the campaign's worker processes, started again
// under a new identity after each kill (the server lists a dead poller
// for a while).
type workerSlot struct {
	index int
	gen   int
	proc  *itest.Process
}

func (w *workerSlot) identity() string { return fmt.Sprintf("chaos-worker-%d-%d", w.index, w.gen) }

// startWorkers starts the Plan's workers and waits until each polls.
func (c *campaign) startWorkers(ctx context.Context) error {
	start := time.Now()
	for i := range c.cfg.Plan.Workers {
		w := &workerSlot{index: i}
		c.workers = append(c.workers, w)
		if err := c.startWorker(w); err != nil {
			return err
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for _, w := range c.workers {
		if err := c.waitPolling(wctx, w.identity()); err != nil {
			return fmt.Errorf("chaos: %s: %w; its output:\n%s", w.identity(), err, w.proc.Tail(4<<10))
		}
	}
	c.cfg.Logf("chaos: %d workers polling in %s", len(c.workers), time.Since(start).Round(100*time.Millisecond))
	return nil
}

// startWorker starts w's process under its current identity.
func (c *campaign) startWorker(w *workerSlot) error {
	name := w.identity()
	args := append([]string{"--task-queue", c.taskQueue, "--allow-origin", c.px.URL, "--identity", name, "--log-level", "warn"}, c.cfg.WorkerArgs...)
	p, err := itest.Start(itest.Spec{
		Name: name, Path: c.cfg.WorkerBin, Args: args, Dir: c.cfg.WorkDir,
		Env:     append(c.cfg.Cluster.ClientEnv(), "API_TOKEN=", "METRICS_ADDR=", "CONVENTIONS=", "ADMISSION=", "ORIGINS_FILE="),
		LogPath: filepath.Join(c.cfg.WorkDir, fmt.Sprintf("worker-%d.log", w.index)),
	})
	if err != nil {
		return fmt.Errorf("chaos: starting %s: %w", name, err)
	}
	c.mu.Lock()
	w.proc = p
	c.mu.Unlock()
	return nil
}

// waitPolling waits until identity polls the origin's queue, where the
// operations' activities run (the worker polls its origins' queues
// whatever its flags, and routes the requests there with the shared
// rate, its default, or they ask for it with OriginQueue).
func (c *campaign) waitPolling(ctx context.Context, identity string) error {
	queue, err := workflows.OriginTaskQueue(c.taskQueue, c.px.URL)
	if err != nil {
		return err
	}
	return itest.WaitForActivityPollers(ctx, c.cl, queue, identity)
}

// stopWorkers stops every worker process.
func (c *campaign) stopWorkers() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, w := range c.workers {
		if w.proc != nil {
			_ = w.proc.Stop(10 * time.Second)
		}
	}
}

// faults carries out the schedule's faults at their times, closes done
// after the last, and restarts a worker that exited on its own (an event:
// a finding) until ctx ends. It returns an error only if a fault could not
// be carried out (the server did not come back, a worker did not start).
func (c *campaign) faults(ctx context.Context, done chan<- struct{}) error {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	defer func() {
		if done != nil {
			close(done)
		}
	}()
	for _, f := range c.schedule.Faults {
		for wait := time.Until(c.start.Add(f.At)); wait > 0; wait = time.Until(c.start.Add(f.At)) {
			select {
			case <-ctx.Done():
				return nil
			case <-tick.C:
				if err := c.superviseWorkers(); err != nil {
					return err
				}
			case <-time.After(wait):
			}
		}
		if err := c.fault(ctx, f); err != nil {
			return fmt.Errorf("chaos: %s: %w", f, err)
		}
	}
	close(done)
	done = nil
	c.event("chaos over: the last fault is done")
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			if err := c.superviseWorkers(); err != nil {
				return err
			}
		}
	}
}

// fault carries out f.
func (c *campaign) fault(ctx context.Context, f Step) error {
	switch f.Kind {
	case FaultToxic:
		c.event("toxic on: %s %s %s, toxicity %.2f, %v", f.Toxic.Name, f.Toxic.Type, f.Toxic.Stream, f.Toxic.Toxicity, f.Toxic.Attributes)
		return c.px.add(f.Toxic)
	case FaultToxicEnd:
		c.event("toxic off: %s", f.Toxic.Name)
		return c.px.remove(f.Toxic.Name)
	case FaultAPIDown:
		c.event("API down: proxy disabled (connections refused, open ones cut)")
		return c.px.setEnabled(false)
	case FaultAPIUp:
		c.event("API up: proxy enabled")
		return c.px.setEnabled(true)
	case FaultWorkerKill:
		return c.killWorker(c.workers[f.Worker])
	case FaultServerKill:
		c.event("SIGKILL temporal-server (pid %d)", c.cfg.Cluster.ServerPid())
		if err := c.cfg.Cluster.KillServer(); err != nil {
			return err
		}
		rctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		defer cancel()
		if err := c.cfg.Cluster.RestartServer(rctx); err != nil {
			return err
		}
		c.event("temporal-server back (pid %d)", c.cfg.Cluster.ServerPid())
	}
	return nil
}

// killWorker SIGKILLs w and starts it again a second later.
func (c *campaign) killWorker(w *workerSlot) error {
	c.mu.Lock()
	p, old := w.proc, w.identity()
	c.mu.Unlock()
	if err := p.Kill(); err != nil {
		return err
	}
	<-p.Done()
	time.Sleep(time.Second)
	w.gen++
	c.event("SIGKILL %s (pid %d); started again as %s", old, p.Pid(), w.identity())
	return c.startWorker(w)
}

// superviseWorkers starts again a worker that exited without being
// killed, recording it as an event.
func (c *campaign) superviseWorkers() error {
	for _, w := range c.workers {
		c.mu.Lock()
		p := w.proc
		c.mu.Unlock()
		if !p.Exited() {
			continue
		}
		old := w.identity()
		w.gen++
		c.event("FINDING: %s exited on its own (%s); started again as %s; its output (end):\n%s", old, p.State(), w.identity(), p.Tail(2<<10))
		if err := c.startWorker(w); err != nil {
			return err
		}
	}
	return nil
}
