package bench

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/harness/actions"
)

// The actions section's targets (Temporal Cloud's estimate, per call or
// per worker and second).
const (
	targetRetryActions  = 2.0 // a retry or a poll: the attempt and what carries its progress
	targetSharedPerSec  = 1.0 // the shared rate under load, per worker per second
	targetIdleActions   = 0.0 // the shared rate idle
	targetFirstTryRatio = 1.0 // the ready workflow's own ÷ the plain activity's
)

// scenarioTitles name the scenarios in tables and the plot.
var scenarioTitles = map[string]string{
	scenFirstTry:   "first try (201)",
	scenRetries425: "3 retries (425 × 3, then 201)",
	scenRetries:    "3 retries (503 × 3, then 201)",
	scenFollow:     "202, followed: 10 polls",
	scenWebhook:    "webhook wait",
	scenLookup:     "lookup-reconciled retry",
	scenLoad1:      "steady stream, 1 worker",
	scenIdle:       "idle worker",
	scenLoad2:      "steady stream, 2 workers",
}

// scenarioShort name the scenarios under the plot's bars.
var scenarioShort = map[string]string{
	scenFirstTry: "first try", scenRetries425: "3 retries (425)", scenRetries: "3 retries (503)", scenFollow: "202 + 10 polls",
	scenWebhook: "webhook wait", scenLookup: "lookup retry", scenLoad1: "stream, 1 worker", scenIdle: "idle, 30 s", scenLoad2: "stream, 2 workers",
}

func scenarioTitle(name string) string {
	if t, ok := scenarioTitles[name]; ok {
		return t
	}
	return name
}

// actionsGoal is one goal of the section, judged on the Cloud estimate
// (what a user pays); the server's count stands beside it.
type actionsGoal struct {
	ID, Claim, Measured, Target string
	OK                          bool
	// Comparison: no goal, a figure beside its baseline.
	Comparison bool
}

// cloudPerCall and serverPerCall are a run's own actions per call.
func (r ActionsRun) cloudPerCall() float64  { return r.perCall(r.CloudOwn()) }
func (r ActionsRun) serverPerCall() float64 { return r.perCall(r.ServerOwn()) }

// perRetry is what each of n retries (or polls) of scenario sc added to
// a first try's call, its own actions (Cloud's, the server's), and the
// heartbeats per retry: what carried the progress.
func (a *ActionsResult) perRetry(sc *ActionsScenario, n int) (cloud, server, heartbeats float64, ok bool) {
	first := a.scenario(scenFirstTry)
	if first == nil || n <= 0 || sc.Ours.Calls == 0 {
		return 0, 0, 0, false
	}
	f := float64(n)
	return (sc.Ours.cloudPerCall() - first.Ours.cloudPerCall()) / f, (sc.Ours.serverPerCall() - first.Ours.serverPerCall()) / f,
		sc.Ours.perCall(sc.Ours.heartbeats()) / f, true
}

// retryMet is the retries' and polls' goal: at most 2 actions each, 1
// where no heartbeat carries anything.
func retryMet(perRetry, heartbeats float64) bool {
	const eps = 1e-9
	return perRetry <= targetRetryActions+eps && (heartbeats > 0 || perRetry <= 1+eps)
}

