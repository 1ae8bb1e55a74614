package serverflag

import "testing"

// FuzzParseScript: a script either parses into steps with statuses in
// 100–599, or fails with an error; it never panics.
func FuzzParseScript(f *testing.F) {
	for _, s := range []string{"503,429:1,201", "", ",", "400", "429:Wed, 21 Oct 2015 07:28:00 GMT", "abc", "99", "600:x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		steps, err := ParseScript(s)
		if err != nil {
			return
		}
		for _, st := range steps {
			if st.Status < 100 || st.Status > 599 {
				t.Fatalf("ParseScript(%q) gave status %d", s, st.Status)
			}
		}
	})
}
