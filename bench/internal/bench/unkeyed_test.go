package bench

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/harness/chaos"
)

// unkeyedResults is a synthetic unkeyed section: plain retries with
// duplicates, a lookup and at most once with the given verdict and
// operator, and a keyed run with its key in the query.
func unkeyedResults(v chaos.Verdict, op *chaos.OperatorReport) *Results {
	s := chaos.NewSchedule(chaos.Plan{Seed: 1, Operations: 4, AnswerCuts: true})
	campaign := func(way chaos.Way, keyIn string, v chaos.Verdict, op *chaos.OperatorReport) UnkeyedRun {
		c := &chaos.Result{Way: way, KeyIn: keyIn, Plan: chaos.Plan{Seed: 1, Operations: 4, StartRate: 4, AnswerCuts: true}, Schedule: s, Verdict: v,
			Requests: 6, RequestsPerSuccess: 1.5, Duration: 70 * time.Second, Operator: op,
			Events: []chaos.Event{{At: 2 * time.Second, What: "toxic on: t00-timeout timeout downstream"}}}
		return UnkeyedRun{Campaign: c, Took: 95 * time.Second, Problems: c.Problems()}
	}
	good := chaos.Verdict{Operations: 4, Succeeded: 4, Records: 4}
	return &Results{Unkeyed: &UnkeyedResult{Plan: UnkeyedPlan{Seed: 1, Operations: 4, KeyPlaceOperations: 4}, Runs: []UnkeyedRun{
		campaign(chaos.WayPlain, chaos.KeyInBody, chaos.Verdict{Operations: 4, Succeeded: 3, Records: 5, Duplicated: []string{"wf-2"}}, nil),
		campaign(chaos.WayLookup, chaos.KeyInBody, good, nil),
		campaign(chaos.WayAtMostOnce, chaos.KeyInBody, v, op),
		campaign(chaos.WayKeyed, chaos.KeyInQuery, good, nil),
	}}}
}

// TestUnkeyedReport: the section's table has a row per campaign with the
// way's figures and whether it kept its promise, the claim row says met
// or missed, and the operator's paragraph its counts.
func TestUnkeyedReport(t *testing.T) {
	op := &chaos.OperatorReport{Query: chaos.PausedQuery, Every: 3 * time.Second, After: 2 * time.Second, Lists: 20, Listed: 3, Decisions: 3, Completed: 2, Unpaused: 1,
		Lookups: 3, CLICalls: 26, Pauses: 3, Waited: 3, StartedPaused: 2, NotSent: 2, MaxWait: 4 * time.Second}
	for _, tc := range []struct {
		name    string
		verdict chaos.Verdict
		op      *chaos.OperatorReport
		want    []string
	}{
		{"all well", chaos.Verdict{Operations: 4, Succeeded: 4, Records: 4}, op, []string{
			"## APIs without keys under chaos",
			"| plain | `body:client_reference` | 4 | 3 | 1 | 0 (0 + 0) | 5 | – | 1.50 | 70.0 s | 1m35s | yes |",
			"| lookup | `body:client_reference` | 4 | 4 | 0 | 0 (0 + 0) | 4 | – | 1.50 | 70.0 s | 1m35s | yes |",
			"| at-most-once | `body:client_reference` | 4 | 4 | 0 | 0 (0 + 0) | 4 | 3 / 3 / 3 (2 + 1) | 1.50 | 70.0 s | 1m35s | yes |",
			"| keyed | `query:client_reference` | 4 | 4 | 0 | 0 (0 + 0) | 4 | – |",
			"| 9b | An API without keys under chaos",
			"lookup: 0 duplicated, 0 lost of 4; at-most-once: 0 duplicated, 0 lost of 4; baseline, plain retries: 1 duplicated (5 records for 4 operations) | 0 and 0 | yes |",
			"temporal-server logged 2 times that it started an attempt of a paused activity",
			"`temporal workflow list --query 'TemporalPauseInfo IN (\"property:activityType=IdempotentHTTPRequest\", \"property:activityType=IdempotentHTTPRequestV2\") AND ExecutionStatus=\"Running\"'`",
			"- 2.0 s: toxic on: t00-timeout",
		}},
		{"a duplicate at most once", chaos.Verdict{Operations: 4, Succeeded: 3, Records: 5, Duplicated: []string{"wf-3"}}, op, []string{
			"| at-most-once | `body:client_reference` | 4 | 3 | 1 | 0 (0 + 0) | 5 | 3 / 3 / 3 (2 + 1) | 1.50 | 70.0 s | 1m35s | **MISSED** |",
			"at-most-once: 1 duplicated, 0 lost of 4",
			"| 0 and 0 | **MISSED** |",
			"- at-most-once, key in `body:client_reference`: 1 operations done more than once: wf-3",
		}},
		{"none waited", chaos.Verdict{Operations: 4, Succeeded: 4, Records: 4}, &chaos.OperatorReport{}, []string{
			"- at-most-once, key in `body:client_reference`: no call waited for a decision",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var md bytes.Buffer
			if err := WriteMarkdown(&md, unkeyedResults(tc.verdict, tc.op), "bench", "contention.svg"); err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(md.String(), w) {
					t.Errorf("RESULTS.md lacks %q:\n%s", w, md.String())
				}
			}
		})
	}
}

// TestUnkeyedCampaigns: the three ways against the API without keys at
// the section's size, then the two key places at theirs (none at 0).
func TestUnkeyedCampaigns(t *testing.T) {
	got := UnkeyedPlan{Operations: 1000, KeyPlaceOperations: 200}.campaigns()
	want := []unkeyedCampaign{
		{chaos.WayPlain, chaos.KeyInBody, 1000}, {chaos.WayLookup, chaos.KeyInBody, 1000}, {chaos.WayAtMostOnce, chaos.KeyInBody, 1000},
		{chaos.WayKeyed, chaos.KeyInBody, 200}, {chaos.WayKeyed, chaos.KeyInQuery, 200},
	}
	if len(got) != len(want) {
		t.Fatalf("campaigns %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("campaign %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if n := len((UnkeyedPlan{Operations: 10}).campaigns()); n != 3 {
		t.Errorf("%d campaigns without key places, want 3", n)
	}
}
