#!/usr/bin/env bash
# Measures `nats bench js pub sync` against an R3 file stream with the
# client on the stream leader's server (bench/compare.sh's "cluster3 js
# pub sync" scenarios connect to the first server, which may be a
# follower). For each round and each server binary in turn (rotating which
# goes first) it starts three servers joined as a cluster, creates
# benchstream with --replicas 3 through the first, reads its leader from
# `nats stream info`, runs the benchmark against the leader's server and
# prints one line: label, leader, msgs/s, load average. docs/benchmarks.md,
# "Where a synchronous publish's time goes".
#
# Usage: bench/pubsync_leader.sh ROUNDS MSGS CLIENTS label=binary ...
#   e.g. bench/pubsync_leader.sh 3 5000 1 cairn=bin/cairn nats=~/go/bin/nats-server
# A binary may be a wrapper script that execs a server (e.g. nats-server
# with a configuration file made from the -sd it is given).
# Environment:
#   PORT_BASE=27300  client ports PORT_BASE+1..3, cluster ports PORT_BASE+11..13
#   NATS_BIN=path    natscli (default: nats from GOBIN)
set -euo pipefail

(($# >= 4)) || { sed -n '2,17p' "$0" >&2; exit 2; }
ROUNDS=$1 MSGS=$2 CLIENTS=$3
shift 3
PORT_BASE="${PORT_BASE:-27300}"
NATS_BIN="${NATS_BIN:-$(go env GOPATH)/bin/nats}"
WORK="$(mktemp -d)"
declare -a PIDS=()

stop_servers() {
	local p
	for p in "${PIDS[@]+"${PIDS[@]}"}"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]+"${PIDS[@]}"}"; do wait "$p" 2>/dev/null || true; done
	PIDS=()
}
trap 'stop_servers; rm -rf "$WORK"' EXIT

nats_at() { # port args...
	local port=$1
	shift
	"$NATS_BIN" --no-context -s "nats://127.0.0.1:$port" "$@" </dev/null
}

# run label binary : one cluster, one measure; prints its line.
run() {
	local label=$1 bin=$2 i j leader="" rate
	local dir="$WORK/$label"
	local routes="nats://127.0.0.1:$((PORT_BASE + 11)),nats://127.0.0.1:$((PORT_BASE + 12)),nats://127.0.0.1:$((PORT_BASE + 13))"
	mkdir -p "$dir"
	for i in 1 2 3; do
		"$bin" -a 127.0.0.1 -p $((PORT_BASE + i)) -n "n$i" --cluster "nats://127.0.0.1:$((PORT_BASE + 10 + i))" \
			--cluster_name bench --routes "$routes" -js -sd "$dir/n$i" >"$dir/server$i.log" 2>&1 &
		PIDS+=($!)
	done
	for ((j = 0; j < 600; j++)); do # 60 s
		nats_at $((PORT_BASE + 1)) stream add benchstream --subjects bench.js --storage file \
			--replicas 3 --defaults >/dev/null 2>&1 && break
		sleep 0.1
	done
	for ((j = 0; j < 100; j++)); do # 10 s
		leader="$(nats_at $((PORT_BASE + 1)) stream info benchstream --json 2>/dev/null |
			sed -nE 's/.*"leader": "n([0-9])".*/\1/p' | head -n 1)"
		[[ -n "$leader" ]] && break
		sleep 0.1
	done
	if [[ -z "$leader" ]]; then
		echo "$label leader=none rate=FAIL"
		stop_servers
		rm -rf "$dir"
		return
	fi
	nats_at $((PORT_BASE + leader)) bench js pub sync bench.js --stream benchstream --size 128 \
		--msgs "$MSGS" --clients "$CLIENTS" --no-progress >"$dir/out" 2>&1 || true
	rate="$(sed -nE 's/.*stats: ([0-9,]+) msgs\/sec.*/\1/p' "$dir/out" | tail -n 1 | tr -d ,)"
	echo "$label leader=n$leader rate=${rate:-FAIL} load=$(cut -d' ' -f1 /proc/loadavg)"
	stop_servers
	rm -rf "$dir"
}

specs=("$@")
for ((r = 0; r < ROUNDS; r++)); do
	for ((k = 0; k < ${#specs[@]}; k++)); do
		spec="${specs[$(((k + r) % ${#specs[@]}))]}"
		run "${spec%%=*}" "${spec#*=}"
	done
done
