package transfer_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktestsuite "go.temporal.io/sdk/testsuite"

	"github.com/idemhttp/temporal-idempotent-http/examples/transfer"
	"github.com/idemhttp/temporal-idempotent-http/testsuite"
)

// README: test

func TestSend(t *testing.T) {
	t.Setenv("BANK_API_TOKEN", "bk_test_9a8b7c6d5e4f")
	env := new(sdktestsuite.WorkflowTestSuite).NewTestWorkflowEnvironment()
	api := testsuite.StartServer(t, testsuite.Options{Now: env.Now, Async: &testsuite.Async{
		Style: testsuite.AsyncOperationLocation, Duration: 30 * time.Hour, RetryAfter: 600,
	}}) // settles in 30 h, past the first day's deadline
	require.NoError(t, transfer.Register(env, api.URL))

	env.ExecuteWorkflow(transfer.Send, transfer.Transfer{ID: "t-1", Cents: 990000, IBAN: "DE89370400440532013000", APIURL: api.URL})
	var s transfer.Settlement
	require.NoError(t, env.GetWorkflowResult(&s))
	require.Equal(t, "rec_1", s.TransferID)
	require.Equal(t, 1, api.Stats().Records)    // sent once
	require.Equal(t, 1, api.Stats().Operations) // followed on, never sent again
}

// README: end

// TestSendRejected: a failed operation is the bank's answer, with its reason.
func TestSendRejected(t *testing.T) {
	t.Setenv("BANK_API_TOKEN", "bk_test_9a8b7c6d5e4f")
	env := new(sdktestsuite.WorkflowTestSuite).NewTestWorkflowEnvironment()
	api := testsuite.StartServer(t, testsuite.Options{Now: env.Now, Async: &testsuite.Async{
		Style: testsuite.AsyncOperationLocation, Duration: time.Hour, RetryAfter: 60, Outcome: testsuite.OutcomeFailed,
	}})
	require.NoError(t, transfer.Register(env, api.URL))
	env.ExecuteWorkflow(transfer.Send, transfer.Transfer{ID: "t-2", Cents: 1, IBAN: "DE89370400440532013000", APIURL: api.URL})
	var s transfer.Settlement
	require.NoError(t, env.GetWorkflowResult(&s))
	require.Contains(t, s.Rejected, "OperationFailed")
	require.Empty(t, s.TransferID)
	require.InDelta(t, 61, api.Stats().Polls, 2) // every minute for an hour
}

// TestREADMEShowsThisCode: the regions marked "README: <name>" stand word
// for word in README.md or in the page of docs/ that shows them.
func TestREADMEShowsThisCode(t *testing.T) {
	showing := pages(t)
	region := regexp.MustCompile(`(?s)// README: (\w+)\n(.*?)// README: end`)
	found := 0
	for _, file := range []string{"transfer.go", "transfer_test.go"} {
		src, err := os.ReadFile(file)
		require.NoError(t, err)
		for _, m := range region.FindAllSubmatch(src, -1) {
			found++
			if code := strings.TrimSpace(string(m[2])); !shown(showing, code) {
				t.Errorf("neither README.md nor docs/*.md shows the %q region of %s word for word:\n%s", m[1], file, code)
			}
		}
	}
	require.Equal(t, 3, found, "regions: workflow, worker, test")
}

// pages returns README.md and every page of docs/, by path: a region
// marked "README: <name>" must stand word for word in one of them.
func pages(t *testing.T) map[string]string {
	t.Helper()
	docs, err := filepath.Glob("../../docs/*.md")
	require.NoError(t, err)
	out := map[string]string{}
	for _, p := range append([]string{"../../README.md"}, docs...) {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		out[p] = string(b)
	}
	return out
}

// shown reports whether one of the pages holds code word for word.
func shown(pages map[string]string, code string) bool {
	for _, text := range pages {
		if strings.Contains(text, code) {
			return true
		}
	}
	return false
}

// TestSendSettledAtOnce: an API that settles at once (201) is the result,
// with no polls.
func TestSendSettledAtOnce(t *testing.T) {
	t.Setenv("BANK_API_TOKEN", "bk_test_9a8b7c6d5e4f")
	env := new(sdktestsuite.WorkflowTestSuite).NewTestWorkflowEnvironment()
	api := testsuite.StartServer(t, testsuite.Options{Now: env.Now})
	require.NoError(t, transfer.Register(env, api.URL))
	env.ExecuteWorkflow(transfer.Send, transfer.Transfer{ID: "t-3", Cents: 5, IBAN: "DE89370400440532013000", APIURL: api.URL})
	var s transfer.Settlement
	require.NoError(t, env.GetWorkflowResult(&s))
	require.Equal(t, "rec_1", s.TransferID)
	require.Zero(t, s.Polls)
}
