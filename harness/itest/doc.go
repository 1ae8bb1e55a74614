// Package itest holds helpers for tests that run real processes: a
// Temporal CLI dev server, the worker binary, the reference API (demoapi)
// and scripts.
//
// It covers the four chores such tests share:
//
//   - Building: [Build] compiles the Temporal CLI from the tools module
//     (tools/go.mod pins its version) and this module's commands with
//     `go build`, so a warm Go build cache makes it a matter of linking and a
//     fresh machine needs no download beyond the module proxy. A test
//     package builds once, in its TestMain, into a temporary directory.
//     [BuildTools] builds other tools of the tools module (the Temporal
//     server, say). Every build into a directory holds its lock
//     ([LockBuildDir]), so test binaries sharing <repo>/bin take turns.
//   - Ports: [FreePort] and [FreePorts] pick loopback ports the kernel will
//     not hand out again for a while; [FreePortsIn] picks them in a range.
//   - Processes: [Start] runs a program in its own process group with its
//     output captured; [StartT] does it for a test, stops the program when
//     the test ends and writes its output to the test log if the test failed
//     (ITEST_VERBOSE=1 streams every line to stderr as well), and
//     [Spec.LogPath] appends it to a file too ([FileTail] reads its end).
//     [Process.Stop] stops the group gracefully and then with SIGKILL;
//     [Process.Kill] kills it at once, as a crash would. On Linux a process
//     also dies with the test binary (parent-death signal).
//   - Readiness: [StartDevServer] (the SDK's testsuite.StartDevServer on
//     free ports, its output in a log file) returns once the dev server
//     answers; [StartRestartableDevServer] runs one as a [Process] of ours
//     with its state in a SQLite file, which a test can kill and start
//     again on the same file and port;
//     [WaitHTTP] waits for an HTTP endpoint such as demoapi's /healthz;
//     [WaitForPollers] waits until a worker polls its task queue; [Eventually]
//     polls any condition.
//
// A test package typically builds and starts the shared pieces in TestMain
// and isolates its tests by task queue and workflow ID:
//
//	func TestMain(m *testing.M) {
//		dir, _ := os.MkdirTemp("", "bin-")
//		bins, err := itest.Build(ctx, dir, log.Printf)
//		srv, err := itest.StartDevServer(ctx, itest.DevServerOptions{CLI: bins.Temporal})
//		code := m.Run()
//		srv.Stop()
//		os.RemoveAll(dir)
//		os.Exit(code)
//	}
//
// Nothing is ever skipped: a missing tool or a build failure fails the tests
// with the command that failed and its output.
package itest
