// Package actions counts Temporal actions, the unit Temporal Cloud bills
// in, two ways: the server's own `action` counter, read from a dev
// server's Prometheus endpoint (`temporal server start-dev
// --metrics-port`, [ServerArgs]), and an estimate by Temporal Cloud's
// published rules (docs.temporal.io/evaluate/cloud/actions) from
// workflow histories ([FromHistory]).
//
// The server counts in its frontend (common/rpc/interceptor/telemetry.go
// of Server 1.29.1), after a successful call, by action_type: a started
// workflow (grpc_StartWorkflowExecution, counted only when it started), a
// signal, a signal-with-start (one, whether it starts or not), a query, a
// heartbeat that reached it, each command of a completed workflow task
// that is an action (command_ScheduleActivityTask, command_StartTimer,
// command_UpsertWorkflowSearchAttributes, a continue-as-new; a child
// workflow counts two), one command_BatchMarkers per workflow task that
// recorded markers (however many), each update accepted or rejected, and
// an activity_retry per attempt after the first that a worker was handed.
// Temporal Cloud bills the same operations but one: the
// TemporalChangeVersion upserts that workflow.GetVersion makes are free.
//
//	before, _ := actions.Settle(ctx, url, "default", 2*time.Second, time.Minute)
//	// … run workflows …
//	after, _ := actions.Settle(ctx, url, "default", 2*time.Second, time.Minute)
//	fmt.Println(after.Sub(before).Total())
package actions

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The server's action types (label action_type) this package names.
const (
	TypeStart           = "grpc_StartWorkflowExecution"
	TypeSignal          = "grpc_SignalWorkflowExecution"
	TypeSignalWithStart = "grpc_SignalWithStartWorkflowExecution"
	TypeQuery           = "grpc_QueryWorkflow"
	TypeHeartbeat       = "grpc_RecordActivityTaskHeartbeat"
	TypeHeartbeatByID   = "grpc_RecordActivityTaskHeartbeatById"
	TypeRetry           = "activity_retry"
	TypeScheduled       = "command_ScheduleActivityTask"
	TypeTimer           = "command_StartTimer"
	TypeBatchMarkers    = "command_BatchMarkers"
	TypeUpsert          = "command_UpsertWorkflowSearchAttributes"
	TypeContinueAsNew   = "command_ContinueAsNewWorkflowExecution"
	TypeSignalExternal  = "command_SignalExternalWorkflowExecution"
	TypeChild           = "command_StartChildWorkflowExecution"
	TypeChildExtra      = "command_StartChildWorkflowExecution_Extra"
	// The update messages' types, as the dev server's Prometheus
	// exporter writes them (its ":" sanitized to "_").
	TypeUpdateAccepted = "message_UpdateWorkflowExecution_Acceptance"
	TypeUpdateRejected = "message_UpdateWorkflowExecution_Rejection"
)

// ServerArgs are the `temporal server start-dev` arguments that serve its
// metrics on 127.0.0.1:port (itest.DevServerOptions.ExtraArgs); the
// endpoint is [MetricsURL](port).
func ServerArgs(port int) []string { return []string{"--metrics-port", strconv.Itoa(port)} }

// MetricsURL is the metrics endpoint of a dev server started with
// [ServerArgs](port).
func MetricsURL(port int) string { return fmt.Sprintf("http://127.0.0.1:%d/metrics", port) }

// Counts are the server's action counter by action_type.
type Counts map[string]float64

// Total is the sum of c.
func (c Counts) Total() float64 { return total(c) }

// total is the sum of m's values.
func total[K comparable](m map[K]float64) float64 {
	t := 0.0
	for _, v := range m {
		t += v
	}
	return t
}

// add returns a + b, by key, into a new map.
func add[K comparable](a, b map[K]float64) map[K]float64 {
	s := make(map[K]float64, len(a))
	for k, v := range a {
		s[k] += v
	}
	for k, v := range b {
		s[k] += v
	}
	return s
}

// Sub returns c − before, by type, without the types that did not move.
func (c Counts) Sub(before Counts) Counts {
	d := Counts{}
	for k, v := range c {
		if x := v - before[k]; x != 0 {
			d[k] = x
		}
	}
	for k, v := range before {
		if _, ok := c[k]; !ok && v != 0 {
			d[k] = -v
		}
	}
	return d
}

// Add returns c + o, by type.
func (c Counts) Add(o Counts) Counts { return add(c, o) }

// Tally returns c by category ([CategoryOf]).
func (c Counts) Tally() Tally {
	t := Tally{}
	for k, v := range c {
		t[CategoryOf(k)] += v
	}
	return t.clean()
}

// String lists c's types in order, "type n" each.
func (c Counts) String() string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(c)) {
		parts = append(parts, fmt.Sprintf("%s %g", k, c[k]))
	}
	return strings.Join(parts, ", ")
}

// Parse reads the `action` counter of service_name="frontend" in
// namespace from Prometheus' text format.
func Parse(r io.Reader, namespace string) (Counts, error) {
	c := Counts{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "action{") {
			continue
		}
		end := strings.LastIndexByte(line, '}')
		if end < 0 {
			return nil, fmt.Errorf("actions: a sample without its closing brace: %q", line)
		}
		labels, err := parseLabels(line[len("action{"):end])
		if err != nil {
			return nil, fmt.Errorf("actions: %w in %q", err, line)
		}
		if labels["service_name"] != "frontend" || labels["namespace"] != namespace {
			continue
		}
		fields := strings.Fields(line[end+1:])
		if len(fields) == 0 {
			return nil, fmt.Errorf("actions: a sample without a value: %q", line)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return nil, fmt.Errorf("actions: %q: %w", line, err)
		}
		c[labels["action_type"]] += v
	}
	return c, sc.Err()
}

