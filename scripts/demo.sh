#!/usr/bin/env bash
# The one-command demo (make demo): a real Temporal server with its Web UI,
# the reference idempotent API, the worker, and the README's scenario run
# through the starter.
#
#   1. POST /payments through the ready workflow while the API answers 503,
#      then 429 with Retry-After: 1, then 201: three requests, one
#      Idempotency-Key, one record.
#   2. A call the API rejects with 400: the workflow fails at once, after one
#      request, with a non-retryable HTTPClientError.
#   3. The first workflow ID run again: same key, so the API answers with its
#      stored response (replayed) and still holds one record.
#
# Then everything stays up (Web UI on http://127.0.0.1:8233) until Ctrl-C,
# which stops it all. Everything listens on 127.0.0.1 only; the server keeps
# its data in memory.
#
# Environment:
#   TEMPORAL_PORT (7233), TEMPORAL_UI_PORT (8233), API_PORT (8081)
#                 the ports of the Temporal frontend, its Web UI and the API
#   BIN_DIR       where the binaries are built (default: bin/ of the repository)
#   DEMO_EXIT=1   run the scenario and shut down instead of waiting for
#                 Ctrl-C (same as the --no-wait flag)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN_DIR=${BIN_DIR:-$ROOT/bin}
TEMPORAL_PORT=${TEMPORAL_PORT:-7233}
TEMPORAL_UI_PORT=${TEMPORAL_UI_PORT:-8233}
API_PORT=${API_PORT:-8081}
DEMO_EXIT=${DEMO_EXIT:-0}
for arg in "$@"; do
	case $arg in
	--no-wait) DEMO_EXIT=1 ;;
	-h | --help)
		sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
		exit 0
		;;
	*)
		echo "demo: unknown argument $arg (try --help)" >&2
		exit 2
		;;
	esac
done

TASK_QUEUE=idempotent-http
ADDRESS=127.0.0.1:$TEMPORAL_PORT
UI=http://127.0.0.1:$TEMPORAL_UI_PORT
API=http://127.0.0.1:$API_PORT
# The worker and the starter reach this server whatever Temporal profile or
# config file the user has.
TEMPORAL_ENV=(TEMPORAL_ADDRESS="$ADDRESS" TEMPORAL_NAMESPACE=default TEMPORAL_CONFIG_FILE=/dev/null TEMPORAL_PROFILE=)

# temporal runs the CLI against this server only.
temporal() { env "${TEMPORAL_ENV[@]}" "$BIN_DIR/temporal" "$@"; }

step() { printf '\n==> %s\n' "$*"; }
say() { printf '    %s\n' "$*"; }
fail() {
	printf 'demo: %s\n' "$*" >&2
	exit 1
}

WORK=$(mktemp -d "${TMPDIR:-/tmp}/idemhttp-demo.XXXXXX")
PIDS=()
NAMES=()

