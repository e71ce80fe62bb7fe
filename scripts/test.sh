#!/usr/bin/env bash
# Runs every test of cairn: the one test command (see README).
#
#   scripts/test.sh
#
# Steps: gofmt check, go vet, go test -race, a short run of every native fuzz
# target, the Node.js `nats` client tests (test/node and test/node-consumer)
# against a freshly built cairn, and the Node order application
# (test/node-consumer/orders.test.mjs) with num_replicas 3 against a cluster of
# three cairn servers.
# Every step runs even if an earlier one failed; the script exits non-zero if
# any failed and prints a summary.
#
# Needs: Go, Node.js 20+ with npm, and for the CLI tests natscli v0.5.0 on
# PATH (.ci/run installs it; so does `go install github.com/nats-io/natscli/nats@v0.5.0`).
# Environment:
#   FUZZTIME=5s          how long each fuzz target runs (0 or "off" skips fuzzing;
#                        longer runs: FUZZTIME=5m scripts/test.sh)
#   GO_TEST_TIMEOUT=20m  the -timeout of go test (the test package takes about 9 minutes under -race on 2 cores)
#   GO_TEST_RUN=regex    passed to go test -run (default: all tests)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

FUZZTIME="${FUZZTIME:-5s}"
GO_TEST_TIMEOUT="${GO_TEST_TIMEOUT:-20m}"

# Tools installed with `go install` (nats, nats-server) live here.
if [[ -n "$(go env GOBIN)" ]]; then PATH="$(go env GOBIN):$PATH"; fi
PATH="$(go env GOPATH)/bin:$PATH"
export PATH
# The Go tests that drive the nats CLI fail instead of skipping when it is missing.
export CAIRN_REQUIRE_CLI=1

# ---------------------------------------------------------------------------

declare -a SUMMARY=()
FAILED=0
CAIRN_PID=""

log() { printf '\n=== %s\n' "$*"; }

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	if [[ -n "$CAIRN_PID" ]] && kill -0 "$CAIRN_PID" 2>/dev/null; then
		kill -KILL "$CAIRN_PID" 2>/dev/null || true
		wait "$CAIRN_PID" 2>/dev/null || true
	fi
	stop_cluster
	[[ -n "${CAIRN_LOG:-}" ]] && rm -f "$CAIRN_LOG"
	[[ -n "${CAIRN_STORE:-}" ]] && rm -rf "$CAIRN_STORE"
	[[ -n "${CLUSTER_DIR:-}" ]] && rm -rf "$CLUSTER_DIR"
	[[ -n "${GO_TEST_LOG:-}" ]] && rm -f "$GO_TEST_LOG"
	exit "$rc"
}

# stop_cluster kills the servers node_cluster_tests started, if any.
CLUSTER_PIDS=()
stop_cluster() {
	local p
	for p in "${CLUSTER_PIDS[@]+"${CLUSTER_PIDS[@]}"}"; do
		kill -KILL "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	CLUSTER_PIDS=()
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# step name command... : runs a step, records pass/fail and its duration.
step() {
	local name="$1" t0 rc=0
	shift
	log "$name"
	t0=$SECONDS
	"$@" || rc=$?
	local took=$((SECONDS - t0))
	if ((rc == 0)); then
		SUMMARY+=("PASS  ${took}s  $name")
	else
		SUMMARY+=("FAIL  ${took}s  $name (exit $rc)")
		FAILED=1
	fi
}

# ---------------------------------------------------------------------------

check_gofmt() {
	local files
	files="$(find . -name '*.go' -not -path './.git/*' -not -path '*/node_modules/*' \
		-not -path '*/testdata/*' -not -path './bin/*' -print0 | xargs -0 -r gofmt -l)" || {
		echo "gofmt failed (a file does not parse?)"
		return 1
	}
	if [[ -n "$files" ]]; then
		echo "gofmt: these files are not formatted (run gofmt -w):"
		echo "$files"
		return 1
	fi
	echo "gofmt: ok"
}

# go_test runs every package's tests under the race detector; its output
# is kept (GO_TEST_LOG) so that a failure's details can be printed again
# after the summary (go_test_failures): a CI log is often read from its end.
go_test() {
	local -a args=(-race -count=1 -timeout "$GO_TEST_TIMEOUT")
	[[ -n "${GO_TEST_RUN:-}" ]] && args+=(-run "$GO_TEST_RUN")
	GO_TEST_LOG="$(mktemp "${TMPDIR:-/tmp}/cairn-go-test.XXXXXX")"
	go test "${args[@]}" ./... 2>&1 | tee "$GO_TEST_LOG"
	return "${PIPESTATUS[0]}"
}

# go_test_failures prints, from go_test's output, the first race reports
# (each cut at 60 lines) and each failing test's lines (at most 200 in all).
go_test_failures() {
	[[ -n "${GO_TEST_LOG:-}" && -s "$GO_TEST_LOG" ]] || return 0
	grep -qE '^WARNING: DATA RACE|^--- FAIL|^panic:' "$GO_TEST_LOG" || return 0
	log "go test: race reports and failures again (from the output above)"
	awk '
		/^WARNING: DATA RACE/ { races++; if (races <= 3) { inrace = 1; n = 0 } }
		inrace { print; n++; if (/^==================/ && n > 1 || n >= 60) { inrace = 0; if (n >= 60) print "[... cut]" } ; next }
		/^--- FAIL|^FAIL|^panic:|_test\.go:[0-9]+:/ { print }
	' "$GO_TEST_LOG" | head -n 200
}

# fuzz_one pkg name: fuzzes one target for FUZZTIME. A run that fails
# without writing a failing input (the Go toolchain's "context deadline
# exceeded" race, golang/go#75804) is retried once; a failing input always
# fails the step.
fuzz_one() {
	local pkg="$1" name="$2" out attempt
	for attempt in 1 2; do
		if out="$(go test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" "$pkg" 2>&1)"; then
			echo "$out" | tail -3
			return 0
		fi
		echo "$out" | tail -20
		if grep -q "Failing input written to" <<<"$out"; then
			echo "FAIL: fuzz target $name in $pkg found a failing input (see its testdata/fuzz folder)"
			return 1
		fi
		echo "fuzz target $name in $pkg ended without a failing input (attempt $attempt)"
	done
	echo "FAIL: fuzz target $name in $pkg failed twice"
	return 1
}

