package bench

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/harness/chaos"
)

// unkeyedRun returns the section's campaign of way against the API
// without keys (nil if it did not run).
func (u *UnkeyedResult) unkeyedRun(way chaos.Way) *UnkeyedRun {
	for i := range u.Runs {
		if c := u.Runs[i].Campaign; c != nil && c.Way == way {
			return &u.Runs[i]
		}
	}
	return nil
}

// lost is the brief's count of lost operations: failed, or completed
// without their record.
func lost(v chaos.Verdict) int { return len(v.Failed) + len(v.Lost) }

// writeUnkeyedClaim writes the unkeyed section's row of the claims table
// (claim 9b): with a lookup and at most once, no operation done twice or
// lost, against plain retries' duplicates.
func writeUnkeyedClaim(b *strings.Builder, u *UnkeyedResult) {
	plain, look, amo := u.unkeyedRun(chaos.WayPlain), u.unkeyedRun(chaos.WayLookup), u.unkeyedRun(chaos.WayAtMostOnce)
	if look == nil && amo == nil {
		return
	}
	var measured []string
	ok := true
	for _, r := range []*UnkeyedRun{look, amo} {
		if r == nil {
			continue
		}
		v := r.Campaign.Verdict
		measured = append(measured, fmt.Sprintf("%s: %d duplicated, %d lost of %d", r.Campaign.Way, len(v.Duplicated), lost(v), v.Operations))
		ok = ok && len(r.Problems) == 0
	}
	if plain != nil {
		v := plain.Campaign.Verdict
		measured = append(measured, fmt.Sprintf("baseline, plain retries: %d duplicated (%d records for %d operations)", len(v.Duplicated), v.Records, v.Operations))
	}
	fmt.Fprintf(b, "| 9b | An API without keys under chaos (answers cut after the API's work, workers and the server SIGKILLed, the API down 30 s): operations done twice or lost with a lookup and at most once (a person's decisions by the CLI) | %s | 0 and 0 | %s |\n",
		strings.Join(measured, "; "), met(ok))
}

