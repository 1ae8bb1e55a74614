package workflows_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/internal/input"
	idemtest "github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// testNamespace is the namespace of Temporal's test workflow environment.
const testNamespace = "default-test-namespace"

type harness struct {
	env    *testsuite.TestWorkflowEnvironment
	starts []time.Time // the test clock at each activity attempt
	keys   []string    // the key of each attempt
}

func newHarness(t *testing.T, srv *idemtest.Server, cfg activities.Config, workflowID string) *harness {
	h := &harness{env: idemtest.Register(t, nil, srv, cfg)}
	h.env.RegisterWorkflow(ChargeOrder)
	if workflowID != "" {
		h.env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: workflowID})
	}
	h.env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, args converter.EncodedValues) {
		var in input.Input
		if args.Get(&in) == nil {
			h.keys = append(h.keys, in.IdempotencyKey)
		}
		h.starts = append(h.starts, h.env.Now())
	})
	return h
}

func (h *harness) call(req workflows.Request) (*workflows.Response, error) {
	h.env.ExecuteWorkflow(workflows.WorkflowName, req)
	if err := h.env.GetWorkflowError(); err != nil {
		return nil, err
	}
	var resp workflows.Response
	if err := h.env.GetWorkflowResult(&resp); err != nil {
		return nil, err
	}
	return &resp, nil
}

func charge(srv *idemtest.Server) workflows.Request {
	return workflows.Request{Operation: "charge", URL: srv.URL + "/payments", Body: json.RawMessage(`{"amount":4200}`)}
}

// recordedHistory reads a history recorded on a dev server
// (testdata/*_history*.json, written by harness/histgen).
func recordedHistory(t *testing.T, file string) *historypb.History {
	t.Helper()
	raw, err := os.ReadFile(file)
	require.NoError(t, err)
	var hist historypb.History
	require.NoError(t, protojson.Unmarshal(raw, &hist))
	return &hist
}

// historyService serves one recorded history to the replayer.
type historyService struct {
	workflowservice.WorkflowServiceClient
	history *historypb.History
}

func (h historyService) GetWorkflowExecutionHistory(context.Context, *workflowservice.GetWorkflowExecutionHistoryRequest, ...grpc.CallOption) (*workflowservice.GetWorkflowExecutionHistoryResponse, error) {
	return &workflowservice.GetWorkflowExecutionHistoryResponse{History: h.history}, nil
}

// notify is a verified notification of operation "charge".
func notify(id, typ string) workflows.Notification {
	return workflows.Notification{ID: id, Type: typ, Operation: "charge", Scheme: "stripe", Received: time.Unix(1700000000, 0),
		Body: []byte(`{"id":"` + id + `","type":"` + typ + `"}`)}
}

// unsigned is notify's notification with its type from a header the
// signature does not cover (webhooks.HMACOptions.TypeHeader), or, with
// unbound, one whose signed body does not name the operation (a callback
// URL's path routed it).
func unsigned(id, typ string, unbound bool) workflows.Notification {
	n := notify(id, typ)
	n.Scheme = "hmac"
	n.TypeUnsigned, n.OperationUnsigned = !unbound, unbound
	return n
}

// delivery is a notification sent at a time after the workflow starts.
type delivery struct {
	at time.Duration
	n  workflows.Notification
	// rejected: the validator must refuse it.
	rejected bool
}

// rawServer records every request body byte for byte and answers with
// answer, which sees the request number (from 1) and the body.
type rawServer struct {
	*httptest.Server
	mu     sync.Mutex
	bodies [][]byte
	paths  []string
	answer func(w http.ResponseWriter, r *http.Request, n int)
}

func newRawServer(t *testing.T, answer func(w http.ResponseWriter, r *http.Request, n int)) *rawServer {
	s := &rawServer{answer: answer}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.bodies = append(s.bodies, b)
		s.paths = append(s.paths, r.URL.Path)
		n := len(s.bodies)
		s.mu.Unlock()
		s.answer(w, r, n)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *rawServer) requests() ([][]byte, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]byte(nil), s.bodies...), append([]string(nil), s.paths...)
}

func answer(status int, body string, kv ...string) func(http.ResponseWriter, *http.Request, int) {
	return func(w http.ResponseWriter, _ *http.Request, _ int) {
		for i := 0; i+1 < len(kv); i += 2 {
			w.Header().Set(kv[i], kv[i+1])
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

// loggedEnv is a test workflow environment with the activity and the ready
// workflow registered (testsuite.Register), whose logs go to the returned
// buffer as JSON lines, and which counts the activity attempts started.
func loggedEnv(t *testing.T, cfg activities.Config) (*testsuite.TestWorkflowEnvironment, *bytes.Buffer, *int) {
	var logs bytes.Buffer
	var s testsuite.WorkflowTestSuite
	s.SetLogger(log.NewStructuredLogger(slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	env := s.NewTestWorkflowEnvironment()
	// The SDK's 3 s default is close to what a 1 MiB body takes through
	// the converter with -race on a loaded machine.
	env.SetTestTimeout(30 * time.Second)
	idemtest.Register(t, env, nil, cfg)
	started := new(int)
	env.SetOnActivityStartedListener(func(*activity.Info, context.Context, converter.EncodedValues) { *started++ })
	return env, &logs, started
}

// logLines returns the decoded JSON log lines whose msg is msg.
func logLines(t *testing.T, logs *bytes.Buffer, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

func sha(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
