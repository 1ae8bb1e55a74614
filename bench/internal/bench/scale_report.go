package bench

import (
	"fmt"
	"html"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

// The scale section's plots.
const (
	ScaleSVG           = "scale.svg"
	ScaleThroughputSVG = "scale-throughput.svg"
)

// writeScaleClaims writes the claims-table rows of the scale section
// (14a-14e).
func writeScaleClaims(b *strings.Builder, s *ScaleResult) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	if w := s.Waiting; w != nil {
		p("| 14a | %d operations waiting at once on the PostgreSQL cluster with %d workers (%d following a 202, %d awaiting a webhook): all complete, each key's work done once at the API | %d of %d completed (%s); API: %d keys done once, %d more than once, %d records; %d start errors, %d webhooks refused, %d not delivered | all %d, each once | %s |\n",
			w.Operations, s.Params.Workers, w.Followed, w.Webhooks, w.Completed, w.Operations, statuses(w.Statuses), w.KeysOnce, w.KeysMore, w.Records, w.StartErrors, w.Rejected, w.DeliveryErrors, w.Operations, met(w.allOnce()))
		if w.Waiting.Samples > 0 {
			p("| 14b | … worker memory per waiting operation, over the idle workers (the %d processes summed; medians over %s) | RSS %.1f KiB, Go heap %.1f KiB, %+.2f goroutines | (measurement) | — |\n",
				s.Params.Workers, secs(w.Waiting.Window), w.perOp(w.Waiting.RSS, w.Idle.RSS)/1024, w.perOp(w.Waiting.Heap, w.Idle.Heap)/1024,
				float64(w.Waiting.Goroutines-w.Idle.Goroutines)/float64(w.Operations))
			p("| 14c | … temporal-server CPU while all wait (Retry-After %d s: %.1f polls/s) | %.3f CPU (idle %.3f): %.2f ms per operation per minute of waiting over idle; PostgreSQL %.3f CPU (idle %.3f); workers %.3f CPU (idle %.3f); from the first start to the last close, server %.1f ms per operation | (measurement) | — |\n",
				w.RetryAfter, float64(w.Waiting.Polls)/w.Waiting.Window.Seconds(), w.Waiting.rate(w.Waiting.Server), w.Idle.rate(w.Idle.Server),
				(w.Waiting.rate(w.Waiting.Server)-w.Idle.rate(w.Idle.Server))*60e3/float64(w.Operations), w.Waiting.rate(w.Waiting.Postgres), w.Idle.rate(w.Idle.Postgres),
				w.Waiting.rate(w.Waiting.Workers), w.Idle.rate(w.Idle.Workers), w.ServerTotal.Seconds()*1e3/float64(w.Operations))
		} else {
			p("| 14b | … worker memory and server CPU while all wait | not measured: %s | (measurement) | **MISSED** |\n", w.WindowNote)
		}
		p("| 14d | … time to start them all; to complete after their operations end | ExecuteWorkflow calls %s, all accepted at the API %s after the first; followed: end seen by a poll after p50 %s, max %s (Retry-After %d s), last close %s after the last end; webhooks: close − the provider's 200 p50 %s, max %s (negative: closed before the 200 arrived; %d delivered in %s) | (measurement) | — |\n",
			secs(w.started()), accepted(w), gap(w.Seen.P50), gap(w.Seen.Max), w.RetryAfter, secs(w.FollowedClose), gap(w.WebhookClose.P50), gap(w.WebhookClose.Max), w.Delivered, secs(w.DeliverEnd-w.DeliverBegin))
	}
	if t := s.Throughput; t != nil && len(t.Rounds) > 0 {
		ready, plain := t.perSecond()
		p("| 14e | Uncontended calls per second with %d worker processes on the cluster: the ready workflow ÷ a plain activity doing the same POST, same workers (%d workflows at once; median of %d interleaved rounds) | %.2f (rounds: %s; %.1f and %.1f calls/s; %d failed) | ≥ %.2f | %s |\n",
			t.Workers, t.Workflows, len(t.Rounds), t.Ratio(), roundRatios(t), ready, plain, t.failed(), targetScaleThroughput, met(t.Ratio() >= targetScaleThroughput && t.failed() == 0))
	}
}

// accepted formats the time to every acceptance, or says it never came.
func accepted(w *ScaleWaiting) string {
	if w.AllAccepted == 0 {
		return "never (not all were accepted)"
	}
	return secs(w.accepted())
}

// statuses formats workflow counts by status, largest first.
func statuses(m map[string]int) string {
	if len(m) == 0 {
		return "none listed"
	}
	names := slices.Sorted(maps.Keys(m))
	slices.SortStableFunc(names, func(a, b string) int { return m[b] - m[a] })
	var parts []string
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%s %d", n, m[n]))
	}
	return strings.Join(parts, ", ")
}