// writeUnkeyed writes the unkeyed section of RESULTS.md.
func writeUnkeyed(b *strings.Builder, r *Results) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	u := r.Unkeyed
	p("## APIs without keys under chaos\n\n")
	p("`harness/chaos` with `Config.Way` (its smaller form, 200 operations for lookup and at most once, is `TestChaosUnkeyed` in `integration/cluster`, run by `make test`): the campaign of the chaos section on the PostgreSQL-backed cluster (three worker processes, one SIGKILLed every 20 s; temporal-server SIGKILLed once; the API down 30 s once), but every toxic loses the answer after the API did the work (`Plan.AnswerCuts`: reset_peer, timeout and limit_data, on the downstream stream), so attempts end with an unknown outcome. The API is the reference server without keys (`testsuite.PlainDialect()`: a record per request; `Options.Lookup: \"client_reference\"`), each operation's key in its body (`KeyIn: \"body:client_reference\"`), met three ways: plain retries (the baseline: every answer lost after the work is a duplicate), a lookup (`Reconcile.Lookup`: `GET /payments?client_reference={key}` before sending again), and at most once (`Reconcile.AtMostOnce`: the activity pauses itself; an operator in the campaign lists the waiting calls every %s with `temporal workflow list --query '%s'`, waits %s, asks the API directly, and runs `temporal activity complete --result '{\"status\":201,\"body\":<the record>}'` or `temporal activity unpause`). The last rows are the reference server with keys (IETF dialect) reading the key from a body member and from a query parameter: one record per key means every attempt carried the same key where the server reads it. Seed %d; one cluster for every campaign, in the table's order.\n\n",
		unkeyedEvery(u), chaos.PausedQuery, unkeyedAfter(u), u.Plan.Seed)
	p("| Way | Key in | Operations | Succeeded | Duplicated | Lost (failed + no record) | Records | Calls that waited / listed / settled (complete + unpause) | Requests per success | Last operation ended | Campaign took | As promised |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, run := range u.Runs {
		c := run.Campaign
		v := c.Verdict
		waits := "–"
		if o := c.Operator; o != nil {
			waits = fmt.Sprintf("%d / %d / %d (%d + %d)", o.Waited, o.Listed, o.Decisions, o.Completed, o.Unpaused)
		}
		p("| %s | `%s` | %d | %d | %d | %d (%d + %d) | %d | %s | %.2f | %.1f s | %s | %s |\n",
			c.Way, cmp.Or(c.KeyIn, "header"), v.Operations, v.Succeeded, len(v.Duplicated), lost(v), len(v.Failed), len(v.Lost), v.Records,
			waits, c.RequestsPerSuccess, c.Duration.Seconds(), run.Took.Round(time.Second), met(len(run.Problems) == 0))
	}
	p("\nWhat each way promises (`chaos.Result.Problems`): none failed or lost; with a lookup, at most once and keys, no duplicate and one record per operation; with plain retries, at least one duplicate (else the faults lost no answer after the work and the run proved nothing); at most once, every call that waited listed. Requests per success count what the workers sent (the lookups included, the operator's own lookups not). The API's counters: ")
	var counters []string
	for _, run := range u.Runs {
		c := run.Campaign
		s := fmt.Sprintf("%s, key in `%s`: %d lookups", c.Way, cmp.Or(c.KeyIn, "header"), c.Stats.Lookups)
		if c.Operator != nil {
			s += fmt.Sprintf(" (%d of them the operator's)", c.Operator.Lookups)
		}
		if !c.Way.Unkeyed() {
			s = fmt.Sprintf("%s, key in `%s`: %d stored responses sent again, %d answered in flight, %d keys misused", c.Way, cmp.Or(c.KeyIn, "header"), c.Stats.Replays, c.Stats.InFlight, c.Stats.Mismatches)
		}
		counters = append(counters, s)
	}
	p("%s.\n\n", strings.Join(counters, "; "))
	problems := false
	for _, run := range u.Runs {
		for _, pr := range run.Problems {
			p("- %s, key in `%s`: %s\n", run.Campaign.Way, cmp.Or(run.Campaign.KeyIn, "header"), pr)
			problems = true
		}
	}
	if problems {
		p("\n")
	}
	if amo := u.unkeyedRun(chaos.WayAtMostOnce); amo != nil && amo.Campaign.Operator != nil {
		o := amo.Campaign.Operator
		p("At most once, the operator: %d lists (%d failed while the server was away), %d workflows listed, %d decisions (%d completed with the record found, %d unpaused: no record, sent again), %d listed but no longer paused when described, %d lookups at the API, %d CLI commands, %d steps failed and retried (%s); the longest wait from the first listing to the decision %s. The workers: %d pauses by %d workflows, %d of them never listed. temporal-server logged %d times that it started an attempt of a paused activity (\"Activity is paused, but new task was schedulled\", 1.29.1 after its restart); those attempts found the activity still paused and sent nothing (%d).\n\n",
			o.Lists, o.ListErrors, o.Listed, o.Decisions, o.Completed, o.Unpaused, o.NotPaused, o.Lookups, o.CLICalls, o.ErrorCount, firstOr(o.Errors, "none"), o.MaxWait.Round(100*time.Millisecond), o.Pauses, o.Waited, len(o.Unlisted), o.StartedPaused, o.NotSent)
	}
	if len(u.Runs) > 0 {
		c := u.Runs[0].Campaign
		p("The faults of the first campaign, as carried out (every campaign has the same schedule for its size):\n\n")
		for _, e := range c.Events {
			p("- %.1f s: %s\n", e.At.Seconds(), firstLine(e.What))
		}
		p("\n")
	}
}

// unkeyedEvery and unkeyedAfter are the operator's pace, as run.
func unkeyedEvery(u *UnkeyedResult) string {
	if r := u.unkeyedRun(chaos.WayAtMostOnce); r != nil && r.Campaign.Operator != nil {
		return fmt.Sprint(r.Campaign.Operator.Every)
	}
	return "3s"
}

func unkeyedAfter(u *UnkeyedResult) string {
	if r := u.unkeyedRun(chaos.WayAtMostOnce); r != nil && r.Campaign.Operator != nil {
		return fmt.Sprintf("%s after the first listing", r.Campaign.Operator.After)
	}
	return "2s after the first listing"
}

// firstOr is the first of list, or none when it is empty.
func firstOr(list []string, none string) string {
	if len(list) == 0 {
		return none
	}
	first := firstLine(list[0])
	if len(first) > 240 {
		first = first[:240] + "…"
	}
	return "first: " + first
}
