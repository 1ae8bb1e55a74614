package chaos

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

func record(id, key string) testsuite.Record {
	return testsuite.Record{ID: id, IdempotencyKey: key, BodySHA256: "ab", Request: json.RawMessage(`{"op":1}`),
		Method: "POST", Path: "/payments", Created: time.Date(2026, 12, 6, 8, 0, 0, 123, time.UTC)}
}

// answered is the outcome of a workflow that got rec's stored response.
func answered(id string, rec testsuite.Record) Outcome {
	b, _ := json.Marshal(rec)
	return Outcome{WorkflowID: id, Key: rec.IdempotencyKey, Response: &workflows.Response{Status: 201, Body: b, IdempotencyKey: rec.IdempotencyKey}}
}

// TestVerify: each way an operation can go wrong lands in its list, and
// only there; the good ones count as succeeded.
func TestVerify(t *testing.T) {
	a, b, c := record("rec_1", "ka"), record("rec_2", "kb"), record("rec_3", "kc")
	truncated := answered("wf-b", b)
	truncated.Response.Body = truncated.Response.Body[:20]
	omitted := answered("wf-b", b)
	omitted.Response.Body, omitted.Response.BodyOmitted = nil, true
	wrongStatus := answered("wf-b", b)
	wrongStatus.Response.Status = 200
	wrongKey := answered("wf-b", b)
	wrongKey.Response.IdempotencyKey = "other"
	// A lookup's result is its 200 with the record; a person's decision
	// hands the 201 and the record back.
	foundByLookup := answered("wf-b", b)
	foundByLookup.Response.Status, foundByLookup.Response.Reconciled = 200, "lookup"
	lookup201 := answered("wf-b", b)
	lookup201.Response.Reconciled = "lookup"
	byOperator := answered("wf-b", b)
	byOperator.Response.Reconciled = "operator"
	for _, tc := range []struct {
		name     string
		outcomes []Outcome
		records  []testsuite.Record
		want     Verdict // Findings only counted
		findings int
	}{
		{"all well", []Outcome{answered("wf-a", a), answered("wf-b", b)}, []testsuite.Record{a, b},
			Verdict{Operations: 2, Succeeded: 2, Records: 2}, 0},
		{"failed", []Outcome{answered("wf-a", a), {WorkflowID: "wf-b", Key: "kb", Err: errors.New("activity timed out")}}, []testsuite.Record{a, b},
			Verdict{Operations: 2, Succeeded: 1, Records: 2, Failed: []string{"wf-b"}}, 1},
		{"no result", []Outcome{{WorkflowID: "wf-a", Key: "ka"}}, []testsuite.Record{a},
			Verdict{Operations: 1, Records: 1, Failed: []string{"wf-a"}}, 1},
		{"duplicate", []Outcome{answered("wf-a", a), answered("wf-b", b)}, []testsuite.Record{a, b, record("rec_3", "kb")},
			Verdict{Operations: 2, Succeeded: 1, Records: 3, Duplicated: []string{"wf-b"}}, 1},
		{"truncated body", []Outcome{answered("wf-a", a), truncated}, []testsuite.Record{a, b},
			Verdict{Operations: 2, Succeeded: 1, Records: 2, Lost: []string{"wf-b"}}, 1},
		{"body omitted", []Outcome{omitted}, []testsuite.Record{b},
			Verdict{Operations: 1, Records: 1, Lost: []string{"wf-b"}}, 1},
		{"another record's body", []Outcome{answered("wf-a", a), {WorkflowID: "wf-b", Key: "kb", Response: answered("x", a).Response}}, []testsuite.Record{a, b},
			Verdict{Operations: 2, Succeeded: 1, Records: 2, Lost: []string{"wf-b"}}, 1},
		{"no record", []Outcome{answered("wf-a", a), answered("wf-b", b)}, []testsuite.Record{a},
			Verdict{Operations: 2, Succeeded: 1, Records: 1, Lost: []string{"wf-b"}}, 1},
		{"status 200", []Outcome{wrongStatus}, []testsuite.Record{b},
			Verdict{Operations: 1, Records: 1, Lost: []string{"wf-b"}}, 1},
		{"wrong key in result", []Outcome{wrongKey}, []testsuite.Record{b},
			Verdict{Operations: 1, Records: 1, Lost: []string{"wf-b"}}, 1},
		{"found by lookup", []Outcome{foundByLookup}, []testsuite.Record{b},
			Verdict{Operations: 1, Succeeded: 1, Records: 1}, 0},
		{"lookup with a 201", []Outcome{lookup201}, []testsuite.Record{b},
			Verdict{Operations: 1, Records: 1, Lost: []string{"wf-b"}}, 1},
		{"settled by a person", []Outcome{byOperator}, []testsuite.Record{b},
			Verdict{Operations: 1, Succeeded: 1, Records: 1}, 0},
		{"stray record", []Outcome{answered("wf-a", a)}, []testsuite.Record{a, c},
			Verdict{Operations: 1, Succeeded: 1, Records: 2, Stray: []string{"kc"}}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Verify(tc.outcomes, tc.records)
			if len(got.Findings) != tc.findings {
				t.Errorf("findings %q, want %d", got.Findings, tc.findings)
			}
			got.Findings = nil
			if got.Operations != tc.want.Operations || got.Succeeded != tc.want.Succeeded || got.Records != tc.want.Records ||
				!slices.Equal(got.Failed, tc.want.Failed) || !slices.Equal(got.Lost, tc.want.Lost) ||
				!slices.Equal(got.Duplicated, tc.want.Duplicated) || !slices.Equal(got.Stray, tc.want.Stray) {
				t.Errorf("Verify = %+v, want %+v", got, tc.want)
			}
			if ok := got.OK(); ok != (tc.findings == 0) {
				t.Errorf("OK() = %v with %d findings", ok, tc.findings)
			}
		})
	}
}

