// Package compose holds the tests of the repository's docker-compose.yml and
// Dockerfile: the file is loaded by compose-go, the loader Docker Compose v2
// itself uses (schema validation, interpolation, the consistency checks of
// depends_on, volumes and networks), and the loaded project is checked
// against the topology that internal/cluster tests without Docker.
//
// Run with `make compose-test` (part of `make test`).
package compose
