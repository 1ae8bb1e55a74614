package governor

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/idemhttp/temporal-idempotent-http/harness/itest"
)

// steppingClock is a reporter's clock under the test's control: its
// monotonic reading is what the test sets, its wall clock that plus
// offset, which the test steps as NTP or a VM's resume steps a machine's.
type steppingClock struct {
	mu     sync.Mutex
	mono   time.Duration
	offset time.Duration
}

func (c *steppingClock) now() instant {
	c.mu.Lock()
	defer c.mu.Unlock()
	return instant{wall: t0.Add(c.mono + c.offset), mono: c.mono}
}

func (c *steppingClock) set(mono time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mono = mono
}

func (c *steppingClock) step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += d
}

// herd is three workers' reporters (a, b, c) on one origin queue, on
// clocks the test sets, whose observations reach a governor's Decider.
type herd struct {
	clocks  map[string]*steppingClock
	reps    map[string]*Reporter
	clients map[string]*fakeClient
	order   []string
}

const herdQueue = "idempotent-http@https://api.example.com"

func newHerd() *herd {
	h := &herd{clocks: map[string]*steppingClock{}, reps: map[string]*Reporter{}, clients: map[string]*fakeClient{}, order: []string{"a", "b", "c"}}
	for _, w := range h.order {
		h.clocks[w] = &steppingClock{}
		h.clients[w] = &fakeClient{}
		r := NewReporter(h.clients[w], "gov", "ns", w, ReporterConfig{ReportInterval: time.Second, Logger: itest.QuietLogger()})
		r.clock = h.clocks[w]
		h.reps[w] = r
	}
	return h
}

// answer has every worker record n answers at mono (accepted, or the last
// one a throttle).
func (h *herd) answer(mono time.Duration, n int, throttle bool) {
	for _, w := range h.order {
		h.clocks[w].set(mono)
		for i := range n {
			h.reps[w].Record(herdQueue, throttle && i == n-1, false)
		}
	}
}

// report has every worker report at mono (urgent: the reports a throttle
// makes due at once).
func (h *herd) report(ctx context.Context, mono time.Duration, urgent bool) {
	for _, w := range h.order {
		h.clocks[w].set(mono)
		h.reps[w].report(ctx, urgent)
	}
}

// herdScenario is one run of the herd: each worker has 30 answers a
// second accepted for 4 s, reporting each second, then at 4.5 s 14 more
// and a throttle, whose report is sent at once and reaches back over the
// one at 4 s. Worker a's wall clock steps by step at stepAt. Every
// observation reaches the governor 50 ms after it was sent, through
// Temporal's JSON payload converter (which drops the monotonic reading
// of a time.Time); edit, if not nil, changes it before. It returns the
// changes the governor made by 7 s (before a saturated raise) and its
// state then.
func herdScenario(t *testing.T, step, stepAt time.Duration, edit func(*Observation)) ([]change, State) {
	t.Helper()
	d := NewDecider(Config{}, RulesV1, State{})
	changes := driveObs(d, herdArrivals(t, step, stepAt, edit), 7*time.Second)
	return changes, d.State
}

// herdArrivals returns the observations of herdScenario as they reach
// the governor.
func herdArrivals(t *testing.T, step, stepAt time.Duration, edit func(*Observation)) []arrival {
	t.Helper()
	s, ms := time.Second, time.Millisecond
	h := newHerd()
	ctx := t.Context()
	var arrivals []arrival
	sent := map[string]int{}
	deliver := func(at time.Duration) {
		for _, w := range h.order {
			got := h.clients[w].sent()
			for _, sg := range got[sent[w]:] {
				obs := sg.obs
				if edit != nil {
					edit(&obs)
				}
				p, err := converter.GetDefaultDataConverter().ToPayload(obs)
				require.NoError(t, err)
				var decoded Observation
				require.NoError(t, converter.GetDefaultDataConverter().FromPayload(p, &decoded))
				arrivals = append(arrivals, arrival{At: at + 50*ms, Obs: decoded})
			}
			sent[w] = len(got)
		}
	}
	stepped := false
	stepIfDue := func(mono time.Duration) {
		if !stepped && mono >= stepAt {
			h.clocks["a"].step(step)
			stepped = true
		}
	}
	for _, w := range h.order {
		h.clocks[w].set(0)
		h.reps[w].Limit(herdQueue) // each worker's interval begins at 0
	}
	for sec := time.Duration(1); sec <= 4; sec++ {
		stepIfDue((sec-1)*s + 100*ms)
		h.answer((sec-1)*s+100*ms, 30, false)
		stepIfDue(sec*s - 100*ms)
		h.report(ctx, sec*s, false)
		deliver(sec * s)
	}
	stepIfDue(4*s + 200*ms)
	h.answer(4*s+400*ms, 15, true)
	h.report(ctx, 4*s+500*ms, true)
	deliver(4*s + 500*ms)
	require.True(t, stepped)
	return arrivals
}

