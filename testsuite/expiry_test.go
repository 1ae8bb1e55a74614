package testsuite

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestSweepFreesExpiredKeys: once every key is past its window (done) or its
// lock (never done), the next request's sweep leaves only the live keys in
// the map, and the records keep no request body of an expired key: memory
// follows the live keys, not every key ever seen.
func TestSweepFreesExpiredKeys(t *testing.T) {
	const done, stuck = 100, 8
	var mu sync.Mutex
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	release := make(chan struct{})
	s := NewServer(Options{Now: clock, LockTimeout: time.Hour, Work: func(r *http.Request, _ []byte) (int, []byte) {
		if strings.HasPrefix(r.Header.Get("Idempotency-Key"), "stuck") {
			<-release
		}
		return http.StatusCreated, nil
	}})
	big := []byte(`{"blob":"` + strings.Repeat("x", 32<<10) + `"}`)
	serve := func(key string, body []byte) int {
		r := httptest.NewRequest(http.MethodPost, "/payments", bytes.NewReader(body))
		r.Header.Set("Idempotency-Key", key)
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		return w.Code
	}
	entries := func() int { s.mu.Lock(); defer s.mu.Unlock(); return len(s.entries) }

	for i := range done {
		if code := serve("k"+strconv.Itoa(i), big); code != http.StatusCreated {
			t.Fatalf("key %d: status %d", i, code)
		}
	}
	var wg sync.WaitGroup
	for i := range stuck {
		wg.Go(func() { serve("stuck"+strconv.Itoa(i), big) })
	}
	deadline := time.Now().Add(5 * time.Second)
	for entries() != done+stuck {
		if time.Now().After(deadline) {
			t.Fatalf("entries = %d, want %d", entries(), done+stuck)
		}
		time.Sleep(time.Millisecond)
	}
	for i, rec := range s.Records() {
		if len(rec.Request) != len(big) {
			t.Fatalf("record %d keeps %d request bytes while its key is live, want %d", i, len(rec.Request), len(big))
		}
	}

	advance(2 * time.Hour) // past the stuck locks, inside the window
	serve("trigger-1", []byte(`{}`))
	if got := entries(); got != done+1 {
		t.Errorf("after the locks expired: %d entries, want %d (the done keys and the new one)", got, done+1)
	}
	advance(defaultWindow)
	serve("trigger-2", []byte(`{}`))
	if got := entries(); got != 1 {
		t.Errorf("after the window: %d entries, want 1 (the new key)", got)
	}
	if got, want := s.Stats().Expired, done+stuck+1; got != want {
		t.Errorf("Stats().Expired = %d, want %d", got, want)
	}

	close(release) // the stuck work ends late: not stored, its record trimmed
	wg.Wait()
	if got := entries(); got != 1 {
		t.Errorf("after the late work: %d entries, want 1", got)
	}
	recs := s.Records()
	if len(recs) != done+stuck+2 {
		t.Fatalf("%d records, want %d", len(recs), done+stuck+2)
	}
	for _, rec := range recs {
		live := rec.IdempotencyKey == "trigger-2"
		if kept := rec.Request != nil; kept != live {
			t.Errorf("record %s of key %s keeps its request body: %v, want %v", rec.ID, rec.IdempotencyKey, kept, live)
		}
	}
}