// goals are the section's goals, in the claims table's order.
func (a *ActionsResult) goals() []actionsGoal {
	var gs []actionsGoal
	p := a.Params
	if sc := a.scenario(scenFirstTry); sc != nil && sc.Plain != nil {
		o, pl := sc.Ours, *sc.Plain
		r := o.cloudPerCall() / pl.cloudPerCall()
		gs = append(gs, actionsGoal{ID: "11a", Claim: "Temporal actions per call, first try (201): the ready workflow on a worker wired by package host (its defaults: the shared rate on), its own actions ÷ a plain activity's in a minimal workflow",
			Measured: fmt.Sprintf("%.2f (%s ÷ %s; server metric %s ÷ %s); the shared rate besides: %s per call in this run (%s reports)",
				r, actions.Num(o.cloudPerCall()), actions.Num(pl.cloudPerCall()), actions.Num(o.serverPerCall()), actions.Num(pl.serverPerCall()),
				actions.Num(o.perCall(o.Shared.Cloud.Total())), actions.Num(o.Shared.Cloud[actions.Signal])),
			Target: fmt.Sprintf("≤ %.2f", targetFirstTryRatio), OK: r <= targetFirstTryRatio && o.serverPerCall() <= pl.serverPerCall() && o.Failed == 0})
	}
	retryGoal := func(id, name, what string, n int, plain *ActionsRun) {
		sc := a.scenario(name)
		if sc == nil {
			return
		}
		c, s, hb, ok := a.perRetry(sc, n)
		if !ok {
			return
		}
		base := ""
		if plain != nil && plain.Calls > 0 {
			if first := a.scenario(scenFirstTry); first != nil && first.Plain != nil {
				base = fmt.Sprintf("; the plain activity %s", actions.Num((plain.cloudPerCall()-first.Plain.cloudPerCall())/float64(n)))
			}
		}
		gs = append(gs, actionsGoal{ID: id, Claim: what,
			Measured: fmt.Sprintf("%s (server metric %s; heartbeats %s, attempts %s per call)%s", actions.Num(c), actions.Num(s), actions.Num(hb),
				actions.Num(sc.Ours.perCall(float64(sc.Ours.History.Attempts))), base),
			Target: "≤ 2, 1 where nothing is carried", OK: retryMet(c, hb) && sc.Ours.Failed == 0})
	}
	plainOf := func(name string) *ActionsRun {
		if sc := a.scenario(name); sc != nil {
			return sc.Plain
		}
		return nil
	}
	retryGoal("11b", scenRetries425, fmt.Sprintf("Actions per retry: %d × 425 Too Early, then 201 (retried as a 503 is, but no breaker counts a 425): the call's own actions beyond a first try's ÷ %d", p.Retries, p.Retries), p.Retries, plainOf(scenRetries))
	retryGoal("11c", scenRetries, fmt.Sprintf("… %d × 503, then 201, on the host's defaults: 503s are failures to the worker's breaker and the governor's, which hold attempts back", p.Retries), p.Retries, plainOf(scenRetries))
	retryGoal("11d", scenFollow, fmt.Sprintf("Actions per poll: a 202 followed (Request.Follow) through %d polls (`Retry-After: 1`): the call's own actions beyond a first try's ÷ %d (a timer for the first poll's wait included)", p.Polls, p.Polls), p.Polls, plainOf(scenFollow))
	retryGoal("11e", scenLookup, "Actions per lookup-reconciled retry (Reconcile.Lookup; the first answer lost after the API made its record, the lookup finds it): the call's own actions beyond a first try's", 1, plainOf(scenLookup))
	if sc := a.scenario(scenWebhook); sc != nil && sc.Plain != nil {
		o, pl := sc.Ours, *sc.Plain
		gs = append(gs, actionsGoal{ID: "11f", Claim: "Actions per webhook wait (Request.Webhook; the event through webhooks.Receiver: an Update) ÷ a plain workflow awaiting a signal with the same timeout",
			Measured: fmt.Sprintf("%.2f (%s ÷ %s)", o.cloudPerCall()/pl.cloudPerCall(), actions.Num(o.cloudPerCall()), actions.Num(pl.cloudPerCall())),
			Target:   "≤ 1.00", OK: o.cloudPerCall() <= pl.cloudPerCall() && o.Failed == 0})
	}
	if sc := a.scenario(scenIdle); sc != nil {
		o := sc.Ours
		gs = append(gs, actionsGoal{ID: "11g", Claim: fmt.Sprintf("The shared rate idle: actions while no request runs, one worker watched %s right after its steady stream (its governor running)", secs1(o.Window)),
			Measured: fmt.Sprintf("%s (server metric %s)", actions.Num(o.CloudOwn()+o.Shared.Cloud.Total()), actions.Num(o.Server.Total())),
			Target:   "0", OK: o.Server.Total() <= targetIdleActions && o.CloudOwn()+o.Shared.Cloud.Total() <= targetIdleActions})
	}
	for _, l := range []struct{ id, name string }{{"11h", scenLoad1}, {"11i", scenLoad2}} {
		sc := a.scenario(l.name)
		if sc == nil {
			continue
		}
		o := sc.Ours
		s, c := o.SharedPerWorkerSecond()
		gs = append(gs, actionsGoal{ID: l.id, Claim: fmt.Sprintf("The shared rate under load, %d worker(s) (%.0f calls/s for %s): the governor's and the reports' actions per worker per second, the calls' own apart", o.Workers, p.StreamRate, durS(p.Stream)),
			Measured: fmt.Sprintf("%s (server metric %s; %s reports in %s; the calls' own %s per call)", actions.Num(c), actions.Num(s), actions.Num(o.Shared.Cloud[actions.Signal]), secs1(o.Busy), actions.Num(o.cloudPerCall())),
			Target:   fmt.Sprintf("≤ %.0f", targetSharedPerSec), OK: c <= targetSharedPerSec && o.Failed == 0})
	}
	return gs
}