// roundRatios lists the rounds' ready ÷ plain.
func roundRatios(t *ScaleThroughput) string {
	var parts []string
	for _, r := range t.Rounds {
		parts = append(parts, fmt.Sprintf("%.2f", r.ratio()))
	}
	return strings.Join(parts, ", ")
}

// writeScale writes the scale section.
func writeScale(b *strings.Builder, s *ScaleResult) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	sp := s.Params
	p("## 14. Scale: many operations waiting at once on the cluster\n\n")
	p("temporal-server 1.29.1 on PostgreSQL (`harness/cluster`, one partition per activity task queue), an API in a process of its own (the reference server: `POST /charges` answered 202 with a monitor that answers `Retry-After: %d` for %s after the acceptance, then 200; `POST /payments` answered 201 at once) and %d worker processes polling one task queue: the bench command started as a worker (`ServeScaleWorker`: the `worker` binary's wiring by package host, on its defaults with the shared rate on, each with its webhook receiver (`--webhook-scheme stripe`) and metrics, and the plain baseline workflow registered beside the package). Workflows are started without eager start (%d `ExecuteWorkflow` calls in flight), so matching hands every task to any worker.\n\n",
		sp.RetryAfter, durS(sp.Duration), sp.Workers, sp.StartConcurrency)
	if t := s.Throughput; t != nil && len(t.Rounds) > 0 {
		ready, plain := t.perSecond()
		p("**Uncontended calls per second** (claim 14e): an API that answers 201 to everything; after a warm-up batch of 20 each, every round starts %d ready workflows (`workflows.HTTPCallWorkflow`, one POST, its request on the origin's queue) at once and waits for them, then %d plain workflows (a minimal workflow around a plain activity doing the same POST with net/http under the ready workflow's retry policy), or the other way round, alternating; the time runs from the first start to the last result. Median %.1f calls/s against %.1f.\n\n", t.Workflows, t.Workflows, ready, plain)
		p("![Calls per second per round](%s)\n\n", ScaleThroughputSVG)
		p("| Round | First | Ready workflow | Plain activity | Ready ÷ plain (calls/s) | Failed |\n|---|---|---|---|---|---|\n")
		for i, r := range t.Rounds {
			first := "plain"
			if r.ReadyFirst {
				first = "ready"
			}
			p("| %d | %s | %s | %s | %.2f | %d |\n", i+1, first, secs(r.Ready), secs(r.Plain), r.ratio(), r.Failed)
		}
		p("\n")
	}
	w := s.Waiting
	if w == nil {
		return
	}
	p("**Waiting at once** (claims 14a-14d): the workers idle for %s (the baseline), then %d workflows started at once: the even ones follow a 202, the odd ones await a Stripe-signed webhook (`WebhookOptions`, timeout 1 h). Once the API has accepted every operation and 5 s more, the processes are sampled once a second for up to %s while every operation waits: the workers' RSS (/proc) and Go heap (`go_memstats_heap_alloc_bytes`, not after a GC) and goroutines (their metrics), summed over the %d processes; the CPU time of temporal-server, of PostgreSQL (the postmaster and its backends) and of the workers, from /proc/<pid>/stat. Then a provider delivers each awaiting workflow its event, %d at once, round robin over the workers' receivers; the followed operations end on their own and are seen at their next poll. At the end every workflow's status and close time is read from visibility and the API's records are counted per key.\n\n",
		secs(sp.IdleWindow), w.Operations, secs(sp.Window), sp.Workers, sp.DeliveryConcurrency)
	p("![Workflows started and completed, CPU in use](%s)\n\n", ScaleSVG)
	if w.WindowNote != "" {
		p("Not all operations waited at once through a sampling window: %s.\n\n", w.WindowNote)
	}
	p("| Phase | Window | Workers' RSS | Go heap | Goroutines | temporal-server CPU | PostgreSQL CPU | Workers' CPU | Polls |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, ph := range []ScalePhase{w.Idle, w.Waiting} {
		if ph.Samples == 0 {
			continue
		}
		p("| %s | %s | %.1f MiB | %.1f MiB | %d | %.3f | %.3f | %.3f | %d |\n", ph.Name, secs(ph.Window), mib(ph.RSS), mib(ph.Heap), ph.Goroutines,
			ph.rate(ph.Server), ph.rate(ph.Postgres), ph.rate(ph.Workers), ph.Polls)
	}
	p("\nCPU columns are CPU-seconds per second of the window. Start: the `ExecuteWorkflow` calls took %s (%.0f/s), every operation was accepted at the API %s after the first call (%d start errors). From the first start to the last close: temporal-server %s of CPU, PostgreSQL %s, the workers %s. The API got %d requests in all (%d records, %d polls, %d key misuses).\n\n",
		secs(w.started()), float64(w.Operations)/max(w.started().Seconds(), 1e-9), accepted(w), w.StartErrors, secs(w.ServerTotal), secs(w.PostgresTotal), secs(w.WorkersTotal), w.Requests, w.Records, w.Polls, w.Mismatch)
	if w.AllClosed > 0 {
		p("Every workflow had closed %s after the first start.\n\n", secs(w.AllClosed-w.FirstStart))
	} else {
		p("Not every workflow had closed when the wait ended (%s).\n\n", statuses(w.Statuses))
	}
}

