package bench

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/harness/chaos"
)

// WriteChaosSVG draws the chaos section of r as an SVG: the requests at
// the API per second (201s, stored responses included, and the other
// answers) and the operations completed per second, with the outage, the
// server kill and the worker kills marked. It fails if r has no campaign.
func WriteChaosSVG(w io.Writer, r *Results) error {
	if r.Chaos == nil || r.Chaos.Campaign == nil {
		return fmt.Errorf("no chaos plot: the results hold no chaos campaign")
	}
	c := r.Chaos.Campaign
	var requests, completions []LogEntry
	for _, l := range c.Log {
		requests = append(requests, LogEntry{At: max(l.At, 0), Status: l.Status})
	}
	for _, at := range c.Completions {
		completions = append(completions, LogEntry{At: max(at, 0), Status: 201})
	}
	var marks []plotMark
	var down time.Duration
	for _, f := range c.Schedule.Faults {
		switch f.Kind {
		case chaos.FaultAPIDown:
			down = f.At
		case chaos.FaultAPIUp:
			marks = append(marks, plotMark{At: down, Label: "API down"}, plotMark{At: f.At, Label: "API up"})
		case chaos.FaultServerKill:
			marks = append(marks, plotMark{At: f.At, Label: "server SIGKILL"})
		case chaos.FaultWorkerKill:
			marks = append(marks, plotMark{At: f.At, Label: "w"})
		}
	}
	v := c.Verdict
	return writeRequestsSVG(w, requestsPlot{
		Title: fmt.Sprintf("Chaos, %d operations, 3 workers (cluster): toxics, a worker SIGKILLed every 20 s (w)",
			v.Operations),
		Bucket: time.Second, Failures: "other answers (409 in flight, …)",
		Marks: marks, XLabel: "seconds since the campaign's start",
	}, []plotSeries{
		{Title: "requests at the API per second", Log: requests,
			Note: fmt.Sprintf("%d requests, %.2f per success", c.Requests, c.RequestsPerSuccess)},
		{Title: "operations completed per second", Log: completions,
			Note: fmt.Sprintf("%d of %d succeeded, %d failed, %d lost, %d duplicated", v.Succeeded, v.Operations, len(v.Failed), len(v.Lost), len(v.Duplicated))},
	})
}

// writeChaosClaim writes the chaos campaign's row of the claims table
// (claim 9): every operation exactly once with its full answer.
func writeChaosClaim(b *strings.Builder, c *chaos.Result) {
	v := c.Verdict
	fmt.Fprintf(b, "| 9 | Chaos campaign (%d operations, cluster, three workers, toxics, worker and server SIGKILLs, the API down 30 s): operations that failed, lost their answer or were done twice (requests per success: %.2f) | %d failed, %d lost, %d duplicated; %d of %d succeeded, %d records | 0, one record per operation | %s |\n",
		v.Operations, c.RequestsPerSuccess, len(v.Failed), len(v.Lost), len(v.Duplicated), v.Succeeded, v.Operations, v.Records, met(v.OK()))
}

// writeChaos writes the chaos section of RESULTS.md.
func writeChaos(b *strings.Builder, r *Results) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	c := r.Chaos.Campaign
	v := c.Verdict
	p("## Chaos campaign at scale\n\n")
	p("`harness/chaos` (its smaller form, 200 operations, is `TestChaosCampaign` in `integration/cluster`, run by `make test`): %d operations (the ready workflow, one business workflow ID each, one POST through the proxy) started at %.0f/s on the PostgreSQL-backed cluster, three worker processes (`%s`: each request routed to its origin's queue, the shared rate on), the reference API behind Toxiproxy (Shopify's fault proxy, `toxiproxy-server` built from tools/go.mod, driven by its API). Seed %d; the faults, as carried out:\n\n",
		v.Operations, c.Plan.StartRate, strings.TrimSpace("worker "+strings.Join(r.Chaos.WorkerArgs, " ")), c.Plan.Seed)
	for _, e := range c.Events {
		p("- %.1f s: %s\n", e.At.Seconds(), firstLine(e.What))
	}
	p("\n![Requests and completions per second](%s)\n\n", ChaosSVG)
	p("| Operations | Succeeded | Failed | Lost | Duplicated | Records at the API | Requests at the API | Requests per success | Last operation ended |\n|---|---|---|---|---|---|---|---|---|\n")
	p("| %d | %d | %d | %d | %d | %d | %d | %.2f | %.1f s |\n\n", v.Operations, v.Succeeded, len(v.Failed), len(v.Lost), len(v.Duplicated), v.Records, c.Requests, c.RequestsPerSuccess, c.Duration.Seconds())
	p("Every operation ended exactly once with its full answer: %s (one record per key, the result's body the API's stored response byte for byte). API counters: %d stored responses sent again, %d answered 409 in flight, %d misused keys.\n\n",
		met(v.OK()), c.Stats.Replays, c.Stats.InFlight, c.Stats.Mismatches)
	for _, f := range v.Findings {
		p("- finding: %s\n", f)
	}
	if len(v.Findings) > 0 {
		p("\n")
	}
}

// firstLine is s up to its first newline.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