// writeActionsClaims writes the section's rows of the claims table.
func writeActionsClaims(b *strings.Builder, a *ActionsResult) {
	for _, g := range a.goals() {
		m := met(g.OK)
		if g.Comparison {
			m = "—"
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s |\n", g.ID, g.Claim, g.Measured, g.Target, m)
	}
}

// goalOf returns the goal judged on scenario name, if any.
func (a *ActionsResult) goalOf(name string) (actionsGoal, bool) {
	ids := map[string]string{scenFirstTry: "11a", scenRetries425: "11b", scenRetries: "11c", scenFollow: "11d", scenLookup: "11e",
		scenWebhook: "11f", scenIdle: "11g", scenLoad1: "11h", scenLoad2: "11i"}
	for _, g := range a.goals() {
		if g.ID == ids[name] {
			return g, true
		}
	}
	return actionsGoal{}, false
}

// writeActions writes the actions section of RESULTS.md.
func writeActions(b *strings.Builder, a *ActionsResult) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	pa := a.Params
	p("## 11. Temporal actions per call\n\n")
	p("Temporal Cloud bills in actions. Each scenario runs %d calls (%d for the 503 one), %d at a time (the follow scenario's all at once), on a dev server of the section's own started with `--metrics-port` (`harness/actions`): its own `action` counter (`service_name=\"frontend\"`, namespace `%s`, by `action_type`) is read before and after each run, once it has stood still for %s (a workflow task's completion or a worker's report can come a moment after what caused it). The ready workflow (`workflows.HTTPCallWorkflow`) runs on a worker wired as package host wires one on its defaults: `host.Load` (`--allow-origin`, `--task-queue`, `--identity`), a client dialed with `Host.ClientOptions` (the dev server's address put in), `Host.Start` (the origin's queue, the shared rate: its governor worker and the reporter), a worker of `Host.WorkerOptions` with `Host.Register`; a fresh one (task queue, origin queue, governor) per scenario. The baseline is a plain activity doing the same request with net/http in a minimal workflow under the ready workflow's default retry policy (200 ms doubling to 10 s, 5 attempts), on a worker of its own; it follows a 202 by a poll activity Temporal retries every second, and awaits a webhook as a signal with the same timeout (%s). The API answers each call alike whichever client sends it.\n\n",
		pa.Calls, pa.FailingCalls, pa.Concurrency, a.Namespace, durS(actionsQuiet), durS(actionsWebhookWait))
	p("**The Cloud estimate** follows Temporal's published rules (docs.temporal.io/evaluate/cloud/actions), counted from each workflow's history (`client.GetWorkflowHistory`; `actions.FromHistory`): a workflow started 1 (a signal-with-start 1 in all, whether or not it starts; a continue-as-new 1); an activity 1 per attempt (its started event's attempt number: retries are not events of their own); a timer, a signal, an accepted update 1 each; all the markers of one workflow task 1; a search-attribute upsert 1, but none for the `TemporalChangeVersion` upserts `workflow.GetVersion` makes; and, from the counter (no history holds them), each heartbeat that reached the server, each query and each rejected update. The server's own counter differs from it in one way only on Server 1.29.1: it counts the `TemporalChangeVersion` upserts (`command_UpsertWorkflowSearchAttributes`); markers it counts once per workflow task (`command_BatchMarkers`), as Cloud does. The same history walk, counted the server's way, explains every action of every run here (the check column: the counter's increase that no history explains).\n\n")
	p("**The shared rate's own actions** (the governor's and the workers' reports) are told apart by the governor workflow's history within the run's window (`governor.WorkflowID` of the origin's queue): each report is a signal-with-start; the governor records markers (its `workflow.GetVersion` calls on a new run, its `SetRate` local activity on each write) and starts timers for its next decision. The calls' own actions are the rest.\n\n")
	p("![Actions per call and the shared rate's per worker and second](%s)\n\n", ActionsSVG)
	p("| Scenario | Calls | Server metric per call, the calls' own, by type | Cloud estimate per call | Plain activity per call: server / Cloud (by type) | Ours ÷ plain (Cloud) | Shared rate per call: server / Cloud | Attempts per call: ours / plain | Goal | Met |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, sc := range a.Scenarios {
		o := sc.Ours
		g, hasGoal := a.goalOf(sc.Name)
		goal, ok := "—", "—"
		if hasGoal {
			goal, ok = g.ID+": "+g.Target, met(g.OK)
			if g.Comparison {
				ok = "—"
			}
		}
		if sc.Plain == nil && o.Calls == 0 || sc.Name == scenLoad1 || sc.Name == scenLoad2 {
			s, c := o.SharedPerWorkerSecond()
			calls := "—"
			own := "none"
			if o.Calls > 0 {
				calls = fmt.Sprint(o.Calls)
				own = fmt.Sprintf("%s per call: %s", actions.Num(o.serverPerCall()), o.ServerOwnTally().Scale(1/float64(o.Calls)))
			}
			p("| %s (%d worker(s), %s) | %s | %s | %s | — | — | **per worker per second: %s / %s** (%s) | — | %s | %s |\n",
				scenarioTitle(sc.Name), max(o.Workers, 1), secs1(o.busyOrWindow()), calls, own, cloudCell(o), actions.Num(s), actions.Num(c),
				o.Shared.Server, goal, ok)
			continue
		}
		plain, ratio, attempts := "—", "—", actions.Num(o.perCall(float64(o.History.Attempts)))
		if sc.Plain != nil {
			pl := *sc.Plain
			plain = fmt.Sprintf("%s / %s (%s)", actions.Num(pl.serverPerCall()), actions.Num(pl.cloudPerCall()), pl.CloudOwnTally().Scale(1/float64(max(pl.Calls, 1))))
			ratio = fmt.Sprintf("%.2f", o.cloudPerCall()/pl.cloudPerCall())
			attempts += " / " + actions.Num(pl.perCall(float64(pl.History.Attempts)))
		}
		p("| %s | %d | %s (%s) | %s | %s | %s | %s / %s | %s | %s | %s |\n", scenarioTitle(sc.Name), o.Calls,
			actions.Num(o.serverPerCall()), o.ServerOwnTally().Scale(1/float64(max(o.Calls, 1))), actions.Num(o.cloudPerCall()), plain, ratio,
			actions.Num(o.perCall(o.Shared.Server.Total())), actions.Num(o.perCall(o.Shared.Cloud.Total())), attempts, goal, ok)
	}
	p("\nThe goals are judged on the Cloud estimate, what a user pays. A retry or a poll is what the scenario's call costs beyond a first try's, divided by its retries or polls; \"1 where nothing is carried\" holds a retry that sends no heartbeat to 1 (a retry's progress, the attempt count and waits, travels on the failed attempt's response when the worker's client has `Activities.ProgressInterceptor`, as package host dials it; on a heartbeat, which Cloud bills, when it has not). The idle worker is the first stream's worker, watched for %s right after it (its governor running, its reporter watching the queue).\n\n", durS(pa.Idle))
	writeActionsWhere(b, a)
	p("Every run, raw: the counter's increase by `action_type` over the run's window; the histories counted the server's way (calls' workflows; the governor within the window); heartbeats (the counter's alone); the check.\n\n")
	p("| Scenario | Way | Calls | Window | Counter's increase by type | Calls' histories (server's count) | Governor's history in the window (server's / Cloud's count) | Heartbeats | Requests at the API | Records | Check |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	row := func(name, way string, r ActionsRun) {
		rec := "—"
		if r.Records > 0 {
			rec = fmt.Sprint(r.Records)
		}
		p("| %s | %s | %d | %s | %s | %s | %s / %s | %s | %d | %s | %s |\n", scenarioTitle(name), way, r.Calls, secs1(r.Window), countsCell(r.Server),
			r.History.Server, r.Shared.Server, r.Shared.Cloud, actions.Num(r.heartbeats()), r.Requests, rec, actions.Num(r.Unexplained()))
	}
	for _, sc := range a.Scenarios {
		if sc.Plain != nil {
			row(sc.Name, "plain", *sc.Plain)
		}
		row(sc.Name, "ours", sc.Ours)
	}
	p("\n")
}

