package bench

import (
	"bytes"
	"cmp"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"

	"github.com/google/pprof/profile"
)

// AttemptProfileFile is the CPU profile of Activities.Do's loop that the
// attempt section writes next to RESULTS.md.
const AttemptProfileFile = "do.cpu.pprof"

// attemptRoot is the frame whose subtree is one attempt of Do's work: the
// registered HTTP activity's function.
const attemptRoot = "activities.(*Activities).requestActivity"

// AttemptProfile is where one attempt of Activities.Do spends its CPU
// time: a CPU profile of doInActivity's loop, run once after the rounds
// (its time is not in them), summarized by the functions of Do's own work
// with the most CPU time, their callees included: the samples under the
// attempt (attemptRoot) but not under net/http's Client.Do, the exchange
// a raw POST makes too.
type AttemptProfile struct {
	// File is the profile's file name next to RESULTS.md ("" when it was
	// not written).
	File       string `json:"file,omitempty"`
	Iterations int    `json:"iterations"`
	// AttemptNs is the CPU time sampled under attemptRoot per attempt,
	// ClientNs its part under net/http's Client.Do.
	AttemptNs float64 `json:"attempt_ns"`
	ClientNs  float64 `json:"client_ns"`
	// Top are the functions of the rest, Do's own work, heaviest first.
	Top []ProfileEntry `json:"top"`
}

// clientDo is net/http's Client.Do, whose subtree a raw POST spends too.
const clientDo = "net/http.(*Client).Do"

// ProfileEntry is one function's CPU time in Do's own work, its callees
// included (pprof's cum), per attempt and as a share of the attempt's.
type ProfileEntry struct {
	Func  string  `json:"func"`
	Ns    float64 `json:"ns_per_op"`
	Share float64 `json:"share"`
}

// profileTop is how many functions AttemptProfile keeps.
const profileTop = 25

// profileAttempt runs doInActivity iters times under the CPU profiler,
// writes the profile to dir (when not "") and summarizes it.
func profileAttempt(iters int, dir string) (*AttemptProfile, error) {
	o, err := newOverhead()
	if err != nil {
		return nil, err
	}
	defer o.Close()
	// Warm the connection pool and caches first, unprofiled.
	if err := o.doInActivity(&meter{}, 1000); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := pprof.StartCPUProfile(&buf); err != nil {
		return nil, err
	}
	err = o.doInActivity(&meter{}, iters)
	pprof.StopCPUProfile()
	if err != nil {
		return nil, err
	}
	res, err := summarizeProfile(buf.Bytes(), iters)
	if err != nil {
		return nil, err
	}
	if dir != "" {
		if err := os.WriteFile(filepath.Join(dir, AttemptProfileFile), buf.Bytes(), 0o644); err != nil {
			return nil, err
		}
		res.File = AttemptProfileFile
	}
	return res, nil
}

// summarizeProfile returns the functions with the most CPU time under
// attemptRoot, outside clientDo, in the CPU profile data of iters attempts.
func summarizeProfile(data []byte, iters int) (*AttemptProfile, error) {
	prof, err := profile.ParseData(data)
	if err != nil {
		return nil, err
	}
	vi := len(prof.SampleType) - 1 // cpu nanoseconds, after the sample count
	cum := map[string]int64{}
	var total, client int64
	for _, s := range prof.Sample {
		// Frames from the leaf up; the attempt's are those below the root.
		var frames []string
		found := false
		for _, loc := range s.Location {
			// Inlined calls come first in a location's lines.
			for _, l := range loc.Line {
				if l.Function == nil {
					continue
				}
				if strings.HasSuffix(l.Function.Name, attemptRoot) {
					found = true
					break
				}
				frames = append(frames, l.Function.Name)
			}
			if found {
				break
			}
		}
		if !found {
			continue
		}
		v := s.Value[vi]
		total += v
		if slices.Contains(frames, clientDo) {
			client += v
			continue
		}
		seen := map[string]bool{}
		for _, f := range frames {
			if !seen[f] {
				seen[f] = true
				cum[f] += v
			}
		}
	}
	res := &AttemptProfile{Iterations: iters, AttemptNs: float64(total) / float64(iters), ClientNs: float64(client) / float64(iters)}
	for f, v := range cum {
		res.Top = append(res.Top, ProfileEntry{Func: shortFunc(f), Ns: float64(v) / float64(iters), Share: float64(v) / float64(total)})
	}
	slices.SortFunc(res.Top, func(a, b ProfileEntry) int {
		return cmp.Or(cmp.Compare(b.Ns, a.Ns), strings.Compare(a.Func, b.Func))
	})
	if len(res.Top) > profileTop {
		res.Top = res.Top[:profileTop]
	}
	return res, nil
}

// shortFunc drops this module's path from a function's name.
func shortFunc(name string) string {
	return strings.TrimPrefix(name, "github.com/idemhttp/temporal-idempotent-http/")
}
