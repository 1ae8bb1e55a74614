// Package bench measures the retry strategy and the HTTP activity (issue 4):
//
//   - Contention after Marc Brooker's "Exponential Backoff And Jitter" (AWS
//     Architecture Blog, 2015): [RunContention] starts many workflows at once
//     on a real Temporal dev server against a capacity-limited reference
//     server, for Temporal's own deterministic backoff and the activity's
//     jitter strategies; [Simulate] is the same contention in virtual time,
//     with Brooker's own OCC model ([BrookerConfig]) and the reference
//     server's capacity model ([ContentionParams.SimConfig]).
//   - Per-attempt overhead: [Overhead] benchmarks Activities.Do against a raw
//     net/http POST (go test -bench, or [RunOverhead]).
//   - Retry spacing: [RunGap] and [RunSleepFloor] measure the gap a
//     Retry-After (or a short interval) leaves on the dev server.
//   - Throughput: [RunThroughput] compares the ready workflow with a minimal one.
//
// [Run] runs them all and [WriteMarkdown] and [WriteContentionSVG] report
// them; cmd/bench is the command. The package's tests are fast and
// deterministic (seeded simulations, report rendering): nothing here starts
// a dev server under plain `go test`.
package bench
