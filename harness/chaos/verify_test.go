package chaos

import (
	"encoding/json"
	"errors"
	"slices"
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
