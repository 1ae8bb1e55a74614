package testsuite

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"

	"go.temporal.io/sdk/log"
	sdktestsuite "go.temporal.io/sdk/testsuite"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// NewEnv returns a Temporal test environment (the SDK's) with nothing
// registered: Register registers the HTTP activity and the ready workflow
// on it, and a test's own worker registration goes on it as on a worker
// (payment.Register(env, api.URL)). It logs to the test's
// output (shown by go test -v, or when the test fails) at Info, or at the
// level slog's default logger is set to (slog.SetLogLoggerLevel(slog.LevelDebug)
// shows the SDK's and the activities' debug lines): the SDK's own default
// prints every timer and heartbeat at Debug to standard output. A test
// that wants its own logger (or context propagators, or a metrics handler)
// makes the environment from its own sdktestsuite.WorkflowTestSuite.
func NewEnv(tb testing.TB) *sdktestsuite.TestWorkflowEnvironment {
	out := &testOutput{w: tb.Output()}
	tb.Cleanup(out.close)
	h := slog.NewTextHandler(out, &slog.HandlerOptions{Level: defaultLevel{}, ReplaceAttr: dropTime})
	var s sdktestsuite.WorkflowTestSuite
	s.SetLogger(log.NewStructuredLogger(slog.New(h)))
	return s.NewTestWorkflowEnvironment()
}

// Register registers the HTTP activity and the ready workflow on env (nil:
// a new one, as NewEnv makes) and returns env. The activity is made with
// cfg extended to allow srv's origin and, unless cfg.Now is set, reading
// the environment's clock (so Retry-After dates, the schedule-to-close
// deadline, OAuth 2.0 token expiry and Signature V4 dates follow its
// skipped time); srv, unless its Options.Now is set, then reads the same
// clock (a later Register moves it to its own). Admission is off
// (cfg.Admission.Off): the environment's clock stands still while an
// activity runs, so a wait for admission inside an attempt would never
// pass on it, and every throttle would add attempts that send nothing;
// admission is tested on a real Temporal server. The rest of cfg is the
// worker's as given, its limits included: a Retry-After is honoured up to
// cfg.MaxRetryAfter (default 5 minutes), so give it the MaxRetryAfter of
// the worker the test models to see an hour-long Retry-After honoured on
// the environment's clock. It fails the test on a bad cfg. A test of a
// user's workflow then reads:
//
//	srv := testsuite.StartServer(t, testsuite.Options{})
//	env := testsuite.Register(t, nil, srv, activities.Config{})
//	env.RegisterWorkflow(ChargeWorkflow)
//	env.ExecuteWorkflow(ChargeWorkflow, srv.URL+"/charges")
func Register(tb testing.TB, env *sdktestsuite.TestWorkflowEnvironment, srv *Server, cfg activities.Config) *sdktestsuite.TestWorkflowEnvironment {
	tb.Helper()
	if env == nil {
		env = NewEnv(tb)
	}
	if srv != nil && srv.URL != "" {
		cfg.AllowedOrigins = append(append([]string(nil), cfg.AllowedOrigins...), srv.URL)
	}
	if cfg.Now == nil {
		cfg.Now = env.Now
	}
	if srv != nil {
		srv.follow(cfg.Now)
	}
	cfg.Admission.Off = true
	acts, err := activities.New(cfg)
	if err != nil {
		tb.Fatalf("activities.New: %v", err)
	}
	acts.Register(env)
	workflows.Register(env)
	return env
}

// testOutput is a test's output that takes no line once the test has
// ended (testing panics on them): an attempt that outlives the test
// logs nowhere.
type testOutput struct {
	mu     sync.Mutex
	w      io.Writer
	closed bool
}

func (o *testOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return len(p), nil
	}
	return o.w.Write(p)
}

func (o *testOutput) close() {
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
}

// defaultLevel is the lowest level slog's default logger is enabled at
// (Info unless slog.SetLogLoggerLevel or slog.SetDefault says otherwise),
// read at each line.
type defaultLevel struct{}

func (defaultLevel) Level() slog.Level {
	for _, l := range []slog.Level{slog.LevelDebug, slog.LevelInfo, slog.LevelWarn} {
		if slog.Default().Enabled(context.Background(), l) {
			return l
		}
	}
	return slog.LevelError
}

// dropTime leaves the time out of a line: the test's output orders them,
// and the environment's clock is not the machine's.
func dropTime(groups []string, a slog.Attr) slog.Attr {
	if len(groups) == 0 && a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}
