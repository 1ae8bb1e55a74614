package activities_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"
	sdktestsuite "go.temporal.io/sdk/testsuite"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/idemhttp/temporal-idempotent-http/activities"
	"github.com/idemhttp/temporal-idempotent-http/internal/input"
	"github.com/idemhttp/temporal-idempotent-http/internal/poll"
	"github.com/idemhttp/temporal-idempotent-http/internal/seal"
	"github.com/idemhttp/temporal-idempotent-http/testsuite"
	"github.com/idemhttp/temporal-idempotent-http/workflows"
)

// walkStrings calls f with every string reachable from v by reflection
// (struct fields exported or not, map keys and values, slices, pointers,
// interfaces), []byte as text, naming each by its path: a field added to
// a result, failure or poll input type is walked without a change here.
func walkStrings(v reflect.Value, path string, f func(path, s string)) {
	switch v.Kind() {
	case reflect.String:
		f(path, v.String())
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			walkStrings(v.Elem(), path, f)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			walkStrings(v.Field(i), path+"."+v.Type().Field(i).Name, f)
		}
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			b := make([]byte, v.Len())
			reflect.Copy(reflect.ValueOf(b), v)
			f(path, string(b))
			return
		}
		for i := range v.Len() {
			walkStrings(v.Index(i), fmt.Sprintf("%s[%d]", path, i), f)
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			walkStrings(k, path+"{key}", f)
			walkStrings(v.MapIndex(k), fmt.Sprintf("%s[%v]", path, k), f)
		}
	}
}

// historyTexts is every text of one workflow run that reaches Temporal's
// history or the worker's log: each activity's input (input.Input,
// poll.Monitor) and result (workflows.Response) or error (its message
// and workflows.Failure), walked field by field, with their JSON encodings
// (decoded too), and the log lines.
type historyTexts struct {
	mu    sync.Mutex
	texts map[string]string
	polls int
}

func (h *historyTexts) add(path, s string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.texts == nil {
		h.texts = map[string]string{}
	}
	h.texts[fmt.Sprintf("%s #%d", path, len(h.texts))] = s
}

// String is every text, for assertions on what they say.
func (h *historyTexts) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return fmt.Sprint(h.texts)
}

func (h *historyTexts) value(path string, v any) {
	walkStrings(reflect.ValueOf(v), path, h.add)
	enc, _ := json.Marshal(v)
	h.add(path+" (JSON)", string(enc)+"\n"+jsonText(enc))
}

func (h *historyTexts) err(path string, err error) {
	if err == nil {
		return
	}
	h.add(path+" (message)", err.Error())
	if f, ok := workflows.AsFailure(err); ok {
		h.value(path+" Failure", f)
	}
}

// secretScheme is a credential scheme: the origin's Credential (for an API
// at api, with a token endpoint at tokens), and the secrets the API echoes
// in its answers (from the request it got, or the test's).
type secretScheme struct {
	name    string
	cred    func(t *testing.T, tokens string) activities.Credential
	secrets func(r *http.Request) []string
	// mtls, when set, makes the API a TLS server that requires a client
	// certificate: it returns the server's TLS config and, once the
	// server's certificate is known, the origin's Credential.
	mtls func(t *testing.T) (*tls.Config, func(server *x509.Certificate) activities.Credential)
}

// mutualTLS is the client-certificate scheme: its secret is the private
// key, whose PEM lines the API echoes.
func mutualTLS() secretScheme {
	var keyLine string
	return secretScheme{name: "mutual TLS",
		secrets: func(*http.Request) []string { return []string{keyLine} },
		mtls: func(t *testing.T) (*tls.Config, func(*x509.Certificate) activities.Credential) {
			ca := testCert(t, "client CA", nil, false)
			pool := x509.NewCertPool()
			pool.AddCert(ca.Leaf)
			dir := t.TempDir()
			certFile, keyFile := certFiles(t, dir, "worker", testCert(t, "worker", &ca, true))
			pemKey, err := os.ReadFile(keyFile)
			require.NoError(t, err)
			keyLine = ""
			for _, line := range strings.Split(string(pemKey), "\n") {
				if len(line) > len(keyLine) && !strings.HasPrefix(line, "-----") {
					keyLine = line
				}
			}
			return &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool}, func(server *x509.Certificate) activities.Credential {
				caFile := filepath.Join(dir, "server-ca.pem")
				require.NoError(t, os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: server.Raw}), 0o600))
				return activities.Credential{CertFile: certFile, KeyFile: keyFile, CAFile: caFile}
			}
		}}
}

