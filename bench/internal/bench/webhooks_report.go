package bench

import (
	"fmt"
	"slices"
	"strings"
)

// receiverRows are part 1's receiver rows of the three schemes, in order.
var receiverSchemes = []string{"standard-webhooks", "stripe", "hmac"}

// schemeRow returns part 1's receiver row of scheme (no client_secret).
func (v *VerifyResult) schemeRow(scheme string) (VerifyRow, bool) {
	return v.row("receiver, " + scheme)
}

// mechSummary is "Update: X ms p50, Y/s (concurrency c: …)" of part 3.
func (m *MechResult) mechSummary(name, short string, conc int) string {
	seq, ok1 := m.run(name, 1)
	par, ok2 := m.run(name, conc)
	if !ok1 || !ok2 {
		return short + ": —"
	}
	return fmt.Sprintf("%s: %s p50 (p95 %s), %.0f/s sequential; %s p50, %.0f/s at concurrency %d", short, ms(seq.Latency.P50), ms(seq.Latency.P95), seq.PerSecond,
		ms(par.Latency.P50), par.PerSecond, conc)
}

// duplicateSummary says what a duplicate of each mechanism added.
func (m *MechResult) duplicateSummary() string {
	var parts []string
	for _, n := range mechanisms {
		if h, ok := m.history(n); ok {
			parts = append(parts, fmt.Sprintf("%s %d events per delivery, %d per duplicate", mechShort(n), h.First, h.Duplicate))
		}
	}
	return strings.Join(parts, "; ")
}

// mechShort is a mechanism's short name.
func mechShort(name string) string {
	switch name {
	case mechUpdate:
		return "Update"
	case mechSignal:
		return "Signal"
	case mechSignalWithStart:
		return "SignalWithStart"
	}
	return name
}

// writeWebhooksClaims writes the claims-table rows of the webhooks
// section (10a–10d).
func writeWebhooksClaims(b *strings.Builder, wh *WebhooksResult) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	if v := wh.Verify; v != nil {
		var parts []string
		for _, s := range receiverSchemes {
			if r, ok := v.schemeRow(s); ok {
				parts = append(parts, fmt.Sprintf("%s %.0f/s (%.1f µs, ÷ bare read %.2f)", s, r.EventsPerSec, r.MedianNs/1e3, r.Ratio))
			}
		}
		bare, _ := v.row(rowBare)
		mac, _ := v.row(rowMAC)
		p("| 10a | Webhook receiver on one core (GOMAXPROCS 1), Temporal excluded: verified events/s of a %d-byte Stripe-like event (median of %d rounds of %d) | %s; bare read %.0f/s (%.1f µs); HMAC-SHA256 alone %.1f µs | (measurement) | — |\n",
			bare.BodyBytes, v.Rounds, v.Events, strings.Join(parts, "; "), bare.EventsPerSec, bare.MedianNs/1e3, mac.MedianNs/1e3)
	}
	for _, run := range wh.Latency {
		p("| 10b | Receiver → workflow on the dev server, concurrency %d: the provider's POST to the 2xx (the event durably with the workflow), %d workflows awaiting their webhook | p50 %s, p95 %s, p99 %s; %.1f events/s; %d failed; %s | (measurement) | — |\n",
			run.Concurrency, run.Deliveries, ms(run.Latency.P50), ms(run.Latency.P95), ms(run.Latency.P99), run.PerSecond, run.Failed, closeVsAnswer(run.ToCompletion))
	}
	m := wh.Mech
	if m == nil {
		return
	}
	conc := wh.Params.Concurrency
	p("| 10c | Delivery to a running workflow: Update (WaitForStage Completed) against Signal | %s. %s. %s | (comparison) | — |\n",
		m.mechSummary(mechUpdate, "Update", conc), m.mechSummary(mechSignal, "Signal", conc), m.mechSummary(mechSignalWithStart, "SignalWithStart", conc))
	if u, ok := m.history(mechUpdate); ok {
		s, _ := m.history(mechSignal)
		p("| 10d | A duplicate delivery (the same update ID) adds nothing to history | Update %d events (first delivery %d); Signal %d (first %d) | Update: 0 | %s |\n",
			u.Duplicate, u.First, s.Duplicate, s.First, met(u.Duplicate == 0 && u.DuplicateError == "" && u.Taken == 1))
	}
}

