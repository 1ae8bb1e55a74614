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

// TestReporterQuietWhileUntroubled: a queue with no limit in force whose
// worker has seen neither a throttle nor a failure for QuietAfter sends
// no reports (each is a Temporal action, and a learning governor decides
// nothing on them); the first throttle is sent at once, reaching back
// over the interval before it, and the reports go on every interval
// until QuietAfter has passed without another. With a limit in force
// every interval is reported. Before, every interval with a request was
// reported: 20 reports in the 20 s below without a limit.
func TestReporterQuietWhileUntroubled(t *testing.T) {
	s, ms := time.Second, time.Millisecond
	for _, tc := range []struct {
		name  string
		limit float32
		// want is when a report was sent: at a tick, or at 5.6 s the
		// urgent one (the tick at 6 s is within the interval after it).
		want []time.Duration
	}{
		{"no limit", 0, []time.Duration{5*s + 600*ms, 7 * s, 8 * s, 9 * s, 10 * s, 11 * s, 12 * s, 13 * s, 14 * s, 15 * s}},
		{"a limit in force", 2, []time.Duration{1 * s, 2 * s, 3 * s, 4 * s, 5 * s, 5*s + 600*ms, 7 * s, 8 * s, 9 * s, 10 * s, 11 * s, 12 * s, 13 * s, 14 * s, 15 * s, 16 * s, 17 * s, 18 * s, 19 * s, 20 * s}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fc := &fakeClient{limit: tc.limit}
			clk := &steppingClock{}
			r := NewReporter(fc, "gov", "ns", "w1", ReporterConfig{ReportInterval: s, Logger: itest.QuietLogger()})
			r.clock = clk
			r.Limit("q")
			r.refreshLimits(t.Context())
			var at []time.Duration
			tick := func(urgent bool) {
				n := len(fc.sent())
				r.report(t.Context(), urgent)
				r.refreshLimits(t.Context())
				for range len(fc.sent()) - n {
					at = append(at, clk.mono)
				}
			}
			var urgentObs Observation
			for sec := 1; sec <= 20; sec++ {
				for i := range 4 {
					clk.set(time.Duration(sec-1)*s + time.Duration(i)*100*ms)
					r.Record("q", false, false)
				}
				if sec == 6 {
					clk.set(5*s + 500*ms)
					r.Record("q", true, false)
					clk.set(5*s + 600*ms)
					tick(true)
					urgentObs = fc.sent()[len(fc.sent())-1].obs
				}
				clk.set(time.Duration(sec) * s)
				tick(false)
			}
			assert.Equal(t, tc.want, at)
			assert.Equal(t, 1, urgentObs.Throttles)
			if tc.limit == 0 {
				assert.Equal(t, 1600*ms, urgentObs.Span, "the urgent report reaches back over the unsent interval before it")
				assert.Equal(t, 9, urgentObs.Requests)
			}
		})
	}
}

// poller is a poller of identity id whose last poll was ago before now.
func poller(id string, ago time.Duration) *taskqueuepb.PollerInfo {
	return &taskqueuepb.PollerInfo{Identity: id, LastAccessTime: timestamppb.New(time.Now().Add(-ago))}
}
