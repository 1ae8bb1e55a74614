package governor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/idemhttp/temporal-idempotent-http/harness/itest"
	"github.com/idemhttp/temporal-idempotent-http/internal/admission"
)

// t0 is the workflow clock's start in these tests.
var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// write is one SetRate call the fake saw, at a workflow time since t0.
type write struct {
	At   time.Duration
	Rate float64
}

// fakeSetter stands in for Activities.SetRate: it records every call and
// answers with respond (nil: the rate was written and is in force).
type fakeSetter struct {
	env     *testsuite.TestWorkflowEnvironment
	respond func(call int, req SetRateRequest) (SetRateResult, error)

	mu    sync.Mutex
	calls []write
}

// SetRate has the name of Activities.SetRate, so the workflow's method
// reference resolves to it once it is registered as SetRateName.
func (f *fakeSetter) SetRate(_ context.Context, req SetRateRequest) (SetRateResult, error) {
	f.mu.Lock()
	f.calls = append(f.calls, write{At: f.env.Now().Sub(t0), Rate: req.Rate})
	n := len(f.calls)
	f.mu.Unlock()
	if f.respond != nil {
		return f.respond(n, req)
	}
	return SetRateResult{Written: true, Limited: true, InForce: float64(float32(req.Rate)), Owner: Identity}, nil
}

// sig is one observation, signalled at workflow time At: Requests over the
// second before At (over Span before At when Span is set).
type sig struct {
	At        time.Duration
	Worker    string
	Requests  int
	Throttles int
	Accepted  int
	Failed    int
	Span      time.Duration
	// Skew is how far the worker's clock is ahead of the workflow's
	// (negative: behind); From and To are on the worker's clock.
	Skew time.Duration
	// Raw, if set, is the observation sent, as it is (the fields above
	// but At are not read).
	Raw *Observation
}

func (s sig) obs() Observation {
	if s.Raw != nil {
		return *s.Raw
	}
	span := s.Span
	if span == 0 {
		span = time.Second
	}
	to := t0.Add(s.At + s.Skew)
	return Observation{Worker: s.Worker, Requests: s.Requests, Throttles: s.Throttles, Accepted: s.Accepted, Failed: s.Failed, From: to.Add(-span), To: to}
}

// every returns one signal per second from worker, at from, from+1s, …,
// up to to, each with rps requests and no throttle.
func every(worker string, rps int, from, to time.Duration) []sig {
	var out []sig
	for at := from; at <= to; at += time.Second {
		out = append(out, sig{At: at, Worker: worker, Requests: rps})
	}
	return out
}

// run is the result of one governor run in the test environment.
type run struct {
	writes []write // successful or not: every SetRate call
	state  State   // queried at end
	err    error   // the workflow's error
}

// runGovernor runs the governor with in, sends signals (those of one time
// together, in order, in one workflow task), queries its state at
// end and then cancels it (unless it ended before).
func runGovernor(t *testing.T, in Input, respond func(int, SetRateRequest) (SetRateResult, error), sigs []sig, end time.Duration, setup ...func(*testsuite.TestWorkflowEnvironment)) run {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	s.SetLogger(itest.QuietLogger())
	env := s.NewTestWorkflowEnvironment()
	env.SetStartTime(t0)
	fake := &fakeSetter{env: env, respond: respond}
	env.RegisterWorkflowWithOptions(Workflow, workflow.RegisterOptions{Name: WorkflowName})
	env.RegisterActivityWithOptions(fake.SetRate, activity.RegisterOptions{Name: SetRateName})
	for _, f := range setup {
		f(env)
	}
	byTime := map[time.Duration][]Observation{}
	var times []time.Duration
	for _, s := range sigs {
		if _, ok := byTime[s.At]; !ok {
			times = append(times, s.At)
		}
		byTime[s.At] = append(byTime[s.At], s.obs())
	}
	for _, at := range times {
		batch := byTime[at]
		env.RegisterDelayedCallback(func() {
			// Signals sent together arrive in one workflow task.
			for i, o := range batch {
				if i < len(batch)-1 {
					env.SignalWorkflowSkippingWorkflowTask(SignalName, o)
				} else {
					env.SignalWorkflow(SignalName, o)
				}
			}
		}, at)
	}
	var r run
	var queried bool
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(QueryName)
		require.NoError(t, err)
		require.NoError(t, v.Get(&r.state))
		queried = true
		env.CancelWorkflow()
	}, end)
	env.ExecuteWorkflow(WorkflowName, in)
	require.True(t, env.IsWorkflowCompleted())
	r.err = env.GetWorkflowError()
	if queried {
		var canceled *temporal.CanceledError
		require.ErrorAs(t, r.err, &canceled, "the governor runs until cancelled")
	}
	fake.mu.Lock()
	r.writes = fake.calls
	fake.mu.Unlock()
	return r
}

