package governor

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/grpc"

	"github.com/idemhttp/temporal-idempotent-http/harness/itest"
)

// fakeClient records SignalWithStartWorkflow calls and answers
// DescribeTaskQueue with limit (none when 0) and pollers.
type fakeClient struct {
	client.Client

	mu      sync.Mutex
	signals []sent
	limit   float32
	pollers []*taskqueuepb.PollerInfo
}

type sent struct {
	at    time.Time
	id    string
	opts  client.StartWorkflowOptions
	obs   Observation
	input Input
}

func (f *fakeClient) SignalWithStartWorkflow(_ context.Context, id, signal string, arg any,
	opts client.StartWorkflowOptions, wf any, args ...any) (client.WorkflowRun, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if signal != SignalName || wf != WorkflowName || len(args) != 1 {
		panic("unexpected SignalWithStartWorkflow call")
	}
	f.signals = append(f.signals, sent{time.Now(), id, opts, arg.(Observation), args[0].(Input)})
	return nil, nil
}

func (f *fakeClient) WorkflowService() workflowservice.WorkflowServiceClient {
	return fakeService{f: f}
}

// fakeService is fakeClient's WorkflowService: DescribeTaskQueue only.
type fakeService struct {
	workflowservice.WorkflowServiceClient
	f *fakeClient
}

func (s fakeService) DescribeTaskQueue(context.Context, *workflowservice.DescribeTaskQueueRequest, ...grpc.CallOption) (*workflowservice.DescribeTaskQueueResponse, error) {
	f := s.f
	f.mu.Lock()
	defer f.mu.Unlock()
	resp := &workflowservice.DescribeTaskQueueResponse{Pollers: f.pollers}
	if f.limit > 0 {
		resp.Config = &taskqueuepb.TaskQueueConfig{QueueRateLimit: &taskqueuepb.RateLimitConfig{
			RateLimit: &taskqueuepb.RateLimit{RequestsPerSecond: f.limit},
			Metadata:  &taskqueuepb.ConfigMetadata{UpdateIdentity: Identity},
		}}
	}
	return resp, nil
}

func (f *fakeClient) sent() []sent {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]sent(nil), f.signals...)
}

func TestReporter(t *testing.T) {
	const interval = 100 * time.Millisecond
	fc := &fakeClient{limit: 2.5}
	rep := NewReporter(fc, "gov", "ns", "w1", ReporterConfig{
		ReportInterval: interval, LimitInterval: interval, Governor: Config{Floor: 3}, Logger: itest.QuietLogger(),
	})
	rep.Start(t.Context())
	defer rep.Close()

	// Concurrent Records, with throttles on queue q1 only.
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				rep.Record("q1", g == 0 && i == 25, false)
				rep.Record("q2", false, i%5 == 0) // a failure in five
				time.Sleep(time.Millisecond)
			}
		})
	}
	wg.Wait()
	time.Sleep(3 * interval) // q1's last report had no throttle: it is quiet
	throttledAt := time.Now()
	rep.Record("q1", true, false) // the first throttle after a quiet report
	time.Sleep(5 * interval)
	rep.Record("q3", false, false)
	time.Sleep(5 * interval)

	requireEventually(t, func() bool { r, ok := rep.Limit("q1"); return ok && r == 2.5 })
	rep.Close()
	got := fc.sent()
	sums := map[string][3]int{}
	failed := map[string]int{}
	last := map[string]sent{}
	var urgent bool
	for _, s := range got {
		q := s.input.TaskQueue
		assert.Equal(t, WorkflowID(q), s.id)
		assert.Equal(t, WorkflowID(q), s.opts.ID)
		assert.Equal(t, "gov", s.opts.TaskQueue)
		assert.Equal(t, "ns", s.input.Namespace)
		assert.Equal(t, 3.0, s.input.Config.Floor)
		assert.Equal(t, "w1", s.obs.Worker)
		assert.Positive(t, s.obs.Requests, "an interval without requests sends nothing")
		assert.True(t, s.obs.To.After(s.obs.From))
		c := sums[q]
		c[0] += s.obs.Requests
		c[1] += s.obs.Throttles
		c[2] += s.obs.Accepted
		failed[q] += s.obs.Failed
		prev, ok := last[q]
		if ok && s.obs.From.Equal(prev.obs.From) {
			// An urgent report reaching back over the one before
			// counts that one again; the governor counts it once
			// (Decider.covers), and so does this sum. (On a loaded
			// machine an interval of q2's may hold no failure: its next
			// failure is then urgent.)
			c[0] -= prev.obs.Requests
			c[1] -= prev.obs.Throttles
			c[2] -= prev.obs.Accepted
			failed[q] -= prev.obs.Failed
		}
		sums[q] = c
		if s.obs.Throttles > 0 && s.at.After(throttledAt) && s.at.Sub(throttledAt) < interval/2 {
			urgent = true
		}
		// The first throttle or failure after a report without one, and
		// the first answer after a report of failures alone, are
		// reported at once; other reports wait their interval.
		if ok && s.obs.Throttles == 0 && (prev.obs.Failed == 0 || prev.obs.Accepted > 0) && !(s.obs.Failed > 0 && prev.obs.Failed == 0) {
			assert.GreaterOrEqual(t, s.at.Sub(prev.at), interval*8/10, "at most one report per interval")
		}
		last[q] = s
	}
	assert.Equal(t, 401, sums["q1"][0])
	assert.Equal(t, 2, sums["q1"][1])
	assert.Equal(t, 400, sums["q2"][0])
	assert.Zero(t, sums["q2"][1])
	assert.Equal(t, 320, sums["q2"][2], "accepted: the answers neither throttles nor failures")
	assert.Equal(t, 80, failed["q2"], "the failures")
	assert.Equal(t, 1, sums["q3"][0])
	assert.True(t, urgent, "the throttle after a quiet report was sent at once: %+v", got)
	_, ok := rep.Limit("unknown")
	assert.False(t, ok)
}