// parseLabels reads `name="value",…` with the text format's escapes.
func parseLabels(s string) (map[string]string, error) {
	labels := map[string]string{}
	for s = strings.TrimSpace(s); s != ""; {
		eq := strings.IndexByte(s, '=')
		if eq <= 0 || len(s) < eq+2 || s[eq+1] != '"' {
			return nil, errors.New("a label without name=\"value\"")
		}
		name := strings.TrimSpace(s[:eq])
		var v strings.Builder
		i := eq + 2
		for ; i < len(s) && s[i] != '"'; i++ {
			if s[i] == '\\' && i+1 < len(s) {
				i++
				switch s[i] {
				case 'n':
					v.WriteByte('\n')
				default:
					v.WriteByte(s[i])
				}
				continue
			}
			v.WriteByte(s[i])
		}
		if i >= len(s) {
			return nil, errors.New("a label value without its closing quote")
		}
		labels[name] = v.String()
		s = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(s[i+1:]), ","))
	}
	return labels, nil
}

// Scrape reads url (a dev server's /metrics) and returns its action
// counter in namespace.
func Scrape(ctx context.Context, url, namespace string) (Counts, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("actions: reading the server's metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("actions: %s answered %s", url, resp.Status)
	}
	return Parse(resp.Body, namespace)
}

// Settle scrapes url every 250 ms until the counter in namespace has not
// moved for quiet (a workflow task's completion, a worker's report, can
// come a moment after what caused it), and returns it; it gives up
// after limit.
func Settle(ctx context.Context, url, namespace string, quiet, limit time.Duration) (Counts, error) {
	deadline := time.Now().Add(limit)
	last, err := Scrape(ctx, url, namespace)
	if err != nil {
		return nil, err
	}
	since := time.Now()
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
		c, err := Scrape(ctx, url, namespace)
		if err != nil {
			return nil, err
		}
		if len(c.Sub(last)) > 0 {
			last, since = c, time.Now()
		}
		if time.Since(since) >= quiet {
			return last, nil
		}
		if time.Now().After(deadline) {
			return last, fmt.Errorf("actions: the action counter still moved after %s (last: %s)", limit, c.Sub(last))
		}
	}
}

// Category is what an action is for, the rows of a report.
type Category string

// The categories of actions.
const (
	// Workflow: a workflow started (by a client, by continue-as-new, as a
	// child).
	Workflow Category = "workflow"
	// Activity: an activity scheduled (its first attempt).
	Activity Category = "activity"
	// Retry: an activity attempt after the first.
	Retry Category = "retry"
	// Heartbeat: an activity heartbeat that reached the server.
	Heartbeat Category = "heartbeat"
	// Timer: a timer started.
	Timer Category = "timer"
	// Signal: a signal (a signal-with-start included, one in all).
	Signal Category = "signal"
	// Update: an update accepted or rejected.
	Update Category = "update"
	// Marker: markers (local activities, side effects, versions).
	Marker Category = "marker"
	// Upsert: a search-attribute upsert.
	Upsert Category = "upsert"
	// Query: a query.
	Query Category = "query"
	// Other: anything else (schedules, Nexus, reset, options).
	Other Category = "other"
)

// Categories lists the categories in report order.
var Categories = []Category{Workflow, Activity, Retry, Heartbeat, Timer, Signal, Update, Marker, Upsert, Query, Other}

// CategoryOf returns the category of the server's action type t.
func CategoryOf(t string) Category {
	switch t {
	case TypeStart, TypeContinueAsNew, "grpc_ExecuteMultiOperation", TypeChild, TypeChildExtra:
		return Workflow
	case TypeScheduled:
		return Activity
	case TypeRetry:
		return Retry
	case TypeHeartbeat, TypeHeartbeatByID:
		return Heartbeat
	case TypeTimer:
		return Timer
	case TypeSignal, TypeSignalWithStart, TypeSignalExternal:
		return Signal
	case TypeUpdateAccepted, TypeUpdateRejected,
		"message_UpdateWorkflowExecution:Acceptance", "message_UpdateWorkflowExecution:Rejection":
		return Update
	case TypeBatchMarkers:
		return Marker
	case TypeUpsert:
		return Upsert
	case TypeQuery:
		return Query
	}
	return Other
}

// Tally counts actions by category.
type Tally map[Category]float64

// Total is the sum of t.
func (t Tally) Total() float64 { return total(t) }

// Add returns t + o.
func (t Tally) Add(o Tally) Tally { return Tally(add(t, o)).clean() }

// Scale returns t × f (f = 1/calls: per call).
func (t Tally) Scale(f float64) Tally {
	s := Tally{}
	for k, v := range t {
		s[k] = v * f
	}
	return s
}

// clean drops the zero categories.
func (t Tally) clean() Tally {
	for k, v := range t {
		if v == 0 {
			delete(t, k)
		}
	}
	return t
}

// String lists t's categories in report order, "category n" each (n to
// two decimals, trailing zeros dropped); "0" when empty.
func (t Tally) String() string {
	var parts []string
	for _, c := range Categories {
		if v := t[c]; v != 0 {
			parts = append(parts, fmt.Sprintf("%s %s", c, Num(v)))
		}
	}
	if len(parts) == 0 {
		return "0"
	}
	return strings.Join(parts, ", ")
}

// Num formats n to two decimals, trailing zeros dropped.
func Num(n float64) string {
	s := strconv.FormatFloat(n, 'f', 2, 64)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	if s == "-0" {
		return "0"
	}
	return s
}
