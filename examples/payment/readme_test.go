package payment_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestREADMEShowsThisCode: every region of this package's code marked
// "README: <name>" stands in the README word for word, so the README's
// workflow, worker and test are the code that compiles and runs here.
func TestREADMEShowsThisCode(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	region := regexp.MustCompile(`(?s)// README: (\w+)\n(.*?)// README: end`)
	found := 0
	for _, file := range []string{"payment.go", "payment_test.go"} {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range region.FindAllSubmatch(src, -1) {
			found++
			code := strings.TrimSpace(string(m[2]))
			if !strings.Contains(string(readme), code) {
				t.Errorf("README.md does not show the %q region of %s word for word:\n%s", m[1], file, code)
			}
		}
	}
	if found != 3 {
		t.Errorf("found %d README regions, want 3 (workflow, worker, test)", found)
	}
}