// TestSharedLimitSurvivesWorkerClockStep: one worker whose wall clock
// steps by an hour, either way (NTP, a VM's resume), while the herd is
// throttled does not move the shared limit from where the reports of
// the same run with no step put it (about 73/s: 0.9 × what the API
// accepted by the reports so far when a's throttle arrives, 284 answers
// over 3.5 s; the correction 1.5 s later finds it within 10 %). A
// one-hour report used to make the cut 0.5/s, the floor, for every
// worker; an hour back, a report reaching back over the one before was
// not seen to, and its answers counted twice (90.7/s). The worker's Span
// (its monotonic clock) keeps the length; from a worker that sends none
// (before Span), the governor's check of To − From against its own clock
// does.
func TestSharedLimitSurvivesWorkerClockStep(t *testing.T) {
	s, ms := time.Second, time.Millisecond
	want, ref := herdScenario(t, 0, 0, nil)
	require.NotEmpty(t, want, "the throttle cuts")
	require.InDelta(t, 0.9*284/3.5, ref.Rate, 0.01, "with no step: %v", want)
	noSpan := func(o *Observation) { o.Span = 0 }
	for _, c := range []struct {
		name   string
		step   time.Duration
		stepAt time.Duration
	}{
		{"+1h within a report", time.Hour, 3*s + 500*ms},
		{"-1h within a report", -time.Hour, 3*s + 500*ms},
		{"+1h within the urgent report that reaches back over the last", time.Hour, 4*s + 200*ms},
		{"-1h within the urgent report that reaches back over the last", -time.Hour, 4*s + 200*ms},
	} {
		for _, old := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/worker without Span=%v", c.name, old), func(t *testing.T) {
				var edit func(*Observation)
				if old {
					edit = noSpan
				}
				got, st := herdScenario(t, c.step, c.stepAt, edit)
				assert.Greater(t, st.Rate, 10*DefaultFloor, "not the floor: %v", got)
				assert.InEpsilon(t, ref.Rate, st.Rate, 0.01, "the limit with a step %s, %s, against %s with none", c.step, fmt.Sprint(got), fmt.Sprint(want))
			})
		}
	}
}

// TestReporterSpanOnMonotonicClock: a report's Span is its interval on
// the reporter's monotonic clock, whatever its wall clock (From and To)
// did within it; an urgent report that reaches back over the one before
// spans both and begins at that one's From.
func TestReporterSpanOnMonotonicClock(t *testing.T) {
	s, ms := time.Second, time.Millisecond
	for _, step := range []time.Duration{0, time.Hour, -time.Hour, 30 * s} {
		t.Run(fmt.Sprint(step), func(t *testing.T) {
			clk := &steppingClock{}
			fc := &fakeClient{}
			r := NewReporter(fc, "gov", "ns", "w1", ReporterConfig{ReportInterval: s, Logger: itest.QuietLogger()})
			r.clock = clk
			r.Limit(herdQueue)
			r.Record(herdQueue, false, false) // its interval begins at 0
			clk.set(500 * ms)
			clk.step(step)
			clk.set(s)
			r.report(t.Context(), false)
			clk.set(1200 * ms)
			r.Record(herdQueue, true, false)
			clk.set(1300 * ms)
			r.report(t.Context(), true)

			got := fc.sent()
			require.Len(t, got, 2)
			first, urgent := got[0].obs, got[1].obs
			assert.Equal(t, s, first.Span)
			assert.Equal(t, s+step, first.To.Sub(first.From), "From and To are on the wall clock")
			assert.Equal(t, 1300*ms, urgent.Span, "the urgent report reaches back over the first")
			assert.True(t, urgent.From.Equal(first.From), "it begins where the first began: %s, %s", urgent.From, first.From)
			assert.Equal(t, 2, urgent.Requests)
		})
	}
}

