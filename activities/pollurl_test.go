package activities_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktestsuite "go.temporal.io/sdk/testsuite"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/internal/request"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// TestPollUncleanLocationNotShown (issue 30, item 14, found by FuzzPoll):
// a monitor's 303 whose Location does not parse cleanly (invalid UTF-8
// before what was a query) never shows the rest whole, in the error's
// message, the Failure's Reason or its URL: it is cut where it stops
// being a URL (request.RedactURL).
func TestPollUncleanLocationNotShown(t *testing.T) {
	for _, loc := range []string{
		"/results/1\xff\xffig=" + qsecret, // the fuzzer's: followed, then answered 303 again
		"/results/1%FF%FFig=" + qsecret,
		"/results/1%3Fsig=" + qsecret,
		"https://elsewhere.example/r\xff\xffsig=" + qsecret, // not followed
	} {
		t.Run(loc, func(t *testing.T) {
			srv := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Location", loc)
				w.WriteHeader(http.StatusSeeOther)
			})
			a, err := activities.New(activities.Config{AllowedOrigins: []string{srv.URL}, Admission: activities.Admission{Off: true}})
			require.NoError(t, err)
			var s sdktestsuite.WorkflowTestSuite
			env := s.NewTestActivityEnvironment()
			a.Register(env)
			in := request.Monitor{Operation: "refund", Method: http.MethodPost, URL: srv.URL + "/refunds", Monitor: srv.URL + "/operations/1"}
			_, err = env.ExecuteActivity(activities.PollActivityName, in)
			require.Error(t, err)
			d, ok := workflows.AsFailure(err)
			require.True(t, ok, "a Failure: %v", err)
			enc, _ := json.Marshal(d)
			for where, text := range map[string]string{"error": err.Error(), "Failure": string(enc), "Reason": d.Reason, "URL": d.URL} {
				assert.NotContains(t, text, qsecret[:8], "%s shows what follows the unclean byte", where)
			}
			assert.True(t, strings.Contains(err.Error(), request.CutURL), "the cut is said: %s", err)
		})
	}
}