// rulesV0 makes the governor decide by RulesV0, as a governor recorded
// before versionRules replays: TestDecisions and TestClockSkew state
// those rules, which must not change.
func rulesV0(env *testsuite.TestWorkflowEnvironment) {
	env.OnGetVersion(versionRules, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
}

func input() Input { return Input{TaskQueue: "api.example.com", Namespace: "ns"} }

func TestDecisions(t *testing.T) {
	s := time.Second
	var (
		operatorOnCall2 = func(n int, req SetRateRequest) (SetRateResult, error) {
			if n >= 2 {
				return SetRateResult{Limited: true, InForce: 3, Owner: "operator@cli", Reason: "manual"}, nil
			}
			return SetRateResult{Written: true, Limited: true, InForce: float64(float32(req.Rate)), Owner: Identity}, nil
		}
		refused = func(int, SetRateRequest) (SetRateResult, error) {
			return SetRateResult{}, temporal.NewNonRetryableApplicationError(
				"UpdateTaskQueueConfig: PermissionDenied: Request unauthorized.", ErrTypeUnsupported, nil)
		}
		failsOnce = func(n int, req SetRateRequest) (SetRateResult, error) {
			if n == 1 {
				return SetRateResult{}, errors.New("Unavailable: frontend is down")
			}
			return SetRateResult{Written: true, Limited: true, InForce: float64(float32(req.Rate)), Owner: Identity}, nil
		}
	)
	cases := []struct {
		name    string
		cfg     Config
		respond func(int, SetRateRequest) (SetRateResult, error)
		sigs    []sig
		end     time.Duration
		writes  []write
		status  string
		inForce float64
		errHas  string
	}{
		{
			name: "a throttle cuts, Gather later, to 0.9 × the rate the API accepted from all workers",
			cfg:  Config{Beta: DefaultBeta, Gather: DefaultGather},
			sigs: []sig{
				// b reports a throttle first; a reports what it got in the
				// same second a moment later: both count.
				{At: 2 * s, Worker: "b", Requests: 10, Accepted: 3, Throttles: 7},
				{At: 2*s + 300*time.Millisecond, Worker: "a", Requests: 10, Accepted: 3, Throttles: 7},
				// In force: the API takes less than 0.9 × 5.4; over the
				// last 3 s a got 2 + 1, b 2 + 2 accepted: (3 + 4) / 2 s
				// × 0.9.
				{At: 9 * s, Worker: "a", Requests: 2, Accepted: 2},
				{At: 9 * s, Worker: "b", Requests: 3, Accepted: 2, Throttles: 1},
				{At: 10 * s, Worker: "a", Requests: 3, Accepted: 1, Throttles: 2},
				{At: 10 * s, Worker: "b", Requests: 3, Accepted: 2, Throttles: 1},
			},
			end:     15 * s,
			writes:  []write{{3*s + 500*time.Millisecond, 5.4}, {10*s + 500*time.Millisecond, 3.15}},
			status:  StatusLimited,
			inForce: 3.15,
		},
		{
			name: "a cut at once counts only the reports so far",
			cfg:  Config{Beta: DefaultBeta, Gather: -1},
			sigs: []sig{
				{At: 2 * s, Worker: "b", Requests: 10, Accepted: 3, Throttles: 7},
				{At: 2*s + 300*time.Millisecond, Worker: "a", Requests: 10, Accepted: 3, Throttles: 7},
			},
			end:     5 * s,
			writes:  []write{{2 * s, 2.7}},
			status:  StatusLimited,
			inForce: 2.7,
		},
		{
			name: "a rate is measured over at least a second: a report of 20 ms",
			cfg:  Config{Beta: DefaultBeta, Gather: -1},
			sigs: []sig{
				{At: 1 * s, Worker: "a", Requests: 10, Accepted: 6, Throttles: 4, Span: 20 * time.Millisecond},
			},
			end:     3 * s,
			writes:  []write{{1 * s, 5.4}}, // 0.9 × 6 / 1 s, not 0.9 × 6 / 0.02 s
			status:  StatusLimited,
			inForce: 5.4,
		},
		{
			name: "no cut while the API accepts about the limit (its throttles come from bursts)",
			cfg:  Config{Beta: DefaultBeta, Gather: -1},
			sigs: []sig{
				{At: 2 * s, Worker: "a", Requests: 10, Accepted: 4, Throttles: 6},
				{At: 8 * s, Worker: "a", Requests: 5, Accepted: 4, Throttles: 1}, // 4 ≥ 0.9 × 3.6
			},
			end:     10 * s,
			writes:  []write{{2 * s, 3.6}}, // 0.9 × 4
			status:  StatusLimited,
			inForce: 3.6,
		},
		{
			name: "no limit before the first throttle; without accepted counts it cuts from 0.8 × the measured rate of all workers",
			sigs: []sig{
				{At: 1 * s, Worker: "a", Requests: 6}, {At: 1 * s, Worker: "b", Requests: 4},
				{At: 2 * s, Worker: "a", Requests: 6, Throttles: 1},
			},
			end:     5 * s,
			writes:  []write{{2 * s, 8}}, // (6 + 4) × 0.8
			status:  StatusLimited,
			inForce: 8,
		},
		{
			name: "stale observations do not count in the measured rate",
			sigs: []sig{
				{At: 1 * s, Worker: "old", Requests: 100},
				{At: 20 * s, Worker: "a", Requests: 10, Throttles: 1},
			},
			end:    25 * s,
			writes: []write{{20 * s, 8}},
			status: StatusLimited,
		},
		{
			name: "a second throttle within CutInterval does not cut again; one after it cuts from min(rate, measured)",
			sigs: append(every("a", 10, 1*s, 9*s), []sig{
				{At: 2 * s, Worker: "b", Requests: 0, Throttles: 1},
				{At: 4 * s, Worker: "b", Requests: 0, Throttles: 1},
				{At: 8 * s, Worker: "b", Requests: 0, Throttles: 1},
			}...),
			end: 10 * s,
			// At 2 s: 0.8 × 10. At 8 s: 0.8 × min(8, 10).
			writes: []write{{2 * s, 8}, {8 * s, 6.4}},
			status: StatusLimited,
		},
		{
			name: "a throttle cuts from the measured rate when it is below the rate",
			sigs: append(every("a", 5, 1*s, 9*s),
				sig{At: 2 * s, Worker: "b", Throttles: 1, Requests: 5},
				sig{At: 9 * s, Worker: "b", Throttles: 1, Requests: 0}),
			end: 10 * s,
			// At 2 s: 0.8 × (5 + 5) = 8. At 9 s: b's latest is 0/s, so 0.8 × 5.
			writes: []write{{2 * s, 8}, {9 * s, 4}},
			status: StatusLimited,
		},
		{
			name: "after Calm without a throttle the rate grows by 20 %, then again after each further Calm",
			sigs: append(every("a", 8, 1*s, 70*s), sig{At: 2 * s, Worker: "b", Requests: 2, Throttles: 1}),
			end:  70 * s,
			// 0.8 × 10; then × 1.2 at 32 s and 62 s (the measured rate, 8,
			// allows up to 16).
			writes: []write{{2 * s, 8}, {32 * s, 9.6}, {62 * s, 11.52}},
			status: StatusLimited,
		},
		{
			name: "a throttle restarts the calm period",
			sigs: append(every("a", 8, 1*s, 50*s),
				sig{At: 2 * s, Worker: "b", Requests: 2, Throttles: 1},
				sig{At: 20 * s, Worker: "b", Requests: 0, Throttles: 1}),
			end: 55 * s,
			// The throttle at 20 s cuts (0.8 × min(8, 8)) and moves the
			// raise from 32 s to 50 s.
			writes: []write{{2 * s, 8}, {20 * s, 6.4}, {50 * s, 7.68}},
			status: StatusLimited,
		},
		{
			name: "a raise never goes above twice the measured rate",
			sigs: append(every("a", 3, 1*s, 40*s), sig{At: 2 * s, Worker: "b", Requests: 7, Throttles: 1}),
			end:  40 * s,
			// 0.8 × 10 = 8; at 32 s: min(9.6, 2 × 3) = 6 is no raise at all.
			writes: []write{{2 * s, 8}},
			status: StatusLimited,
		},
		{
			name:   "an idle queue is not raised",
			sigs:   []sig{{At: 2 * s, Worker: "a", Requests: 10, Throttles: 1}},
			end:    300 * s,
			writes: []write{{2 * s, 8}},
			status: StatusLimited,
		},
		{
			name:   "a raise under MinChange is skipped",
			cfg:    Config{Raise: 0.05},
			sigs:   append(every("a", 8, 1*s, 70*s), sig{At: 2 * s, Worker: "b", Requests: 2, Throttles: 1}),
			end:    70 * s,
			writes: []write{{2 * s, 8}},
			status: StatusLimited,
		},
		{
			name: "the floor is respected, and a cut at the floor writes nothing",
			sigs: []sig{
				{At: 5 * s, Worker: "a", Requests: 2, Throttles: 1, Span: 5 * s}, // 0.4/s
				{At: 11 * s, Worker: "a", Requests: 2, Throttles: 2, Span: 5 * s},
			},
			end:     15 * s,
			writes:  []write{{5 * s, 0.5}},
			status:  StatusLimited,
			inForce: 0.5,
		},
		{
			name:   "a configured floor",
			cfg:    Config{Floor: 2},
			sigs:   []sig{{At: 1 * s, Worker: "a", Requests: 1, Throttles: 1}},
			end:    5 * s,
			writes: []write{{1 * s, 2}},
			status: StatusLimited,
		},
		{
			name:    "a limit set by someone else stops the writes",
			respond: operatorOnCall2,
			sigs: []sig{
				{At: 2 * s, Worker: "a", Requests: 10, Throttles: 1},
				{At: 8 * s, Worker: "a", Requests: 10, Throttles: 1},
				{At: 14 * s, Worker: "a", Requests: 10, Throttles: 1},
				{At: 20 * s, Worker: "a", Requests: 10, Throttles: 1},
			},
			end:     25 * s,
			writes:  []write{{2 * s, 8}, {8 * s, 6.4}}, // the second found the operator's limit
			status:  StatusOverridden,
			inForce: 3,
		},
		{
			name:    "a refused call stops the writes",
			respond: refused,
			sigs: []sig{
				{At: 2 * s, Worker: "a", Requests: 10, Throttles: 1},
				{At: 8 * s, Worker: "a", Requests: 10, Throttles: 1},
			},
			end:    12 * s,
			writes: []write{{2 * s, 8}},
			status: StatusUnsupported,
			errHas: "PermissionDenied",
		},
		{
			name:    "a transient failure is retried at the next decision",
			respond: failsOnce,
			sigs: []sig{
				{At: 2 * s, Worker: "a", Requests: 10, Throttles: 1},
				{At: 3 * s, Worker: "a", Requests: 5, Throttles: 1},
			},
			end:     5 * s,
			writes:  []write{{2 * s, 8}, {3 * s, 4}},
			status:  StatusLimited,
			inForce: 4,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := input()
			in.Config = c.cfg
			if in.Config.Beta == 0 {
				// The cases written for the measured rate's fallback.
				in.Config.Beta = 0.8
			}
			if in.Config.Gather == 0 {
				// The cases written for a cut at once.
				in.Config.Gather = -1
			}
			r := runGovernor(t, in, c.respond, c.sigs, c.end, rulesV0)
			requireWrites(t, c.writes, r.writes)
			assert.Equal(t, c.status, r.state.Status)
			if c.inForce != 0 {
				assert.InDelta(t, c.inForce, r.state.InForce, 1e-6)
			}
			if c.errHas != "" {
				assert.Contains(t, r.state.Error, c.errHas)
			} else {
				assert.Empty(t, r.state.Error)
			}
			if c.status == StatusLimited {
				last := c.writes[len(c.writes)-1]
				assert.InDelta(t, last.Rate, r.state.Rate, 1e-5, "State.Rate is the last rate written")
				assert.Equal(t, t0.Add(last.At), r.state.LastWrite)
			}
		})
	}
}

