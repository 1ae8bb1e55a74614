# Every target builds what it needs with the Go toolchain alone; the Temporal
# CLI and server are pinned Go tools in tools/go.mod, built into bin/.
SHELL := /bin/bash
GO    ?= go

.PHONY: test check unit fuzz demo soak bench cluster-test bin tidy

## test: the test command: gofmt, go vet and every test with -race, the
## integration tests on a real Temporal dev server included.
test: check
	$(GO) test -race -count=1 -timeout 60m ./...

## check: formatting and vet only.
check:
	@unformatted="$$(gofmt -l $$(git ls-files '*.go'))"; \
	  if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...

## unit: the fast tests, without real servers.
unit:
	$(GO) test -race -count=1 ./activities/... ./workflows/... ./testsuite/... ./internal/cliutil/... ./worker/... ./cmd/...

## fuzz: fuzz the Retry-After parser for FUZZTIME (default 30s).
FUZZTIME ?= 30s
fuzz:
	$(GO) test ./activities -run '^$$' -fuzz FuzzParseRetryAfter -fuzztime $(FUZZTIME)

## bin: build the Temporal CLI, the worker, the starter and the demo API into bin/.
bin:
	$(GO) build -C tools -o ../bin/temporal github.com/temporalio/cli/cmd/temporal
	$(GO) build -o bin/ ./worker ./cmd/starter ./cmd/demoapi

tidy:
	$(GO) mod tidy
	cd tools && $(GO) mod tidy
