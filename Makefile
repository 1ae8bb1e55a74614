# Every target builds what it needs with the Go toolchain alone; the Temporal
# CLI and server are pinned Go tools in tools/go.mod, built into bin/.
SHELL := /bin/bash
GO    ?= go

.PHONY: test check unit apidiff integration cluster-test fuzz demo soak bench bench-test bin tidy

## test: the test command: gofmt, go vet and every test with -race, the
## integration tests on a real Temporal dev server and on a PostgreSQL-backed
## Temporal cluster included. Packages run one at a time (-p 1) so the
## real-server tests do not compete for this machine's two cores. The first
## run builds the Temporal CLI and server from tools/go.mod (minutes).
## Fuzz targets run their seed corpus and testdata/fuzz inputs only, as
## plain go test does: the same inputs on every run (time-boxed fuzzing is
## make fuzz; harness/repocheck pins both). The compatibility check
## (make apidiff) runs first.
test: check apidiff compose-test bench-test rules-test
	$(GO) test -race -count=1 -p 1 -timeout 60m ./...

## check: formatting and vet only (the library and the bench module).
check:
	@unformatted="$$(gofmt -l $$(git ls-files '*.go'))"; \
	  if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	cd bench && GOWORK=off $(GO) vet ./...

## apidiff: the compatibility check: the public packages' API (those
## api/v1.txt lists) against the baseline commit named in api/BASELINE, by
## golang.org/x/exp/cmd/apidiff (pinned in tools/apidiff/go.mod, built into
## bin/apidiff); every incompatible change must be listed in
## api/incompatible.txt (scripts/apidiff.sh). Under a minute; part of test.
apidiff:
	bash scripts/apidiff.sh

## unit: the fast tests, without real servers.
unit:
	$(GO) test -race -count=1 ./activities/... ./workflows/... ./testsuite/... ./internal/backoff/... ./internal/defaults/... ./internal/input/... ./internal/poll/... ./internal/rules/... ./internal/httpurl/... ./internal/idemkey/... ./internal/redact/... ./internal/httpheader/... ./internal/jsonfield/... ./internal/wire/... ./internal/longrunning/... ./internal/named/... ./internal/admission/... ./internal/seal/... ./harness/apicheck/... ./harness/repocheck/... ./harness/actions/... ./internal/cliutil/... ./internal/telemetry/... ./internal/signature/... ./webhooks/... ./worker/... ./cmd/...

## integration: only the tests on a real Temporal dev server.
integration:
	$(GO) test -race -count=1 -timeout 30m ./harness/itest/... ./integration/

## cluster-test: only the tests on the PostgreSQL-backed cluster (installs
## PostgreSQL from Debian's packages when it is missing; needs root).
cluster-test:
	bash scripts/install-postgres.sh
	$(GO) test -race -count=1 -timeout 30m ./harness/cluster/ ./integration/cluster/

## interop: the interop suite: the activity, in Temporal's test environment
## and on a dev server, against npm idempotency middlewares (installed by
## scripts/install-interop.sh into interop/node) and the reference server in
## each dialect, and against two LRO mock APIs (AutoRest test server,
## Spector); prints the tables and writes them to interop/RESULTS.md.
## Under a minute once installed; part of test.
.PHONY: interop
interop:
	bash scripts/install-interop.sh
	$(GO) test -race -count=1 ./interop/... -args -interop.table=$(CURDIR)/interop/RESULTS.md
	@cat interop/RESULTS.md

## demo: Temporal dev server + Web UI, reference API, worker and the seed
## scenario; everything stays up until Ctrl-C. The first build shows its
## progress; Ctrl-C stops everything the demo started and exits 0.
demo:
	scripts/demo.sh

## rules-test: the Prometheus alerting rules (monitoring/alerts.yml)
## checked and unit-tested with promtool (monitoring/alerts_test.yml);
## installs Debian's prometheus package for promtool when it is missing
## (needs root). Seconds; part of test.
.PHONY: rules-test
rules-test:
	bash scripts/install-promtool.sh
	cd monitoring && promtool check rules alerts.yml && promtool test rules alerts_test.yml