// TestClockSkew: a worker whose clock is off, either way, by a few
// seconds or by more than the windows, gets the same decisions as one on
// time: the governor judges a report's age by when it arrived, on its
// own clock, and its rates by the report's own interval. A clock 15 s
// behind once dropped every report (the queue pinned at the floor, no
// raise ever due); 5 s behind, the cut used the sent rate.
func TestClockSkew(t *testing.T) {
	s := time.Second
	for _, alone := range []bool{true, false} {
		for _, skew := range []time.Duration{0, -5 * s, 5 * s, -15 * s, 15 * s, -time.Hour, time.Hour} {
			t.Run(fmt.Sprintf("alone=%v/%s", alone, skew), func(t *testing.T) {
				in := input()
				in.Config = Config{Beta: DefaultBeta, Gather: DefaultGather}
				// Worker a, skewed, alone or beside b, on time: a
				// throttle, then a steady load without throttles, which
				// a raise after Calm follows.
				sigs := []sig{{At: 2 * s, Worker: "a", Requests: 10, Accepted: 6, Throttles: 4, Skew: skew}}
				for at := 4 * s; at <= 60*s; at += s {
					sigs = append(sigs, sig{At: at, Worker: "a", Requests: 3, Accepted: 3, Skew: skew})
				}
				want := []write{{3*s + 500*time.Millisecond, 5.4}, {32 * s, 6}} // 0.9 × 6/s; then + 20 %, at most twice the 3/s measured
				if !alone {
					sigs = append(sigs, sig{At: 2*s + 300*time.Millisecond, Worker: "b", Requests: 10, Accepted: 3, Throttles: 7})
					for at := 4 * s; at <= 60*s; at += s {
						sigs = append(sigs, sig{At: at, Worker: "b", Requests: 3, Accepted: 3})
					}
					want = []write{{3*s + 500*time.Millisecond, 8.1}, {32*s + 300*time.Millisecond, 9.72}} // 0.9 × (6 + 3)/s; then + 20 %
				}
				r := runGovernor(t, in, nil, sigs, 60*s, rulesV0)
				requireWrites(t, want, r.writes)
				assert.Equal(t, StatusLimited, r.state.Status)
			})
		}
	}
}