// writeWebhooks writes the webhooks section.
func writeWebhooks(b *strings.Builder, wh *WebhooksResult) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	wp := wh.Params
	p("## 10. Webhooks\n\n")
	if v := wh.Verify; v != nil {
		bare, _ := v.row(rowBare)
		p("**Verification on one core.** `webhooks.NewReceiver` with a `client.Client` stub whose `UpdateWorkflow` returns a handle completed at once (so Temporal is excluded, the receiver's own work is not: reading, verifying, routing, building the notification, its update ID and dedup memo, tracing and metrics with the no-op defaults), driven through `ServeHTTP` with `httptest` requests, under `runtime.GOMAXPROCS(1)`. Each delivery is a Stripe-like `payment_intent.succeeded` event of %d bytes whose `data.object.metadata` names the workflow and operation, signed with `internal/signature` (the rules the verifiers share) and pre-signed outside the timed loop; every event ID is new, so every delivery reaches `UpdateWorkflow` (checked: every answer 200, one update per event). Baselines in the same rounds: an `http.HandlerFunc` that only reads the body and answers 200, through the same `httptest` harness, and HMAC-SHA256 of the body alone. %d rounds of %d deliveries per row, rows in rotating order; ratios are per round against the bare read of the same round, then the median. CPU is the process's (user + system); allocations are per delivery, the harness's included.\n\n",
			bare.BodyBytes, v.Rounds, v.Events)
		p("| Row | ns/event (median) | Events/s | ÷ bare read | CPU ns/event | Allocs/event | Bytes/event | Per round, ns/event |\n|---|---|---|---|---|---|---|---|\n")
		for _, r := range v.Rows {
			ratio := "1"
			if r.Name != rowBare {
				ratio = fmt.Sprintf("%.2f", r.Ratio)
			}
			var rounds []string
			for _, x := range r.NsPerEvent {
				rounds = append(rounds, fmt.Sprintf("%.0f", x))
			}
			p("| %s | %.0f | %.0f | %s | %.0f | %.0f | %.0f | %s |\n", r.Name, r.MedianNs, r.EventsPerSec, ratio, r.MedianCPUNs, r.AllocsPerOp, r.BytesPerOp, strings.Join(rounds, ", "))
		}
		if cs, ok := v.row(rowClientSecret); ok {
			if st, ok := v.schemeRow("stripe"); ok && st.MedianNs > 0 {
				p("\nThe body with a `client_secret` (%d bytes) takes the redaction path (the member's value replaced in place, redact.Fields): %.2f × the Stripe row without one.", cs.BodyBytes, cs.MedianNs/st.MedianNs)
			}
		}
		p("\n\n")
	}
	if len(wh.Latency) > 0 {
		p("**Latency to the workflow.** On the dev server, with a worker of the section's own in this process (8 pollers per task type, adaptive admission off): %d ready workflows (`workflows.WorkflowName`) per mode, each calling an in-process API (`httptest`, answering the start POST 201 `{\"id\": …}`) with `Request.Webhook` (succeeded on `%s`), started at once; all %d had started their operation and had no pending task %s after the first start. Then one Stripe-signed event per workflow is POSTed by an HTTP client (the provider) to an HTTP server around `webhooks.NewReceiver` with the dev server's client: first %d one at a time, then %d with %d in flight. Latency runs from the provider's POST to the end of the receiver's answer, which comes only once the update completed (the event durably in the workflow's history). \"Close − 2xx\" is the workflow's close time at the server minus when the provider had the answer (same machine, same clock): negative when the workflow closed before the answer reached the provider.\n\n",
			wp.Workflows, whSucceeded, 2*wp.Workflows, secs(wh.Start), wp.Workflows, wp.Workflows, wp.Concurrency)
		p("| Concurrency | Events | Failed | Answers | p50 | p95 | p99 | max | Events/s | Close − 2xx: p50 / p95 / max (min) | Not closed |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, run := range wh.Latency {
			p("| %d | %d | %d | %s | %s | %s | %s | %s | %.1f | %s / %s / %s (%s) | %d |\n", run.Concurrency, run.Deliveries, run.Failed, outcomes(run.Outcomes),
				ms(run.Latency.P50), ms(run.Latency.P95), ms(run.Latency.P99), ms(run.Latency.Max), run.PerSecond,
				ms(run.ToCompletion.P50), ms(run.ToCompletion.P95), ms(run.ToCompletion.Max), ms(run.ToCompletion.Min), run.NotClosed)
		}
		p("\n")
	}
	m := wh.Mech
	if m == nil {
		return
	}
	p("**Update against Signal.** The raw cost of each delivery mechanism to a running workflow, on the same dev server and worker: %d bench-only workflows (`%s`) that take a notification (the `workflows.Notification` of a ~1 KiB event, as the receiver sends) by an Update handler (a validator refusing an event ID already taken) or a signal channel, each event ID once, and wait. %d rounds of %d deliveries per mechanism, spread over the workflows, mechanisms in rotating order, each batch after the workflows had no pending task; sequentially, then %d in flight. `UpdateWorkflow` waits for the stage Completed (the handler ran and its outcome is in history, as the receiver waits); `SignalWorkflow` returns once the signal is in history, before the workflow ran; `SignalWithStartWorkflow` targets the running workflow.\n\n",
		m.Sinks, sinkWorkflowName, wp.MechRounds, wp.Deliveries, wp.Concurrency)
	p("| Mechanism | Concurrency | Deliveries | Failed | p50 | p95 | p99 | max | Per second |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, run := range m.Runs {
		p("| %s | %d | %d | %d | %s | %s | %s | %s | %.1f |\n", run.Name, run.Concurrency, run.Deliveries, run.Failed,
			ms(run.Latency.P50), ms(run.Latency.P95), ms(run.Latency.P99), ms(run.Latency.Max), run.PerSecond)
	}
	if d := m.DuplicateUpdate; d.N > 0 {
		p("\nA duplicate Update (%d update IDs of the sequential run sent again, one at a time): p50 %s, p95 %s, max %s; the server answers it from the completed update's stored outcome.\n", d.N, ms(d.P50), ms(d.P95), ms(d.Max))
	}
	p("\nHistory events per delivery, on a fresh workflow of the same kind, counted once it had no pending workflow task: one delivery, then the same delivery again (the same update ID; the same signal).\n\n")
	p("| Mechanism | Events per delivery | Their types | Events per duplicate | Their types | Taken by the handler |\n|---|---|---|---|---|---|\n")
	for _, h := range m.History {
		dup := strings.Join(h.DuplicateTypes, ", ")
		if dup == "" {
			dup = "—"
		}
		if h.DuplicateError != "" {
			dup += " (error: " + h.DuplicateError + ")"
		}
		p("| %s | %d | %s | %d | %s | %d |\n", h.Mechanism, h.First, strings.Join(h.FirstTypes, ", "), h.Duplicate, dup, h.Taken)
	}
	conc := wp.Concurrency
	p("\n**In short.** %s. %s. %s. Duplicates: %s.\n\n", m.mechSummary(mechUpdate, "Update", conc), m.mechSummary(mechSignal, "Signal", conc),
		m.mechSummary(mechSignalWithStart, "SignalWithStart", conc), m.duplicateSummary())
	u, _ := m.run(mechUpdate, 1)
	sg, _ := m.run(mechSignal, 1)
	cost := fmt.Sprintf("A Signal's p50 is %.2f × an Update's (%s against %s)", ratioOr0(sg.Latency.P50.Seconds(), u.Latency.P50.Seconds()), ms(sg.Latency.P50), ms(u.Latency.P50))
	p("**Why Update.** %s: `SignalWorkflow` returns once the signal is in history, before the workflow has run, so a receiver answering 2xx on it would say only that the event is queued; the workflow could not refuse an event (after the operation ended, or already taken) before it is stored, and every redelivery adds events. An Update's 2xx means the workflow's handler took the event, a refused one leaves nothing in history, and a redelivery under the same update ID adds nothing: that guarantee is what the receiver's 2xx promises the provider, so the receiver uses Update.\n\n", cost)
}

// outcomes formats the receiver's answers by outcome.
func outcomes(m map[string]int) string {
	if len(m) == 0 {
		return "—"
	}
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	slices.Sort(names)
	var parts []string
	for _, n := range names {
		label := n
		if label == "" {
			label = "(no answer)"
		}
		parts = append(parts, fmt.Sprintf("%s %d", label, m[n]))
	}
	return strings.Join(parts, ", ")
}

// ratioOr0 is a ÷ b, or 0 when b is 0.
func ratioOr0(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// closeVsAnswer says when the workflows closed relative to the 2xx (p50).
func closeVsAnswer(c LatStats) string {
	switch {
	case c.N == 0:
		return "close time not measured"
	case c.Max < 0:
		return fmt.Sprintf("every workflow had closed before the 2xx reached the provider (p50 %s before, the latest %s before)", ms(-c.P50), ms(-c.Max))
	case c.P50 < 0:
		return fmt.Sprintf("the workflow had closed %s before the 2xx reached the provider (p50; the latest %s after it)", ms(-c.P50), ms(c.Max))
	}
	return fmt.Sprintf("the workflow closed %s after the 2xx (p50)", ms(c.P50))
}