// TestObservationWireBothWays: Span is one more JSON field, "span"
// (nanoseconds, left out when 0). A report from a worker from before it
// decodes with Span 0 (the governor takes To − From, checked); a report
// with it decodes in a governor from before it, which ignores the field
// (as encoding/json does an unknown one) and takes To − From, as it did.
func TestObservationWireBothWays(t *testing.T) {
	dc := converter.GetDefaultDataConverter()
	from := t0
	to := t0.Add(time.Hour + time.Second) // a wall clock stepped forward
	// oldObservation is Observation as a worker or governor from before
	// Span declares it.
	type oldObservation struct {
		Worker    string    `json:"worker"`
		Requests  int       `json:"requests"`
		Throttles int       `json:"throttles"`
		Accepted  int       `json:"accepted,omitempty"`
		Failed    int       `json:"failed,omitempty"`
		From      time.Time `json:"from"`
		To        time.Time `json:"to"`
		Received  time.Time `json:"received,omitzero"`
	}
	old := oldObservation{Worker: "a", Requests: 3, Throttles: 1, Accepted: 2, From: from, To: to}
	cur := Observation{Worker: "a", Requests: 3, Throttles: 1, Accepted: 2, From: from, To: to, Span: time.Second}

	p, err := dc.ToPayload(old)
	require.NoError(t, err)
	var decoded Observation
	require.NoError(t, dc.FromPayload(p, &decoded))
	assert.Equal(t, Observation{Worker: "a", Requests: 3, Throttles: 1, Accepted: 2, From: from, To: to}, decoded, "an old report: no Span")

	p, err = dc.ToPayload(cur)
	require.NoError(t, err)
	assert.Contains(t, string(p.GetData()), `"span":1000000000`)
	var decodedOld oldObservation
	require.NoError(t, dc.FromPayload(p, &decodedOld), "a governor from before Span decodes a new report")
	assert.Equal(t, old, decodedOld)

	p, err = dc.ToPayload(Observation{Worker: "a", From: from, To: to})
	require.NoError(t, err)
	assert.NotContains(t, string(p.GetData()), "span", "no Span, no field")
}

// TestGovernorTakesSpansFromItsVersion: the governor workflow takes the
// checked Spans from version report-spans on; a governor recorded before
// it, replayed after an upgrade, decides from its workers' wall clocks as
// it did: there a one-hour report cuts to the floor.
func TestGovernorTakesSpansFromItsVersion(t *testing.T) {
	s, ms := time.Second, time.Millisecond
	var sigs []sig
	for _, a := range herdArrivals(t, time.Hour, 4*s+200*ms, nil) {
		sigs = append(sigs, sig{At: a.At, Raw: &a.Obs})
	}
	before := func(env *testsuite.TestWorkflowEnvironment) {
		env.OnGetVersion(versionSpans, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	}
	for _, c := range []struct {
		name  string
		setup []func(*testsuite.TestWorkflowEnvironment)
		want  float64
	}{
		{"report-spans", nil, 0.9 * 284 / 3.5},
		{"before report-spans", []func(*testsuite.TestWorkflowEnvironment){before}, DefaultFloor},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := runGovernor(t, input(), nil, sigs, 7*s, c.setup...)
			requireWrites(t, []write{{4*s + 550*ms, float64(float32(c.want))}}, r.writes)
		})
	}
}
