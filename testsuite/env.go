package testsuite

import (
	"testing"

	sdktestsuite "go.temporal.io/sdk/testsuite"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// Register registers the HTTP activity and the ready workflow on a Temporal
// test environment, with cfg extended to allow srv's origin and, unless
// cfg.Now is set, reading the environment's clock (so Retry-After dates and
// the schedule-to-close deadline follow its skipped time), with admission
// off (cfg.Admission.Off): the environment's clock stands still while an
// activity runs, so a wait for admission inside an attempt would never pass
// on it, and every throttle would add attempts that send nothing; admission
// is tested on a real Temporal server. The rest of cfg is the worker's
// as given, its limits included: a Retry-After is honoured up to
// cfg.MaxRetryAfter (default 5 minutes), so give it the MaxRetryAfter of
// the worker the test models to see an hour-long Retry-After honoured on
// the environment's clock. It fails the test on a bad cfg. A test of a
// user's workflow then reads:
//
//	srv := testsuite.StartServer(t, testsuite.Options{})
//	env := new(sdktestsuite.WorkflowTestSuite).NewTestWorkflowEnvironment()
//	testsuite.Register(t, env, srv, activities.Config{})
//	env.RegisterWorkflow(ChargeWorkflow)
//	env.ExecuteWorkflow(ChargeWorkflow, srv.URL+"/charges")
func Register(tb testing.TB, env *sdktestsuite.TestWorkflowEnvironment, srv *Server, cfg activities.Config) *activities.Activities {
	tb.Helper()
	if srv != nil && srv.URL != "" {
		cfg.AllowedOrigins = append(append([]string(nil), cfg.AllowedOrigins...), srv.URL)
	}
	if cfg.Now == nil {
		cfg.Now = env.Now
	}
	cfg.Admission.Off = true
	acts, err := activities.New(cfg)
	if err != nil {
		tb.Fatalf("activities.New: %v", err)
	}
	acts.Register(env)
	workflows.Register(env)
	return acts
}