func requireWrites(t *testing.T, want, got []write) {
	t.Helper()
	require.Len(t, got, len(want), "SetRate calls: want %v, got %v", want, got)
	for i := range want {
		assert.Equal(t, want[i].At, got[i].At, "call %d: %v", i, got[i])
		assert.InDelta(t, want[i].Rate, got[i].Rate, 1e-5, "call %d: %v", i, got[i])
		// Every rate is written as the server stores it (a float32).
		assert.Equal(t, float64(float32(got[i].Rate)), got[i].Rate)
	}
}

// continuedInput decodes the input of the run a continue-as-new starts.
func continuedInput(t *testing.T, err error) Input {
	t.Helper()
	var can *workflow.ContinueAsNewError
	require.ErrorAs(t, err, &can)
	require.Equal(t, WorkflowName, can.WorkflowType.Name)
	var in Input
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &in))
	return in
}

func TestContinueAsNewCarriesStateAndDrainsSignals(t *testing.T) {
	s := time.Second
	in := input()
	in.Config = Config{MaxSignals: 3, Calm: time.Minute, Beta: 0.8, Gather: -1}
	r := runGovernor(t, in, nil, []sig{
		{At: 1 * s, Worker: "a", Requests: 6},
		{At: 2 * s, Worker: "b", Requests: 4, Throttles: 1},
		// Three signals at once: the third arrives after the limit of 3
		// and must be handled, not lost.
		{At: 3 * s, Worker: "c", Requests: 1},
		{At: 3 * s, Worker: "d", Requests: 1},
		{At: 3 * s, Worker: "e", Requests: 1, Throttles: 1},
	}, time.Hour)
	next := continuedInput(t, r.err)
	assert.Equal(t, in.TaskQueue, next.TaskQueue)
	assert.Equal(t, in.Namespace, next.Namespace)
	assert.Equal(t, in.Config, next.Config)
	st := next.State
	assert.Equal(t, StatusLimited, st.Status)
	assert.InDelta(t, 8, st.Rate, 1e-6)
	assert.InDelta(t, 8, st.InForce, 1e-6)
	assert.Equal(t, t0.Add(2*s), st.LastCut)
	assert.Equal(t, t0.Add(3*s), st.LastThrottle, "e's throttle was handled before continuing")
	for _, w := range []string{"a", "b", "c", "d", "e"} {
		assert.Contains(t, st.Workers, w)
	}
	requireWrites(t, []write{{2 * s, 8}}, r.writes) // e's throttle came within CutInterval

	// The next run decides from the carried state: a throttle cuts from
	// the carried rate (8), not from the measured rate (20), and a
	// throttle within CutInterval of the carried LastCut does not cut.
	next.State.Workers = nil
	r2 := runGovernor(t, next, nil, []sig{
		{At: 4 * s, Worker: "a", Requests: 20, Throttles: 1},
		{At: 8 * s, Worker: "a", Requests: 20, Throttles: 1},
	}, 10*s, rulesV0) // the cut these lines state (RulesV1 raises the saturated queue at 7 s)
	requireWrites(t, []write{{8 * s, 6.4}}, r2.writes)
	assert.Equal(t, StatusLimited, r2.state.Status)
}