// TestProblems: what each way promises, and what falls short of it.
func TestProblems(t *testing.T) {
	good := Verdict{Operations: 2, Succeeded: 2, Records: 2}
	dup := Verdict{Operations: 2, Succeeded: 1, Records: 3, Duplicated: []string{"wf-b"}}
	failed := Verdict{Operations: 2, Succeeded: 1, Records: 2, Failed: []string{"wf-a"}}
	fewer := Verdict{Operations: 2, Succeeded: 1, Records: 1, Lost: []string{"wf-b"}}
	stray := Verdict{Operations: 2, Succeeded: 2, Records: 3, Stray: []string{"kx"}}
	waited := &OperatorReport{Waited: 3, Listed: 3}
	for _, tc := range []struct {
		name string
		r    Result
		want []string // substrings, one per problem, in order
	}{
		{"keyed, all well", Result{Verdict: good}, nil},
		{"keyed, a duplicate", Result{Verdict: dup}, []string{"1 operations done more than once: wf-b"}},
		{"lookup, a failure", Result{Way: WayLookup, Verdict: failed}, []string{"1 operations lost (1 failed, 0 completed without their record): wf-a"}},
		{"lookup, a record missing", Result{Way: WayLookup, Verdict: fewer}, []string{"1 operations lost (0 failed, 1 completed without", "1 records for 2 operations"}},
		{"stray", Result{Way: WayLookup, Verdict: stray}, []string{"1 keys of no operation have records: kx", "3 records for 2 operations"}},
		{"plain with duplicates: the baseline", Result{Way: WayPlain, Verdict: dup}, nil},
		{"plain without", Result{Way: WayPlain, Verdict: good}, []string{"no duplicate with plain retries"}},
		{"plain, a failure", Result{Way: WayPlain, Verdict: Verdict{Operations: 2, Succeeded: 0, Records: 3, Failed: []string{"wf-a"}, Duplicated: []string{"wf-b"}}}, []string{"1 operations lost"}},
		{"at most once, all well", Result{Way: WayAtMostOnce, Verdict: good, Operator: waited}, nil},
		{"at most once, none waited", Result{Way: WayAtMostOnce, Verdict: good, Operator: &OperatorReport{}}, []string{"no call waited"}},
		{"at most once, one unlisted", Result{Way: WayAtMostOnce, Verdict: good, Operator: &OperatorReport{Waited: 3, Listed: 2, Unlisted: []string{"wf-c"}}},
			[]string{"1 calls waited for a decision and no list showed them"}},
		{"at most once, sent without a decision", Result{Way: WayAtMostOnce, Verdict: dup, Operator: &OperatorReport{Waited: 3, Listed: 3, Undecided: []string{"wf-b"}, StartedPaused: 1}},
			[]string{"1 operations done more than once", "1 calls sent again without a person's decision (never unpaused; temporal-server logged 1 times"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.r.Problems()
			if len(got) != len(tc.want) {
				t.Fatalf("Problems() = %q, want %d", got, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("problem %d %q, want %q in it", i, got[i], w)
				}
			}
		})
	}
}
