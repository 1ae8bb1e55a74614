package credential

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// TestOAuth2ClientSecretFileRotation: the client secret of
// OAuth2Options.SecretFile is read again when the file changes, at a token
// request: half of a secret written in place is never sent (it is read
// once a second old), a settled or renamed file is, and each new secret
// is told to the redactor (as written and as Basic credentials) before
// the token request that carries it. A refusal of the client, answered
// from memory for 30 s, ends as soon as the file holds a new secret; a
// file that breaks keeps the last secret, logged once.
func TestOAuth2ClientSecretFileRotation(t *testing.T) {
	const (
		first  = "cs_first_0123456789"
		second = "cs_second_9876543210"
		third  = "cs_third_abcdefghij"
	)
	var mu sync.Mutex
	var sent []string
	refused := map[string]bool{}
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, secret, _ := r.BasicAuth()
		mu.Lock()
		defer mu.Unlock()
		sent = append(sent, secret)
		w.Header().Set("Content-Type", "application/json")
		if refused[secret] || !strings.HasPrefix(secret, "cs_") || len(secret) < len(first) {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"error":"invalid_client"}`)
			return
		}
		n++
		fmt.Fprintf(w, `{"access_token":"at_secret_file_%04d_abcdef","token_type":"Bearer","expires_in":60}`, n)
	}))
	t.Cleanup(srv.Close)

	path := filepath.Join(t.TempDir(), "client-secret")
	if err := os.WriteFile(path, []byte(first+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{t: time.Now()}
	r := &recRedactor{}
	var logs []string
	cfg := &clientcredentials.Config{ClientID: testClientID, TokenURL: srv.URL, AuthStyle: oauth2.AuthStyleInHeader}
	src, err := NewOAuth2With(cfg, &http.Client{Timeout: 10 * time.Second}, r, OAuth2Options{SecretFile: path, Logf: func(msg string, kv ...any) {
		logs = append(logs, fmt.Sprint(msg, kv))
	}})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ClientSecret != "" {
		t.Fatal("NewOAuth2With modified cfg")
	}
	s := src.(*oauth2Source)
	s.now, s.secret.now = clock.now, clock.now

	// writeAt writes the file (in place, or renamed over it) with the
	// modification time at.
	writeAt := func(v string, at time.Time, renamed bool) {
		t.Helper()
		target := path
		if renamed {
			target = path + ".new"
		}
		if err := os.WriteFile(target, []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(target, at, at); err != nil {
			t.Fatal(err)
		}
		if renamed {
			if err := os.Rename(target, path); err != nil {
				t.Fatal(err)
			}
		}
	}
	// fetch applies the source, the token held having expired, and
	// returns the secret the token request sent, or the error.
	fetch := func() (string, error) {
		t.Helper()
		mu.Lock()
		before := len(sent)
		mu.Unlock()
		req, _ := http.NewRequest(http.MethodPost, "https://api.example/pay", nil)
		err := s.Apply(context.Background(), req, nil)
		mu.Lock()
		defer mu.Unlock()
		if len(sent) == before {
			return "", fmt.Errorf("no token request (%v)", err)
		}
		return sent[len(sent)-1], err
	}
	basic := func(secret string) string {
		return clientSecrets(&clientcredentials.Config{ClientID: testClientID, ClientSecret: secret})[1]
	}

	for _, step := range []struct {
		name    string
		advance time.Duration // the clock, before do: 2 min expires the token held
		do      func()
		want    string // the secret the token request sent
		fail    bool   // the token request is refused
	}{
		{"the file as read at the start", 0, func() {}, first, false},
		{"half of a secret written in place now: not read", 2 * time.Minute, func() {
			writeAt(second[:9], clock.now(), false)
		}, first, false},
		{"the whole secret, written in place 2 s ago: read", 2 * time.Minute, func() {
			writeAt(second, clock.now().Add(-2*time.Second), false)
		}, second, false},
		{"the file deleted: the last secret is kept", 2 * time.Minute, func() {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		}, second, false},
		{"the server refuses the secret", 2 * time.Minute, func() {
			writeAt(second, clock.now(), true)
			mu.Lock()
			refused[second] = true
			mu.Unlock()
		}, second, true},
		{"a new secret renamed over it ends the refusal's 30 s wait", 2 * time.Second, func() {
			writeAt(third, clock.now(), true)
		}, third, false},
	} {
		clock.advance(step.advance)
		step.do()
		got, err := fetch()
		if got != step.want || (err != nil) != step.fail {
			t.Fatalf("%s: the token request sent %q (error %v), want %q (refused %v)", step.name, got, err, step.want, step.fail)
		}
		if err != nil && strings.Contains(err.Error(), step.want[3:11]) {
			t.Fatalf("%s: the error holds the secret: %v", step.name, err)
		}
	}
	for _, sec := range []string{first, second, third} {
		if !r.has(sec) || !r.has(basic(sec)) {
			t.Errorf("the secret %s… (or its Basic form) was not told to the redactor", sec[:6])
		}
	}
	if r.has(second[:9]) {
		t.Error("half a secret was told to the redactor: it was read")
	}
	if len(logs) != 1 || !strings.Contains(logs[0], path) {
		t.Errorf("logs %q, want one line about the deleted file", logs)
	}
}
