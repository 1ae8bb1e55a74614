package bench

import (
	"cmp"
	"fmt"
	"html"
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

// plotSeries is one panel of a requests plot: a run's requests, bucketed.
type plotSeries struct {
	Title string
	Log   []LogEntry
	// Note, if set, replaces the panel's summary on the right ("N
	// requests, last success at T").
	Note string
	// Capacity, if set, is this panel's own capacity line (its origin's),
	// in place of the plot's.
	Capacity int
}

// requestsPlot is what a requests plot draws besides its series.
type requestsPlot struct {
	Title string
	// Bucket is the width of a bar; Capacity the requests accepted per
	// bucket, drawn as a dashed line.
	Bucket   time.Duration
	Capacity int
	// Failures labels the bars of the answers that are not a success
	// (default "429 (over capacity)").
	Failures string
	// Mark, if positive, draws a vertical line at that time, labelled
	// MarkLabel.
	Mark      time.Duration
	MarkLabel string
	// Marks are more vertical lines, each with a label at its top.
	Marks []plotMark
	// XLabel names the x axis (default "seconds since the server's
	// first request").
	XLabel string
}

// plotMark is a labelled vertical line of a requests plot.
type plotMark struct {
	At    time.Duration
	Label string
}

// WriteContentionSVG draws the contention section of r as an SVG: the
// requests per capacity window of the first two dev-server runs (Temporal's
// own backoff and full jitter) and of the adaptive-admission run, one panel
// each. It fails if r has fewer than two contention runs.
func WriteContentionSVG(w io.Writer, r *Results) error {
	c := r.Contention
	if c == nil || len(c.Runs) < 2 {
		return fmt.Errorf("no contention plot: the results hold fewer than two contention runs")
	}
	series := []plotSeries{
		{Title: strategyName(c.Runs[0].Strategy), Log: c.Runs[0].Log},
		{Title: strategyName(c.Runs[1].Strategy), Log: c.Runs[1].Log},
	}
	title := fmt.Sprintf("%d workflows, %d requests per %s accepted: Temporal's own backoff vs full jitter (dev server)", c.Params.Clients, c.Params.Capacity, c.Params.Window)
	if a, ok := admissionRun(c); ok {
		series = append(series, plotSeries{Title: runName(a.Strategy, true), Log: a.Log})
		title = fmt.Sprintf("%d workflows, %d requests per %s accepted: Temporal's own backoff, full jitter, adaptive admission (dev server)", c.Params.Clients, c.Params.Capacity, c.Params.Window)
	}
	return writeContentionSVG(w, title, series, c.Params.Window, c.Params.Capacity)
}

// WriteOutageSVG draws the outage section of r as an SVG: the requests per
// second of each outage run, one panel each, with the recovery marked. It
// fails if r has no outage run.
func WriteOutageSVG(w io.Writer, r *Results) error {
	if len(r.Outage) == 0 {
		return fmt.Errorf("no outage plot: the results hold no outage run")
	}
	p := r.outageParams()
	outage := r.Outage[0].Outage
	var series []plotSeries
	for _, o := range r.Outage {
		series = append(series, plotSeries{
			Title: o.name(),
			Log:   o.Log,
			Note: fmt.Sprintf("%d requests during the outage, %d after; last success %.1f s after the recovery",
				o.DuringOutage, o.After, o.RecoveryToLast.Seconds()),
		})
	}
	return writeRequestsSVG(w, requestsPlot{
		Title: fmt.Sprintf("%d workflows, API down (503) for %.0f s, then %d requests per %s accepted (dev server)",
			p.Clients, outage.Seconds(), p.Capacity, p.Window),
		Bucket: p.Window, Capacity: p.Capacity,
		Failures: "503 (down) or 429 (over capacity)",
		Mark:     outage, MarkLabel: "recovery",
	}, series)
}

// writeContentionSVG draws the contention plot: writeRequestsSVG with
// bars of bucket and the capacity per bucket.
func writeContentionSVG(w io.Writer, title string, series []plotSeries, bucket time.Duration, capacity int) error {
	return writeRequestsSVG(w, requestsPlot{Title: title, Bucket: bucket, Capacity: capacity}, series)
}

// writeRequestsSVG draws one panel per series, stacked, with the same
// axes: requests per bucket since the server's first request, successes and
// the other answers stacked, and a dashed line at capacity (requests
// accepted per bucket when bucket equals the capacity window). It uses no
// dependency.
func writeRequestsSVG(w io.Writer, pl requestsPlot, series []plotSeries) error {
	title, bucket, capacity := pl.Title, pl.Bucket, pl.Capacity
	if pl.Failures == "" {
		pl.Failures = "429 (over capacity)"
	}
	const (
		width   = 900
		panelH  = 230
		left    = 60
		right   = 20
		top     = 50
		gap     = 45
		bottomM = 45
	)
	plotW := float64(width - left - right)
	var end time.Duration
	maxCount := 1
	counts := make([][][2]int, len(series)) // [bucket][ok, failed]
	for _, s := range series {
		for _, l := range s.Log {
			end = max(end, l.At)
		}
	}
	end = max(end, pl.Mark)
	for _, m := range pl.Marks {
		end = max(end, m.At)
	}
	// The x axis runs to the tick after the last request, in whole buckets.
	step := niceStep(end.Seconds() / 10)
	xMax := math.Ceil(end.Seconds()/step+1e-9) * step
	nb := int(math.Ceil(xMax / bucket.Seconds()))
	for i, s := range series {
		counts[i] = make([][2]int, nb)
		for _, l := range s.Log {
			b := int(l.At / bucket)
			if l.Status >= 200 && l.Status <= 299 {
				counts[i][b][0]++
			} else {
				counts[i][b][1]++
			}
		}
		for _, c := range counts[i] {
			maxCount = max(maxCount, c[0]+c[1])
		}
	}
	yMax := axisCeil(float64(maxCount))
	height := top + len(series)*(panelH+gap) - gap + bottomM
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="15" font-weight="bold">%s</text>`+"\n", left, html.EscapeString(title))
	fmt.Fprintf(&b, `<rect x="%d" y="30" width="10" height="10" fill="#2e7d32"/><text x="%d" y="39">success (201)</text>`, left, left+14)
	fmt.Fprintf(&b, `<rect x="%d" y="30" width="10" height="10" fill="#c62828"/><text x="%d" y="39">%s</text>`, left+120, left+134, html.EscapeString(pl.Failures))
	capX := left + 157 + 7*len([]rune(pl.Failures))
	capLabel := ""
	if capacity > 0 {
		capLabel = fmt.Sprintf("capacity: %d per %s window", capacity, bucket)
	} else if slices.ContainsFunc(series, func(s plotSeries) bool { return s.Capacity > 0 }) {
		capLabel = fmt.Sprintf("capacity of the panel's origin per %s window", bucket)
	}
	if capLabel != "" {
		fmt.Fprintf(&b, `<line x1="%d" y1="35" x2="%d" y2="35" stroke="#333" stroke-dasharray="4,3"/><text x="%d" y="39">%s</text>`+"\n", capX, capX+25, capX+30, html.EscapeString(capLabel))
	}
	if pl.Mark > 0 {
		mx := capX + 30 + 7*len(capLabel) + 20
		fmt.Fprintf(&b, `<line x1="%d" y1="30" x2="%d" y2="42" stroke="#1565c0" stroke-width="2"/><text x="%d" y="39">%s</text>`+"\n", mx, mx, mx+6, html.EscapeString(pl.MarkLabel))
	}
	barW := plotW / float64(nb)
	for i, s := range series {
		y0 := float64(top + i*(panelH+gap) + 10)
		h := float64(panelH - 10)
		ys := func(v float64) float64 { return y0 + h - v/yMax*h }
		total, last := 0, time.Duration(0)
		for _, l := range s.Log {
			total++
			if l.Status >= 200 && l.Status <= 299 {
				last = max(last, l.At)
			}
		}
		note := s.Note
		if note == "" {
			note = fmt.Sprintf("%d requests, last success at %.1f s", total, last.Seconds())
		}
		fmt.Fprintf(&b, `<text x="%d" y="%.0f" font-weight="bold">%s</text><text x="%d" y="%.0f" text-anchor="end">%s</text>`+"\n",
			left, y0-4, html.EscapeString(s.Title), width-right, y0-4, html.EscapeString(note))
		// grid and y ticks
		for _, t := range ticks(yMax) {
			fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#e0e0e0"/><text x="%d" y="%.1f" text-anchor="end">%g</text>`+"\n",
				left, ys(t), width-right, ys(t), left-6, ys(t)+4, t)
		}
		for k, c := range counts[i] {
			x := float64(left) + float64(k)*barW
			bw := math.Max(barW-0.5, 0.5)
			if c[0] > 0 {
				fmt.Fprintf(&b, `<rect x="%.2f" y="%.2f" width="%.2f" height="%.2f" fill="#2e7d32"/>`, x, ys(float64(c[0])), bw, float64(c[0])/yMax*h)
			}
			if c[1] > 0 {
				fmt.Fprintf(&b, `<rect x="%.2f" y="%.2f" width="%.2f" height="%.2f" fill="#c62828"/>`, x, ys(float64(c[0]+c[1])), bw, float64(c[1])/yMax*h)
			}
		}
		b.WriteString("\n")
		if c := cmp.Or(s.Capacity, capacity); c > 0 {
			fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#333" stroke-dasharray="4,3"/>`+"\n", left, ys(float64(c)), width-right, ys(float64(c)))
		}
		row := 0 // one letter on the top row; longer labels take turns on the three below
		for _, m := range pl.Marks {
			x := float64(left) + m.At.Seconds()/(float64(nb)*bucket.Seconds())*plotW
			ly := y0 + 10
			if len(m.Label) > 1 {
				ly += float64(1+row%3) * 11
				row++
			}
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#6a1b9a" stroke-dasharray="2,2"/><text x="%.1f" y="%.1f" font-size="10" fill="#6a1b9a">%s</text>`+"\n",
				x, y0, x, y0+h, x+2, ly, html.EscapeString(m.Label))
		}
		if pl.Mark > 0 {
			x := float64(left) + pl.Mark.Seconds()/(float64(nb)*bucket.Seconds())*plotW
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#1565c0" stroke-width="2"/>`+"\n", x, y0, x, y0+h)
		}
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#000"/><line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#000"/>`+"\n",
			left, y0, left, y0+h, left, y0+h, width-right, y0+h)
		// x ticks
		for t := 0.0; t <= xMax+1e-9; t += step {
			x := float64(left) + t/(float64(nb)*bucket.Seconds())*plotW
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#000"/><text x="%.1f" y="%.1f" text-anchor="middle">%g</text>`,
				x, y0+h, x, y0+h+4, x, y0+h+16, t)
		}
		b.WriteString("\n")
		fmt.Fprintf(&b, `<text x="14" y="%.0f" transform="rotate(-90 14 %.0f)" text-anchor="middle">requests per %s</text>`+"\n", y0+h/2, y0+h/2, bucket)
	}
	if pl.XLabel == "" {
		pl.XLabel = "seconds since the server's first request"
	}
	fmt.Fprintf(&b, `<text x="%.0f" y="%d" text-anchor="middle">%s</text>`+"\n", float64(left)+plotW/2, height-10, html.EscapeString(pl.XLabel))
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

// axisCeil rounds v up to a round axis maximum (1, 1.2, 1.5, 2, 2.5, 3, 4,
// 5, 6 or 8 times a power of ten).
func axisCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

// niceStep is a tick step of 1, 2 or 5 times a power of ten, at least v.
func niceStep(v float64) float64 { return niceCeil(math.Max(v, 1e-9)) }

func ticks(yMax float64) []float64 {
	step := niceStep(yMax / 5)
	var out []float64
	for t := 0.0; t <= yMax+1e-9; t += step {
		out = append(out, t)
	}
	return out
}
