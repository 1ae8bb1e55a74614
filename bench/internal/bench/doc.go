// Package bench measures the retry strategy and the HTTP activity; cmd/bench
// is its command. [Run] runs the sections listed in [Sections]:
//
//   - sim: contention in virtual time, a discrete-event simulation with
//     Brooker's own OCC model ("Exponential Backoff And Jitter", AWS
//     Architecture Blog, 2015) and the reference server's capacity model;
//   - overhead: one attempt of Activities.Do against a raw net/http POST
//     (also as go test benchmarks);
//   - retryafter: the gap a Retry-After (or a short interval) leaves between
//     two attempts on a Temporal dev server, against a time.Sleep loop;
//   - throughput: workflows per second of the ready workflow against a
//     minimal one on the dev server;
//   - contention: many workflows started at once on the dev server against
//     a capacity-limited reference server, for Temporal's own deterministic
//     backoff and the activity's jitter strategies;
//   - outage: the same workflows against an API that is down for a while,
//     then recovers, beside its simulation (with adaptive admission's
//     circuit breaker on and off);
//   - peers: what a user would write instead, plain activities retrying with
//     go-retryablehttp and failsafe-go (dependencies of this module alone, not
//     of the library): their
//     per-attempt overhead beside Activities.Do's, and their contention run;
//   - longrunning: following long-running operations (Request.Follow) on
//     the dev server, the reference server in a process of its own: the
//     gap between a monitor's Retry-After (or the poll backoff) and the
//     next poll, polls per operation, and 1000 operations waiting at once
//     on one worker against the same worker idle and holding as many
//     workflows waiting on a timer (goroutines, heap, RSS, CPU);
//   - webhooks: the webhook receiver (webhooks.NewReceiver): verified
//     events per second on one core per scheme with Temporal stubbed out,
//     against a bare body read and HMAC-SHA256 alone; its latency to the
//     ready workflows awaiting a webhook on the dev server; and the two
//     delivery mechanisms, Update and Signal (and SignalWithStart), to a
//     running workflow: latency, throughput, history events per delivery
//     and per duplicate;
//   - actions: Temporal actions per call (what Temporal Cloud bills) on a
//     dev server of its own started with --metrics-port: the server's own
//     action counter and an estimate by Cloud's rules from the histories
//     (harness/actions), for the ready workflow on a worker wired by
//     package host (the shared rate on) against a plain activity in a
//     minimal workflow: a first try, retries, a followed 202, a webhook
//     wait, a lookup-reconciled retry; and the shared rate's own actions
//     (the governor's, the reports) idle and under a steady stream on one
//     and two workers;
//   - fairness: Temporal's fairness keys (issue 42, item 5) on a dev
//     server of its own with matching.enableFairness and one partition
//     per task queue: two origins of different capacities, each
//     workflow's call on one task queue with its origin as the fairness
//     key and one default per-key rate (at either capacity, and weighted
//     in their ratio), against a task queue per origin with the shared
//     rate (a worker wired by package host); then one origin down for
//     30 s, both ways;
//   - scale: many operations waiting at once (issue 42, item 6) on the
//     PostgreSQL-backed cluster with three worker processes (the bench
//     command as [ServeScaleWorker]: the worker binary's wiring and a
//     plain baseline): the ready workflow's uncontended calls per second
//     against a plain activity's on the same workers; then, by default,
//     10,000 operations started at once, half following a 202 and half
//     awaiting a webhook: worker memory per waiting operation,
//     temporal-server's and PostgreSQL's CPU, the time to start and to
//     complete, and every key's work done once at the API;
//   - chaos: the chaos campaign of harness/chaos at full size
//     (1000 operations, three workers, Toxiproxy's toxics, worker and
//     server SIGKILLs, the API down 30 s) on the PostgreSQL-backed
//     cluster: every operation exactly once with its full answer, and the
//     requests it cost ([WriteChaosSVG] plots them);
//   - unkeyed: the same campaign with answers cut after the API's work,
//     against the reference server without keys, three ways (plain
//     retries, the baseline; a lookup; at most once, an operator in the
//     run deciding with the Temporal CLI): duplicates, lost operations,
//     the calls that waited, listed and settled, requests per success;
//     and against the server with keys, the key in the body and in the
//     query (one record per key).
//
// The dev-server sections use the Temporal CLI that [EnsureCLI] finds or
// builds. [Results] is what a run measured (results.json); [WriteMarkdown],
// [WriteContentionSVG] and [WriteOutageSVG] report it. The package's tests are fast and
// deterministic (seeded simulations, report rendering, a miniature overhead
// run, the peer activities in Temporal's test environment): nothing here
// starts a dev server under plain `go test`.
package bench
