package admission

import (
	"testing"
	"time"
)

// TestPace: a burst of attempts on a queue whose rate the server keeps
// (matching's release of a second's tokens after an idle moment) is
// spread at the worker's share, one at a time: the first goes at once,
// each next one 1/share later, in the order they asked; an attempt that
// comes back with its ticket at its turn is admitted without a new
// turn; after an idle moment only one goes at once again (a burst of
// one). The learned rate's tokens are not spent.
func TestPace(t *testing.T) {
	tests := []struct {
		name    string
		share   float64
		maxWait time.Duration
		n       int
		want    []time.Duration // wait of each request asking at once
	}{
		{"share 2/s", 2, 0, 3, []time.Duration{0, ms(500), ms(1000)}},
		{"share 6/s", 6, 0, 3, []time.Duration{0, 166666667, 333333334}},
		{"share 0.5/s, MaxWait 3 s", 0.5, 3 * time.Second, 2, []time.Duration{0, 2 * time.Second}},
		{"share 0.5/s, MaxWait 1 s: one per MaxWait", 0.5, 0, 2, []time.Duration{0, time.Second}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := New(Config{InitialRate: 100, MaxWait: tc.maxWait})
			now := at(0)
			var tickets []Ticket
			for i := range tc.n {
				d := l.Pace(origin, now, tc.share, Ticket{}, false)
				if got := d.Wait; d.Admitted != (i == 0) || absDur(got-tc.want[i]) > time.Millisecond {
					t.Fatalf("request %d: %+v, want admitted %v, wait %v", i, d, i == 0, tc.want[i])
				}
				if i > 0 && (d.Reason != ReasonRate || d.Ticket.Due.IsZero()) {
					t.Errorf("request %d waits without a rate reason or a due time: %+v", i, d)
				}
				tickets = append(tickets, d.Ticket)
			}
			for i := 1; i < tc.n; i++ {
				due := tickets[i].Due
				if d := l.Pace(origin, due.Add(-ms(100)), tc.share, tickets[i], false); d.Admitted {
					t.Errorf("request %d back before its turn admitted: %+v", i, d)
				}
				if d := l.Pace(origin, due, tc.share, tickets[i], false); !d.Admitted {
					t.Errorf("request %d back at its turn: %+v, want admitted", i, d)
				}
			}
			// Idle for a long time: one at once, the next at 1/share.
			later := now.Add(time.Minute)
			if d := l.Pace(origin, later, tc.share, Ticket{}, false); !d.Admitted {
				t.Errorf("first request after an idle minute: %+v, want admitted", d)
			}
			if d := l.Pace(origin, later, tc.share, Ticket{}, false); d.Admitted || absDur(d.Wait-tc.want[1]) > time.Millisecond {
				t.Errorf("second request after an idle minute: %+v, want a wait of %v (a burst of one)", d, tc.want[1])
			}
			if s := l.State(origin, later); s.Waiting != 0 {
				t.Errorf("paced requests hold tickets of the learned rate: %+v", s)
			}
			// 100/s saves up 100 tokens: pacing spent none of them.
			admitN(t, l, origin, later, 100)
		})
	}
}

// TestPaceBeyondMaxWaitNotReserved: a turn further away than MaxWait is
// not given (the attempt goes back to the server's queue, where any worker
// may take it): the requests this worker is handed beyond what it paces
// within MaxWait do not push its later turns out. Before, each took a turn
// it never used, and a worker handed a burst once paced everything after
// it seconds late (on the cluster, one of two workers sent nothing for
// 27 s while the queue's backlog waited).
func TestPaceBeyondMaxWaitNotReserved(t *testing.T) {
	l := New(Config{InitialRate: 100, MaxWait: time.Second})
	now := at(0)
	// 2/s: turns at 0, 0.5 s and 1 s fit MaxWait; the next ten do not.
	for i := range 13 {
		d := l.Pace(origin, now, 2, Ticket{}, false)
		if i < 3 {
			if !d.Admitted && d.Ticket.Due.IsZero() {
				t.Fatalf("request %d within MaxWait without a turn: %+v", i, d)
			}
			continue
		}
		if d.Admitted || !d.Ticket.Due.IsZero() || d.Wait <= time.Second {
			t.Fatalf("request %d beyond MaxWait: %+v, want a wait over MaxWait and no turn", i, d)
		}
	}
	// Half a second later the next free turn is 1.5 s: one second away.
	if d := l.Pace(origin, now.Add(ms(500)), 2, Ticket{}, false); d.Admitted || absDur(d.Wait-time.Second) > time.Millisecond || d.Ticket.Due.IsZero() {
		t.Errorf("after the surplus went elsewhere: %+v, want a turn 1 s away", d)
	}
}

// TestPaceOffAndBreaker: a share of 0 paces nothing (as Gate), and the
// breaker and the retry budget decide before the pace.
func TestPaceOffAndBreaker(t *testing.T) {
	l := New(Config{InitialRate: 1, MinRetries: 1, RetryRatio: 0.01})
	for i := range 20 {
		if d := l.Pace(origin, at(ms(i)), 0, Ticket{}, false); !d.Admitted {
			t.Fatalf("request %d with no share refused: %+v", i, d)
		}
	}
	if d := l.Pace(origin, at(ms(30)), 100, Ticket{}, true); !d.Admitted {
		t.Fatalf("retry within the budget: %+v", d)
	}
	if d := l.Pace(origin, at(ms(40)), 100, Ticket{}, true); d.Admitted || d.Reason != ReasonRetryBudget {
		t.Errorf("retry over the budget: %+v, want the retry budget's wait", d)
	}
	for i := range 5 {
		l.Observe(origin, at(ms(100+i)), at(ms(110+i)), failure)
	}
	if d := l.Pace(origin, at(ms(200)), 100, Ticket{}, false); d.Admitted || d.Reason != ReasonCircuitOpen {
		t.Errorf("breaker open: %+v", d)
	}
}

// TestPaceTicketOfAnother: a ticket of the learned rate, or of another
// limiter, takes a new turn of the pace.
func TestPaceTicketOfAnother(t *testing.T) {
	l := New(Config{InitialRate: 100})
	other := New(Config{InitialRate: 100})
	if d := l.Pace(origin, at(0), 1, Ticket{}, false); !d.Admitted {
		t.Fatalf("first: %+v", d)
	}
	for _, tk := range []Ticket{
		{Limiter: other.id, Due: at(0)},
		{Limiter: l.id, Seq: 3, Due: at(0)},
	} {
		if d := l.Pace(origin, at(0), 1, tk, false); d.Admitted {
			t.Errorf("ticket %+v admitted before the pace's next turn: %+v", tk, d)
		}
	}
}

func absDur(d time.Duration) time.Duration { return max(d, -d) }
