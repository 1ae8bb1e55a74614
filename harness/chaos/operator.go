package chaos

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/idemhttp/temporal-idempotent-http/internal/input"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// PausedQuery is the visibility query that lists the calls waiting for a
// person's decision (Reconcile.AtMostOnce), as an operator runs it
// (docs/unknown-outcomes.md):
//
//	temporal workflow list --query 'TemporalPauseInfo IN ("property:activityType=IdempotentHTTPRequest", "property:activityType=IdempotentHTTPRequestV2") AND ExecutionStatus="Running"'
//
// Temporal server 1.29.1 sets the search attribute TemporalPauseInfo of a
// workflow to "property:activityType=TYPE" for each type of its paused
// activities; a call AtMostOnce by its Request is scheduled as
// input.ActivityNameV2, one by its origin's convention as
// input.ActivityName.
const PausedQuery = `TemporalPauseInfo IN ("property:activityType=` + input.ActivityName + `", "property:activityType=` + input.ActivityNameV2 + `") AND ExecutionStatus="Running"`

// The worker's log lines of a call that paused itself for a decision, and
// of an attempt started while it was still paused, which sent nothing
// (activities/reconcile.go).
const (
	pausedLogMessage  = "HTTP call at most once paused for a person's decision"
	startedLogMessage = "HTTP call at most once started while waiting for a decision: not sending"
)

// OperatorOptions paces the campaign's operator (WayAtMostOnce): a person
// who lists the calls waiting for a decision with the Temporal CLI, asks
// the API whether each went through (its lookup, directly, not through
// the proxy) and completes the activity with the record found, or
// unpauses it to send again. Zero fields take the defaults named.
type OperatorOptions struct {
	// Every is the time between two lists (default 3 s).
	Every time.Duration
	// After is how long a call has been listed before the operator
	// decides (default 4 × the API's processing time, at least 2 s): the
	// API may still be working on the request whose answer was lost, and
	// a lookup then would find nothing and send it again, a duplicate. A
	// person takes longer.
	After time.Duration
	// Parallel is how many calls the operator settles at once (default 4).
	Parallel int
}

func (o OperatorOptions) withDefaults(processing time.Duration) OperatorOptions {
	if o.Every <= 0 {
		o.Every = 3 * time.Second
	}
	if o.After <= 0 {
		o.After = max(4*processing, 2*time.Second)
	}
	if o.Parallel <= 0 {
		o.Parallel = 4
	}
	return o
}

// OperatorReport is what the operator did and what the workers say waited.
type OperatorReport struct {
	// Query is the list's visibility query (PausedQuery).
	Query string `json:"query"`
	// Every and After are the operator's pace (OperatorOptions).
	Every time.Duration `json:"every_ns"`
	After time.Duration `json:"after_ns"`
	// Lists is how many lists ran; ListErrors how many failed (the
	// server away, say).
	Lists      int `json:"lists"`
	ListErrors int `json:"list_errors"`
	// Listed is how many workflows the lists showed, each once however
	// many times it waited; Decisions how many times one was settled:
	// Completed (`temporal activity complete` with the record found) plus
	// Unpaused (`temporal activity unpause`: no record, send again).
	Listed    int `json:"listed"`
	Decisions int `json:"decisions"`
	Completed int `json:"completed"`
	Unpaused  int `json:"unpaused"`
	// NotPaused counts listed workflows whose activity was no longer
	// paused when described (the list is eventually consistent, or the
	// call had been settled the round before).
	NotPaused int `json:"not_paused"`
	// Lookups is the operator's GETs at the API (in its Stats, not in the
	// campaign's Requests); CLICalls its Temporal CLI commands.
	Lookups  int `json:"lookups"`
	CLICalls int `json:"cli_calls"`
	// Errors are the first failed steps (CLI or lookup), retried the
	// round after; ErrorCount counts them all.
	Errors     []string `json:"errors,omitempty"`
	ErrorCount int      `json:"error_count"`
	// Pauses is how many times a call paused itself (the workers' log
	// lines); Waited the workflows that paused at least once, by the
	// workers' logs or by a history whose activity's last failure is
	// AwaitingDecision; Unlisted those of Waited that no list showed
	// (should be none).
	Pauses   int      `json:"pauses"`
	Waited   int      `json:"waited"`
	Unlisted []string `json:"unlisted,omitempty"`
	// MaxWait is the longest time from a workflow's first appearance in a
	// list to its decision.
	MaxWait time.Duration `json:"max_wait_ns"`
	// Undecided are the duplicated workflows the operator never unpaused:
	// their call sent again without a person's "send again".
	Undecided []string `json:"undecided,omitempty"`
	// NotSent counts the attempts started while their activity was still
	// paused, which sent nothing (the workers' log lines).
	NotSent int `json:"not_sent"`
	// StartedPaused counts temporal-server's log lines "Activity is
	// paused, but new task was schedulled" during the campaign: an
	// activity task dispatched to a worker while its activity was paused
	// (server 1.29.1 logs it and starts the attempt anyway).
	StartedPaused int `json:"started_paused"`
}