// TestReporterGovernorFor: a governor the reporter starts takes the
// Config GovernorFor gives its queue, in place of Governor.
func TestReporterGovernorFor(t *testing.T) {
	tests := []struct {
		name  string
		cfg   ReporterConfig
		floor map[string]float64 // queue → the Config.Floor its governor starts with
	}{
		{"Governor for every queue", ReporterConfig{Governor: Config{Floor: 3}}, map[string]float64{"q1": 3, "q2": 3}},
		{"GovernorFor each queue", ReporterConfig{Governor: Config{Floor: 3}, GovernorFor: func(q string) Config {
			return Config{Floor: map[string]float64{"q1": 7, "q2": 9}[q]}
		}}, map[string]float64{"q1": 7, "q2": 9}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fc := &fakeClient{}
			tc.cfg.ReportInterval, tc.cfg.Logger = time.Hour, itest.QuietLogger()
			rep := NewReporter(fc, "gov", "ns", "w1", tc.cfg)
			rep.Start(t.Context())
			defer rep.Close()
			for q := range tc.floor {
				rep.Record(q, true, false) // a throttle: sent at once
			}
			requireEventually(t, func() bool { return len(fc.sent()) == len(tc.floor) })
			for _, s := range fc.sent() {
				assert.Equal(t, tc.floor[s.input.TaskQueue], s.input.Config.Floor, "queue %s", s.input.TaskQueue)
			}
		})
	}
}

// TestReporterUrgentFailure: the first failure after a report without one
// is sent at once (no report is ever due here: the interval is an hour),
// like a throttle, to the governor of an origin queue on the governors'
// own task queue; the next failure waits for the interval.
func TestReporterUrgentFailure(t *testing.T) {
	cases := []struct {
		name, queue, governorTQ string
		throttled               bool
	}{
		{"a failure, an origin queue", "idempotent-http@https://api.example.com", "idempotent-http@governor", false},
		{"a throttle, another queue", "q1", "gov", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fc := &fakeClient{}
			rep := NewReporter(fc, "gov", "ns", "w1", ReporterConfig{ReportInterval: time.Hour, Logger: itest.QuietLogger()})
			rep.Start(t.Context())
			defer rep.Close()
			rep.Record(c.queue, false, false)
			rep.Record(c.queue, c.throttled, !c.throttled)
			requireEventually(t, func() bool { return len(fc.sent()) == 1 })
			rep.Record(c.queue, c.throttled, !c.throttled)
			rep.Close()
			got := fc.sent()
			require.Len(t, got, 1, "one urgent report, then none before the interval")
			o := got[0].obs
			assert.Equal(t, c.governorTQ, got[0].opts.TaskQueue)
			assert.Equal(t, 2, o.Requests)
			assert.Equal(t, 1, o.Accepted)
			if c.throttled {
				assert.Equal(t, 1, o.Throttles)
				assert.Zero(t, o.Failed)
			} else {
				assert.Equal(t, 1, o.Failed)
				assert.Zero(t, o.Throttles)
			}
		})
	}
}

