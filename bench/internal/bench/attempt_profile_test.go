package bench

import (
	"strings"
	"testing"
)

// TestProfileAttemptFindsDoWork: the attempt section's profile of Do
// samples the attempt and names the functions under it, heaviest first,
// and RESULTS.md shows them.
func TestProfileAttemptFindsDoWork(t *testing.T) {
	ap, err := profileAttempt(20000, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if ap.AttemptNs <= 0 || len(ap.Top) == 0 || ap.File != AttemptProfileFile {
		t.Fatalf("profile %+v", ap)
	}
	for i, e := range ap.Top {
		if e.Share <= 0 || e.Share > 1 || i > 0 && e.Ns > ap.Top[i-1].Ns {
			t.Fatalf("entry %d %+v out of order or share", i, e)
		}
	}
	var b strings.Builder
	writeAttemptProfile(&b, ap)
	if !strings.Contains(b.String(), "| `"+ap.Top[0].Func+"` |") {
		t.Fatalf("RESULTS.md lacks the top function:\n%s", b.String())
	}
	t.Logf("%.1f µs per attempt; top: %+v", ap.AttemptNs/1e3, ap.Top[:min(8, len(ap.Top))])
}