## compose-test: docker-compose.yml, alone and with docker-compose.webhooks.yml,
## loaded by compose-go, the loader of Docker Compose v2 (schema,
## interpolation, depends_on), and checked against the tested topology and
## the flags and variables of the binaries it runs; a module of its own
## (tools/compose), so the library needs none of its dependencies. Seconds;
## part of test.
.PHONY: compose-test
compose-test:
	cd tools/compose && GOWORK=off $(GO) vet ./... && GOWORK=off $(GO) test -count=1 ./...

## soak: SOAK_N (default 1000) workflows against an API failing 30 % of
## requests; prints time, requests per record and workflows/s.
SOAK_N ?= 1000
soak:
	SOAK_N=$(SOAK_N) $(GO) test -count=1 -timeout 30m -run '^TestLoad$$' -v ./integration

## bench: the performance measurements on a real dev server (contention
## after Brooker, per-attempt overhead, Retry-After precision, throughput,
## outage, the peers go-retryablehttp and failsafe-go, long-running
## operations' polls, and the webhook receiver: verified events/s on one
## core, latency to the workflow, Update against Signal); writes
## bench/results/RESULTS.md, results.json, contention.svg and outage.svg.
## About 7 minutes on 2 CPUs plus about 13 for the peers section, 3.5
## for longrunning and 1.5 for webhooks (one section alone: go run
## ./cmd/bench -only webhooks -out results/webhooks in bench/); section
## actions (Temporal actions per call against a plain activity, and the
## shared rate's own, on a dev server of its own with its metrics on)
## takes about 4.5 more (alone: go run ./cmd/bench -only actions -out
## results/actions); section partial (400 workflows against an API
## failing 30 % of requests at random, against the same API without
## failures, three rounds, then the contention setup, each on a worker
## wired by package host) about 3.5 more (alone: go run ./cmd/bench -only
## partial -out results/partial); section fairness (Temporal's
## fairness keys on one task queue against a queue per origin, on a dev
## server of its own with matching.enableFairness) about 4 more (alone:
## go run ./cmd/bench -only fairness -out results/fairness); section
## scale (10,000 operations waiting at once on the PostgreSQL cluster with
## three workers, and calls/s against a plain activity there) about 20
## more (alone: go run ./cmd/bench -only scale -out results/scale;
## -scale-ops 300 for a quick run of about 6); builds
## bin/temporal first if it is missing. A module of its own (bench/go.mod,
## cmd/bench and internal/bench under bench/), so the library's go.mod needs
## none of the peers' dependencies. Section chaos, last, is the chaos
## campaign at 1000 operations on the PostgreSQL-backed cluster (about 5
## minutes; alone: go run ./cmd/bench -only chaos -out results/chaos).
## Section unkeyed, after it, runs that campaign against an API without
## keys three ways (plain retries, lookup, at most once with an operator
## using the CLI) at 1000 operations each, then keys in the body and in
## the query at 200 (about 16.5 minutes; alone: go run ./cmd/bench -only
## unkeyed -out results/unkeyed).
bench:
	cd bench && GOWORK=off $(GO) run ./cmd/bench -out results

## bench-test: the bench module's own tests (simulation, report rendering, a
## miniature overhead run, the peer activities in Temporal's test
## environment; no dev server), vetted and with -race. Under a minute; part
## of test.
bench-test:
	cd bench && GOWORK=off $(GO) vet ./... && GOWORK=off $(GO) test -race -count=1 ./...