// busyOrWindow is the time a run's calls took, or its window when idle.
func (r ActionsRun) busyOrWindow() time.Duration {
	if r.Busy > 0 {
		return r.Busy
	}
	return r.Window
}

// secs1 formats d in seconds to a tenth.
func secs1(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }

// cloudCell is a run's Cloud estimate per call (none without calls).
func cloudCell(r ActionsRun) string {
	if r.Calls == 0 {
		return actions.Num(r.CloudOwn())
	}
	return actions.Num(r.cloudPerCall())
}

// countsCell lists c for a table cell ("none" when empty).
func countsCell(c actions.Counts) string {
	if len(c) == 0 {
		return "none"
	}
	return "`" + c.String() + "`"
}

// writeActionsWhere says where the ready workflow's actions beyond the
// plain activity's went, from the figures.
func writeActionsWhere(b *strings.Builder, a *ActionsResult) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	var parts []string
	if sc := a.scenario(scenRetries425); sc != nil && sc.Ours.Calls > 0 {
		o := sc.Ours
		if hb := o.perCall(o.heartbeats()); hb > 0 {
			parts = append(parts, fmt.Sprintf("each retry of the ready workflow's call sends a heartbeat at the end of the failed attempt (its progress for the next: %s heartbeats per call for %d retries), the plain activity none", actions.Num(hb), a.Params.Retries))
		} else {
			parts = append(parts, fmt.Sprintf("nowhere on a retry: its progress for the next attempt rides on the failed attempt's response (`Activities.ProgressInterceptor`, on the client package host dials), not on a heartbeat (0 heartbeats per call for %d retries)", a.Params.Retries))
		}
	}
	held := func(o ActionsRun, needed float64) string {
		extra := o.perCall(float64(o.History.Attempts)) - needed
		s := fmt.Sprintf("%s attempts per call beyond the %s the API's answers needed, each an action (an attempt held back ends as NotAdmitted and Temporal retries it)", actions.Num(extra), actions.Num(needed))
		if hb := o.perCall(o.heartbeats()); hb > 0 {
			s += fmt.Sprintf(", with %s heartbeats per call", actions.Num(hb))
		}
		return s + fmt.Sprintf("; the shared rate's actions came to %s per call (%s timers, %s workflow tasks with markers)", actions.Num(o.perCall(o.Shared.Cloud.Total())), actions.Num(o.Shared.Cloud[actions.Timer]), actions.Num(o.Shared.Cloud[actions.Marker]))
	}
	if sc := a.scenario(scenRetries); sc != nil && sc.Ours.Calls > 0 {
		parts = append(parts, "with 503s every answer fails at first, as in an outage, and the worker's breaker and the governor's (the cluster's, which sets the queue's limit) open and hold attempts back: "+held(sc.Ours, float64(1+a.Params.Retries)))
	}
	if sc := a.scenario(scenLookup); sc != nil && sc.Ours.Calls > 0 {
		parts = append(parts, "with the first answers lost (no answer is a failure), the lookup scenario's breakers do the same: "+held(sc.Ours, 2))
	}
	if sc := a.scenario(scenFollow); sc != nil && sc.Ours.Calls > 0 {
		o := sc.Ours
		wait := "the start request's attempt waits the 202's Retry-After before it returns (as short a wait as admission's `MaxWait`, 1 s), so no timer waits it"
		if timers := o.perCall(o.History.Cloud[actions.Timer]); timers > 0 {
			wait = fmt.Sprintf("a followed call waits for the 202's Retry-After on a timer (%s per call)", actions.Num(timers))
		}
		parts = append(parts, fmt.Sprintf("%s; the plain activity polls at once, before the API said to; each poll that finds the operation running costs its attempt (heartbeats: %s per call)", wait, actions.Num(o.perCall(o.heartbeats()))))
	}
	if sc := a.scenario(scenLoad1); sc != nil {
		o := sc.Ours
		parts = append(parts, fmt.Sprintf("the shared rate reports only while a queue's limit is in force or its requests fail or are throttled (%s reports in %s of a steady stream on one worker), and a new governor run costs 1 more for the markers of its `workflow.GetVersion` calls (the server counts their `TemporalChangeVersion` upserts too: %s in that run)", actions.Num(o.Shared.Cloud[actions.Signal]), secs1(o.Busy), actions.Num(o.Shared.Server[actions.Upsert])))
	}
	if len(parts) == 0 {
		return
	}
	p("Where the actions beyond the plain activity's go: %s.\n\n", strings.Join(parts, "; "))
}