func TestTaskQueue(t *testing.T) {
	assert.Equal(t, "idempotent-http@governor", TaskQueue("idempotent-http"))
	for q, want := range map[string]string{
		"idempotent-http@https://api.example.com": "idempotent-http@governor",
		"a@b@https://api.example.com":             "a@b@governor",
		"plain":                                   "",
		"@https://api.example.com":                "",
	} {
		got, ok := governorQueue(q)
		assert.Equal(t, want, got, q)
		assert.Equal(t, want != "", ok, q)
	}
}

func requireEventually(t *testing.T, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, 5*time.Second, 10*time.Millisecond)
}

// flakyClient is a fakeClient whose SignalWithStartWorkflow fails while
// fail is set.
type flakyClient struct {
	*fakeClient
	fail bool
}

func (f *flakyClient) SignalWithStartWorkflow(ctx context.Context, id, signal string, arg any,
	opts client.StartWorkflowOptions, wf any, args ...any) (client.WorkflowRun, error) {
	if f.fail {
		return nil, context.DeadlineExceeded
	}
	return f.fakeClient.SignalWithStartWorkflow(ctx, id, signal, arg, opts, wf, args...)
}

// TestReporterFailedSendCountsOnce: an urgent report that reaches back
// over the report before it (its failures included) and cannot be sent
// puts back only its own counts: the answers of the report before were
// sent, and counting them again would show the governor failures (and
// accepted answers) that did not happen, more than the requests sent.
func TestReporterFailedSendCountsOnce(t *testing.T) {
	const queue = "base@https://api.example.com"
	fc := &flakyClient{fakeClient: &fakeClient{}}
	r := NewReporter(fc, "gov", "ns", "w1", ReporterConfig{ReportInterval: time.Hour})
	ctx := context.Background()
	// A failure after a calm: sent at once.
	r.Record(queue, false, true)
	r.report(ctx, true)
	// A throttle right after: an urgent report reaching back over the
	// failure's, which is not sent.
	fc.fail = true
	r.Record(queue, true, false)
	r.report(ctx, true)
	fc.fail = false
	// The next report carries what was not sent: one throttle.
	r.mu.Lock()
	r.cfg.ReportInterval = 0
	r.mu.Unlock()
	r.report(ctx, false)
	got := fc.sent()
	require.Len(t, got, 2)
	assert.Equal(t, Observation{Worker: "w1", Requests: 1, Failed: 1}, Observation{Worker: got[0].obs.Worker, Requests: got[0].obs.Requests, Failed: got[0].obs.Failed})
	last := got[1].obs
	assert.Equal(t, 1, last.Requests, "requests: %+v", last)
	assert.Equal(t, 1, last.Throttles, "throttles: %+v", last)
	assert.Zero(t, last.Failed, "the failure was sent before: %+v", last)
	assert.Zero(t, last.Accepted, "accepted: %+v", last)
}

// TestReporterAlone: a worker that the last read found alone on a queue
// without a limit reports nothing, throttles and failures included (its
// own admission decides); with another worker polling, or a limit in
// force, it reports.
func TestReporterAlone(t *testing.T) {
	const interval = 50 * time.Millisecond
	tests := []struct {
		name    string
		limit   float32
		pollers []*taskqueuepb.PollerInfo
		reports bool
	}{
		{"alone, no limit", 0, []*taskqueuepb.PollerInfo{poller("w1", 0)}, false},
		{"alone, a limit in force", 3, []*taskqueuepb.PollerInfo{poller("w1", 0)}, true},
		{"two workers", 0, []*taskqueuepb.PollerInfo{poller("w1", 0), poller("w2", time.Second)}, true},
		{"no poller seen: not known to be alone", 0, nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fc := &fakeClient{limit: tc.limit, pollers: tc.pollers}
			rep := NewReporter(fc, "gov", "ns", "w1", ReporterConfig{
				ReportInterval: interval, LimitInterval: interval, Logger: itest.QuietLogger(),
			})
			rep.Limit("q") // watched: read before the first answer
			rep.Start(t.Context())
			defer rep.Close()
			time.Sleep(3 * interval)
			for i := range 20 {
				rep.Record("q", i%2 == 0, i%3 == 0)
				time.Sleep(interval / 5)
			}
			time.Sleep(3 * interval)
			rep.Close()
			if got := len(fc.sent()); (got > 0) != tc.reports {
				t.Errorf("%d reports sent, want any: %t", got, tc.reports)
			}
		})
	}
}

