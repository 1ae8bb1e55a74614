package bench

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/harness/chaos"
)

// chaosResults is a synthetic chaos section: a campaign of 4 operations
// with the given verdict.
func chaosResults(v chaos.Verdict) *Results {
	s := chaos.NewSchedule(chaos.Plan{Seed: 1, Operations: 4})
	return &Results{Chaos: &ChaosResult{WorkerArgs: []string{"--shared-rate"}, Campaign: &chaos.Result{
		Plan: chaos.Plan{Seed: 1, Operations: 4, StartRate: 4}, Schedule: s, Verdict: v,
		Requests: 9, RequestsPerSuccess: 2.25, Duration: 70 * time.Second,
		Events:      []chaos.Event{{At: 2 * time.Second, What: "toxic on: t00-latency"}, {At: 50 * time.Second, What: "FINDING: worker exited\nits output"}},
		Log:         []chaos.Sample{{At: time.Second, Status: 201}, {At: 2 * time.Second, Status: 409}, {At: 3 * time.Second, Status: 201}},
		Completions: []time.Duration{time.Second, 3 * time.Second, 4 * time.Second, 70 * time.Second},
	}}}
}

// TestChaosReport: the section states the verdict as met or missed, with
// its figures and findings, and the plot has both panels and the faults'
// marks.
func TestChaosReport(t *testing.T) {
	for _, tc := range []struct {
		name    string
		verdict chaos.Verdict
		want    []string
	}{
		{"all well", chaos.Verdict{Operations: 4, Succeeded: 4, Records: 4},
			[]string{"## Chaos campaign at scale", "| 4 | 4 | 0 | 0 | 0 | 4 | 9 | 2.25 | 70.0 s |", "full answer: yes", "- 50.0 s: FINDING: worker exited\n",
				"| 0 failed, 0 lost, 0 duplicated; 4 of 4 succeeded, 4 records | 0, one record per operation | yes |"}},
		{"a duplicate", chaos.Verdict{Operations: 4, Succeeded: 3, Records: 5, Duplicated: []string{"wf-2"}, Findings: []string{"wf-2: 2 records for key k: rec_2 rec_5"}},
			[]string{"| 4 | 3 | 0 | 0 | 1 | 5 | 9 | 2.25 | 70.0 s |", "full answer: **MISSED**", "- finding: wf-2: 2 records",
				"| 0 failed, 0 lost, 1 duplicated; 3 of 4 succeeded, 5 records | 0, one record per operation | **MISSED** |"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := chaosResults(tc.verdict)
			var md bytes.Buffer
			if err := WriteMarkdown(&md, r, "bench", "contention.svg"); err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(md.String(), w) {
					t.Errorf("RESULTS.md lacks %q:\n%s", w, md.String())
				}
			}
			var svg bytes.Buffer
			if err := WriteChaosSVG(&svg, r); err != nil {
				t.Fatal(err)
			}
			for _, w := range []string{"requests at the API per second", "operations completed per second", "API down", "API up", "server SIGKILL", "seconds since the campaign&#39;s start"} {
				if !strings.Contains(svg.String(), w) {
					t.Errorf("chaos.svg lacks %q", w)
				}
			}
			if strings.Contains(svg.String(), "capacity:") {
				t.Errorf("chaos.svg draws a capacity line; the campaign's API has none")
			}
		})
	}
	if err := WriteChaosSVG(&bytes.Buffer{}, &Results{}); err == nil {
		t.Errorf("WriteChaosSVG without a campaign: no error")
	}
}