# cleanup stops what was started, newest first, each with SIGINT (as Ctrl-C
# would), then SIGKILL after 10 s; the logs are kept only after a failure.
cleanup() {
	local status=$?
	trap - EXIT INT TERM
	if ((${#PIDS[@]} > 0)); then
		step "Shutting down"
		local i pid n
		for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
			pid=${PIDS[i]}
			kill -INT "$pid" 2>/dev/null || true
			for ((n = 0; n < 100; n++)); do
				kill -0 "$pid" 2>/dev/null || break
				sleep 0.1
			done
			if kill -0 "$pid" 2>/dev/null; then
				say "${NAMES[i]} (pid $pid) did not stop in 10 s: killing it"
				kill -KILL "$pid" 2>/dev/null || true
			fi
			wait "$pid" 2>/dev/null || true
			say "stopped ${NAMES[i]}"
		done
	fi
	if ((status != 0 && status != 130 && status != 143)); then
		echo "demo: logs kept in $WORK" >&2
	else
		rm -rf "$WORK"
	fi
	exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# launch NAME LOG CMD...: starts CMD in the background, its output in LOG.
launch() {
	local name=$1 log=$2
	shift 2
	"$@" >"$log" 2>&1 &
	PIDS+=($!)
	NAMES+=("$name")
}

# wait_until NAME LOG TIMEOUT CMD...: waits until CMD succeeds; fails with
# the end of LOG if the last launched process exits or TIMEOUT seconds pass.
wait_until() {
	local name=$1 log=$2 timeout=$3
	shift 3
	local pid=${PIDS[${#PIDS[@]} - 1]} deadline=$((SECONDS + timeout))
	until "$@" >/dev/null 2>&1; do
		if ! kill -0 "$pid" 2>/dev/null; then
			tail -n 30 "$log" >&2 || true
			fail "$name exited (log above, in $log)"
		fi
		if ((SECONDS >= deadline)); then
			tail -n 30 "$log" >&2 || true
			fail "$name not ready after ${timeout}s (log above, in $log)"
		fi
		sleep 0.2
	done
}

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# api_stat FIELD: one number from the API's GET /stats.
api_stat() { curl -fsS "$API/stats" | sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p"; }

api_summary() {
	say "API (GET $API/stats): $(api_stat requests) requests, $(api_stat distinct_keys) distinct idempotency key(s), $(api_stat records) record(s), $(api_stat replays) replay(s)"
}

command -v go >/dev/null || fail "the go command is needed (Go 1.26, see go.mod)"
command -v curl >/dev/null || fail "curl is needed"
for p in TEMPORAL_PORT TEMPORAL_UI_PORT API_PORT; do
	port_free "${!p}" || fail "port ${!p} on 127.0.0.1 is in use: stop what listens there or set $p to another port"
done

step "Building the Temporal CLI (pinned by tools/go.mod), the worker, the starter and the reference API into $BIN_DIR"
say "(the first build of the CLI compiles the Temporal server: a few minutes; later ones take seconds)"
mkdir -p "$BIN_DIR"
BIN_DIR=$(cd "$BIN_DIR" && pwd)
(cd "$ROOT/tools" && GOWORK=off go build -o "$BIN_DIR/temporal" github.com/temporalio/cli/cmd/temporal)
(cd "$ROOT" && go build -o "$BIN_DIR/" ./worker ./cmd/starter ./cmd/demoapi)

step "Starting the Temporal dev server on $ADDRESS, Web UI on $UI"
launch "Temporal dev server" "$WORK/temporal.log" "$BIN_DIR/temporal" server start-dev \
	--ip 127.0.0.1 --port "$TEMPORAL_PORT" --ui-port "$TEMPORAL_UI_PORT" --log-level warn \
	--dynamic-config-value frontend.enableServerVersionCheck=false
wait_until "the Temporal dev server" "$WORK/temporal.log" 60 \
	temporal operator namespace describe --namespace default --address "$ADDRESS"
wait_until "the Temporal Web UI" "$WORK/temporal.log" 60 curl -fsS -o /dev/null "$UI/"

step "Starting the reference API on $API (scripted: 503, 429 with Retry-After: 1, 201, then 400)"
launch "reference API" "$WORK/demoapi.log" "$BIN_DIR/demoapi" --addr "127.0.0.1:$API_PORT" --script 503,429:1,201,400
wait_until "the reference API" "$WORK/demoapi.log" 30 curl -fsS -o /dev/null "$API/healthz"

WORKER_ID=demo-worker-$$
step "Starting the worker ($WORKER_ID) on task queue $TASK_QUEUE, allowed to call $API"
launch "worker" "$WORK/worker.log" env "${TEMPORAL_ENV[@]}" API_TOKEN= \
	"$BIN_DIR/worker" --task-queue "$TASK_QUEUE" --allow-origin "$API" --identity "$WORKER_ID"
worker_polls() {
	temporal task-queue describe --task-queue "$TASK_QUEUE" --address "$ADDRESS" -o json |
		grep -q "\"identity\": *\"$WORKER_ID\""
}
wait_until "the worker" "$WORK/worker.log" 30 worker_polls

# starter ID OUT ERR: runs the ready workflow under workflow ID with the
# demo's payment; its JSON result goes to OUT, its messages to ERR.
starter() {
	env "${TEMPORAL_ENV[@]}" "$BIN_DIR/starter" --task-queue "$TASK_QUEUE" --ui "$UI" \
		--url "$API/payments" --body '{"amount":42,"currency":"EUR"}' \
		--workflow-id "$1" --operation charge >"$2" 2>"$3"
}

step "1. POST $API/payments through the ready workflow; the API answers 503, then 429 (Retry-After: 1), then 201"
starter demo-payment "$WORK/1.out" "$WORK/1.err" || {
	cat "$WORK/1.err" >&2
	fail "the payment workflow failed"
}
say "result: $(cat "$WORK/1.out")"
say "$(grep 'Web UI' "$WORK/1.err")"
api_summary
[[ "$(api_stat requests) $(api_stat distinct_keys) $(api_stat records)" == "3 1 1" ]] ||
	fail "expected 3 requests, 1 key and 1 record"
say "=> 3 requests, one key, one record: the retries were safe"

step "2. The same call for workflow demo-rejected; the API rejects it with 400"
if starter demo-rejected "$WORK/2.out" "$WORK/2.err"; then
	fail "the call the API rejects succeeded: $(cat "$WORK/2.out")"
fi
while IFS= read -r line; do say "$line"; done <"$WORK/2.err"
grep -q 'type=HTTPClientError last_status=400 attempts=1 ' "$WORK/2.err" ||
	fail "expected a non-retryable HTTPClientError after 1 attempt"
api_summary
say "=> failed at once, after one request: a 400 cannot succeed by retrying"

step "3. Workflow demo-payment run again: the same idempotency key, so the API answers with its stored response"
starter demo-payment "$WORK/3.out" "$WORK/3.err" || {
	cat "$WORK/3.err" >&2
	fail "the second run of demo-payment failed"
}
say "result: $(cat "$WORK/3.out")"
api_summary
grep -q '"replayed":true' "$WORK/3.out" || fail "expected the stored response (replayed: true)"
[[ "$(api_stat records)" == 1 ]] || fail "expected still 1 record"
say "=> replayed, still one record: the work ran once"

step "Web UI: $UI/namespaces/default/workflows"
say "worker, API and server logs: $WORK/{worker,demoapi,temporal}.log"
if [[ $DEMO_EXIT == 1 ]]; then
	exit 0
fi
say "Everything stays up; press Ctrl-C to stop it all."
while :; do
	for i in "${!PIDS[@]}"; do
		if ! kill -0 "${PIDS[i]}" 2>/dev/null; then
			fail "${NAMES[i]} exited unexpectedly; its log: $(ls "$WORK"/*.log | tr '\n' ' ')"
		fi
	done
	sleep 1
done
