package host

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
)

// FuzzOriginsPlaces: in any document toml.Decode accepts, every key it
// decodes has a place, and the file holds that key there (its name, or
// the quote that starts it), so that an error's FILE:LINE:COLUMN points at
// the key it names.
func FuzzOriginsPlaces(f *testing.F) {
	example, err := os.ReadFile(filepath.Join("testdata", "origins.toml"))
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{
		string(example),
		"a.b . \"c.d\" = { e = 1, 'f g' = [ { h = \"\"\"x\n\"\"\"\"\" } ] } # c\n[x]\ny = 1979-05-27 07:32:00Z\n",
		"\ufeff[ t . 'u' ]\r\nk = '''\r\n]'''\r\n[[arr]]\nv = \"\\\"\\u00e9\"\n[[arr]]\nv = 2\n",
		"[origin.\"https://x.example\".headers]\nAuthorization = { env = \"K\", prefix = \"Bearer \" }\n\"X \\\"Y\\\"\" = { file = \"/f\" }\n",
		"x = [\n  1, # one\n  2,\n]\n[y.z]\n[y]\nw = true\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		text = strings.TrimPrefix(text, "\ufeff")
		var doc map[string]any
		if _, err := toml.Decode(text, &doc); err != nil {
			return
		}
		p := locate(text)
		lines := strings.SplitAfter(text, "\n")
		var visit func(path []string, v any)
		visit = func(path []string, v any) {
			switch v := v.(type) {
			case map[string]any:
				for k, x := range v {
					kp := append(append([]string(nil), path...), k)
					pl, own := p.find(kp)
					if !own {
						t.Fatalf("no place for %q in %q", kp, text)
					}
					if pl.line > len(lines) || pl.col > len(lines[pl.line-1]) {
						t.Fatalf("place %d:%d of %q is not in the file %q", pl.line, pl.col, kp, text)
					}
					at := lines[pl.line-1][pl.col-1:]
					if !strings.HasPrefix(at, k) && !strings.HasPrefix(at, `"`) && !strings.HasPrefix(at, "'") {
						t.Fatalf("place %d:%d of %q holds %q, not the key, in %q", pl.line, pl.col, kp, at, text)
					}
					visit(kp, x)
				}
			case []map[string]any:
				for _, x := range v {
					visit(path, x)
				}
			case []any:
				for _, x := range v {
					visit(path, x)
				}
			}
		}
		visit(nil, doc)
	})
}
