// Package registered hands tests and benchmarks the activities that
// activities.Activities.Register registers, by their registered names, so
// that they can call one attempt directly inside an activity context of
// their own (a loop of attempts in one activity execution, many
// goroutines sharing one) without the activities being public methods: a
// worker of users' own registers them with Register and workflows call
// them through package workflows.
package registered

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/worker"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/internal/input"
	"github.com/idemhttp/temporal-idempotent-http/internal/poll"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// Activities are the two activities of an activities.Activities, as
// Register registers them.
type Activities struct {
	// Do is the HTTP activity, registered as "IdempotentHTTPRequest".
	Do func(context.Context, input.Input) (*workflows.Response, error)
	// Poll is the poll activity, registered as "IdempotentHTTPPoll".
	Poll func(context.Context, poll.Monitor) (*workflows.Response, error)
}

// Of returns a's activities. It panics if Register does not register both
// names with the functions' types: the tests that use it then fail at once.
func Of(a *activities.Activities) Activities {
	r := recorder{}
	a.Register(r)
	return Activities{
		Do:   lookup[func(context.Context, input.Input) (*workflows.Response, error)](r, input.ActivityName),
		Poll: lookup[func(context.Context, poll.Monitor) (*workflows.Response, error)](r, poll.ActivityName),
	}
}

func lookup[F any](r recorder, name string) F {
	f, ok := r[name].(F)
	if !ok {
		panic(fmt.Sprintf("registered: Register registers %q as %T, not %T", name, r[name], f))
	}
	return f
}

// recorder is a worker.ActivityRegistry that keeps what is registered by
// name.
type recorder map[string]any

var _ worker.ActivityRegistry = recorder{}

func (r recorder) RegisterActivity(a any) {
	panic(fmt.Sprintf("registered: %T registered without a name", a))
}

func (r recorder) RegisterActivityWithOptions(a any, o activity.RegisterOptions) {
	r[o.Name] = a
}

func (r recorder) RegisterDynamicActivity(a any, _ activity.DynamicRegisterOptions) {
	panic(fmt.Sprintf("registered: %T registered as a dynamic activity", a))
}