func credentialSchemes() []secretScheme {
	const (
		staticKey    = "sk_live_51HxQeKZ0aBcDeFgHiJkLmNo"
		fileKey      = "ak_live_Zy9Xw8Vu7Ts6Rq5Po4"
		clientSecret = "cs_3f1e9d8c7b6a5f4e3d2c1b0a"
		awsSecret    = "wJalrXUtnFEMIbK7MDENGbPxRfiCYEXAMPLEKEY"
	)
	bearer := func(r *http.Request) string { return strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ") }
	return []secretScheme{
		{"static header", func(*testing.T, string) activities.Credential {
			return activities.Credential{Header: http.Header{"Authorization": {"Bearer " + staticKey}}}
		}, func(r *http.Request) []string { return []string{bearer(r)} }, nil},
		{"header file", func(t *testing.T, _ string) activities.Credential {
			path := filepath.Join(t.TempDir(), "key")
			require.NoError(t, os.WriteFile(path, []byte(fileKey), 0o600))
			return activities.Credential{HeaderFiles: map[string]string{"X-Api-Key": path}}
		}, func(r *http.Request) []string { return []string{r.Header.Get("X-Api-Key")} }, nil},
		{"OAuth 2.0", func(_ *testing.T, tokens string) activities.Credential {
			return activities.Credential{OAuth2: &clientcredentials.Config{ClientID: "client-1", ClientSecret: clientSecret, TokenURL: tokens}}
		}, func(r *http.Request) []string { return []string{bearer(r), clientSecret} }, nil},
		{"AWS SigV4", func(*testing.T, string) activities.Credential {
			return activities.Credential{SigV4: &activities.SigV4{Service: "execute-api", Region: "eu-west-1",
				Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
					return aws.Credentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: awsSecret, Source: "test"}, nil
				})}}
		}, func(*http.Request) []string { return []string{awsSecret} }, nil},
		mutualTLS(),
	}
}

// answerPosition is where a misbehaving API puts a secret: start answers
// the POST, poll every other request; secret is the secret to echo.
type answerPosition struct {
	name  string
	start func(w http.ResponseWriter, secret string)
	poll  func(w http.ResponseWriter, r *http.Request, secret string, n int)
	// sealed: the call succeeds only with Config.SealKeys (without them it
	// fails MonitorNotFollowed); refresh: the monitor refuses the token
	// once (the token endpoint is then asked again, and errs).
	sealed, refresh bool
}