// WriteScaleSVG draws the waiting part of r's scale section: workflows
// started and completed over time, and the CPU in use by temporal-server,
// PostgreSQL and the workers, with the phases marked.
func WriteScaleSVG(w io.Writer, r *Results) error {
	if r.Scale == nil || r.Scale.Waiting == nil || len(r.Scale.Waiting.Samples) < 2 {
		return fmt.Errorf("no scale plot: the results hold no samples")
	}
	sw := r.Scale.Waiting
	ss := sw.Samples
	var started, completed, server, pg, workers []linePoint
	for i, s := range ss {
		x := s.At.Seconds()
		started = append(started, linePoint{x, float64(s.Started)})
		completed = append(completed, linePoint{x, float64(s.Completed)})
		if i > 0 {
			dt := (s.At - ss[i-1].At).Seconds()
			if dt <= 0 {
				continue
			}
			server = append(server, linePoint{x, (s.Server - ss[i-1].Server).Seconds() / dt})
			pg = append(pg, linePoint{x, (s.Postgres - ss[i-1].Postgres).Seconds() / dt})
			workers = append(workers, linePoint{x, (s.Workers - ss[i-1].Workers).Seconds() / dt})
		}
	}
	var marks []plotMark
	add := func(at time.Duration, label string) {
		if at > 0 {
			marks = append(marks, plotMark{At: at, Label: label})
		}
	}
	add(sw.FirstStart, "start")
	add(sw.AllAccepted, "all accepted")
	add(sw.DeliverBegin, "webhooks")
	add(sw.AllClosed, "all closed")
	var bands []plotBand
	if sw.Idle.Samples > 0 {
		bands = append(bands, plotBand{From: sw.Idle.From, To: sw.Idle.From + sw.Idle.Window, Label: "idle"})
	}
	if sw.Waiting.Samples > 0 {
		bands = append(bands, plotBand{From: sw.Waiting.From, To: sw.Waiting.From + sw.Waiting.Window, Label: "all waiting"})
	}
	return writeLinesSVG(w, fmt.Sprintf("%d operations waiting at once, %d workers on the PostgreSQL cluster", sw.Operations, r.Scale.Params.Workers),
		"seconds since the sampler started", marks, bands, []linePanel{
			{YLabel: "workflows", Lines: []line{{"started", started}, {"completed", completed}}},
			{YLabel: "CPU in use (cores)", Lines: []line{{"temporal-server", server}, {"PostgreSQL", pg}, {"workers", workers}}},
		})
}

// WriteScaleThroughputSVG draws the throughput part: calls per second of
// the ready workflow and of the plain activity, per round.
func WriteScaleThroughputSVG(w io.Writer, r *Results) error {
	if r.Scale == nil || r.Scale.Throughput == nil || len(r.Scale.Throughput.Rounds) == 0 {
		return fmt.Errorf("no scale throughput plot: the results hold no round")
	}
	t := r.Scale.Throughput
	var ready, plain []linePoint
	for i, rd := range t.Rounds {
		if rd.Ready > 0 && rd.Plain > 0 {
			ready = append(ready, linePoint{float64(i + 1), float64(t.Workflows) / rd.Ready.Seconds()})
			plain = append(plain, linePoint{float64(i + 1), float64(t.Workflows) / rd.Plain.Seconds()})
		}
	}
	return writeLinesSVG(w, fmt.Sprintf("Uncontended calls/s, %d workers: ready workflow vs plain activity (ready ÷ plain %.2f)", t.Workers, t.Ratio()),
		"round", nil, nil, []linePanel{{YLabel: "calls per second", Lines: []line{{"ready workflow", ready}, {"plain activity", plain}}}})
}

// plotBand is a shaded span of a line plot's x axis (a sampling window),
// labelled inside its first panel.
type plotBand struct {
	From, To time.Duration
	Label    string
}

