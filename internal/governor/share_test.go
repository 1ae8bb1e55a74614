package governor

import (
	"context"
	"sync"
	"testing"
	"time"

	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/stretchr/testify/assert"

	"github.com/idemhttp/temporal-idempotent-http/harness/itest"
)

// describeClient answers DescribeTaskQueue with resp, and records whether
// the request asked for the config.
type describeClient struct {
	client.Client
	resp *workflowservice.DescribeTaskQueueResponse
	req  *workflowservice.DescribeTaskQueueRequest
}

func (c *describeClient) WorkflowService() workflowservice.WorkflowServiceClient {
	return describeService{c: c}
}

type describeService struct {
	workflowservice.WorkflowServiceClient
	c *describeClient
}

func (s describeService) DescribeTaskQueue(_ context.Context, req *workflowservice.DescribeTaskQueueRequest, _ ...grpc.CallOption) (*workflowservice.DescribeTaskQueueResponse, error) {
	s.c.req = req
	return s.c.resp, nil
}

// TestReporterShare: the reporter reads the pollers in the call that
// reads the limit and exposes the worker's share of the limit: the limit
// ÷ the distinct identities that polled the queue within PollerWindow, at
// least one; no share without a limit.
func TestReporterShare(t *testing.T) {
	now := time.Now()
	poller := func(id string, ago time.Duration) *taskqueuepb.PollerInfo {
		return &taskqueuepb.PollerInfo{Identity: id, LastAccessTime: timestamppb.New(now.Add(-ago))}
	}
	tests := []struct {
		name    string
		limit   float32
		pollers []*taskqueuepb.PollerInfo
		want    float64
		pollN   int
	}{
		{"no limit", 0, []*taskqueuepb.PollerInfo{poller("a", 0)}, 0, 1},
		{"no poller seen: the worker itself", 6, nil, 6, 1},
		{"two workers", 6, []*taskqueuepb.PollerInfo{poller("a", 0), poller("b", time.Second)}, 3, 2},
		{"one identity polling twice counts once", 6, []*taskqueuepb.PollerInfo{poller("a", 0), poller("a", 2*time.Second), poller("b", 0), poller("c", 0)}, 2, 3},
		{"a poller gone longer than the window", 6, []*taskqueuepb.PollerInfo{poller("a", 0), poller("dead", PollerWindow+time.Second)}, 6, 1},
		{"no access time", 4, []*taskqueuepb.PollerInfo{{Identity: "a"}, poller("b", 0)}, 4, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp := &workflowservice.DescribeTaskQueueResponse{Pollers: tc.pollers}
			if tc.limit > 0 {
				resp.Config = &taskqueuepb.TaskQueueConfig{QueueRateLimit: &taskqueuepb.RateLimitConfig{
					RateLimit: &taskqueuepb.RateLimit{RequestsPerSecond: tc.limit},
				}}
			}
			fc := &describeClient{resp: resp}
			r := NewReporter(fc, "gov", "ns", "a", ReporterConfig{Logger: itest.QuietLogger()})
			if s := r.Share("q"); s != 0 {
				t.Fatalf("share %v before the limit was read, want 0", s)
			}
			r.refreshLimits(t.Context())
			if !fc.req.GetReportConfig() {
				t.Errorf("DescribeTaskQueue asked %v: want the config (the pollers come with it)", fc.req)
			}
			if got := r.Share("q"); got != tc.want {
				t.Errorf("Share = %v, want %v", got, tc.want)
			}
			if got := r.Pollers("q"); got != tc.pollN {
				t.Errorf("Pollers = %v, want %v", got, tc.pollN)
			}
		})
	}
}

// countingDescribe answers DescribeTaskQueue without a limit and counts
// the calls per queue.
type countingDescribe struct {
	client.Client
	mu    sync.Mutex
	reads map[string]int
}

func (c *countingDescribe) WorkflowService() workflowservice.WorkflowServiceClient {
	return countingService{c: c}
}

func (c *countingDescribe) SignalWithStartWorkflow(context.Context, string, string, any, client.StartWorkflowOptions, any, ...any) (client.WorkflowRun, error) {
	return nil, nil
}

type countingService struct {
	workflowservice.WorkflowServiceClient
	c *countingDescribe
}

func (s countingService) DescribeTaskQueue(_ context.Context, req *workflowservice.DescribeTaskQueueRequest, _ ...grpc.CallOption) (*workflowservice.DescribeTaskQueueResponse, error) {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	s.c.reads[req.GetTaskQueue().GetName()]++
	return &workflowservice.DescribeTaskQueueResponse{}, nil
}

// TestReporterReadsActiveQueuesEverySecond: a queue this worker sends
// requests to has its limit read every report interval, so that a change
// its governor writes (the breaker closing after an outage) reaches the
// worker's pace within about a second; an idle queue every LimitInterval.
// Read every 5 s, a worker paced its recovery at the breaker's one probe
// a second for up to 5 s after the governor had closed it.
func TestReporterReadsActiveQueuesEverySecond(t *testing.T) {
	fc := &countingDescribe{reads: map[string]int{}}
	clk := &steppingClock{}
	r := NewReporter(fc, "gov", "ns", "a", ReporterConfig{ReportInterval: time.Second, LimitInterval: 5 * time.Second, Logger: itest.QuietLogger()})
	r.clock = clk
	r.Limit("idle")
	for sec := range 10 {
		clk.set(time.Duration(sec) * time.Second)
		r.Record("busy", false, false)
		r.report(t.Context(), false)
		r.refreshLimits(t.Context())
	}
	assert.Equal(t, 10, fc.reads["busy"], "the active queue: read every second")
	assert.Equal(t, 2, fc.reads["idle"], "the idle queue: at 0 s and 5 s")
}
