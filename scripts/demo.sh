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
#   4. A capture that a payment provider (a second reference API) confirms
#      later by a signed webhook: the workflow awaits it; the provider
#      delivers the event twice, out of order, with a forged copy; the
#      worker's receiver verifies them and the workflow completes once,
#      from the webhook.
#
# Then everything stays up (Web UI on http://127.0.0.1:8233, the worker's
# Prometheus metrics on http://127.0.0.1:9464/metrics) until Ctrl-C, which
# stops it all. Everything listens on 127.0.0.1 only; the server keeps
# its data in memory.
#
# Environment:
#   TEMPORAL_PORT (7233), TEMPORAL_UI_PORT (8233), API_PORT (8081),
#   METRICS_PORT (9464), PROVIDER_PORT (8082), WEBHOOK_PORT (8090)
#                 the ports of the Temporal frontend, its Web UI, the API,
#                 the worker's /metrics, the webhook provider and the
#                 worker's webhook receiver
#   BIN_DIR       where the binaries are built (default: bin/ of the repository)
#   DEMO_EXIT=1   run the scenario and shut down instead of waiting for
#                 Ctrl-C (same as the --no-wait flag)
#   DEMO_PROGRESS_EVERY (15)
#                 seconds between the progress lines of a build that compiles
#                 (the first build of the CLI compiles the Temporal server);
#                 a build that finds everything cached prints nothing
#   DEMO_FAKE_BUILD=N
#                 for the tests: each build step is a stand-in that "compiles"
#                 ten packages a second for N seconds (the binaries in BIN_DIR
#                 must exist already)
#
# Ctrl-C, at any point, stops everything the demo started and exits 0 with
# one line saying so; so does `make demo` in a terminal (the demo then runs
# in a process group of its own in the terminal's foreground, so that the
# Ctrl-C reaches the demo and not make).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN_DIR=${BIN_DIR:-$ROOT/bin}
TEMPORAL_PORT=${TEMPORAL_PORT:-7233}
TEMPORAL_UI_PORT=${TEMPORAL_UI_PORT:-8233}
API_PORT=${API_PORT:-8081}
METRICS_PORT=${METRICS_PORT:-9464}
PROVIDER_PORT=${PROVIDER_PORT:-8082}
WEBHOOK_PORT=${WEBHOOK_PORT:-8090}
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

# Under make in a terminal, make shares the demo's process group, the one in
# the terminal's foreground: a Ctrl-C would reach make too, and make, however
# the demo exits, then reports an error or dies of the signal. So the demo
# runs itself again as a job of its own (job control, set -m): in a process
# group of its own that the terminal's Ctrl-C reaches alone; this shell only
# passes its exit status on. Bash's job control uses the terminal on fd 2 as
# set -m finds it, so fd 2 is the terminal then, even when the output goes to
# a pipe (make demo 2>&1 | tee demo.log); the demo itself gets the original.
if [[ -z ${DEMO_OWN_GROUP:-} && -r /proc/$$/stat ]] && { : </dev/tty; } 2>/dev/null; then
	read -r stat </proc/$$/stat
	# After the command name: state ppid pgrp session tty_nr tpgid ...
	read -r -a f <<<"${stat##*) }"
	if [[ ${f[2]} != "$$" && ${f[5]} == "${f[2]}" ]]; then
		exec {stderr}>&2 2>/dev/tty
		set -m
		status=0
		DEMO_OWN_GROUP=1 "$BASH" "${BASH_SOURCE[0]}" "$@" 2>&"$stderr" {stderr}>&- || status=$?
		exit "$status"
	fi
fi

TASK_QUEUE=idempotent-http
ADDRESS=127.0.0.1:$TEMPORAL_PORT
UI=http://127.0.0.1:$TEMPORAL_UI_PORT
API=http://127.0.0.1:$API_PORT
METRICS=http://127.0.0.1:$METRICS_PORT/metrics
PROVIDER=http://127.0.0.1:$PROVIDER_PORT
RECEIVER=http://127.0.0.1:$WEBHOOK_PORT/webhooks
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
INTERRUPTED=0

