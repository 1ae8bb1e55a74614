package chaos

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"

	"github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// Outcome is how one operation ended, as its workflow reported it.
type Outcome struct {
	// WorkflowID is the operation's business workflow ID; Key the
	// idempotency key derived from it.
	WorkflowID string `json:"workflow_id"`
	Key        string `json:"key"`
	// Response is the workflow's result; Err its failure (nil when it
	// completed), "" in JSON.
	Response *workflows.Response `json:"-"`
	Err      error               `json:"-"`
}

// Verdict is what [Verify] found. An operation is in at most one of
// Failed, Lost and Duplicated (in that order of precedence); Succeeded
// counts the others.
type Verdict struct {
	Operations int `json:"operations"`
	Succeeded  int `json:"succeeded"`
	// Failed: the workflow failed, or did not end in time.
	Failed []string `json:"failed,omitempty"`
	// Lost: the workflow completed but its answer is not the API's: no
	// record for its key, another key, a status other than 201 or a body
	// other than the stored response.
	Lost []string `json:"lost,omitempty"`
	// Duplicated: the API did the work of the operation's key more than
	// once.
	Duplicated []string `json:"duplicated,omitempty"`
	// Records is the records the API made; Stray those for a key of no
	// operation (a changed key would show here).
	Records int      `json:"records"`
	Stray   []string `json:"stray,omitempty"`
	// Findings says, one line each, what is wrong (empty when all is well).
	Findings []string `json:"findings,omitempty"`
}

// OK reports whether every operation ended exactly once with its full
// answer: none failed, lost or duplicated, no stray record, one record
// per operation.
func (v Verdict) OK() bool {
	return len(v.Failed)+len(v.Lost)+len(v.Duplicated)+len(v.Stray) == 0 &&
		v.Succeeded == v.Operations && v.Records == v.Operations
}

// Verify checks outcomes against the records the API made (its
// testsuite.Server.Records): each operation completed, with status 201
// (200 for a result its lookup found: Response.Reconciled "lookup"), with
// exactly one record for its key, and its result's body is that record's
// stored response (the record's JSON, as the reference server answers,
// lists and the operator hands it back), byte for byte.
func Verify(outcomes []Outcome, records []testsuite.Record) Verdict {
	v := Verdict{Operations: len(outcomes), Records: len(records)}
	byKey := map[string][]testsuite.Record{}
	for _, r := range records {
		byKey[r.IdempotencyKey] = append(byKey[r.IdempotencyKey], r)
	}
	ours := map[string]bool{}
	for _, o := range outcomes {
		ours[o.Key] = true
		recs := byKey[o.Key]
		if problem := check(o, recs); problem != "" {
			v.Findings = append(v.Findings, o.WorkflowID+": "+problem)
			switch {
			case o.Err != nil || o.Response == nil:
				v.Failed = append(v.Failed, o.WorkflowID)
			case len(recs) > 1:
				v.Duplicated = append(v.Duplicated, o.WorkflowID)
			default:
				v.Lost = append(v.Lost, o.WorkflowID)
			}
			continue
		}
		v.Succeeded++
	}
	for key, recs := range byKey {
		if !ours[key] {
			v.Stray = append(v.Stray, key)
			v.Findings = append(v.Findings, fmt.Sprintf("key %q: %d records, of no operation", key, len(recs)))
		}
	}
	sort.Strings(v.Stray)
	return v
}

// check returns what is wrong with outcome o given the records of its
// key, "" if nothing.
func check(o Outcome, recs []testsuite.Record) string {
	switch {
	case o.Err != nil:
		return fmt.Sprintf("failed: %v (%d records for its key)", o.Err, len(recs))
	case o.Response == nil:
		return "no result"
	case len(recs) > 1:
		ids := ""
		for _, r := range recs {
			ids += " " + r.ID
		}
		return fmt.Sprintf("%d records for key %s:%s", len(recs), o.Key, ids)
	case len(recs) == 0:
		return fmt.Sprintf("completed (status %d) but the API has no record for key %s", o.Response.Status, o.Key)
	case o.Response.IdempotencyKey != o.Key:
		return fmt.Sprintf("result carries key %s, want %s", o.Response.IdempotencyKey, o.Key)
	case o.Response.Status != wantStatus(o.Response):
		return fmt.Sprintf("status %d, want %d (reconciled %q)", o.Response.Status, wantStatus(o.Response), o.Response.Reconciled)
	}
	want, err := json.Marshal(recs[0])
	if err != nil {
		return fmt.Sprintf("record %s: %v", recs[0].ID, err)
	}
	if !bytes.Equal(o.Response.Body, want) {
		return fmt.Sprintf("result body %q (omitted %v %q) is not the stored response %q", o.Response.Body, o.Response.BodyOmitted, o.Response.OmittedReason, want)
	}
	return ""
}

// wantStatus is the status of a good result: the lookup's 200 for a
// result it found, else the 201 of the request that made the record (a
// person's decision hands it back).
func wantStatus(r *workflows.Response) int {
	if r.Reconciled == "lookup" {
		return http.StatusOK
	}
	return http.StatusCreated
}

// Problems says, one line each, where r falls short of what its way
// promises; none when it does. Every way: no operation failed or lost its
// answer, no stray record. The keyed way and the ways that reconcile
// (lookup, at-most-once): no duplicate either, one record per operation.
// The plain way, the baseline: at least one duplicate, else the faults lost
// no answer after the API's work and the campaign proved nothing. With an
// operator (at-most-once): some call waited, every one that did was
// listed, and every decision was taken.
func (r *Result) Problems() []string {
	v := r.Verdict
	var p []string
	if n := len(v.Failed) + len(v.Lost); n > 0 {
		p = append(p, fmt.Sprintf("%d operations lost (%d failed, %d completed without their record): %s", n, len(v.Failed), len(v.Lost), short(append(slices.Clone(v.Failed), v.Lost...))))
	}
	if len(v.Stray) > 0 {
		p = append(p, fmt.Sprintf("%d keys of no operation have records: %s", len(v.Stray), short(v.Stray)))
	}
	switch {
	case r.Way == WayPlain && len(v.Duplicated) == 0:
		p = append(p, "no duplicate with plain retries against an API without keys: the faults lost no answer after the API's work (check the toxics and the API's cut rate)")
	case r.Way != WayPlain && len(v.Duplicated) > 0:
		p = append(p, fmt.Sprintf("%d operations done more than once: %s", len(v.Duplicated), short(v.Duplicated)))
	case r.Way != WayPlain && v.Records != v.Operations:
		p = append(p, fmt.Sprintf("%d records for %d operations", v.Records, v.Operations))
	}
	if o := r.Operator; o != nil {
		if o.Waited == 0 {
			p = append(p, "no call waited for a decision: the faults made no unknown outcome")
		}
		if len(o.Undecided) > 0 {
			p = append(p, fmt.Sprintf("%d calls sent again without a person's decision (never unpaused; temporal-server logged %d times that it started an attempt of a paused activity): %s", len(o.Undecided), o.StartedPaused, short(o.Undecided)))
		}
		if len(o.Unlisted) > 0 {
			p = append(p, fmt.Sprintf("%d calls waited for a decision and no list showed them (query %s): %s", len(o.Unlisted), o.Query, short(o.Unlisted)))
		}
	}
	return p
}

// short lists at most 10 of ids.
func short(ids []string) string {
	if len(ids) > 10 {
		return strings.Join(ids[:10], ", ") + fmt.Sprintf(", … (%d more)", len(ids)-10)
	}
	return strings.Join(ids, ", ")
}