// linePoint is a point of a line plot.
type linePoint struct{ X, Y float64 }

// line is one named series of a panel.
type line struct {
	Name   string
	Points []linePoint
}

// linePanel is one panel of a line plot, its y axis from 0.
type linePanel struct {
	YLabel string
	Lines  []line
}

// lineColors are the series' colours, in order.
var lineColors = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e"}

// writeLinesSVG draws panels stacked on one x axis from 0 (marks are
// vertical lines across every panel, labelled at the top, a label close
// to the one before raised a line; bands are shaded spans). It uses no
// dependency.
func writeLinesSVG(w io.Writer, title, xlabel string, marks []plotMark, bands []plotBand, panels []linePanel) error {
	const (
		width  = 900
		panelH = 220
		left   = 70
		right  = 20
		top    = 50
		gapH   = 50
		bottom = 45
	)
	plotW := float64(width - left - right)
	xMax := 0.0
	for _, pn := range panels {
		for _, l := range pn.Lines {
			for _, pt := range l.Points {
				xMax = max(xMax, pt.X)
			}
		}
	}
	for _, m := range marks {
		xMax = max(xMax, m.At.Seconds())
	}
	xMax = axisCeil(max(xMax, 1))
	height := top + len(panels)*panelH + (len(panels)-1)*gapH + bottom
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	p(`<rect width="100%%" height="100%%" fill="white"/>` + "\n")
	p(`<text x="%d" y="22" font-size="15" font-weight="bold">%s</text>`+"\n", left, html.EscapeString(title))
	x := func(v float64) float64 { return left + v/xMax*plotW }
	for i, pn := range panels {
		y0 := float64(top + i*(panelH+gapH))
		yMax := 0.0
		for _, l := range pn.Lines {
			for _, pt := range l.Points {
				yMax = max(yMax, pt.Y)
			}
		}
		yMax = axisCeil(max(yMax, 1e-9))
		y := func(v float64) float64 { return y0 + panelH - v/yMax*panelH }
		for _, t := range ticks(yMax) {
			p(`<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", left, width-right, y(t), y(t))
			p(`<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", left-5, y(t)+4, trimFloat(t))
		}
		p(`<text x="14" y="%.1f" transform="rotate(-90 14 %.1f)" text-anchor="middle">%s</text>`+"\n", y0+panelH/2, y0+panelH/2, html.EscapeString(pn.YLabel))
		p(`<rect x="%d" y="%.1f" width="%.1f" height="%d" fill="none" stroke="#888"/>`+"\n", left, y0, plotW, panelH)
		for _, bd := range bands {
			bx := x(bd.From.Seconds())
			p(`<rect x="%.1f" y="%.1f" width="%.1f" height="%d" fill="#f0e6c8" opacity="0.6"/>`+"\n", bx, y0, max(x(bd.To.Seconds())-bx, 1), panelH)
			if i == 0 {
				p(`<text x="%.1f" y="%.1f" font-size="10" text-anchor="middle" fill="#8a6d1c">%s</text>`+"\n", (bx+x(bd.To.Seconds()))/2, y0+panelH-6, html.EscapeString(bd.Label))
			}
		}
		lastLabel, raised := -1e9, false
		for _, m := range marks {
			mx := x(m.At.Seconds())
			p(`<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#999" stroke-dasharray="4,3"/>`+"\n", mx, mx, y0, y0+panelH)
			if i == 0 && m.Label != "" {
				raised = mx-lastLabel < 70 && !raised
				ly := y0 - 4
				if raised {
					ly -= 11
				}
				p(`<text x="%.1f" y="%.1f" font-size="10" text-anchor="middle">%s</text>`+"\n", mx, ly, html.EscapeString(m.Label))
				lastLabel = mx
			}
		}
		for k, l := range pn.Lines {
			color := lineColors[k%len(lineColors)]
			var pts []string
			for _, pt := range l.Points {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(pt.X), y(pt.Y)))
			}
			if len(pts) > 0 {
				p(`<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`+"\n", color, strings.Join(pts, " "))
			}
			p(`<rect x="%d" y="%.1f" width="12" height="3" fill="%s"/><text x="%d" y="%.1f">%s</text>`+"\n",
				left+10+k*170, y0+14, color, left+26+k*170, y0+18, html.EscapeString(l.Name))
		}
	}
	yb := float64(height - bottom)
	for _, t := range ticks(xMax) {
		p(`<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", x(t), yb+16, trimFloat(t))
	}
	p(`<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", left+plotW/2, yb+36, html.EscapeString(xlabel))
	p("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// trimFloat formats an axis value without trailing zeros.
func trimFloat(v float64) string {
	s := fmt.Sprintf("%.3f", v)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s
}
