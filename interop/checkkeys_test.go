package interop_test

import (
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/idemhttp/temporal-idempotent-http/harness/interop"
	"github.com/idemhttp/temporal-idempotent-http/harness/itest"
)

// checkKeysReport is what `starter check-keys --json` prints, the fields
// the test reads (cmd/starter's checkReport).
type checkKeysReport struct {
	Key     string `json:"key"`
	Verdict string `json:"verdict"`
	Reason  string `json:"reason"`
	Second  *struct {
		Status   int  `json:"status"`
		Replayed bool `json:"replayed"`
	} `json:"second"`
	ChangedBody *struct {
		Outcome string `json:"outcome"`
		Answer  *struct {
			Status int `json:"status"`
		} `json:"answer"`
	} `json:"changed_body"`
	ExitCode int `json:"exit_code"`
}

// TestCheckKeys runs the starter's check-keys, the binary, against the
// npm idempotency middlewares: each honours keys (a replay, marked by
// node-idempotency, byte for byte by express-idempotency) and refuses the
// key reused with a changed body (422 and 417); told to read another
// header, each processes the check's requests as unkeyed: a second
// record.
func TestCheckKeys(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	if err := itest.BuildCommands(ctx, dir, "./cmd/starter"); err != nil {
		t.Fatal(err)
	}
	starter := filepath.Join(dir, "starter")
	for _, tc := range []struct {
		name, server string
		opts         interop.Options
		verdict      string
		code         int
		replayed     bool // the second answer is marked Idempotent-Replayed
		records      int
		changed      int // the changed body's status (0: not sent)
	}{
		{name: "express-idempotency", server: interop.ExpressIdempotency,
			verdict: "replay", code: 0, records: 1, changed: 417},
		{name: "node-idempotency", server: interop.NodeIdempotency,
			verdict: "replay", code: 0, replayed: true, records: 1, changed: 422},
		{name: "express-idempotency reading X-Request-Key", server: interop.ExpressIdempotency,
			opts:    interop.Options{KeyHeader: "X-Request-Key"},
			verdict: "second_record", code: 3, records: 2},
		{name: "node-idempotency reading X-Request-Key, keys optional", server: interop.NodeIdempotency,
			opts:    interop.Options{KeyHeader: "X-Request-Key", Env: []string{"ENFORCE_KEY=false"}},
			verdict: "second_record", code: 3, records: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := interop.Start(t, tc.server, tc.opts).Tenant(uniqueName(t, "t"))
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, starter, "check-keys", "--json", "--url", srv.PaymentsURL(), "--body", `{"amount":4200,"currency":"EUR"}`)
			out, err := cmd.Output()
			code := 0
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				code = exit.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			var rep checkKeysReport
			if err := json.Unmarshal(out, &rep); err != nil {
				t.Fatalf("check-keys printed %q: %v", out, err)
			}
			t.Logf("check-keys: %s (exit %d): %s", rep.Verdict, code, rep.Reason)
			if rep.Verdict != tc.verdict || code != tc.code || rep.ExitCode != code {
				t.Errorf("verdict %s, exit %d (report: %d), want %s, exit %d; %s", rep.Verdict, code, rep.ExitCode, tc.verdict, tc.code, out)
			}
			if rep.Second == nil || rep.Second.Replayed != tc.replayed {
				t.Errorf("second answer %+v, want replay marker %v", rep.Second, tc.replayed)
			}
			switch cb := rep.ChangedBody; {
			case tc.changed == 0 && cb != nil:
				t.Errorf("a third request after %s: %+v", rep.Verdict, cb)
			case tc.changed != 0 && (cb == nil || cb.Outcome != "refused" || cb.Answer == nil || cb.Answer.Status != tc.changed):
				t.Errorf("changed body: %s, want refused with %d", out, tc.changed)
			}
			st := srv.StatsT(t)
			wantRequests := 2
			if tc.changed != 0 {
				wantRequests = 3
			}
			if st.Records != tc.records || st.Requests != wantRequests {
				t.Errorf("server: %d requests (%s), %d records; want %d requests, %d records", st.Requests, st.Statuses(), st.Records, wantRequests, tc.records)
			}
		})
	}
}