// WriteActionsSVG draws the actions section: the Cloud estimate per call
// of each scenario of single calls, plain against ours (the calls' own
// by category, the shared rate's on top), the server's count marked; and
// the shared rate's actions per worker per second, idle and under load,
// against the goal. It fails if r has no actions section.
func WriteActionsSVG(w io.Writer, r *Results) error {
	a := r.Actions
	if a == nil || len(a.Scenarios) == 0 {
		return fmt.Errorf("no actions plot: the results hold no actions section")
	}
	const (
		width  = 960
		left   = 60
		right  = 20
		top    = 84
		panelH = 260
		gap    = 90
	)
	colors := map[actions.Category]string{
		actions.Workflow: "#1565c0", actions.Activity: "#2e7d32", actions.Retry: "#f9a825", actions.Heartbeat: "#c62828",
		actions.Timer: "#6a1b9a", actions.Signal: "#00838f", actions.Update: "#00695c", actions.Marker: "#8d6e63",
		actions.Upsert: "#bdbdbd", actions.Query: "#ad1457", actions.Other: "#424242",
	}
	const sharedColor = "#90a4ae"
	type seg struct {
		v     float64
		color string
	}
	type bar struct {
		label  string
		segs   []seg
		server float64 // the server's count, a tick
	}
	type group struct {
		label string
		bars  []bar
	}
	stack := func(t actions.Tally) []seg {
		var s []seg
		for _, c := range actions.Categories {
			if v := t[c]; v > 0 {
				s = append(s, seg{v, colors[c]})
			}
		}
		return s
	}
	var calls, load []group
	for _, sc := range a.Scenarios {
		o := sc.Ours
		if sc.Plain != nil {
			pl := *sc.Plain
			f, fp := 1/float64(max(o.Calls, 1)), 1/float64(max(pl.Calls, 1))
			ours := append(stack(o.CloudOwnTally().Scale(f)), seg{o.perCall(o.Shared.Cloud.Total()), sharedColor})
			calls = append(calls, group{scenarioShort[sc.Name], []bar{
				{"plain", stack(pl.CloudOwnTally().Scale(fp)), pl.serverPerCall()},
				{"ours", ours, o.serverPerCall() + o.perCall(o.Shared.Server.Total())},
			}})
			continue
		}
		s, c := o.SharedPerWorkerSecond()
		load = append(load, group{scenarioShort[sc.Name], []bar{{"", []seg{{c, sharedColor}}, s}}})
	}
	var sb strings.Builder
	height := top + 2*panelH + gap + 40
	fmt.Fprintf(&sb, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&sb, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&sb, `<text x="%d" y="22" font-size="15" font-weight="bold">Temporal actions: a plain activity against the ready workflow on a worker wired by package host</text>`+"\n", left)
	x, y := left, 36
	// legend adds a colour's box (a line for color "") and its label,
	// wrapping at the right margin.
	legend := func(color, label string) {
		w := 22 + 7*len(label)
		if x+w > width-right {
			x, y = left, y+16
		}
		if color == "" {
			fmt.Fprintf(&sb, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#000" stroke-width="2"/>`, x, y+5, x+10, y+5)
		} else {
			fmt.Fprintf(&sb, `<rect x="%d" y="%d" width="10" height="10" fill="%s"/>`, x, y, color)
		}
		fmt.Fprintf(&sb, `<text x="%d" y="%d">%s</text>`, x+13, y+9, html.EscapeString(label))
		x += w
	}
	for _, c := range actions.Categories {
		if c != actions.Query && c != actions.Other {
			legend(colors[c], string(c))
		}
	}
	legend(sharedColor, "shared rate (governor, reports)")
	legend("", "the server's own count (bars: Cloud estimate)")
	sb.WriteString("\n")
	panel := func(y0 int, title, ylabel string, groups []group, goal float64) {
		h := float64(panelH - 30)
		yTop := float64(y0 + 20)
		maxV := goal
		for _, g := range groups {
			for _, b := range g.bars {
				t := 0.0
				for _, s := range b.segs {
					t += s.v
				}
				maxV = math.Max(maxV, math.Max(t, b.server))
			}
		}
		yMax := axisCeil(maxV * 1.1)
		ys := func(v float64) float64 { return yTop + h - v/yMax*h }
		fmt.Fprintf(&sb, `<text x="%d" y="%d" font-weight="bold">%s</text>`+"\n", left, y0+10, html.EscapeString(title))
		for _, t := range ticks(yMax) {
			fmt.Fprintf(&sb, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#e0e0e0"/><text x="%d" y="%.1f" text-anchor="end">%g</text>`+"\n", left, ys(t), width-right, ys(t), left-6, ys(t)+4, t)
		}
		fmt.Fprintf(&sb, `<text x="14" y="%.0f" transform="rotate(-90 14 %.0f)" text-anchor="middle">%s</text>`+"\n", yTop+h/2, yTop+h/2, html.EscapeString(ylabel))
		if goal > 0 {
			fmt.Fprintf(&sb, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#333" stroke-dasharray="5,3"/>`+"\n", left, ys(goal), width-right, ys(goal))
		}
		if len(groups) == 0 {
			return
		}
		gw := float64(width-left-right) / float64(len(groups))
		for i, g := range groups {
			gx := float64(left) + float64(i)*gw
			bw := math.Min(40, gw/float64(len(g.bars)+1))
			for j, b := range g.bars {
				bx := gx + gw/2 - float64(len(g.bars))*bw/2 + float64(j)*bw + 2
				acc := 0.0
				for _, s := range b.segs {
					fmt.Fprintf(&sb, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>`, bx, ys(acc+s.v), bw-4, s.v/yMax*h, s.color)
					acc += s.v
				}
				fmt.Fprintf(&sb, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#000" stroke-width="2"/>`, bx-2, ys(b.server), bx+bw-2, ys(b.server))
				fmt.Fprintf(&sb, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="11">%s</text>`, bx+bw/2-2, math.Min(ys(acc), ys(b.server))-4, actions.Num(acc))
				if b.label != "" {
					fmt.Fprintf(&sb, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="10">%s</text>`, bx+bw/2-2, yTop+h+12, b.label)
				}
			}
			fmt.Fprintf(&sb, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", gx+gw/2, yTop+h+26, html.EscapeString(g.label))
		}
		fmt.Fprintf(&sb, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#000"/>`+"\n", left, yTop+h, width-right, yTop+h)
	}
	panel(top, fmt.Sprintf("Actions per call (%d calls each; %d for the 503 scenario)", a.Params.Calls, a.Params.FailingCalls), "actions per call", calls, 0)
	panel(top+panelH+gap, "The shared rate: its actions per worker per second, the calls' own apart (dashed: the goal, at most 1 under load)", "actions per worker per second", load, targetSharedPerSec)
	sb.WriteString("</svg>\n")
	_, err := io.WriteString(w, sb.String())
	return err
}
