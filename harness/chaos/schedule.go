package chaos

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// Fault kinds of a [Step].
const (
	// FaultToxic adds Step.Toxic to the proxy; FaultToxicEnd removes it.
	FaultToxic    = "toxic"
	FaultToxicEnd = "toxic-end"
	// FaultWorkerKill SIGKILLs worker Step.Worker and starts it again.
	FaultWorkerKill = "worker-kill"
	// FaultServerKill SIGKILLs temporal-server and starts it again.
	FaultServerKill = "server-kill"
	// FaultAPIDown disables the proxy; FaultAPIUp enables it again.
	FaultAPIDown = "api-down"
	FaultAPIUp   = "api-up"
)

// Toxiproxy's toxic types the campaign uses. The first four are in every
// schedule; the campaign adds the last two when there is time. A plan
// with AnswerCuts uses cutToxics alone, all three in every schedule.
var (
	requiredToxics = []string{"reset_peer", "latency", "bandwidth", "timeout"}
	optionalToxics = []string{"limit_data", "slicer"}
	cutToxics      = []string{"reset_peer", "timeout", "limit_data"}
)

// Toxic is one toxic as Toxiproxy's API takes it.
type Toxic struct {
	Name string `json:"name"`
	Type string `json:"type"`
	// Stream is "upstream" (requests) or "downstream" (answers).
	Stream string `json:"stream"`
	// Toxicity is the share of connections it applies to.
	Toxicity   float32        `json:"toxicity"`
	Attributes map[string]int `json:"attributes"`
}

// Step is one fault of a [Schedule], At after the campaign's start.
type Step struct {
	At     time.Duration `json:"at"`
	Kind   string        `json:"kind"`
	Worker int           `json:"worker,omitempty"`
	Toxic  *Toxic        `json:"toxic,omitempty"`
}

// String describes the step for logs and findings.
func (s Step) String() string {
	switch s.Kind {
	case FaultToxic:
		return fmt.Sprintf("%6.1fs + toxic %s %s %s toxicity %.2f %v", s.At.Seconds(), s.Toxic.Name, s.Toxic.Type, s.Toxic.Stream, s.Toxic.Toxicity, s.Toxic.Attributes)
	case FaultToxicEnd:
		return fmt.Sprintf("%6.1fs - toxic %s", s.At.Seconds(), s.Toxic.Name)
	case FaultWorkerKill:
		return fmt.Sprintf("%6.1fs SIGKILL worker %d, start it again", s.At.Seconds(), s.Worker)
	}
	return fmt.Sprintf("%6.1fs %s", s.At.Seconds(), s.Kind)
}

// Schedule is a campaign's plan: when each operation starts and the
// faults, in time order.
type Schedule struct {
	Seed   uint64          `json:"seed"`
	Starts []time.Duration `json:"-"`
	Faults []Step          `json:"faults"`
	// End is when the last fault is over.
	End time.Duration `json:"end"`
}

// Plan is what [NewSchedule] plans from. Its zero fields take the
// defaults named on each.
type Plan struct {
	Seed       uint64
	Operations int
	// StartRate is operations started per second (default 4).
	StartRate float64
	// Workers is the number of worker processes (default 3).
	Workers int
	// WorkerKillEvery is the time between worker kills (default 20 s).
	WorkerKillEvery time.Duration
	// Outage is how long the API is down, once (default 30 s).
	Outage time.Duration
	// AnswerCuts makes every toxic one that loses the answer after the
	// API did the work (reset_peer, timeout and limit_data, all on the
	// downstream stream: the request arrives whole, its answer does not),
	// so that attempts end with an unknown outcome, the case an API
	// without keys makes dangerous. Default false: the six kinds, either
	// way.
	AnswerCuts bool
}

func (p Plan) withDefaults() Plan {
	if p.StartRate <= 0 {
		p.StartRate = 4
	}
	if p.Workers <= 0 {
		p.Workers = 3
	}
	if p.WorkerKillEvery <= 0 {
		p.WorkerKillEvery = 20 * time.Second
	}
	if p.Outage <= 0 {
		p.Outage = 30 * time.Second
	}
	return p
}

// Quiet margins around the server kill: no worker is killed within
// serverQuiet of it (a worker started while the server is down has
// nothing to poll), and it comes at least serverGap after the outage.
const (
	serverQuiet = 10 * time.Second
	serverGap   = 5 * time.Second
)

