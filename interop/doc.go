// Package interop holds the interop suite: it runs the HTTP activity, in
// Temporal's test environment and on a Temporal dev server, against
// idempotency servers written outside this project (npm middlewares,
// installed by scripts/install-interop.sh into interop/node) and against the
// reference server of package testsuite in each of its dialects, through
// the same scenarios. SERVERS.md says exactly what each server answers; the
// suite prints the table scenario × server → outcome, requests, records
// (`make interop`).
//
// The package has tests only.
package interop
