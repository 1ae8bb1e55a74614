package testsuite_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/workflow"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// provision starts a long-running operation at url and follows it for up
// to 80 hours.
func provision(ctx workflow.Context, url string) (*workflows.Response, error) {
	return workflows.Call(ctx, workflows.Request{Operation: "provision", URL: url, Body: json.RawMessage(`{"size":"xl"}`),
		Follow: &workflows.FollowOptions{Timeout: 80 * time.Hour}})
}

// location follows the reference server's default style (202, Location).
func location(srv *testsuite.Server) map[string]activities.Convention {
	c := activities.IETFConvention()
	c.LongRunning = activities.AcceptedLocation()
	return map[string]activities.Convention{srv.URL: c}
}

// TestOAuth2TokensExpireOnTheTestClock: an operation polled for hours on
// the test environment's clock, behind five-minute OAuth 2.0 tokens, never
// sends a token that expired on that clock (no request is refused) and
// asks for about one token per lifetime, whether it polls less or more
// often than tokens expire.
func TestOAuth2TokensExpireOnTheTestClock(t *testing.T) {
	const secret = "cs_test_7d1f3a9b2c4e6f80"
	for _, tc := range []struct {
		name       string
		duration   time.Duration
		retryAfter int
	}{
		{"72 hours, a poll every 5 minutes", 72 * time.Hour, 300},
		{"6 hours, a poll every minute", 6 * time.Hour, 60},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := testsuite.StartServer(t, testsuite.Options{OAuthClients: map[string]string{"app": secret}, OAuthTokenLifetime: 5 * time.Minute,
				Async: &testsuite.Async{Duration: tc.duration, RetryAfter: tc.retryAfter}})
			env := testsuite.Register(t, nil, srv, activities.Config{Conventions: location(srv), Credentials: map[string]activities.Credential{
				srv.URL: {OAuth2: &clientcredentials.Config{ClientID: "app", ClientSecret: secret, TokenURL: srv.URL + "/oauth/token"}},
			}})
			env.RegisterWorkflow(provision)
			env.ExecuteWorkflow(provision, srv.URL+"/vms")
			require.True(t, env.IsWorkflowCompleted())
			require.NoError(t, env.GetWorkflowError())
			st := srv.Stats()
			t.Logf("polls %d, refused %d, token requests %d", st.Polls, st.Unauthorized, st.TokenRequests)
			assert.Zero(t, st.Unauthorized, "requests refused for a token expired on the test clock")
			assert.InDelta(t, tc.duration/(5*time.Minute), st.TokenRequests, 5, "token requests: one per 5-minute lifetime")
			assert.InDelta(t, tc.duration/(time.Duration(tc.retryAfter)*time.Second), st.Polls, 3)
			assert.Equal(t, 1, st.Records)
		})
	}
}

// TestSigV4DatesFollowTheTestClock: requests signed with AWS Signature V4
// during an operation followed for 72 hours on the test environment's
// clock carry that clock's date, which the reference server (on the same
// clock) accepts: none is refused as more than 5 minutes off.
func TestSigV4DatesFollowTheTestClock(t *testing.T) {
	const akid, secret = "AKIDEXAMPLE7Q2W3E4R5", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
	srv := testsuite.StartServer(t, testsuite.Options{SigV4Credentials: &aws.Credentials{AccessKeyID: akid, SecretAccessKey: secret}, SigV4Service: "execute-api", SigV4Region: "eu-west-1",
		Async: &testsuite.Async{Duration: 72 * time.Hour, RetryAfter: 300}})
	env := testsuite.Register(t, nil, srv, activities.Config{Conventions: location(srv), Credentials: map[string]activities.Credential{
		srv.URL: {SigV4: &activities.SigV4{Service: "execute-api", Region: "eu-west-1", Credentials: credentials.NewStaticCredentialsProvider(akid, secret, "")}},
	}})
	env.RegisterWorkflow(provision)
	env.ExecuteWorkflow(provision, srv.URL+"/vms")
	require.True(t, env.IsWorkflowCompleted())
	st := srv.Stats()
	t.Logf("polls %d, refused %d", st.Polls, st.Unauthorized)
	require.NoError(t, env.GetWorkflowError())
	assert.Zero(t, st.Unauthorized, "requests refused as signed more than 5 minutes from the test clock")
	assert.InDelta(t, 72*12, st.Polls, 3)
}

// TestRetryAfterAnHourOnTheTestClock: a monitor that answers Retry-After:
// 3600 while a 72-hour operation runs is polled about once an hour on
// the test environment's clock when the worker's Config.MaxRetryAfter
// allows an hour, as a worker so configured would poll it; with the
// default cap (5 minutes) it is polled every 5 minutes.
func TestRetryAfterAnHourOnTheTestClock(t *testing.T) {
	for _, tc := range []struct {
		name          string
		maxRetryAfter time.Duration
		polls         int
	}{
		{"MaxRetryAfter 1h", time.Hour, 72},
		{"default MaxRetryAfter", 0, 72 * 12},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := testsuite.StartServer(t, testsuite.Options{Async: &testsuite.Async{Duration: 72 * time.Hour, RetryAfter: 3600}})
			env := testsuite.Register(t, nil, srv, activities.Config{Conventions: location(srv), MaxRetryAfter: tc.maxRetryAfter})
			env.RegisterWorkflow(provision)
			env.ExecuteWorkflow(provision, srv.URL+"/vms")
			require.True(t, env.IsWorkflowCompleted())
			require.NoError(t, env.GetWorkflowError())
			t.Logf("polls %d", srv.Stats().Polls)
			assert.InDelta(t, tc.polls, srv.Stats().Polls, 2)
		})
	}
}
