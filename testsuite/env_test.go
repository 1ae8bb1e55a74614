package testsuite_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// OpenAccount is a user's workflow under test.
func OpenAccount(ctx workflow.Context, apiURL string) (int, error) {
	resp, err := workflows.Post(ctx, "open-account", apiURL+"/accounts", map[string]string{"owner": "ada"})
	if err != nil {
		return 0, err
	}
	return int(resp.Attempt), nil
}

// TestRegister is the few lines a user writes to test a workflow against the
// reference server.
func TestRegister(t *testing.T) {
	srv := testsuite.StartServer(t, testsuite.Options{})
	srv.Script(testsuite.Fail(502), testsuite.Fail(503))
	env := testsuite.Register(t, nil, srv, activities.Config{})
	env.RegisterWorkflow(OpenAccount)

	env.ExecuteWorkflow(OpenAccount, srv.URL)
	require.NoError(t, env.GetWorkflowError())
	var attempts int
	require.NoError(t, env.GetWorkflowResult(&attempts))
	assert.Equal(t, 3, attempts)
	assert.Equal(t, 1, srv.Stats().Records)
	var body map[string]string
	require.NoError(t, json.Unmarshal(srv.Records()[0].Request, &body))
	assert.Equal(t, "ada", body["owner"])
}

// output is a test whose output is kept, to be read.
type output struct {
	testing.TB
	mu  sync.Mutex
	buf bytes.Buffer
}

func (o *output) Output() io.Writer { return o }

func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.Write(p)
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// followTen runs a workflow that follows an operation polled ten times, in
// an environment Register makes for tb.
func followTen(t *testing.T, tb testing.TB) {
	srv := testsuite.StartServer(t, testsuite.Options{Async: &testsuite.Async{Duration: 10 * time.Minute, RetryAfter: 60}})
	env := testsuite.Register(tb, nil, srv, activities.Config{Conventions: location(srv)})
	env.RegisterWorkflow(provision)
	env.ExecuteWorkflow(provision, srv.URL+"/vms")
	require.NoError(t, env.GetWorkflowError())
	require.Equal(t, 10, srv.Stats().Polls)
}

// TestQuietByDefault: the environment Register makes logs to the test's
// output at Info, two lines for an operation polled ten times (the SDK's
// default logger printed 39 at Debug, on standard output), and at Debug
// when slog's default level says so.
func TestQuietByDefault(t *testing.T) {
	quiet := &output{TB: t}
	followTen(t, quiet)
	lines := strings.Split(strings.TrimSpace(quiet.String()), "\n")
	assert.Len(t, lines, 2, quiet.String())
	assert.NotContains(t, quiet.String(), "level=DEBUG")
	assert.Contains(t, quiet.String(), `level=INFO msg="long-running operation ended"`)
	assert.NotContains(t, quiet.String(), "time=", "the machine's time is no help beside the environment's clock")

	defer slog.SetLogLoggerLevel(slog.SetLogLoggerLevel(slog.LevelDebug))
	chatty := &output{TB: t}
	followTen(t, chatty)
	assert.Contains(t, chatty.String(), `level=DEBUG msg="long-running operation still running"`)
}

// TestRegisterPutsTheServerOnTheEnvironmentsClock: a server started without
// Options.Now follows the clock of the environment Register makes, so an
// operation that runs 30 hours ends after 30 hours of skipped time (on the
// machine's clock it would still run when following gives up).
func TestRegisterPutsTheServerOnTheEnvironmentsClock(t *testing.T) {
	srv := testsuite.StartServer(t, testsuite.Options{Async: &testsuite.Async{Duration: 30 * time.Hour, RetryAfter: 300}})
	env := testsuite.Register(t, nil, srv, activities.Config{Conventions: location(srv)})
	env.RegisterWorkflow(provision)
	env.ExecuteWorkflow(provision, srv.URL+"/vms")
	require.NoError(t, env.GetWorkflowError())
	assert.InDelta(t, 30*12, srv.Stats().Polls, 2)
	assert.WithinDuration(t, env.Now(), srv.Records()[0].Created.Add(30*time.Hour), 10*time.Minute, "the record's time is the environment's")
}

// TestNewEnvTakesYourOwnRegistration: a worker registration of the user's
// own (its own activities.Config, on the machine's clock) goes on NewEnv's
// environment, which registers nothing itself.
func TestNewEnvTakesYourOwnRegistration(t *testing.T) {
	env := testsuite.NewEnv(t)
	api := testsuite.StartServer(t, testsuite.Options{Now: env.Now})
	api.Script(testsuite.Fail(503))
	register := func(w worker.Registry) error {
		acts, err := activities.New(activities.Config{AllowedOrigins: []string{api.URL}})
		if err != nil {
			return err
		}
		acts.Register(w)
		w.RegisterWorkflow(OpenAccount)
		return nil
	}
	require.NoError(t, register(env))
	env.ExecuteWorkflow(OpenAccount, api.URL)
	var attempts int
	require.NoError(t, env.GetWorkflowResult(&attempts))
	assert.Equal(t, 2, attempts)
	assert.Equal(t, http.StatusServiceUnavailable, api.Log()[0].Status)
}