# cleanup stops what was started, newest first, each with SIGINT (as Ctrl-C
# would), then SIGKILL after 10 s; the logs are kept only after a failure.
# After a Ctrl-C it says so in one line, and the demo exits 0.
cleanup() {
	local status=$?
	trap - EXIT INT TERM HUP
	# Nothing may cut the shutdown short: not a failing command, nor a
	# reader of the output that is gone (| tee, stopped by the Ctrl-C too).
	set +e
	trap '' PIPE
	local i pid n names=()
	if [[ -n ${LIST_PID:-} ]]; then
		kill "$LIST_PID" 2>/dev/null || true
		wait "$LIST_PID" 2>/dev/null || true
	fi
	if ((INTERRUPTED)); then
		status=0
	elif ((${#PIDS[@]} > 0)); then
		step "Shutting down"
	fi
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
		((INTERRUPTED)) || say "stopped ${NAMES[i]}"
		names+=("${NAMES[i]}")
	done
	if ((INTERRUPTED)); then
		# The terminal echoed ^C without a newline.
		if [[ -t 1 ]]; then
			printf '\n'
		else
			{ printf '\n' >/dev/tty; } 2>/dev/null
		fi
		if ((${#names[@]} == 0)); then
			echo "demo: stopped (Ctrl-C); nothing was running yet"
		else
			echo "demo: stopped (Ctrl-C); everything it started is down: $(join_names "${names[@]}")"
		fi
	fi
	if ((status != 0 && status != 129 && status != 143)); then
		echo "demo: logs kept in $WORK" >&2
	else
		rm -rf "$WORK"
	fi
	exit "$status"
}
# join_names A B C prints "A, B and C".
join_names() {
	local out=$1
	shift
	while (($# > 1)); do
		out+=", $1"
		shift
	done
	if (($# == 1)); then
		out+=" and $1"
	fi
	printf '%s' "$out"
}
trap cleanup EXIT
trap 'INTERRUPTED=1; exit 0' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

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
api_stat() { curl -fsS "${2:-$API}/stats" | sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p"; }

api_summary() {
	say "API (GET $API/stats): $(api_stat requests) requests, $(api_stat distinct_keys) distinct idempotency key(s), $(api_stat records) record(s), $(api_stat replays) replay(s)"
}

# elapsed SECONDS prints a duration such as 45s or 2m05s.
elapsed() {
	if (($1 < 60)); then
		printf '%ds' "$1"
	else
		printf '%dm%02ds' $(($1 / 60)) $(($1 % 60))
	fi
}

# fake_build N: the stand-in for go build -v that DEMO_FAKE_BUILD asks for:
# ten package paths a second for N seconds.
fake_build() {
	trap 'exit 130' INT
	local i
	for ((i = 1; i <= $1 * 10; i++)); do
		echo "example.com/fake/pkg$i"
		sleep 0.1
	done
}

# build_count sets compiled and downloads from go build -v's output in LOG:
# the packages compiled so far (one import path a line) and the modules
# downloaded.
build_count() {
	compiled=$(grep -cv -e '^go: ' -e '[[:space:]#]' -e '^$' "$1" || true)
	downloads=$(grep -c '^go: downloading ' "$1" || true)
}

# go_build WHAT HINT DIR OUT PKGS...: go build -o OUT PKGS in DIR. A build
# that compiles nothing (everything in Go's build cache) stays quiet unless
# it takes DEMO_PROGRESS_EVERY seconds. One that compiles or downloads
# modules (go build -v names each package it compiles) says so at once, with
# HINT; every build prints a progress line every DEMO_PROGRESS_EVERY seconds,
# so that a slow first build looks slow, not hung. On failure it shows the
# end of go's output.
PROGRESS_EVERY=${DEMO_PROGRESS_EVERY:-15}
LIST_PID=
go_build() {
	local what=$1 hint=$2 dir=$3 out=$4
	shift 4
	local log="$WORK/build.log" total="$WORK/build.total"
	rm -f "$total"
	if [[ -n ${DEMO_FAKE_BUILD:-} ]]; then
		fake_build "$DEMO_FAKE_BUILD" >"$log" 2>&1 &
	else
		(cd "$dir" && GOWORK=off exec go build -v -o "$out" "$@") >"$log" 2>&1 &
	fi
	local pid=$!
	PIDS+=("$pid")
	NAMES+=("the build of $what")
	local start=$SECONDS next=$((SECONDS + PROGRESS_EVERY)) loud=0 ticked=0 status=0 of compiled downloads
	while kill -0 "$pid" 2>/dev/null; do
		sleep 0.5
		build_count "$log"
		if ((!loud && (compiled > 0 || downloads > 0))); then
			loud=1
			say "compiling $what: not in Go's build cache yet${hint:+ ($hint)}; a progress line every ${PROGRESS_EVERY}s"
			# How many packages there are at most, for the progress lines.
			if [[ -n ${DEMO_FAKE_BUILD:-} ]]; then
				echo $((DEMO_FAKE_BUILD * 10)) >"$total"
			else
				(cd "$dir" && GOWORK=off go list -deps "$@" 2>/dev/null | wc -l >"$total.tmp" && mv "$total.tmp" "$total") &
				LIST_PID=$!
			fi
		fi
		if ((SECONDS >= next)); then
			of=
			[[ -s $total ]] && of=" (of at most $(tr -d ' ' <"$total"))"
			if ((compiled == 0 && downloads > 0)); then
				say "building $what: $(elapsed $((SECONDS - start))), $downloads modules downloaded so far"
			elif ((compiled == 0)); then
				say "building $what: $(elapsed $((SECONDS - start))), no package compiled yet (go is loading, checking or linking)"
			else
				say "building $what: $(elapsed $((SECONDS - start))), $compiled packages compiled so far$of"
			fi
			next=$((next + PROGRESS_EVERY))
			ticked=1
		fi
	done
	wait "$pid" || status=$?
	unset 'PIDS[-1]' 'NAMES[-1]'
	if [[ -n $LIST_PID ]]; then
		wait "$LIST_PID" 2>/dev/null || true
		LIST_PID=
	fi
	build_count "$log"
	if ((status != 0)); then
		tail -n 30 "$log" >&2 || true
		fail "building $what failed (go build exited with status $status)"
	fi
	if ((loud || ticked)); then
		say "built $what in $(elapsed $((SECONDS - start))): $compiled packages compiled"
	fi
}

command -v go >/dev/null || fail "the go command is needed (Go 1.26, see go.mod)"
command -v curl >/dev/null || fail "curl is needed"
for p in TEMPORAL_PORT TEMPORAL_UI_PORT API_PORT METRICS_PORT PROVIDER_PORT WEBHOOK_PORT; do
	port_free "${!p}" || fail "port ${!p} on 127.0.0.1 is in use: stop what listens there or set $p to another port"
done

CLI_VERSION=$(sed -n 's/^[[:space:]]*github.com\/temporalio\/cli \(v[^ ]*\).*/\1/p' "$ROOT/tools/go.mod")
SERVER_VERSION=$(sed -n 's/^[[:space:]]*go.temporal.io\/server \(v[^ ]*\).*/\1/p' "$ROOT/tools/go.mod")
step "Building the Temporal CLI ${CLI_VERSION:-} (with Temporal server ${SERVER_VERSION:-}, pinned by tools/go.mod), the worker, the starter and the reference API into $BIN_DIR"
mkdir -p "$BIN_DIR"
BIN_DIR=$(cd "$BIN_DIR" && pwd)
go_build "the Temporal CLI" "it embeds the Temporal server: minutes, 15 or more on a busy 2-core machine" \
	"$ROOT/tools" "$BIN_DIR/temporal" github.com/temporalio/cli/cmd/temporal
go_build "the worker, the starter and the reference API" "" \
	"$ROOT" "$BIN_DIR/" ./worker ./cmd/starter ./cmd/demoapi

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

# A fresh Standard Webhooks secret, shared by the provider and the receiver
# through the environment only.
WEBHOOK_SECRET="whsec_$(head -c 24 /dev/urandom | base64)"
step "Starting a payment provider on $PROVIDER (a reference API that confirms each payment 3 s later by a signed Standard Webhooks event to $RECEIVER: twice, in random order, and once forged)"
launch "webhook provider" "$WORK/provider.log" env WEBHOOK_SECRET="$WEBHOOK_SECRET" "$BIN_DIR/demoapi" \
	--addr "127.0.0.1:$PROVIDER_PORT" --webhook-url "$RECEIVER" --webhook-scheme standard-webhooks \
	--webhook-duration 3s --webhook-deliveries 2 --webhook-shuffle --webhook-forged 1
wait_until "the webhook provider" "$WORK/provider.log" 30 curl -fsS -o /dev/null "$PROVIDER/healthz"

WORKER_ID=demo-worker-$$
step "Starting the worker ($WORKER_ID) on task queue $TASK_QUEUE, allowed to call $API and $PROVIDER, metrics on $METRICS, webhook receiver on $RECEIVER"
launch "worker" "$WORK/worker.log" env "${TEMPORAL_ENV[@]}" API_TOKEN= ORIGINS_FILE= WEBHOOK_SECRETS="$WEBHOOK_SECRET" \
	"$BIN_DIR/worker" --task-queue "$TASK_QUEUE" --allow-origin "$API,$PROVIDER" --identity "$WORKER_ID" \
	--metrics-addr "127.0.0.1:$METRICS_PORT" --webhook-addr "127.0.0.1:$WEBHOOK_PORT" --webhook-scheme standard-webhooks
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

step "4. POST $PROVIDER/payments (operation capture) and await the provider's signed webhook of its outcome (polling $PROVIDER/resources/{id} after 1 min without one)"
env "${TEMPORAL_ENV[@]}" "$BIN_DIR/starter" --task-queue "$TASK_QUEUE" --ui "$UI" \
	--url "$PROVIDER/payments" --body '{"amount":4200,"currency":"EUR"}' \
	--workflow-id demo-capture --operation capture \
	--await-webhook operation.succeeded --webhook-failed operation.failed \
	--webhook-poll "$PROVIDER/resources/{id}" --webhook-poll-after 1m >"$WORK/4.out" 2>"$WORK/4.err" || {
	cat "$WORK/4.err" >&2
	fail "the capture workflow failed"
}
say "result: $(cat "$WORK/4.out")"
say "$(grep 'Web UI' "$WORK/4.err")"
grep -q '"source":"webhook"' "$WORK/4.out" || fail "expected the outcome from the webhook"
# The duplicate and the forged copy may still be on their way.
for _ in $(seq 50); do
	stats=$(curl -fsS "$PROVIDER/stats")
	[[ $stats != *'"webhooks_pending"'* && $stats == *'"webhooks_delivered":2'* && $stats == *'"webhooks_rejected":1'* ]] && break
	sleep 0.2
done
say "provider: $(api_stat records "$PROVIDER") record, $(api_stat webhooks "$PROVIDER") deliveries: $(api_stat webhooks_delivered "$PROVIDER") answered 2xx (the event, its duplicate), $(api_stat webhooks_rejected "$PROVIDER") refused (the forged copy, 400, never shown to Temporal)"
say "=> one record, the outcome from the verified webhook; the duplicate and the forgery changed nothing"

step "Web UI: $UI/namespaces/default/workflows"
say "worker, API, provider and server logs: $WORK/{worker,demoapi,provider,temporal}.log"

step "Metrics (Prometheus text, the SDK's and the activity's): $METRICS"
# One line per outcome and error type of the attempts so far (both origins
# summed), and per outcome of the webhook deliveries.
curl -fsS "$METRICS" >"$WORK/metrics.txt"
sed -n 's/^idempotent_http_attempts_total{.*error_type="\([^"]*\)".*outcome="\([^"]*\)".*} \([0-9]*\)$/\2 \1 \3/p' "$WORK/metrics.txt" |
	awk '{n[$1 " " $2] += $3} END {for (k in n) print k, n[k]}' | sort |
	while read -r outcome type n; do say "idempotent_http_attempts_total{outcome=\"$outcome\",error_type=\"$type\"} $n"; done
sed -n 's/^idempotent_http_webhooks_total{.*outcome="\([^"]*\)".*} \([0-9]*\)$/\1 \2/p' "$WORK/metrics.txt" |
	awk '{n[$1] += $2} END {for (k in n) print k, n[k]}' | sort |
	while read -r outcome n; do say "idempotent_http_webhooks_total{outcome=\"$outcome\"} $n"; done
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
