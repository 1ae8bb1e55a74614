package workflows

import (
	"runtime"
	"sync"
	"weak"

	"go.temporal.io/sdk/workflow"
)

// calls remembers, for each workflow execution in this worker's memory, the
// keys its Calls used. A replay runs the workflow code again in a new
// execution with a new workflow.Info, so it meets the same calls in the same
// order: the detection is deterministic. An entry goes with its execution.
var calls = struct {
	sync.Mutex
	keys map[weak.Pointer[workflow.Info]]map[string]string
}{keys: map[weak.Pointer[workflow.Info]]map[string]string{}}

// repeated records that this execution calls with key for operation; it
// reports whether an earlier call used key, and that call's operation.
func repeated(ctx workflow.Context, key, operation string) (string, bool) {
	info := workflow.GetInfo(ctx)
	wp := weak.Make(info)
	calls.Lock()
	defer calls.Unlock()
	seen := calls.keys[wp]
	if seen == nil {
		seen = map[string]string{}
		calls.keys[wp] = seen
		runtime.AddCleanup(info, func(wp weak.Pointer[workflow.Info]) {
			calls.Lock()
			delete(calls.keys, wp)
			calls.Unlock()
		}, wp)
	}
	if op, ok := seen[key]; ok {
		return op, true
	}
	seen[key] = operation
	return "", false
}
