// Package compose holds the tests of the repository's docker-compose.yml,
// its webhooks overlay docker-compose.webhooks.yml and the Dockerfile: the
// files are loaded by compose-go, the loader Docker Compose v2 itself uses
// (schema validation, interpolation, the consistency checks of depends_on,
// volumes and networks); the loaded project is checked against the
// topology that harness/cluster tests without Docker, and its commands
// against the binaries built from this repository.
//
// Run with `make compose-test` (part of `make test`).
package compose
