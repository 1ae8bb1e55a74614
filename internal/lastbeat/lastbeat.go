// Package lastbeat carries an activity attempt's last heartbeat on the
// attempt's failure response instead of in a heartbeat call of its own.
//
// An attempt that fails and leaves progress for the next one (what the
// retry budget has spent, an outcome it could not know, a monitor a 202
// moved) records it as heartbeat details, which the next attempt reads.
// A heartbeat call is a Temporal action of its own (Temporal Cloud bills
// each one that reaches the server), so a retry cost two: the attempt and
// its heartbeat. Temporal's API has a field for this on the failure
// response, RespondActivityTaskFailedRequest.LastHeartbeatDetails, which
// the server saves as the activity's progress just as a heartbeat's
// details (service/history/api/respondactivitytaskfailed); the Go SDK
// never sets it. A [Carrier]'s gRPC interceptor does: an attempt hands
// its progress to [Carrier.Hold], and the interceptor puts it on that
// attempt's failure response (matched by task token), encoded by the
// client's DataConverter as a heartbeat would be.
//
// Only attempts whose task was polled through the interceptor's
// connection can be carried (Hold reports false for the others, which
// then heartbeat): a worker whose client was dialed without it, or
// Temporal's test environment, loses nothing. The SDK retries a
// response's RPC inside the interceptor, on the same request, so the
// details set once travel with every try.
package lastbeat

import (
	"context"
	"strings"
	"sync"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/grpc"
)

// maxAge is how long a polled task's entry is kept when no response for
// it passes the interceptor (its worker gave up responding): longer than
// any attempt is let run.
const maxAge = 48 * time.Hour

// sweepEvery is the least time between two sweeps of old entries.
const sweepEvery = time.Minute

// Carrier matches attempts to their failure responses by task token. The
// zero value is not usable; call [New]. Its methods are safe for
// concurrent use.
type Carrier struct {
	now func() time.Time

	mu        sync.Mutex
	tasks     map[string]*task
	lastSweep time.Time
}

// task is one activity task polled through an interceptor and not yet
// responded to.
type task struct {
	dc      converter.DataConverter
	polled  time.Time
	details *commonpb.Payloads // held for its failure response
}

// New returns an empty Carrier.
func New() *Carrier {
	return &Carrier{now: time.Now, tasks: map[string]*task{}}
}

// Interceptor returns a gRPC unary client interceptor for the client a
// worker polls activity tasks with; dc is that client's DataConverter
// (nil: converter.GetDefaultDataConverter()). Chain it after the SDK's
// own (as ConnectionOptions.DialOptions are) and before any payload codec
// interceptor, which then encodes the details too.
func (c *Carrier) Interceptor(dc converter.DataConverter) grpc.UnaryClientInterceptor {
	if dc == nil {
		dc = converter.GetDefaultDataConverter()
	}
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		switch name := method[strings.LastIndexByte(method, '/')+1:]; name {
		case "RespondActivityTaskFailed":
			if r, ok := req.(*workflowservice.RespondActivityTaskFailedRequest); ok {
				if d := c.take(r.GetTaskToken()); d != nil && r.LastHeartbeatDetails == nil {
					r.LastHeartbeatDetails = d
				}
			}
		case "RespondActivityTaskCompleted":
			if r, ok := req.(*workflowservice.RespondActivityTaskCompletedRequest); ok {
				c.take(r.GetTaskToken())
			}
		case "RespondActivityTaskCanceled":
			if r, ok := req.(*workflowservice.RespondActivityTaskCanceledRequest); ok {
				c.take(r.GetTaskToken())
			}
		}
		err := invoker(ctx, method, req, reply, cc, opts...)
		if err != nil {
			return err
		}
		switch r := reply.(type) {
		case *workflowservice.PollActivityTaskQueueResponse:
			c.polled(r.GetTaskToken(), dc)
		case *workflowservice.RespondWorkflowTaskCompletedResponse:
			// Eager activities come back on the workflow task's response.
			for _, t := range r.GetActivityTasks() {
				c.polled(t.GetTaskToken(), dc)
			}
		}
		return nil
	}
}

// polled records a task polled through an interceptor with dc.
func (c *Carrier) polled(token []byte, dc converter.DataConverter) {
	if len(token) == 0 {
		return
	}
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tasks[string(token)] = &task{dc: dc, polled: now}
	if now.Sub(c.lastSweep) >= sweepEvery {
		c.lastSweep = now
		for k, t := range c.tasks {
			if now.Sub(t.polled) > maxAge {
				delete(c.tasks, k)
			}
		}
	}
}

// take forgets the task of token and returns the details held for it.
func (c *Carrier) take(token []byte) *commonpb.Payloads {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.tasks[string(token)]
	if t == nil {
		return nil
	}
	delete(c.tasks, string(token))
	return t.details
}

// Hold keeps details for the failure response of the attempt whose task
// token is token, encoded by its client's DataConverter (with ctx, for a
// context-aware one, as the SDK's heartbeat does); a later Hold replaces
// them. It reports false, holding nothing, when the attempt cannot be
// carried (its task was not polled through an interceptor, or the
// details do not encode): the caller heartbeats them instead.
func (c *Carrier) Hold(ctx context.Context, token []byte, details ...any) bool {
	if c == nil || len(token) == 0 {
		return false
	}
	c.mu.Lock()
	t := c.tasks[string(token)]
	c.mu.Unlock()
	if t == nil {
		return false
	}
	dc := t.dc
	if ca, ok := dc.(converter.ContextAware); ok {
		dc = ca.WithContext(ctx)
	}
	p, err := dc.ToPayloads(details...)
	if err != nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tasks[string(token)] != t {
		return false
	}
	t.details = p
	return true
}