func answerPositions() []answerPosition {
	accepted := func(loc string) func(http.ResponseWriter, string) {
		return func(w http.ResponseWriter, secret string) {
			w.Header().Set("Location", strings.ReplaceAll(loc, "SECRET", secret))
			w.WriteHeader(http.StatusAccepted)
		}
	}
	done := func(w http.ResponseWriter, _ *http.Request, _ string, _ int) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"tr_1","state":"done"}`))
	}
	return []answerPosition{
		{name: "202 Location path", start: accepted("/operations/SECRET"), poll: done, sealed: true},
		{name: "202 Location path, escaped", start: accepted("/operations/x%2FSECRET"), poll: done, sealed: true},
		{name: "202 Location query", start: accepted("/operations/1?sig=SECRET"), poll: done, sealed: true},
		{name: "monitor moves to a path", start: accepted("/operations/1"), sealed: true,
			poll: func(w http.ResponseWriter, r *http.Request, secret string, n int) {
				if r.URL.Path == "/operations/1" {
					w.Header().Set("Location", "/operations/"+secret)
					w.WriteHeader(http.StatusAccepted)
					return
				}
				done(w, r, secret, n)
			}},
		{name: "monitor header and body", start: accepted("/operations/1"),
			poll: func(w http.ResponseWriter, _ *http.Request, secret string, _ int) {
				w.Header().Set("Location", "/receipts/"+secret)
				w.Header().Set("Request-Id", "req_"+secret)
				w.Header().Set("Content-Type", "application/json")
				_, _ = fmt.Fprintf(w, `{"echo":%q,"raw":"%s"}`, "Bearer "+secret, secret)
			}},
		{name: "monitor error body", start: accepted("/operations/1"),
			poll: func(w http.ResponseWriter, _ *http.Request, secret string, _ int) {
				w.WriteHeader(http.StatusBadRequest)
				_, _ = fmt.Fprintf(w, `{"error":"bad token %s"}`, secret)
			}},
		{name: "monitor status line", start: accepted("/operations/1"),
			poll: func(w http.ResponseWriter, _ *http.Request, secret string, _ int) {
				conn, buf, err := w.(http.Hijacker).Hijack()
				if err != nil {
					return
				}
				defer conn.Close()
				_, _ = fmt.Fprintf(buf, "HTTP/1.1 %s OK\r\nContent-Length: 0\r\n\r\n", secret)
				_ = buf.Flush()
			}},
		{name: "token endpoint error", start: accepted("/operations/1"), refresh: true,
			poll: func(w http.ResponseWriter, r *http.Request, secret string, n int) {
				w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
				w.WriteHeader(http.StatusUnauthorized)
			}},
	}
}

// TestNoSecretReachesHistory: for each credential scheme (static header,
// header file, OAuth 2.0, AWS SigV4, a client certificate), a misbehaving
// API echoes the scheme's secrets in every answer position (a 202's
// monitor path, escaped path and query, a moved monitor, headers, bodies,
// an error body, the status line, the token endpoint's error); every
// field of every activity input, result and failure, walked by
// reflection, and every log line hold no 8-byte piece of any of them.
// A monitor that needs a secret to be polled is followed only sealed
// (Config.SealKeys): its poll requests the real URL.
func TestNoSecretReachesHistory(t *testing.T) {
	sealKey := bytes.Repeat([]byte{7}, 32)
	for _, scheme := range credentialSchemes() {
		for _, pos := range answerPositions() {
			if pos.refresh && scheme.name != "OAuth 2.0" {
				continue
			}
			for _, keys := range [][][]byte{nil, {sealKey}} {
				if keys == nil && !pos.sealed {
					continue
				}
				name := scheme.name + "/" + pos.name
				if pos.sealed {
					name += map[bool]string{true: "/SealKeys", false: "/no SealKeys"}[keys != nil]
				}
				t.Run(name, func(t *testing.T) {
					noSecretIn(t, scheme, pos, keys)
				})
			}
		}
	}
}

func noSecretIn(t *testing.T, scheme secretScheme, pos answerPosition, keys [][]byte) {
	var (
		mu       sync.Mutex
		echoed   = map[string]bool{}
		polled   []string
		fetches  atomic.Int32
		hist     historyTexts
		logs     syncBuffer
		starts   atomic.Int32
		pollNums atomic.Int32
	)
	secretsOf := func(r *http.Request) []string {
		ss := scheme.secrets(r)
		mu.Lock()
		defer mu.Unlock()
		for _, s := range ss {
			echoed[s] = true
		}
		return ss
	}
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if fetches.Add(1) > 1 && pos.refresh {
			_, pass, _ := r.BasicAuth()
			_ = r.ParseForm()
			w.WriteHeader(http.StatusBadRequest)
			_, _ = fmt.Fprintf(w, `{"error":"invalid_client","error_description":"client secret %s%s was revoked"}`, pass, r.PostForm.Get("client_secret"))
			return
		}
		_, _ = fmt.Fprintf(w, `{"access_token":"at_%d_Vq8Rz2Lm5Np7Kx4Jw","token_type":"Bearer","expires_in":3600}`, fetches.Load())
	}))
	t.Cleanup(tokens.Close)
	api := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		secrets := secretsOf(r)
		if r.Method == http.MethodPost {
			starts.Add(1)
			pos.start(w, secrets[0])
			return
		}
		mu.Lock()
		polled = append(polled, r.URL.EscapedPath()+"?"+r.URL.RawQuery)
		mu.Unlock()
		pos.poll(w, r, secrets[0], int(pollNums.Add(1)))
	}))
	var cred activities.Credential
	if scheme.mtls != nil {
		var credFor func(*x509.Certificate) activities.Credential
		api.TLS, credFor = scheme.mtls(t)
		api.StartTLS()
		cred = credFor(api.Certificate())
	} else {
		api.Start()
		cred = scheme.cred(t, tokens.URL)
	}
	t.Cleanup(api.Close)

	var s sdktestsuite.WorkflowTestSuite
	s.SetLogger(log.NewStructuredLogger(slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	env := s.NewTestWorkflowEnvironment()
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, args converter.EncodedValues) {
		if info.ActivityType.Name == poll.ActivityName {
			var in poll.Monitor
			require.NoError(t, args.Get(&in))
			hist.value("poll input", in)
		} else {
			var in input.Input
			require.NoError(t, args.Get(&in))
			hist.value("start input", in)
		}
	})
	env.SetOnActivityCompletedListener(func(info *activity.Info, result converter.EncodedValue, err error) {
		hist.err(info.ActivityType.Name+" error", err)
		if err == nil && result != nil && result.HasValue() {
			var resp workflows.Response
			require.NoError(t, result.Get(&resp))
			hist.value(info.ActivityType.Name+" result", resp)
		}
	})
	cfg := activities.Config{
		Credentials:   map[string]activities.Credential{api.URL: cred},
		SealKeys:      keys,
		ResultHeaders: []string{"Location", "Request-Id", "Content-Type"},
	}
	testsuite.Register(t, env, &testsuite.Server{URL: api.URL}, cfg)
	env.RegisterWorkflow(followWorkflow)
	env.ExecuteWorkflow(followWorkflow, api.URL+"/transfers", workflows.FollowOptions{Timeout: time.Minute})
	var resp *workflows.Response
	err := env.GetWorkflowError()
	if err == nil {
		require.NoError(t, env.GetWorkflowResult(&resp))
		hist.value("workflow result", resp)
	}
	hist.err("workflow error", err)
	sc := bufio.NewScanner(strings.NewReader(logs.take()))
	sc.Buffer(nil, 1<<20)
	for i := 0; sc.Scan(); i++ {
		hist.add(fmt.Sprintf("log line %d", i), sc.Text()+"\n"+jsonText(sc.Bytes()))
	}

	require.Equal(t, int32(1), starts.Load(), "one start request")
	var secrets []string
	for s := range echoed {
		require.GreaterOrEqual(t, len(s), 8, "the API echoed a secret: %q", s)
		secrets = append(secrets, s)
	}
	require.NotEmpty(t, secrets)
	require.NotEmpty(t, hist.texts)
	for where, text := range hist.texts {
		if p := pieces(text, secrets...); len(p) > 0 {
			t.Errorf("%s holds pieces %q of a credential:\n%s", where, p, text)
		}
	}

	switch {
	case pos.sealed && keys == nil:
		f, ok := workflows.AsFailure(err)
		require.True(t, ok, "%v", err)
		assert.Equal(t, workflows.ErrTypeMonitorNotFollowed, f.Type)
		assert.True(t, f.OutcomeUnknown, "the operation goes on at the server")
		assert.Contains(t, f.Message, "Config.SealKeys")
	case pos.sealed:
		require.NoError(t, err)
		require.NotNil(t, resp.Accepted)
		assert.NotEmpty(t, resp.Accepted.Sealed, "the monitor travelled sealed")
		assert.Contains(t, resp.Accepted.Monitor+resp.Accepted.ResultURL+fmt.Sprint(polled), "operations")
		mu.Lock()
		last := polled[len(polled)-1]
		mu.Unlock()
		assert.NotContains(t, last, "REDACTED", "the poll requested the real monitor: %v", polled)
	case pos.name == "monitor status line":
		f, ok := workflows.AsFailure(err)
		require.True(t, ok, "%v", err)
		assert.Equal(t, workflows.ErrTypeOperationStillRunning, f.Type)
		assert.Contains(t, hist.String(), "malformed HTTP status code", "the poll's error says what was wrong")
	case pos.refresh:
		f, ok := workflows.AsFailure(err)
		require.True(t, ok, "%v", err)
		assert.Equal(t, workflows.ErrTypeCredentialUnavailable, f.Type)
		assert.Contains(t, f.Reason, "invalid_client")
	}
}

// TestSealedMonitorResumesAcrossKeyRotation: a monitor sealed by one
// worker's key resumes (FollowAccepted with the Failure's Accepted) on a
// worker that lists a new key first and the old one after it, polling the
// real URL; a worker that holds no key that opens it sends nothing and
// waits for one that does until following times out, saying which key it
// needs.
func TestSealedMonitorResumesAcrossKeyRotation(t *testing.T) {
	const secret = "sk_live_51HxQeKZ0aBcDeFgHiJkLmNo"
	k1, k2 := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	var done atomic.Bool
	var mu sync.Mutex
	var polled []string
	api := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			w.Header().Set("Location", "/operations/"+secret)
			w.WriteHeader(http.StatusAccepted)
			return
		}
		mu.Lock()
		polled = append(polled, r.URL.Path)
		mu.Unlock()
		if !done.Load() {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		_, _ = w.Write([]byte(`{"id":"tr_1"}`))
	})
	cfg := func(keys ...[]byte) activities.Config {
		return activities.Config{SealKeys: keys, Credentials: map[string]activities.Credential{api.URL: {Header: http.Header{"Authorization": {"Bearer " + secret}}}}}
	}
	// The first worker follows until its timeout: still running.
	env := testsuite.Register(t, nil, &testsuite.Server{URL: api.URL}, cfg(k1))
	env.RegisterWorkflow(followWorkflow)
	env.ExecuteWorkflow(followWorkflow, api.URL+"/transfers", workflows.FollowOptions{Timeout: 30 * time.Second})
	f, ok := workflows.AsFailure(env.GetWorkflowError())
	require.True(t, ok, "%v", env.GetWorkflowError())
	require.Equal(t, workflows.ErrTypeOperationStillRunning, f.Type)
	require.NotNil(t, f.Accepted)
	acc := *f.Accepted
	assert.NotEmpty(t, acc.Sealed)
	assert.Contains(t, acc.Monitor, "/operations/[REDACTED]")
	assert.Empty(t, pieces(fmt.Sprint(acc), secret))

	resume := func(keys ...[]byte) (*workflows.Response, error) {
		env := testsuite.Register(t, nil, &testsuite.Server{URL: api.URL}, cfg(keys...))
		env.RegisterWorkflow(workflows.FollowAccepted)
		env.ExecuteWorkflow(workflows.FollowAccepted, acc, workflows.FollowOptions{Timeout: time.Minute})
		if err := env.GetWorkflowError(); err != nil {
			return nil, err
		}
		var resp workflows.Response
		require.NoError(t, env.GetWorkflowResult(&resp))
		return &resp, nil
	}
	done.Store(true)
	mu.Lock()
	before := len(polled)
	mu.Unlock()
	// A worker without the key waits for one that holds it (a rotation
	// rolled out one worker at a time), until following times out:
	// resumable, never final.
	_, err := resume(k2)
	f, ok = workflows.AsFailure(err)
	require.True(t, ok, "%v", err)
	assert.Equal(t, workflows.ErrTypeOperationStillRunning, f.Type)
	assert.Contains(t, err.Error(), "sealed with key "+seal.ID(k1)+", which this worker does not hold")
	require.NotNil(t, f.Accepted)
	assert.Equal(t, acc.Sealed, f.Accepted.Sealed, "resumable with the same sealed monitor")
	mu.Lock()
	assert.Len(t, polled, before, "nothing polled without the key")
	mu.Unlock()

	resp, err := resume(k2, k1)
	require.NoError(t, err)
	assert.JSONEq(t, `{"id":"tr_1"}`, string(resp.Body))
	mu.Lock()
	assert.Equal(t, "/operations/"+secret, polled[len(polled)-1], "the real monitor was polled")
	mu.Unlock()
	assert.Empty(t, pieces(fmt.Sprint(*resp.Accepted), secret))
}