// NewSchedule plans a campaign: operations started at p.StartRate with a
// seeded jitter; the outage in the first third of the starts; the server
// kill 5–15 s after the outage, and 5 s before the last start if the
// starts last that long; a worker kill every p.WorkerKillEvery
// (round robin from a seeded worker) until the chaos ends, none within
// 10 s of the server kill; and toxics, one at a time, 6–12 s each with
// 2–5 s between, outside the outage, the four required kinds first in a
// seeded order (with p.AnswerCuts, the three that lose answers, on the
// downstream stream). The chaos lasts as long as the starts, and at least
// until 20 s after the server kill. The same Plan gives the same Schedule.
func NewSchedule(p Plan) Schedule {
	p = p.withDefaults()
	rng := rand.New(rand.NewPCG(p.Seed, p.Seed^0x9e3779b97f4a7c15))
	s := Schedule{Seed: p.Seed}
	gap := time.Duration(float64(time.Second) / p.StartRate)
	for i := range p.Operations {
		s.Starts = append(s.Starts, time.Duration(i)*gap+time.Duration(rng.Int64N(int64(gap))))
	}
	span := time.Duration(p.Operations) * gap
	down := span/10 + time.Duration(rng.Int64N(int64(span/5)+1))
	up := down + p.Outage
	// The server dies while operations are still being started (when the
	// starts last long enough), so some are in flight.
	lo := up + serverGap
	hi := max(min(lo+10*time.Second, span-5*time.Second), lo+time.Second)
	kill := lo + time.Duration(rng.Int64N(int64(hi-lo)))
	s.End = max(span, kill+20*time.Second)
	s.Faults = append(s.Faults,
		Step{At: down, Kind: FaultAPIDown}, Step{At: up, Kind: FaultAPIUp},
		Step{At: kill, Kind: FaultServerKill})
	toxics := toxicSteps(rng, 2*time.Second, s.End, down, up, p.AnswerCuts)
	s.End = max(s.End, toxics[len(toxics)-1].At)
	s.Faults = append(s.Faults, toxics...)
	w := rng.IntN(p.Workers)
	for at := p.WorkerKillEvery; at < s.End; at += p.WorkerKillEvery {
		if at > kill-serverQuiet && at < kill+serverQuiet {
			continue
		}
		s.Faults = append(s.Faults, Step{At: at, Kind: FaultWorkerKill, Worker: w})
		w = (w + 1) % p.Workers
	}
	slices.SortStableFunc(s.Faults, func(a, b Step) int { return int(a.At - b.At) })
	return s
}

// toxicSteps plans toxics from from to end, none overlapping [down, up);
// with cuts, only the kinds that lose answers, downstream.
func toxicSteps(rng *rand.Rand, from, end, down, up time.Duration, cuts bool) []Step {
	required := requiredToxics
	if cuts {
		required = cutToxics
	}
	kinds := slices.Clone(required)
	rng.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
	if !cuts {
		extra := slices.Clone(optionalToxics)
		rng.Shuffle(len(extra), func(i, j int) { extra[i], extra[j] = extra[j], extra[i] })
		kinds = append(kinds, extra...)
	}
	var steps []Step
	at := from
	for i := 0; ; i++ {
		length := 6*time.Second + time.Duration(rng.Int64N(int64(6*time.Second)))
		if at < up && at+length > down {
			at = up + time.Second // after the outage
		}
		if at+length > end {
			// The required kinds come whatever the length of the run:
			// squeeze the rest in after it.
			if i >= len(required) {
				return steps
			}
		}
		t := newToxic(rng, fmt.Sprintf("t%02d-%s", i, kinds[i%len(kinds)]), kinds[i%len(kinds)])
		if cuts {
			t.Stream = "downstream"
		}
		steps = append(steps, Step{At: at, Kind: FaultToxic, Toxic: t}, Step{At: at + length, Kind: FaultToxicEnd, Toxic: t})
		at += length + 2*time.Second + time.Duration(rng.Int64N(int64(3*time.Second)))
	}
}

// newToxic returns a toxic of kind with seeded attributes, on 30–70 % of
// the connections.
func newToxic(rng *rand.Rand, name, kind string) *Toxic {
	t := &Toxic{Name: name, Type: kind, Stream: "downstream", Toxicity: 0.3 + 0.4*rng.Float32(), Attributes: map[string]int{}}
	if rng.IntN(3) == 0 {
		t.Stream = "upstream"
	}
	switch kind {
	case "reset_peer": // a TCP RST after timeout ms
		t.Attributes["timeout"] = rng.IntN(300)
	case "latency": // ms, ± jitter
		t.Attributes["latency"] = 500 + rng.IntN(2500)
		t.Attributes["jitter"] = rng.IntN(500)
	case "bandwidth": // KB/s
		t.Attributes["rate"] = 1
	case "timeout": // no data; the connection closed after timeout ms
		t.Attributes["timeout"] = 1000 + rng.IntN(4000)
	case "limit_data": // the connection closed after bytes
		t.Attributes["bytes"] = 64 + rng.IntN(300)
	case "slicer": // small pieces, delay µs apart
		t.Attributes["average_size"] = 16
		t.Attributes["size_variation"] = 8
		t.Attributes["delay"] = 2000 + rng.IntN(8000)
	}
	return t
}