## fuzz: fuzz each target for FUZZTIME (default 30s): the Retry-After, URL
## origin (the allow-list key) and failure-script parsers; the activity end
## to end against a generated server echoing its credentials (FuzzDo: no
## credential piece anywhere, success only on a 2xx, results within
## MaxResultBytes, nothing sent for an invalid request or one not admitted);
## the poll activity against a generated monitor (FuzzPoll: no credential
## piece, no key sent, a result only from a whole 2xx other than 202, retries
## never under the 1 s minimum poll interval) and the status-document reader;
## the redactor; the admission limiter (rates finite and above the floor,
## waits finite); bodies byte for byte through Temporal's converter; and
## the benchmarks' reader of /proc/<pid>/stat.
## Run it for the targets a change touches before it lands, and commit every
## input it finds (testdata/fuzz/<Target>/) with its fix: make test then
## replays it on every run.
FUZZTIME ?= 30s
fuzz:
	$(GO) test ./internal/backoff -run '^$$' -fuzz '^FuzzParseRetryAfter$$' -fuzztime $(FUZZTIME)
	$(GO) test ./internal/httpurl -run '^$$' -fuzz '^FuzzOrigin$$' -fuzztime $(FUZZTIME)
	$(GO) test ./internal/keyplace -run '^$$' -fuzz '^FuzzInsertBody$$' -fuzztime $(FUZZTIME)
	$(GO) test ./internal/reconcile -run '^$$' -fuzz '^FuzzRead$$' -fuzztime $(FUZZTIME)
	$(GO) test ./internal/redact -run '^$$' -fuzz '^FuzzRedactFields$$' -fuzztime $(FUZZTIME)
	$(GO) test ./internal/redact -run '^$$' -fuzz '^FuzzCheckedFields$$' -fuzztime $(FUZZTIME)
	$(GO) test ./harness/serverflag -run '^$$' -fuzz '^FuzzParseScript$$' -fuzztime $(FUZZTIME)
	$(GO) test ./testsuite -run '^$$' -fuzz '^FuzzParseKeyString$$' -fuzztime $(FUZZTIME)
	$(GO) test ./activities -run '^$$' -fuzz '^FuzzDo$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 5s
	$(GO) test ./activities -run '^$$' -fuzz '^FuzzRedact$$' -fuzztime $(FUZZTIME)
	$(GO) test ./activities -run '^$$' -fuzz '^FuzzPoll$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 5s
	$(GO) test ./internal/longrunning -run '^$$' -fuzz '^FuzzRead$$' -fuzztime $(FUZZTIME)
	$(GO) test ./internal/wire -run '^$$' -fuzz '^FuzzWireBody$$' -fuzztime $(FUZZTIME)
	$(GO) test ./internal/admission -run '^$$' -fuzz '^FuzzLimiter$$' -fuzztime $(FUZZTIME)
	$(GO) test ./webhooks -run '^$$' -fuzz '^FuzzReceiver$$' -fuzztime $(FUZZTIME)
	$(GO) test ./webhooks -run '^$$' -fuzz '^FuzzStandardWebhooks$$' -fuzztime $(FUZZTIME)
	$(GO) test ./webhooks -run '^$$' -fuzz '^FuzzStripe$$' -fuzztime $(FUZZTIME)
	$(GO) test ./webhooks -run '^$$' -fuzz '^FuzzHMAC$$' -fuzztime $(FUZZTIME)
	$(GO) test ./host -run '^$$' -fuzz '^FuzzLoadOrigins$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 5s
	$(GO) test ./host -run '^$$' -fuzz '^FuzzOriginsPlaces$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 5s
	$(GO) test ./host -run '^$$' -fuzz '^FuzzParseSetting$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 5s
	$(GO) test ./internal/seal -run '^$$' -fuzz '^FuzzOpen$$' -fuzztime $(FUZZTIME)
	cd bench && GOWORK=off $(GO) test ./internal/bench -run '^$$' -fuzz '^FuzzParseProcStat$$' -fuzztime $(FUZZTIME)

## bin: build the Temporal CLI, the worker, the starter and the demo API into bin/.
bin:
	$(GO) build -C tools -o ../bin/temporal github.com/temporalio/cli/cmd/temporal
	$(GO) build -o bin/ ./worker ./cmd/starter ./cmd/demoapi

tidy:
	$(GO) mod tidy
	cd tools && $(GO) mod tidy
	cd bench && GOWORK=off $(GO) mod tidy
	cd tools/apidiff && GOWORK=off $(GO) mod tidy
