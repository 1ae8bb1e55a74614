package chaos

import (
	"reflect"
	"slices"
	"testing"
	"time"
)

// TestNewSchedule checks, for several plans, what the campaign promises
// of its schedule: seeded (the same plan gives the same schedule), every
// operation started within the starts' span, the outage once and as long
// as planned, the server killed once after it, a worker killed every
// WorkerKillEvery (each worker in turn, none near the server kill), the
// four required toxics, one toxic at a time and none during the outage.
func TestNewSchedule(t *testing.T) {
	for _, tc := range []struct {
		name string
		plan Plan
	}{
		{"ci seed 1", Plan{Seed: 1, Operations: 200}},
		{"ci seed 7", Plan{Seed: 7, Operations: 200}},
		{"ci seed 33", Plan{Seed: 33, Operations: 200}},
		{"full", Plan{Seed: 1, Operations: 1000}},
		{"small", Plan{Seed: 3, Operations: 20}},
		{"fast starts, short outage", Plan{Seed: 5, Operations: 300, StartRate: 10, Outage: 10 * time.Second}},
		{"answer cuts, ci", Plan{Seed: 33, Operations: 200, StartRate: 2.5, AnswerCuts: true}},
		{"answer cuts, full", Plan{Seed: 33, Operations: 1000, AnswerCuts: true}},
		{"answer cuts, small", Plan{Seed: 3, Operations: 20, AnswerCuts: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewSchedule(tc.plan)
			p := tc.plan.withDefaults()
			if again := NewSchedule(tc.plan); !reflect.DeepEqual(s, again) {
				t.Fatalf("two schedules of one plan differ")
			}
			other := tc.plan
			other.Seed++
			if reflect.DeepEqual(s.Faults, NewSchedule(other).Faults) {
				t.Errorf("seed %d and %d give the same faults", tc.plan.Seed, other.Seed)
			}
			checkStarts(t, s, p)
			down, up, kill := checkOutageAndKill(t, s, p)
			checkWorkerKills(t, s, p, kill)
			checkToxics(t, s, p, down, up)
			for i := 1; i < len(s.Faults); i++ {
				if s.Faults[i].At < s.Faults[i-1].At {
					t.Fatalf("faults out of order at %d: %v after %v", i, s.Faults[i], s.Faults[i-1])
				}
			}
			if last := s.Faults[len(s.Faults)-1].At; s.End < last {
				t.Errorf("End %s before the last fault at %s", s.End, last)
			}
		})
	}
}

func checkStarts(t *testing.T, s Schedule, p Plan) {
	t.Helper()
	span := time.Duration(float64(p.Operations) / p.StartRate * float64(time.Second))
	if len(s.Starts) != p.Operations {
		t.Fatalf("%d starts, want %d", len(s.Starts), p.Operations)
	}
	if !slices.IsSorted(s.Starts) {
		t.Errorf("starts not in order")
	}
	if s.Starts[0] < 0 || s.Starts[len(s.Starts)-1] >= span {
		t.Errorf("starts from %s to %s, want within [0, %s)", s.Starts[0], s.Starts[len(s.Starts)-1], span)
	}
}

func checkOutageAndKill(t *testing.T, s Schedule, p Plan) (down, up, kill time.Duration) {
	t.Helper()
	count := map[string]int{}
	for _, f := range s.Faults {
		count[f.Kind]++
		switch f.Kind {
		case FaultAPIDown:
			down = f.At
		case FaultAPIUp:
			up = f.At
		case FaultServerKill:
			kill = f.At
		}
	}
	if count[FaultAPIDown] != 1 || count[FaultAPIUp] != 1 || count[FaultServerKill] != 1 {
		t.Fatalf("api-down %d, api-up %d, server-kill %d times; want once each", count[FaultAPIDown], count[FaultAPIUp], count[FaultServerKill])
	}
	if up-down != p.Outage || down <= 0 {
		t.Errorf("API down from %s to %s, want %s from after the start", down, up, p.Outage)
	}
	if kill < up+serverGap || kill > s.End-20*time.Second {
		t.Errorf("server killed at %s, want after %s (the outage's end + %s) and 20 s before the end %s", kill, up+serverGap, serverGap, s.End)
	}
	return down, up, kill
}