// startedPausedLog is temporal-server 1.29.1's log message when it starts
// an attempt of a paused activity (recordactivitytaskstarted).
const startedPausedLog = "Activity is paused, but new task was schedulled"

// maxOperatorErrors bounds OperatorReport.Errors.
const maxOperatorErrors = 20

// operator is the running operator loop of a campaign.
type operator struct {
	c    *campaign
	opts OperatorOptions
	keys map[string]string // workflow ID → key
	done chan struct{}
	// halt ends the loop and waits for its round to end.
	halt func()

	// serverLog is temporal-server's log file; serverLog0 StartedPaused's
	// count in it at the start.
	serverLog  func() string
	serverLog0 int

	mu       sync.Mutex
	r        OperatorReport
	listed   map[string]bool
	unpaused map[string]bool
	seen     map[string]time.Time // first listed, since the last decision
}

// startOperator starts the operator's loop until ctx ends or stop.
func (c *campaign) startOperator(ctx context.Context, ops []*operation) *operator {
	o := &operator{c: c, opts: c.cfg.Operator, keys: map[string]string{}, done: make(chan struct{}),
		listed: map[string]bool{}, unpaused: map[string]bool{}, seen: map[string]time.Time{},
		serverLog: c.cfg.Cluster.ServerLogPath,
		r:         OperatorReport{Query: PausedQuery, Every: c.cfg.Operator.Every, After: c.cfg.Operator.After}}
	o.serverLog0 = countLines(o.serverLog(), startedPausedLog)
	for _, op := range ops {
		o.keys[op.id] = op.outcome.Key
	}
	octx, cancel := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(o.opts.Every)
		defer tick.Stop()
		for {
			select {
			case <-octx.Done():
				return
			case <-o.done:
				return
			case <-tick.C:
				o.round(octx)
			}
		}
	}()
	o.halt = func() { close(o.done); cancel(); <-stopped }
	return o
}

// report returns what the operator did (without the workers' side:
// finish adds it). Call it once halted.
func (o *operator) report() *OperatorReport {
	o.mu.Lock()
	defer o.mu.Unlock()
	r := o.r
	r.Listed = len(o.listed)
	return &r
}

// fail records a failed step.
func (o *operator) fail(format string, args ...any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.r.ErrorCount++
	if len(o.r.Errors) < maxOperatorErrors {
		o.r.Errors = append(o.r.Errors, fmt.Sprintf("%.1fs ", time.Since(o.c.start).Seconds())+fmt.Sprintf(format, args...))
	}
}

// cli runs the Temporal CLI in the campaign's namespace.
func (o *operator) cli(ctx context.Context, args ...string) ([]byte, error) {
	o.mu.Lock()
	o.r.CLICalls++
	o.mu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return o.c.cfg.Cluster.CLI(cctx, append(args, "--namespace", o.c.cfg.Cluster.Namespace())...)
}

