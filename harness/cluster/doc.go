// Package cluster brings up, for tests, a production-like Temporal service on
// this machine and tears it down again: a throw-away PostgreSQL instance (from
// Debian's packages) holding the temporal and temporal_visibility databases,
// and a temporal-server process running the frontend, history, matching and
// worker services against it, all on free loopback ports.
//
// Unlike the SDK's test environment or the CLI's dev server (SQLite, one
// process), this is the shape of a real deployment: SQL persistence and
// visibility created with temporal-sql-tool, history sharded, services that
// talk to each other over gRPC and membership, and a namespace created through
// the operator API. Workers and other processes under test connect to
// [Cluster.FrontendHostPort] like they would to any Temporal service.
//
// The Temporal binaries (temporal-server, temporal-sql-tool and the temporal
// CLI) are built from the tools module (tools/go.mod pins their versions) by
// [BuildTools], reusing the Go build cache; PostgreSQL is installed, when its
// binaries are missing, by scripts/install-postgres.sh. A test usually calls
// [StartForTest], which does both and stops everything when the test ends:
//
//	c := cluster.StartForTest(t, cluster.Options{})
//	cl, err := client.Dial(client.Options{HostPort: c.FrontendHostPort(), Namespace: c.Namespace()})
//
// Every process it starts runs in its own process group and is killed with it
// by [Cluster.Stop]; every temporary directory it made is removed then.
// Nothing listens on anything but 127.0.0.1.
package cluster
