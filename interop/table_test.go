package interop_test

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// row is one measured cell of the table.
type row struct {
	Env, Scenario, Title, Server string
	Outcomes                     []string
	Elapsed                      time.Duration
	// Activity is the last run's activity span on a real server (0: unknown).
	Activity          time.Duration
	Requests, Records int
	Statuses          string
	Done, Failed      bool
}

type table struct {
	mu   sync.Mutex
	rows []*row
}

var results table

func (tb *table) add(env string, sc scenario, server string) *row {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	r := &row{Env: env, Scenario: sc.name, Title: sc.title, Server: server}
	tb.rows = append(tb.rows, r)
	return r
}

func (r *row) addOutcome(o string, d, activity time.Duration) {
	results.mu.Lock()
	defer results.mu.Unlock()
	r.Outcomes = append(r.Outcomes, o)
	r.Elapsed, r.Activity = d, activity
}

func (r *row) finish(failed bool) {
	results.mu.Lock()
	defer results.mu.Unlock()
	r.Done, r.Failed = true, failed
}

// markdown renders one table per environment: scenario × server → outcome
// (of each run; "→" between runs), requests, records; ✗ marks a cell whose
// expectations failed. Then the statuses each server answered.
func (tb *table) markdown() string {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	// Rows and columns in the order of scenarios and servers; environments
	// as they ran.
	var envs, scens, titles, cols []string
	for _, sc := range scenarios {
		scens, titles = append(scens, sc.name), append(titles, sc.title)
	}
	for _, srv := range servers {
		cols = append(cols, srv.name)
	}
	cells := map[[3]string]*row{}
	for _, r := range tb.rows {
		if !slices.Contains(envs, r.Env) {
			envs = append(envs, r.Env)
		}
		cells[[3]string{r.Env, r.Scenario, r.Server}] = r
	}
	if len(envs) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("# Interop results\n\nWritten by `make interop` (interop/, SERVERS.md says what each server answers). " +
		"A cell: ✓ or ✗ (the suite's expectations met or not), the outcome of each run of the workflow ID " +
		"(→ between runs), the requests the server received and the records it created.\n")
	for _, env := range envs {
		fmt.Fprintf(&b, "\n### %s\n\n| scenario | %s |\n|---|%s\n", env, strings.Join(cols, " | "), strings.Repeat("---|", len(cols)))
		for i, sc := range scens {
			fmt.Fprintf(&b, "| %s |", titles[i])
			for _, srv := range cols {
				r := cells[[3]string{env, sc, srv}]
				switch {
				case r == nil || !r.Done:
					b.WriteString(" not run |")
				default:
					mark := "✓"
					if r.Failed {
						mark = "✗"
					}
					fmt.Fprintf(&b, " %s %s; %d req, %d rec |", mark, strings.Join(r.Outcomes, " → "), r.Requests, r.Records)
				}
			}
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "\nStatuses answered, in order (`201*`: sent after the attempt had timed out; `-`: never answered), and the time of the last run's activity (from its scheduling to its end by Temporal's clock on the dev server; the wall time of the workflow in the test environment, which skips retry waits):\n\n| scenario | %s |\n|---|%s\n", strings.Join(cols, " | "), strings.Repeat("---|", len(cols)))
		for _, sc := range scens {
			fmt.Fprintf(&b, "| %s |", sc)
			for _, srv := range cols {
				r := cells[[3]string{env, sc, srv}]
				if r == nil || !r.Done {
					b.WriteString(" |")
					continue
				}
				d := r.Elapsed
				if r.Activity > 0 {
					d = r.Activity
				}
				fmt.Fprintf(&b, " %s (%.1f s) |", shorten(r.Statuses, 60), d.Seconds())
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

// shorten keeps a long status list readable: "409 ×12" for runs.
func shorten(s string, max int) string {
	f := strings.Fields(s)
	var out []string
	for i := 0; i < len(f); {
		j := i
		for j < len(f) && f[j] == f[i] {
			j++
		}
		if n := j - i; n > 2 {
			out = append(out, fmt.Sprintf("%s ×%d", f[i], n))
		} else {
			out = append(out, f[i:j]...)
		}
		i = j
	}
	r := strings.Join(out, " ")
	if len(r) > max {
		r = r[:max] + "…"
	}
	return r
}
