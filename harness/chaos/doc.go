// Package chaos is the chaos campaign: many idempotent operations on the
// PostgreSQL-backed Temporal cluster (harness/cluster) while
// everything between them and their API fails in turn, and a check that
// every operation still ended exactly once with its full answer.
//
// One campaign ([Run]) is the cluster, three worker processes (the worker
// binary, as a user runs it), the reference idempotent API
// (testsuite.Server) behind Toxiproxy, Shopify's fault proxy (a separate
// process, toxiproxy-server, built from tools/go.mod and driven by its
// HTTP API), and N operations: each the ready workflow under its own
// business workflow ID, calling the API through the proxy. A seeded
// [Schedule] says when each operation starts and when each fault comes:
//
//   - toxics added and removed through the run (reset_peer, latency,
//     bandwidth, timeout, limit_data, slicer), on a share of the
//     connections, upstream or downstream;
//   - one worker SIGKILLed every 20 s and started again;
//   - temporal-server SIGKILLed once and started again on the same
//     configuration, ports and store;
//   - the API down for 30 s once: the proxy disabled, so connections are
//     refused and the ones open are cut, as when the API's host or its
//     load balancer is gone (a real outage; a 503 would be an answer from
//     a live server, which the contention and outage benchmarks cover).
//
// At the end [Verify] compares every workflow's result with what the API
// stored: one record per key, no duplicate, no answer lost (the result's
// body is the stored response byte for byte), none failed. The requests
// the API received, per success, are the campaign's cost.
//
// Config.Way plays an API that ignores idempotency keys
// (testsuite.PlainDialect, a lookup on the body member client_reference)
// with each operation's key in its body (KeyInBody), and Plan.AnswerCuts
// makes every toxic one that loses the answer after the API did the work
// (reset_peer, timeout and limit_data, downstream), so attempts end with
// an unknown outcome. The ways: [WayPlain], retries as against an API
// with keys, every lost answer a duplicate (the baseline, which must show
// some); [WayLookup], Reconcile.Lookup before sending again; and
// [WayAtMostOnce], Reconcile.AtMostOnce: the activity pauses itself, and
// an operator in the campaign lists the waiting calls with the Temporal
// CLI ([PausedQuery]), asks the API directly and completes the activity
// with the record found or unpauses it ([OperatorOptions],
// [OperatorReport]). [Result.Problems] says where a campaign fell short of
// its way's promise. Config.KeyIn puts the key of the keyed way (the
// reference server honouring keys, [WayKeyed]) in the body or the query,
// where the server reads it.
//
// The same seed gives the same schedule; what the faults hit (which
// request, which attempt) depends on timing and is not replayed.
package chaos
