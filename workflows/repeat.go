package workflows

import (
	"runtime"
	"sync"
	"weak"

	"go.temporal.io/sdk/workflow"
)

// perExecution keeps a map of V for each workflow execution in this
// worker's memory, keyed weakly by the execution's workflow.Info, so that
// an entry goes with its execution (a run that continues as new starts
// with none). The one home of workflow code's memory across calls: the
// Repeat rule's keys (calls) and the webhooks an operation awaits (hooks,
// webhook.go).
//
// The SDK may run an execution's code again from the start with the same
// workflow.Info (when it rebuilds a stale cached state): such a replay
// meets each entry at a history length no greater than the one at which
// it was made, which is how its users tell a replay from a later call, so
// that they decide the same on every replay. Temporal's test environment
// keeps no history length (0) and never runs the code again.
type perExecution[V any] struct {
	mu sync.Mutex
	m  map[weak.Pointer[workflow.Info]]map[string]V
}

// with calls f, under the lock, with ctx's execution's map (made on first
// use) and the current history length.
func (p *perExecution[V]) with(ctx workflow.Context, f func(m map[string]V, length int)) {
	info := workflow.GetInfo(ctx)
	length := info.GetCurrentHistoryLength()
	wp := weak.Make(info)
	p.mu.Lock()
	defer p.mu.Unlock()
	m := p.m[wp]
	if m == nil {
		if p.m == nil {
			p.m = map[weak.Pointer[workflow.Info]]map[string]V{}
		}
		m = map[string]V{}
		p.m[wp] = m
		runtime.AddCleanup(info, func(wp weak.Pointer[workflow.Info]) {
			p.mu.Lock()
			delete(p.m, wp)
			p.mu.Unlock()
		}, wp)
	}
	f(m, length)
}

// calls remembers, for each workflow execution, the keys its calls used
// and the history length at which each was first used: a call is a repeat
// only when it comes later in the history than the first call with its
// key, the same on every replay.
var calls perExecution[firstUse]

type firstUse struct {
	operation     string
	historyLength int
}

// repeated records that this execution calls with key for operation; it
// reports whether an earlier call of this run used key, and that call's
// operation, and whether this call made the record (owns it: only such a
// call may forget it). A call that meets the record at the same history
// length (a replay of the first call, or one started beside it in the same
// workflow task) neither repeats nor owns it.
func repeated(ctx workflow.Context, key, operation string) (prev string, again, owns bool) {
	calls.with(ctx, func(seen map[string]firstUse, length int) {
		// In the test environment (length 0) every second call is a
		// repeat.
		if first, ok := seen[key]; ok {
			prev, again = first.operation, length == 0 || length > first.historyLength
			return
		}
		seen[key] = firstUse{operation: operation, historyLength: length}
		owns = true
	})
	return prev, again, owns
}

// forget drops key after its call failed: calling again with the same key
// is then a retry of the same operation (the safe thing to do), not a
// repeat of a completed one.
func forget(ctx workflow.Context, key string) {
	calls.with(ctx, func(seen map[string]firstUse, _ int) { delete(seen, key) })
}

// refuseRepeat is the Repeat rule, the one statement of it that Call (in
// execute) and ExecuteChild (in the parent) share: it records that this
// run calls with key for req.Operation, and refuses the call when an
// earlier call of the run used key, unless req.Repeat says the repeat is
// meant. When owns is true the caller forgets key if its call fails (a
// call again is then a retry); a call that does not own the record leaves
// it, so that its failure cannot erase a completed call's.
func refuseRepeat(ctx workflow.Context, key string, req Request) (owns bool, err error) {
	prev, again, owns := repeated(ctx, key, req.Operation)
	if !again || req.Repeat {
		return owns, nil
	}
	return false, invalid("operation %q: this workflow run already completed a call with the same idempotency key (operation %q): the server would answer with that call's stored response and this call's work would not happen; if this is another operation, give it its own name (e.g. %q); set Request.Repeat (workflows.Call) if reading the stored answer again is meant",
		req.Operation, prev, req.Operation+"-2")
}
