package credential

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestHeaderFileInPlaceWriteSettles: a key file rewritten in place (the
// same inode: truncated, then written, maybe in pieces) is not read while
// its modification time is under a second old, so that half of a new key
// is never sent; a file renamed over it is read at once.
func TestHeaderFileInPlaceWriteSettles(t *testing.T) {
	old := checkEvery
	checkEvery = 0
	t.Cleanup(func() { checkEvery = old })
	path := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(path, []byte("ak_live_first_0123456789"), 0o600); err != nil {
		t.Fatal(err)
	}
	src, err := NewHeaderFiles(map[string]string{"X-Api-Key": path}, &secrets{}, func(string, ...any) {}, Names{})
	if err != nil {
		t.Fatal(err)
	}
	hf := src.(*headerFiles)
	written := time.Now().Truncate(time.Second).Add(time.Minute) // after NewHeaderFiles
	// Half of the new key, written in place.
	if err := os.WriteFile(path, []byte("ak_live_second_98"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, written, written); err != nil {
		t.Fatal(err)
	}
	send := func(at time.Time) string {
		hf.now = func() time.Time { return at }
		req, _ := http.NewRequest(http.MethodPost, "https://api.example/x", nil)
		if err := src.Apply(context.Background(), req, nil); err != nil {
			t.Fatal(err)
		}
		return req.Header.Get("X-Api-Key")
	}
	if got := send(written.Add(100 * time.Millisecond)); got != "ak_live_first_0123456789" {
		t.Fatalf("a file written in place 100 ms ago was read: sent %q", got)
	}
	if err := os.WriteFile(path, []byte("ak_live_second_9876543210"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, written, written.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if got := send(written.Add(3 * time.Second)); got != "ak_live_second_9876543210" {
		t.Fatalf("a settled file was not read: sent %q", got)
	}
}
