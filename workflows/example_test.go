package workflows_test

import (
	"fmt"
	"log/slog"
	"net/http/httptest"
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	idemtest "github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// Charge is a business workflow: it charges an order once, however often
// Temporal retries, replays or re-runs it.
func Charge(ctx workflow.Context, apiURL, orderID string, cents int) (string, error) {
	resp, err := workflows.Post(ctx, "charge", apiURL+"/payments", map[string]any{"order": orderID, "amount": cents})
	if err != nil {
		return "", err // an ActivityError; workflows.AsFailure(err) says what happened
	}
	return fmt.Sprintf("status %d after %d attempts", resp.Status, resp.Attempt), nil
}

func ExamplePost() {
	// The reference server answers 503 once, then does the work.
	api := idemtest.NewServer(idemtest.Options{})
	api.Script(idemtest.Fail(503))
	hs := httptest.NewServer(api)
	defer hs.Close()

	// On a worker: acts.Register(w) and workflows.Register(w). Here, the test environment.
	acts, err := activities.New(activities.Config{AllowedOrigins: []string{hs.URL}})
	if err != nil {
		panic(err)
	}
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := suite.NewTestWorkflowEnvironment()
	acts.Register(env)
	env.RegisterWorkflow(Charge)

	env.ExecuteWorkflow(Charge, hs.URL, "order-1", 4200)
	var out string
	if err := env.GetWorkflowResult(&out); err != nil {
		panic(err)
	}
	st := api.Stats()
	fmt.Println(out)
	fmt.Printf("requests %d, keys %d, records %d\n", st.Requests, st.DistinctKeys, st.Records)
	// Output:
	// status 201 after 2 attempts
	// requests 2, keys 1, records 1
}

// Subscription is the input of a periodic billing workflow.
type Subscription struct {
	APIURL string
	Period string // "2026-12"
	Cents  int
}

// MonthlyCharge charges one period, then continues as new with the next.
// The workflow ID stays the same across continue-as-new, so the period is
// part of the operation name: each month gets its own key, and a retried or
// replayed month keeps its key.
func MonthlyCharge(ctx workflow.Context, sub Subscription) error {
	if _, err := workflows.Post(ctx, "charge-"+sub.Period, sub.APIURL+"/charges", map[string]any{"amount": sub.Cents, "period": sub.Period}); err != nil {
		return err
	}
	if err := workflow.Sleep(ctx, 30*24*time.Hour); err != nil {
		return err
	}
	next, err := time.Parse("2006-01", sub.Period)
	if err != nil {
		return err
	}
	sub.Period = next.AddDate(0, 1, 0).Format("2006-01")
	return workflow.NewContinueAsNewError(ctx, MonthlyCharge, sub)
}

// periodKeys returns the keys MonthlyCharge uses for two periods, the
// second asked twice.
func periodKeys(ctx workflow.Context) ([]string, error) {
	return []string{workflows.Key(ctx, "charge-2026-11"), workflows.Key(ctx, "charge-2026-12"), workflows.Key(ctx, "charge-2026-12")}, nil
}

// ExampleKey_periodic shows the keys of a periodic operation such as
// MonthlyCharge: one per period, the same every time it is asked.
func ExampleKey_periodic() {
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(periodKeys)
	env.ExecuteWorkflow(periodKeys)
	var keys []string
	if err := env.GetWorkflowResult(&keys); err != nil {
		panic(err)
	}
	fmt.Println("one key per period:", keys[0] != keys[1])
	fmt.Println("the same when asked again:", keys[1] == keys[2])
	// Output:
	// one key per period: true
	// the same when asked again: true
}