func TestContinueAsNewWhenSuggested(t *testing.T) {
	in := input()
	in.Config.Gather = -1
	r := runGovernor(t, in, nil, []sig{
		{At: time.Second, Worker: "a", Requests: 10, Accepted: 9, Throttles: 1},
	}, time.Hour, func(env *testsuite.TestWorkflowEnvironment) { env.SetContinueAsNewSuggested(true) })
	next := continuedInput(t, r.err)
	assert.InDelta(t, 8.1, next.State.Rate, 1e-6) // 0.9 × 9
	assert.Equal(t, StatusLimited, next.State.Status)
}

// TestWorkflowRulesV1: a new governor decides by RulesV1: the first
// throttle's report cuts at once and every worker's reports correct it;
// the workers' failures open the breaker (one probe a second), an answer
// closes it at once, back to the rate before (a governor recorded before
// version breaker-restore ramps back, doubling each second); and it
// continues as new on the governors' own task queue.
func TestWorkflowRulesV1(t *testing.T) {
	s, ms := time.Second, time.Millisecond
	corrected := float64(float32(0.9 * 6 / 1.3))
	// At once, then corrected: 6 accepted over 1.3 s (a's second and
	// b's, 300 ms later), × 0.9; open: one probe a second.
	herd := []write{{2 * s, 2.7}, {3*s + 500*ms, corrected}, {13*s + 100*ms, 1}}
	for _, c := range []struct {
		name  string
		setup func(*testsuite.TestWorkflowEnvironment)
		back  []write
	}{
		{"breaker-restore", func(*testsuite.TestWorkflowEnvironment) {}, []write{{17 * s, corrected}}},
		{"before breaker-restore", func(env *testsuite.TestWorkflowEnvironment) {
			env.OnGetVersion(versionRestore, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
		}, []write{{17 * s, 2}, {18 * s, 4}, {19 * s, corrected}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := input()
			in.TaskQueue = "idempotent-http@https://api.example.com"
			in.Config = Config{MaxSignals: 9}
			var queried State
			r := runGovernor(t, in, nil, []sig{
				{At: 2 * s, Worker: "a", Requests: 10, Accepted: 3, Throttles: 7},
				{At: 2*s + 300*ms, Worker: "b", Requests: 10, Accepted: 3, Throttles: 7},
				// The herd's reports are out of the failure window (10 s).
				{At: 13 * s, Worker: "a", Requests: 3, Failed: 3},
				{At: 13*s + 100*ms, Worker: "b", Requests: 2, Failed: 2},
				{At: 15 * s, Worker: "a", Requests: 1, Failed: 1},
				{At: 17 * s, Worker: "b", Requests: 1, Accepted: 1},
				{At: 18 * s, Worker: "a", Requests: 2, Accepted: 2},
				{At: 19 * s, Worker: "b", Requests: 4, Accepted: 4},
				{At: 20 * s, Worker: "a", Requests: 5, Accepted: 5}, // the ninth
			}, time.Hour, c.setup, func(env *testsuite.TestWorkflowEnvironment) {
				env.RegisterDelayedCallback(func() {
					v, err := env.QueryWorkflow(QueryName)
					require.NoError(t, err)
					require.NoError(t, v.Get(&queried))
				}, 16*s)
			})
			requireWrites(t, append(slices.Clone(herd), c.back...), r.writes)
			assert.Equal(t, StatusOpen, queried.Status, "the query says the breaker is open")
			assert.InDelta(t, corrected, queried.Breaker.Before, 1e-6)
			var can *workflow.ContinueAsNewError
			require.ErrorAs(t, r.err, &can)
			assert.Equal(t, "idempotent-http@governor", can.TaskQueueName, "it moves to the governors' task queue")
			next := continuedInput(t, r.err)
			assert.Equal(t, StatusLimited, next.State.Status)
			assert.InDelta(t, corrected, next.State.Rate, 1e-6)
			assert.Equal(t, 1, next.State.Breaker.Opened)
		})
	}
}

// TestWorkflowTripMargin: a new governor's breaker does not trip when
// the workers' failures are half their answers by chance (5 of 9); a
// governor recorded before version breaker-trip-margin trips on the ratio
// alone: one probe a second.
func TestWorkflowTripMargin(t *testing.T) {
	s, ms := time.Second, time.Millisecond
	for _, c := range []struct {
		name  string
		setup func(*testsuite.TestWorkflowEnvironment)
		want  []write
	}{
		{"breaker-trip-margin", func(*testsuite.TestWorkflowEnvironment) {}, nil},
		{"before breaker-trip-margin", func(env *testsuite.TestWorkflowEnvironment) {
			env.OnGetVersion(versionTripMargin, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
		}, []write{{s + 200*ms, 1}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := input()
			in.Config = Config{MaxSignals: 2}
			r := runGovernor(t, in, nil, []sig{
				{At: s, Worker: "a", Requests: 5, Accepted: 2, Failed: 3},
				{At: s + 200*ms, Worker: "b", Requests: 4, Accepted: 2, Failed: 2},
			}, time.Minute, c.setup)
			requireWrites(t, c.want, r.writes)
		})
	}
}

// TestContinueAsNewMovesToGovernorQueue: a governor of an origin queue
// running elsewhere (one recorded with RulesV0 included) continues on the
// governors' own task queue; one of another queue stays where it is.
func TestContinueAsNewMovesToGovernorQueue(t *testing.T) {
	cases := []struct {
		name, queue, want string
		setup             []func(*testsuite.TestWorkflowEnvironment)
	}{
		{"RulesV1, an origin queue", "idempotent-http@https://api.example.com", "idempotent-http@governor", nil},
		{"RulesV0, an origin queue", "idempotent-http@https://api.example.com", "idempotent-http@governor", []func(*testsuite.TestWorkflowEnvironment){rulesV0}},
		{"another queue: where it runs (the test environment's queue)", "api.example.com", "default-test-taskqueue", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := input()
			in.TaskQueue = c.queue
			setup := append([]func(*testsuite.TestWorkflowEnvironment){func(env *testsuite.TestWorkflowEnvironment) {
				env.SetContinueAsNewSuggested(true)
			}}, c.setup...)
			r := runGovernor(t, in, nil, []sig{{At: time.Second, Worker: "a", Requests: 1}}, time.Hour, setup...)
			var can *workflow.ContinueAsNewError
			require.ErrorAs(t, r.err, &can)
			assert.Equal(t, c.want, can.TaskQueueName)
		})
	}
}

func TestWorkflowID(t *testing.T) {
	assert.Equal(t, "idemhttp-governor/api.example.com", WorkflowID("api.example.com"))
}

func TestConfigDefaults(t *testing.T) {
	c := Config{}.WithDefaults()
	assert.Equal(t, Config{
		MeasureWindow: 10 * time.Second, AcceptWindow: 3 * time.Second, Gather: 1500 * time.Millisecond, Beta: 0.9, CutInterval: 5 * time.Second, Calm: 30 * time.Second,
		Raise: 0.2, MinChange: 0.1, MinGap: 10 * time.Second, Floor: 0.5, MaxSignals: 1000,
		Saturation: 0.85, SaturatedCalm: 3 * time.Second, SaturatedRaise: 0.5, Approach: 0.97, RampInterval: time.Second,
		Breaker: admission.Breaker{FailureRatio: 0.5, MinFailures: 5, FailureWindow: 10 * time.Second,
			OpenTime: time.Second, MaxOpenTime: time.Second, RestartRate: admission.DefaultInitialRate / 2},
	}, c)
	set := Config{MeasureWindow: 1, AcceptWindow: 2, Gather: -1, Beta: 0.5, CutInterval: 2, Calm: 3, Raise: 0.3, MinChange: 0.2, MinGap: 4, Floor: 1, MaxSignals: 5,
		Saturation: 0.5, SaturatedCalm: 6, SaturatedRaise: 0.3, Approach: 0.9, RampInterval: 7,
		Breaker: admission.Breaker{FailureRatio: 0.4, MinFailures: 3, FailureWindow: 8, OpenTime: 9, MaxOpenTime: 10, RestartRate: 1}}
	assert.Equal(t, set, set.WithDefaults(), "set fields are kept")
	// A worker's restart rate above admission's default initial rate
	// (its own InitialRate higher) is kept, not cut to 10/s.
	fast := Config{Breaker: admission.Breaker{RestartRate: 20}}
	assert.Equal(t, 20.0, fast.WithDefaults().Breaker.RestartRate)
}

func TestClassify(t *testing.T) {
	var appErr *temporal.ApplicationError
	for _, msg := range []string{"PermissionDenied", "Unimplemented", "InvalidArgument"} {
		err := classify("UpdateTaskQueueConfig", serviceErr(msg))
		require.ErrorAs(t, err, &appErr, msg)
		assert.Equal(t, ErrTypeUnsupported, appErr.Type())
		assert.True(t, appErr.NonRetryable())
		assert.True(t, strings.Contains(err.Error(), msg), err.Error())
	}
	err := classify("UpdateTaskQueueConfig", serviceErr("Unavailable"))
	assert.False(t, errors.As(err, &appErr), "a transient error stays one: %v", err)
}

func TestObservationRate(t *testing.T) {
	o := Observation{Requests: 3, From: t0, To: t0.Add(1500 * time.Millisecond)}
	assert.InDelta(t, 2, o.Rate(), 1e-9)
	assert.Zero(t, Observation{Requests: 3, From: t0, To: t0}.Rate())
	assert.Zero(t, Observation{}.Rate())
}

// serviceErr returns the service error the server answers with for code.
func serviceErr(code string) error {
	switch code {
	case "PermissionDenied":
		return serviceerror.NewPermissionDenied("Request unauthorized.", "")
	case "Unimplemented":
		return serviceerror.NewUnimplemented("unknown method UpdateTaskQueueConfig")
	case "InvalidArgument":
		return serviceerror.NewInvalidArgument("Setting rate limit on workflow task queues is not allowed.")
	}
	return serviceerror.NewUnavailable("frontend is down")
}
