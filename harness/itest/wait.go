package itest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/sdk/client"
)

// Eventually calls cond every interval until it returns nil, then returns
// nil. When ctx ends first it returns cond's last error, wrapped with ctx's.
func Eventually(ctx context.Context, interval time.Duration, cond func() error) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		err := cond()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (%w)", err, ctx.Err())
		case <-t.C:
		}
	}
}

// WaitHTTP waits until a GET of url answers 200, such as demoapi's /healthz.
func WaitHTTP(ctx context.Context, url string) error {
	hc := &http.Client{Timeout: 2 * time.Second}
	err := Eventually(ctx, 50*time.Millisecond, func() error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("itest: %s not ready: %w", url, err)
	}
	return nil
}

// WaitForPollers waits until a worker polls taskQueue for both workflow and
// activity tasks, as DescribeTaskQueue reports its pollers. With identity
// set, the poller must have that identity (a worker's --identity), so a
// restarted worker is told apart from the one before it, which the server
// keeps listing for a few minutes.
func WaitForPollers(ctx context.Context, c client.Client, taskQueue, identity string) error {
	types := []enumspb.TaskQueueType{enumspb.TASK_QUEUE_TYPE_WORKFLOW, enumspb.TASK_QUEUE_TYPE_ACTIVITY}
	err := Eventually(ctx, 100*time.Millisecond, func() error {
		for _, tqt := range types {
			resp, err := c.DescribeTaskQueue(ctx, taskQueue, tqt)
			if err != nil {
				return err
			}
			ok := slices.ContainsFunc(resp.GetPollers(), func(p *taskqueuepb.PollerInfo) bool {
				return identity == "" || p.GetIdentity() == identity
			})
			if !ok {
				return errors.New("no " + tqt.String() + " poller" + withIdentity(identity))
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("itest: no worker on task queue %q: %w", taskQueue, err)
	}
	return nil
}

// WaitForActivityPollers waits until a worker with identity ("" for any)
// polls taskQueue for activity tasks (a queue with no workflows).
func WaitForActivityPollers(ctx context.Context, c client.Client, taskQueue, identity string) error {
	err := Eventually(ctx, 100*time.Millisecond, func() error {
		resp, err := c.DescribeTaskQueue(ctx, taskQueue, enumspb.TASK_QUEUE_TYPE_ACTIVITY)
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(resp.GetPollers(), func(p *taskqueuepb.PollerInfo) bool {
			return identity == "" || p.GetIdentity() == identity
		}) {
			return errors.New("no activity poller" + withIdentity(identity))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("itest: no worker on activity task queue %q: %w", taskQueue, err)
	}
	return nil
}

func withIdentity(identity string) string {
	if identity == "" {
		return ""
	}
	return " with identity " + identity
}
