package workflows

import (
	"runtime"
	"sync"
	"weak"

	"go.temporal.io/sdk/workflow"
)

// calls remembers, for each workflow execution in this worker's memory, the
// keys its calls used and the history length at which each was first used.
// It is keyed weakly by the execution's workflow.Info, and an entry goes
// with its execution.
//
// The SDK may run an execution's code again from the start with the same
// workflow.Info (when it rebuilds a stale cached state): such a replay
// meets each call at a history length no greater than the one recorded, so
// a call is a repeat only when it comes later in the history than the first
// call with its key. The detection is therefore the same on every replay.
var calls = struct {
	sync.Mutex
	keys map[weak.Pointer[workflow.Info]]map[string]firstUse
}{keys: map[weak.Pointer[workflow.Info]]map[string]firstUse{}}

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
	info := workflow.GetInfo(ctx)
	length := info.GetCurrentHistoryLength()
	wp := weak.Make(info)
	calls.Lock()
	defer calls.Unlock()
	seen := calls.keys[wp]
	if seen == nil {
		seen = map[string]firstUse{}
		calls.keys[wp] = seen
		runtime.AddCleanup(info, func(wp weak.Pointer[workflow.Info]) {
			calls.Lock()
			delete(calls.keys, wp)
			calls.Unlock()
		}, wp)
	}
	// Temporal's test environment keeps no history length (0) and never
	// rebuilds a cached state: there every second call is a repeat.
	if first, ok := seen[key]; ok {
		return first.operation, length == 0 || length > first.historyLength, false
	}
	seen[key] = firstUse{operation: operation, historyLength: length}
	return "", false, true
}

// forget drops key after its call failed: calling again with the same key
// is then a retry of the same operation (the safe thing to do), not a
// repeat of a completed one.
func forget(ctx workflow.Context, key string) {
	calls.Lock()
	defer calls.Unlock()
	delete(calls.keys[weak.Make(workflow.GetInfo(ctx))], key)
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
	return false, invalid("operation %q: this workflow run already completed a call with the same idempotency key (operation %q): the server would answer with that call's stored response and this call's work would not happen; if this is another operation, give it its own name (e.g. %q); set Request.Repeat (workflows.Repeat()) if reading the stored answer again is meant",
		req.Operation, prev, req.Operation+"-2")
}