func checkWorkerKills(t *testing.T, s Schedule, p Plan, kill time.Duration) {
	t.Helper()
	var kills []Step
	for _, f := range s.Faults {
		if f.Kind == FaultWorkerKill {
			kills = append(kills, f)
		}
	}
	// One every WorkerKillEvery until the end, but for the two the server
	// kill may silence.
	if want := int(s.End/p.WorkerKillEvery) - 1; len(kills) < want {
		t.Errorf("%d worker kills in %s, want at least %d", len(kills), s.End, want)
	}
	for i, k := range kills {
		if k.At%p.WorkerKillEvery != 0 {
			t.Errorf("worker kill at %s, not on the %s beat", k.At, p.WorkerKillEvery)
		}
		if d := k.At - kill; d > -serverQuiet && d < serverQuiet {
			t.Errorf("worker kill at %s, %s from the server kill", k.At, d)
		}
		if k.Worker < 0 || k.Worker >= p.Workers {
			t.Errorf("worker kill of worker %d of %d", k.Worker, p.Workers)
		}
		if i > 0 && k.Worker != (kills[i-1].Worker+1)%p.Workers {
			t.Errorf("worker %d killed after %d: want each in turn", k.Worker, kills[i-1].Worker)
		}
	}
}

func checkToxics(t *testing.T, s Schedule, p Plan, down, up time.Duration) {
	t.Helper()
	kinds := map[string]bool{}
	var active *Toxic
	var since time.Duration
	for _, f := range s.Faults {
		switch f.Kind {
		case FaultToxic:
			if active != nil {
				t.Errorf("toxic %s added at %s while %s is on", f.Toxic.Name, f.At, active.Name)
			}
			active, since = f.Toxic, f.At
			kinds[f.Toxic.Type] = true
			if p.AnswerCuts && (!slices.Contains(cutToxics, f.Toxic.Type) || f.Toxic.Stream != "downstream") {
				t.Errorf("toxic %s %s %s in a plan of answer cuts: want one of %v, downstream", f.Toxic.Name, f.Toxic.Type, f.Toxic.Stream, cutToxics)
			}
			if f.Toxic.Toxicity <= 0 || f.Toxic.Toxicity > 1 || len(f.Toxic.Attributes) == 0 {
				t.Errorf("toxic %+v: toxicity or attributes missing", f.Toxic)
			}
		case FaultToxicEnd:
			if active == nil || active.Name != f.Toxic.Name {
				t.Fatalf("toxic %s removed at %s, not the one on (%v)", f.Toxic.Name, f.At, active)
			}
			if since < up && f.At > down {
				t.Errorf("toxic %s from %s to %s overlaps the outage %s-%s", f.Toxic.Name, since, f.At, down, up)
			}
			active = nil
		}
	}
	if active != nil {
		t.Errorf("toxic %s never removed", active.Name)
	}
	required := requiredToxics
	if p.AnswerCuts {
		required = cutToxics
	}
	for _, k := range required {
		if !kinds[k] {
			t.Errorf("no %s toxic in the schedule (kinds: %v)", k, kinds)
		}
	}
}

// TestAnswerCutsKeepTheSchedule: AnswerCuts changes the toxics alone; the
// starts, the outage, the server kill and the worker kills are those of
// the same plan without it.
func TestAnswerCutsKeepTheSchedule(t *testing.T) {
	for _, seed := range []uint64{1, 33} {
		p := Plan{Seed: seed, Operations: 200, StartRate: 2.5}
		cut := p
		cut.AnswerCuts = true
		a, b := NewSchedule(p), NewSchedule(cut)
		if !reflect.DeepEqual(a.Starts, b.Starts) {
			t.Errorf("seed %d: AnswerCuts moved the starts", seed)
		}
		others := func(s Schedule) []Step {
			var steps []Step
			for _, f := range s.Faults {
				if f.Kind != FaultToxic && f.Kind != FaultToxicEnd && f.Kind != FaultWorkerKill {
					steps = append(steps, f)
				}
			}
			return steps
		}
		if !reflect.DeepEqual(others(a), others(b)) {
			t.Errorf("seed %d: AnswerCuts moved the outage or the server kill:\n%v\n%v", seed, others(a), others(b))
		}
	}
}