// round lists the waiting calls and settles those listed for at least
// After.
func (o *operator) round(ctx context.Context) {
	out, err := o.cli(ctx, "workflow", "list", "--query", PausedQuery, "--output", "json")
	o.mu.Lock()
	o.r.Lists++
	o.mu.Unlock()
	if err != nil {
		o.mu.Lock()
		o.r.ListErrors++
		o.mu.Unlock()
		o.fail("list: %v", err)
		return
	}
	ids, err := listedIDs(out)
	if err != nil {
		o.fail("list: %v", err)
		return
	}
	now := time.Now()
	var due []string
	o.mu.Lock()
	for _, id := range ids {
		if _, ours := o.keys[id]; !ours {
			continue
		}
		o.listed[id] = true
		first, ok := o.seen[id]
		if !ok {
			o.seen[id] = now
			continue
		}
		if now.Sub(first) >= o.opts.After {
			due = append(due, id)
		}
	}
	o.mu.Unlock()
	sem := make(chan struct{}, o.opts.Parallel)
	var wg sync.WaitGroup
	for _, id := range due {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			o.settle(ctx, id)
		}()
	}
	wg.Wait()
}

// settle decides one listed call: its paused activity, the API's records
// for its key, then complete or unpause.
func (o *operator) settle(ctx context.Context, id string) {
	out, err := o.cli(ctx, "workflow", "describe", "--workflow-id", id, "--output", "json")
	if err != nil {
		o.fail("describe %s: %v", id, err)
		return
	}
	activityID, paused, err := pausedActivity(out)
	if err != nil {
		o.fail("describe %s: %v", id, err)
		return
	}
	if !paused {
		o.mu.Lock()
		o.r.NotPaused++
		delete(o.seen, id)
		o.mu.Unlock()
		return
	}
	records, err := o.lookup(ctx, o.keys[id])
	if err != nil {
		o.fail("lookup %s: %v", id, err)
		return
	}
	var completed bool
	if len(records) > 0 {
		// It went through: its answer is the record, as the API answered
		// it (a second record would be a duplicate, which Verify finds).
		result := fmt.Sprintf(`{"status":%d,"body":%s}`, http.StatusCreated, records[0])
		_, err = o.cli(ctx, "activity", "complete", "--workflow-id", id, "--activity-id", activityID, "--result", result)
		completed = true
	} else {
		_, err = o.cli(ctx, "activity", "unpause", "--workflow-id", id, "--activity-id", activityID)
	}
	if err != nil {
		o.fail("settle %s: %v", id, err)
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.r.Decisions++
	if completed {
		o.r.Completed++
	} else {
		o.r.Unpaused++
		o.unpaused[id] = true
	}
	o.r.MaxWait = max(o.r.MaxWait, time.Since(o.seen[id]))
	delete(o.seen, id)
}

// lookup asks the API itself (not through the proxy) for the records of
// key: the answers of its lookup, raw.
func (o *operator) lookup(ctx context.Context, key string) ([]json.RawMessage, error) {
	o.mu.Lock()
	o.r.Lookups++
	o.mu.Unlock()
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	u := o.c.apiURL + paymentsPath + "?" + ClientReference + "=" + url.QueryEscape(key)
	req, err := http.NewRequestWithContext(lctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %d %s", u, resp.StatusCode, bytes.TrimSpace(b))
	}
	var list []json.RawMessage
	if err := json.Unmarshal(b, &list); err != nil {
		return nil, fmt.Errorf("GET %s: %w", u, err)
	}
	return list, nil
}

// listedIDs reads the workflow IDs of `temporal workflow list --output
// json`: a JSON array of executions, or one execution per line.
func listedIDs(out []byte) ([]string, error) {
	type execution struct {
		Execution struct {
			WorkflowID string `json:"workflowId"`
		} `json:"execution"`
	}
	out = bytes.TrimSpace(out)
	var list []execution
	if len(out) > 0 && out[0] == '[' {
		if err := json.Unmarshal(out, &list); err != nil {
			return nil, fmt.Errorf("reading the list: %w", err)
		}
	} else {
		dec := json.NewDecoder(bytes.NewReader(out))
		for dec.More() {
			var e execution
			if err := dec.Decode(&e); err != nil {
				return nil, fmt.Errorf("reading the list: %w", err)
			}
			list = append(list, e)
		}
	}
	ids := make([]string, 0, len(list))
	for _, e := range list {
		if e.Execution.WorkflowID != "" {
			ids = append(ids, e.Execution.WorkflowID)
		}
	}
	return ids, nil
}

// pausedActivity reads `temporal workflow describe --output json`: the ID
// of the workflow's pending HTTP activity, and whether it is paused.
func pausedActivity(out []byte) (activityID string, paused bool, err error) {
	var d struct {
		PendingActivities []struct {
			ActivityID   string `json:"activityId"`
			ActivityType struct {
				Name string `json:"name"`
			} `json:"activityType"`
			Paused bool `json:"paused"`
		} `json:"pendingActivities"`
	}
	if err := json.Unmarshal(out, &d); err != nil {
		return "", false, fmt.Errorf("reading the description: %w", err)
	}
	for _, a := range d.PendingActivities {
		if a.ActivityType.Name == input.ActivityName || a.ActivityType.Name == input.ActivityNameV2 {
			return a.ActivityID, a.Paused, nil
		}
	}
	return "", false, nil
}

// waited returns the workflows, among ops, whose call paused itself at
// least once, how many pauses and how many attempts started while paused
// sent nothing: by the workers' logs (their line for each, with the key),
// and by each history whose HTTP activity's last failure before it closed
// is AwaitingDecision.
func (c *campaign) waited(ctx context.Context, ops []*operation) (waited map[string]bool, pauses, notSent int) {
	byKey := map[string]string{}
	for _, op := range ops {
		byKey[op.outcome.Key] = op.id
	}
	waited = map[string]bool{}
	for _, w := range c.workers {
		f, err := os.Open(filepath.Join(c.cfg.WorkDir, fmt.Sprintf("worker-%d.log", w.index)))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for sc.Scan() {
			if !bytes.Contains(sc.Bytes(), []byte("HTTP call at most once")) {
				continue
			}
			var line struct {
				Msg string `json:"msg"`
				Key string `json:"key"`
			}
			id, ok := "", false
			if json.Unmarshal(sc.Bytes(), &line) == nil {
				id, ok = byKey[line.Key]
			}
			switch {
			case ok && line.Msg == pausedLogMessage:
				waited[id] = true
				pauses++
			case ok && line.Msg == startedLogMessage:
				notSent++
			}
		}
		f.Close()
	}
	for _, op := range ops {
		if !waited[op.id] && c.lastFailureAwaiting(ctx, op.id) {
			waited[op.id] = true
		}
	}
	return waited, pauses, notSent
}

// lastFailureAwaiting reports whether workflow id's HTTP activity last
// failed waiting for a decision (its started event's last failure, which
// Temporal records once the activity closes).
func (c *campaign) lastFailureAwaiting(ctx context.Context, id string) bool {
	it := c.cl.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return false
		}
		if a := ev.GetActivityTaskStartedEventAttributes(); a != nil &&
			a.GetLastFailure().GetApplicationFailureInfo().GetType() == workflows.ErrTypeAwaitingDecision {
			return true
		}
	}
	return false
}

// finish adds to the report the workers' and the server's side: the
// pauses, the workflows that waited and those of them no list showed, the
// duplicated workflows (of v) never unpaused, and the server's attempts
// of paused activities.
func (o *operator) finish(r *OperatorReport, waited map[string]bool, pauses, notSent int, v Verdict) {
	o.mu.Lock()
	defer o.mu.Unlock()
	r.Pauses, r.Waited, r.NotSent = pauses, len(waited), notSent
	r.Unlisted = nil
	for id := range waited {
		if !o.listed[id] {
			r.Unlisted = append(r.Unlisted, id)
		}
	}
	sort.Strings(r.Unlisted)
	for _, id := range v.Duplicated {
		if !o.unpaused[id] {
			r.Undecided = append(r.Undecided, id)
		}
	}
	r.StartedPaused = countLines(o.serverLog(), startedPausedLog) - o.serverLog0
}

// countLines counts the lines of the file at path that hold s (0 if it
// cannot be read).
func countLines(path, s string) int {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		if bytes.Contains(sc.Bytes(), []byte(s)) {
			n++
		}
	}
	return n
}
