// A module of its own for golang.org/x/exp/cmd/apidiff, the Go team's API
// compatibility checker (make apidiff), so that its dependencies stay out
// of the library's go.mod and of the Temporal tools' (../go.mod).
module github.com/idemhttp/temporal-idempotent-http/tools/apidiff

go 1.26.0

tool golang.org/x/exp/cmd/apidiff

require (
	golang.org/x/exp v0.0.0-20261113113407-e3970619a1a4 // indirect
	golang.org/x/mod v0.42.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/tools v0.52.1-0.20261106145633-d407941a339a // indirect
)
