// Package integration holds the tests that run this module against a real
// Temporal server: a Temporal CLI dev server built from tools/go.mod, the
// worker and demoapi binaries built from this module, and the demo script.
//
// They run with plain `go test ./...`; nothing is skipped. TestMain builds the
// binaries once (a cold Go build cache spends minutes on the CLI; a warm one
// seconds) and starts one dev server for the package; each test has its own
// task queue, workflow IDs and reference API, so they run in parallel. Every
// wait on Temporal's timers and on Retry-After is real.
//
// ITEST_VERBOSE=1 streams the output of every process; SOAK_N sets the
// number of workflows of TestLoad (default 200), e.g. for `make soak`:
//
//	SOAK_N=1000 go test ./integration -run TestLoad -v -count=1
package integration