# Runs every FuzzXxx target of every package for FUZZTIME.
go_fuzz() {
	if [[ "$FUZZTIME" == 0 || "$FUZZTIME" == off ]]; then
		echo "fuzzing skipped (FUZZTIME=$FUZZTIME)"
		return 0
	fi
	local pkg pkgs name rc=0 found=0 listing
	pkgs="$(go list ./...)" || return 1
	for pkg in $pkgs; do
		listing="$(go test -run '^$' -list '^Fuzz' "$pkg")" || { echo "$listing"; rc=1; continue; }
		for name in $(grep -E '^Fuzz[A-Za-z0-9_]*$' <<<"$listing" || true); do
			found=$((found + 1))
			echo "--- fuzz $pkg $name for $FUZZTIME"
			if ! fuzz_one "$pkg" "$name"; then
				rc=1
			fi
		done
	done
	echo "fuzz targets run: $found"
	return "$rc"
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# port_used port: true if any TCP socket (listening or not, either end) uses it.
port_used() {
	local hex
	hex="$(printf ':%04X ' "$1")"
	grep -qF "$hex" /proc/net/tcp /proc/net/tcp6 2>/dev/null || port_open "$1"
}

# free_port: a port no socket uses, below the usual ephemeral range
# (32768+) so that outgoing connections do not take it before the server binds.
free_port() {
	local p i
	for ((i = 0; i < 200; i++)); do
		p=$((20000 + RANDOM % 12000))
		port_used "$p" || { printf '%s' "$p"; return 0; }
	done
	echo "no free port found" >&2
	return 1
}

# Builds cairn, starts it with JetStream on a free loopback port, runs the Node client tests
# (test/node, then test/node-consumer) against it, stops it with SIGTERM and expects a clean
# exit (status 0).
node_tests() {
	go build -o bin/cairn ./cmd/cairn || return 1
	local port i rc=0 attempt
	CAIRN_LOG="$(mktemp "${TMPDIR:-/tmp}/cairn-test-server.XXXXXX")"
	# JetStream on, with a fresh store directory (removed on exit).
	CAIRN_STORE="$(mktemp -d "${TMPDIR:-/tmp}/cairn-test-store.XXXXXX")"
	for ((attempt = 1; attempt <= 3; attempt++)); do
		port="$(free_port)" || return 1
		./bin/cairn -a 127.0.0.1 -p "$port" -js -sd "$CAIRN_STORE" >"$CAIRN_LOG" 2>&1 &
		CAIRN_PID=$!
		for ((i = 0; i < 100; i++)); do # 10 s
			kill -0 "$CAIRN_PID" 2>/dev/null || break
			port_open "$port" && break
			sleep 0.1
		done
		if kill -0 "$CAIRN_PID" 2>/dev/null && port_open "$port"; then break; fi
		echo "cairn did not start on port $port (attempt $attempt); its log:"
		cat "$CAIRN_LOG"
		kill -KILL "$CAIRN_PID" 2>/dev/null || true
		wait "$CAIRN_PID" 2>/dev/null || true
		CAIRN_PID=""
	done
	[[ -n "$CAIRN_PID" ]] || return 1

	# The client tests, then the consumer, KV and object store acceptance
	# tests, against the same server; both run even if the first fails.
	NATS_URL="nats://127.0.0.1:$port" test/node/run.sh || rc=$?
	NATS_URL="nats://127.0.0.1:$port" test/node-consumer/run.sh || rc=$?

	if ! kill -0 "$CAIRN_PID" 2>/dev/null; then
		echo "cairn died during the Node tests; its log:"
		cat "$CAIRN_LOG"
		wait "$CAIRN_PID" 2>/dev/null || true
		CAIRN_PID=""
		return 1
	fi
	kill -TERM "$CAIRN_PID"
	local stopped=0
	for ((i = 0; i < 100; i++)); do # 10 s
		kill -0 "$CAIRN_PID" 2>/dev/null || { stopped=1; break; }
		sleep 0.1
	done
	if ((!stopped)); then
		echo "cairn did not exit within 10 s of SIGTERM"
		kill -KILL "$CAIRN_PID" 2>/dev/null || true
		rc=1
	fi
	local src=0
	wait "$CAIRN_PID" || src=$?
	CAIRN_PID=""
	if ((stopped && src != 0)); then
		echo "cairn exited with status $src after SIGTERM (nats-server exits 0); its log:"
		tail -n 20 "$CAIRN_LOG"
		rc=1
	fi
	return "$rc"
}

# Starts three cairn servers routed to one another, each with JetStream and its own store (the
# README's "Run a cluster"), waits until their meta group answers, and runs the Node order-processing
# application (test/node-consumer/orders.test.mjs, the unmodified `nats` client) against them with
# its ORDERS stream at num_replicas 3 (NATS_REPLICAS), connected to all three.
node_cluster_tests() {
	go build -o bin/cairn ./cmd/cairn || return 1
	CLUSTER_DIR="$(mktemp -d "${TMPDIR:-/tmp}/cairn-test-cluster.XXXXXX")"
	local -a ports=()
	local p i rc=0 routes urls
	while ((${#ports[@]} < 6)); do
		p="$(free_port)" || return 1
		[[ " ${ports[*]-} " == *" $p "* ]] || ports+=("$p")
	done
	routes="nats://127.0.0.1:${ports[3]},nats://127.0.0.1:${ports[4]},nats://127.0.0.1:${ports[5]}"
	urls="nats://127.0.0.1:${ports[0]},nats://127.0.0.1:${ports[1]},nats://127.0.0.1:${ports[2]}"
	for i in 0 1 2; do
		./bin/cairn -a 127.0.0.1 -p "${ports[i]}" -n "n$((i + 1))" --cluster "nats://127.0.0.1:${ports[i + 3]}" \
			--cluster_name ci --routes "$routes" -js -sd "$CLUSTER_DIR/n$((i + 1))" >"$CLUSTER_DIR/n$((i + 1)).log" 2>&1 &
		CLUSTER_PIDS+=("$!")
	done
	for ((i = 0; i < 300; i++)); do # 60 s: the meta group answers account info
		nats --no-context -s "$urls" account info >/dev/null 2>&1 && break
		sleep 0.2
	done
	if ((i == 300)); then
		echo "the cluster's meta group did not answer within 60 s; the logs:"
		tail -n 20 "$CLUSTER_DIR"/n*.log
		stop_cluster
		return 1
	fi
	(cd test/node-consumer && NATS_URL="$urls" NATS_REPLICAS=3 node --test --test-concurrency=1 --test-timeout=60000 orders.test.mjs) || rc=$?
	if ((rc != 0)); then
		tail -n 20 "$CLUSTER_DIR"/n*.log
	fi
	stop_cluster
	return "$rc"
}

# ---------------------------------------------------------------------------

T0=$SECONDS
echo "cairn tests: $(go version), node $(node --version 2>/dev/null || echo missing), nats CLI $(nats --version 2>/dev/null || echo missing), $(nproc) cores"

step "gofmt" check_gofmt
step "go vet" go vet ./...
step "go test -race" go_test
step "fuzz (each target ${FUZZTIME})" go_fuzz
step "Node nats client tests against bin/cairn" node_tests
step "Node order application, num_replicas 3, against a 3-server cluster" node_cluster_tests

go_test_failures
log "summary ($((SECONDS - T0))s)"
printf '%s\n' "${SUMMARY[@]}"
if ((FAILED)); then
	echo "scripts/test.sh: FAILED"
	exit 1
fi
echo "scripts/test.sh: all steps passed"