// TestReporterRecovery: the first accepted answer after a report of
// failures alone is reported at once, on its own (without the failures
// of the report before), so that the governor's breaker closes on it;
// after a report with accepted answers among its failures it waits for
// its interval.
func TestReporterRecovery(t *testing.T) {
	const interval = 400 * time.Millisecond
	tests := []struct {
		name     string
		accepted int // accepted answers among the first report's failures
		urgent   bool
	}{
		{"after failures alone", 0, true},
		{"after failures among answers", 2, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fc := &fakeClient{}
			rep := NewReporter(fc, "gov", "ns", "w1", ReporterConfig{
				ReportInterval: interval, LimitInterval: interval, Logger: itest.QuietLogger(),
			})
			rep.Start(t.Context())
			defer rep.Close()
			for range tc.accepted {
				rep.Record("q", false, false)
			}
			for range 3 {
				rep.Record("q", false, true)
			}
			requireEventually(t, func() bool { return len(fc.sent()) == 1 })
			first := fc.sent()[0]
			require.Equal(t, 3, first.obs.Failed)
			time.Sleep(interval / 4) // the urgent failure report and its interval are over
			answered := time.Now()
			rep.Record("q", false, false)
			requireEventually(t, func() bool { return len(fc.sent()) == 2 })
			second := fc.sent()[1]
			if urgent := second.at.Sub(answered) < interval/2; urgent != tc.urgent {
				t.Errorf("the answer was reported %s after it came (interval %s): urgent %t, want %t", second.at.Sub(answered), interval, urgent, tc.urgent)
			}
			if tc.urgent {
				assert.Equal(t, 0, second.obs.Failed, "the failures reported before are not counted again")
				assert.Equal(t, 1, second.obs.Accepted)
			}
		})
	}
}

// TestReporterIntervalBeginsAtFirstRequest: a report after an idle
// moment (the queue's start, or a report tick without requests) spans
// from its first request, not from the tick: a herd's first report
// would otherwise count up to a second without requests in its rate,
// and the governor's first cut would go to half the API's rate. A
// busy queue's interval begins at its last report, as before.
func TestReporterIntervalBeginsAtFirstRequest(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name     string
		records  []time.Duration // requests recorded at these monotonic times
		ticks    []time.Duration // regular reports at these
		wantSpan []time.Duration // Span of each report sent
	}{
		{"first request after the queue's start", []time.Duration{700 * ms, 800 * ms}, []time.Duration{1000 * ms}, []time.Duration{300 * ms}},
		{"first request after an idle tick", []time.Duration{1800 * ms}, []time.Duration{1000 * ms, 2000 * ms}, []time.Duration{200 * ms}},
		{"busy: the next interval begins at the report", []time.Duration{0, 900 * ms, 1200 * ms}, []time.Duration{1000 * ms, 2000 * ms}, []time.Duration{1000 * ms, 1000 * ms}},
		{"idle between two busy intervals", []time.Duration{0, 2500 * ms}, []time.Duration{1000 * ms, 2000 * ms, 3000 * ms}, []time.Duration{1000 * ms, 500 * ms}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := &steppingClock{}
			fc := &fakeClient{}
			r := NewReporter(fc, "gov", "ns", "w1", ReporterConfig{ReportInterval: time.Second, Logger: itest.QuietLogger()})
			r.clock = clk
			r.Limit(herdQueue) // watched from 0, before any request
			records, ticks := tc.records, tc.ticks
			for len(records) > 0 || len(ticks) > 0 {
				if len(records) > 0 && (len(ticks) == 0 || records[0] <= ticks[0]) {
					clk.set(records[0])
					r.Record(herdQueue, false, false)
					records = records[1:]
					continue
				}
				clk.set(ticks[0])
				r.report(t.Context(), false)
				ticks = ticks[1:]
			}
			got := fc.sent()
			var spans []time.Duration
			for _, s := range got {
				spans = append(spans, s.obs.Span)
				assert.Equal(t, s.obs.Span, s.obs.To.Sub(s.obs.From), "From and To span the same interval")
			}
			assert.Equal(t, tc.wantSpan, spans)
		})
	}
}
