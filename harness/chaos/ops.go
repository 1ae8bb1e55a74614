package chaos

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/idemhttp/temporal-idempotent-http/internal/idemkey"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// waiters is how many operations are waited for at once (in start order).
const waiters = 32

// maxHistories bounds the histories kept per list of a Verdict.
const maxHistories = 20

// operation is one operation of the campaign.
type operation struct {
	id      string
	at      time.Duration // its start, after the campaign's
	req     workflows.Request
	started chan struct{} // closed once started (or given up)
	outcome Outcome
}

// operations returns the campaign's operations: the ready workflow under
// a business workflow ID of its own, one POST each through the proxy
// (Config.request).
func (c *campaign) operations() []*operation {
	ns := c.cfg.Cluster.Namespace()
	ops := make([]*operation, len(c.schedule.Starts))
	for i, at := range c.schedule.Starts {
		id := fmt.Sprintf("%s-order-%04d", c.cfg.prefix(), i)
		ops[i] = &operation{id: id, at: at, started: make(chan struct{}), req: c.cfg.request(c.px.URL, i),
			outcome: Outcome{WorkflowID: id, Key: idemkey.Derive(ns, id, operationName)}}
	}
	return ops
}

// startAndWait starts each operation at its time (retrying while the
// server is away) and waits for every one to end, until ctx ends.
func (c *campaign) startAndWait(ctx context.Context, ops []*operation) {
	var wg sync.WaitGroup
	for _, op := range ops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(op.started)
			select {
			case <-ctx.Done():
				op.outcome.Err = fmt.Errorf("not started: %w", ctx.Err())
				return
			case <-time.After(time.Until(c.start.Add(op.at))):
			}
			if err := c.startOne(ctx, op); err != nil {
				op.outcome.Err = fmt.Errorf("not started: %w", err)
			}
		}()
	}
	queue := make(chan *operation)
	for range waiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for op := range queue {
				<-op.started
				if op.outcome.Err == nil {
					c.waitOne(ctx, op)
				}
			}
		}()
	}
	for _, op := range ops {
		queue <- op
	}
	close(queue)
	wg.Wait()
}

// startOne starts op's workflow, again every second while the start fails
// for want of a server. A start whose answer was lost finds the workflow
// started (its ID may not be used twice).
func (c *campaign) startOne(ctx context.Context, op *operation) error {
	opts := client.StartWorkflowOptions{
		ID: op.id, TaskQueue: c.taskQueue,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
	}
	for {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := c.cl.ExecuteWorkflow(sctx, opts, workflows.WorkflowName, op.req)
		cancel()
		var started *serviceerror.WorkflowExecutionAlreadyStarted
		if err == nil || errors.As(err, &started) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-time.After(time.Second):
		}
	}
}

// waitOne waits for op's workflow to end and keeps its outcome, asking
// again every second while the server is away.
func (c *campaign) waitOne(ctx context.Context, op *operation) {
	for {
		var resp workflows.Response
		err := c.cl.GetWorkflow(ctx, op.id, "").Get(ctx, &resp)
		var ended *temporal.WorkflowExecutionError
		switch {
		case err == nil:
			op.outcome.Response = &resp
			return
		case errors.As(err, &ended):
			op.outcome.Err = err
			return
		}
		select {
		case <-ctx.Done():
			op.outcome.Err = fmt.Errorf("did not end in time: %w (last: %v)", ctx.Err(), err)
			return
		case <-time.After(time.Second):
		}
	}
}

// collect reads what the API did, checks the outcomes and gathers the
// close times, the histories of the operations that went wrong and, with
// an operator (halted), what it did and what waited.
func (c *campaign) collect(ctx context.Context, ops []*operation, opr *operator) (*Result, error) {
	r := &Result{Way: c.cfg.Way, KeyIn: c.cfg.KeyIn, Plan: c.cfg.Plan, Schedule: c.schedule, Stats: c.api.Stats(), Histories: map[string][]string{}}
	outcomes := make([]Outcome, len(ops))
	for i, op := range ops {
		outcomes[i] = op.outcome
	}
	r.Verdict = Verify(outcomes, c.api.Records())
	r.Requests = r.Stats.Requests
	if opr != nil {
		r.Operator = opr.report()
		waited, pauses, notSent := c.waited(ctx, ops)
		opr.finish(r.Operator, waited, pauses, notSent, r.Verdict)
		// The operator's lookups went to the API directly.
		r.Requests -= r.Operator.Lookups
	}
	if r.Verdict.Succeeded > 0 {
		r.RequestsPerSuccess = float64(r.Requests) / float64(r.Verdict.Succeeded)
	}
	for _, l := range c.api.Log() {
		r.Log = append(r.Log, Sample{At: l.Time.Sub(c.start), Status: l.Status})
	}
	for _, op := range ops {
		d, err := c.cl.DescribeWorkflowExecution(ctx, op.id, "")
		if err != nil {
			continue
		}
		if ct := d.GetWorkflowExecutionInfo().GetCloseTime(); ct != nil {
			at := ct.AsTime().Sub(c.start)
			r.Completions = append(r.Completions, at)
			r.Duration = max(r.Duration, at)
		}
	}
	sort.Slice(r.Completions, func(i, j int) bool { return r.Completions[i] < r.Completions[j] })
	lists := [][]string{r.Verdict.Failed, r.Verdict.Lost, r.Verdict.Duplicated}
	if r.Operator != nil {
		lists = append(lists, r.Operator.Unlisted)
	}
	for _, list := range lists {
		// The plain way's duplicates are many and alike: a few tell.
		for _, id := range list[:min(len(list), maxHistories)] {
			r.Histories[id] = c.history(ctx, id)
		}
	}
	c.mu.Lock()
	r.Events = append([]Event(nil), c.events...)
	c.mu.Unlock()
	return r, nil
}
