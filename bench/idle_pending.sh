#!/usr/bin/env bash
# Idle cost of a million deliveries awaiting acknowledgement (issue 5:
# "Redelivery timers stay cheap with 1,000,000 messages pending
# acknowledgement (measure CPU while idle)"), cairn against nats-server
# v2.15.2 with natscli v0.5.0.
#
# For each server in turn (cairn first, then nats-server, with the same
# flags `-js -sd <fresh dir> -a 127.0.0.1 -p <free port>`) it:
#   1. creates a file stream (`nats stream add benchstream --subjects bench.js
#      --storage file --defaults`) and publishes MSGS 128-byte messages
#      (`nats bench js pub async ... --batch 500`);
#   2. creates the durable pull consumer "idle" with ack_policy explicit,
#      ack_wait 1h and max_ack_pending -1 (`nats consumer add --config`: the
#      CLI's --max-pending=-1 means "ask/default", i.e. 1000);
#   3. fetches all MSGS without acking them, FETCH_BATCH per pull request
#      (bench/fetchnoack: natscli's `nats consumer next --count N --no-ack`
#      sends one request per message, which takes minutes for a million);
#   4. checks that `nats consumer info --json` reports num_ack_pending = MSGS;
#   5. lets the server settle SETTLE_SECS, then reads its CPU time
#      (utime+stime of /proc/<pid>/stat, clock ticks / CLK_TCK) before and
#      after IDLE_SECS during which no client is connected, and its RSS
#      (VmRSS) and peak RSS (VmHWM) at the end.
# It prints a markdown table (and writes it to bench/out/idle_pending.md).
#
# What "idle" includes: cairn writes a durable consumer's state (the whole
# pending set) at most every 100 ms, and less often when that is slow, so
# the last write after the fetch (up to about 0.7 s of CPU for a million
# pending) may fall in the window with the default SETTLE_SECS.
# SETTLE_SECS=30 measures the steady state alone (redelivery timers and
# other periodic work); PPROF=1 shows which is which.
#
# Usage: bench/idle_pending.sh
# Environment:
#   MSGS=1000000         messages published and left pending
#   IDLE_SECS=10         length of the idle measurement
#   SETTLE_SECS=2        wait between the last client and the measurement
#   FETCH_BATCH=50000    messages per pull request while fetching
#   PPROF=1              also take a CPU profile of each server over the idle
#                        window (--profile <port>; saved in the work folder,
#                        implies KEEP_WORK=1); the profile's HTTP request is
#                        the only activity then
#   CAIRN_BIN=path       use this binary as "cairn" instead of building bin/cairn
#   NATS_SERVER_BIN=path nats-server to compare with (default: v2.15.2 from GOBIN)
#   NATS_BIN=path        natscli (default: v0.5.0 from GOBIN)
#   KEEP_WORK=1          keep the temporary folder with server logs and outputs
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT_DIR="$ROOT/bench/out"
MSGS="${MSGS:-1000000}"
IDLE_SECS="${IDLE_SECS:-10}"
SETTLE_SECS="${SETTLE_SECS:-2}"
FETCH_BATCH="${FETCH_BATCH:-50000}"
PPROF="${PPROF:-}"
[[ "$PPROF" == 1 ]] && KEEP_WORK=1
NATS_SERVER_VERSION="v2.15.2"
NATSCLI_VERSION="v0.5.0"
STREAM=benchstream
CONSUMER=idle

BENCH_TAG=idle_pending
STOP_GRACE=30 # a store with a million pending acks takes a while to save
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"

# ensure_idle_tools: the shared tools, then bench/fetchnoack and the clock
# tick rate for the CPU readings.
ensure_idle_tools() {
	ensure_tools
	log "building bench/fetchnoack"
	(cd "$ROOT" && go build -o "$WORK/fetchnoack" ./bench/fetchnoack)
	CLK_TCK="$(getconf CLK_TCK)"
}

# cpu_ticks pid: utime+stime (fields 14 and 15 of /proc/<pid>/stat; the
# command name in field 2 may hold spaces, so count after its ')').
cpu_ticks() {
	local s
	s="$(cat "/proc/$1/stat")"
	s="${s##*) }"
	# shellcheck disable=SC2086 # split into fields on purpose
	set -- $s
	# $1 is field 3 (state): utime is field 14 -> ${12}, stime 15 -> ${13}.
	echo $((${12} + ${13}))
}

status_kib() { awk -v k="$2:" '$1 == k {print $2}' "/proc/$1/status"; }

# run_nats outfile args... : `nats --no-context -s $URL args...`, failing the
# script with its output when it fails.
run_nats() {
	local out="$1"
	shift
	if ! "$NATS_BIN" --no-context -s "$URL" "$@" </dev/null >"$out" 2>&1; then
		tail -n 20 "$out" >&2
		die "nats $* failed"
	fi
}

# ---------------------------------------------------------------------------
# one server

# measure label binary ; appends a row to ROWS
declare -a ROWS=()
measure() {
	local label="$1" bin="$2" dir="$WORK/$1" t0 t1
	mkdir -p "$dir"
	local -a extra=()
	local pport=""
	if [[ "$PPROF" == 1 ]]; then
		pport="$(free_port)"
		extra=(--profile "$pport")
	fi
	start_server "$label" "$bin" "$dir/server.log" -js -sd "$dir/store" "${extra[@]+"${extra[@]}"}"
	URL="nats://127.0.0.1:$SERVER_PORT"
	log "$label: pid $SERVER_PID on $URL"

	run_nats "$dir/stream.out" stream add "$STREAM" --subjects bench.js --storage file --defaults
	t0=$(date +%s.%N)
	run_nats "$dir/pub.out" bench js pub async bench.js --stream "$STREAM" --size 128 --batch 500 --msgs "$MSGS" --no-progress
	t1=$(date +%s.%N)
	local pubs fetchs
	pubs="$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", b-a}')"
	log "$label: published $MSGS in $pubs s"

	printf '{"durable_name":"%s","deliver_policy":"all","ack_policy":"explicit","ack_wait":%d,"max_ack_pending":-1,"replay_policy":"instant"}\n' \
		"$CONSUMER" $((3600 * 1000000000)) >"$dir/consumer.json"
	run_nats "$dir/consumer.out" consumer add "$STREAM" "$CONSUMER" --config "$dir/consumer.json"

	t0=$(date +%s.%N)
	"$WORK/fetchnoack" -s "$URL" -stream "$STREAM" -consumer "$CONSUMER" -n "$MSGS" -batch "$FETCH_BATCH" >"$dir/fetch.out" 2>&1 ||
		{ cat "$dir/fetch.out" >&2; die "$label: fetch failed"; }
	t1=$(date +%s.%N)
	fetchs="$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", b-a}')"
	log "$label: $(cat "$dir/fetch.out")"

	run_nats "$dir/info.json" consumer info "$STREAM" "$CONSUMER" --json
	local pending mack ackwait
	pending="$(jq -r '.num_ack_pending' "$dir/info.json")"
	mack="$(jq -r '.config.max_ack_pending' "$dir/info.json")"
	ackwait="$(jq -r '.config.ack_wait' "$dir/info.json")"
	[[ "$pending" == "$MSGS" ]] || die "$label: num_ack_pending $pending, want $MSGS (info in $dir/info.json)"
	log "$label: num_ack_pending $pending, max_ack_pending $mack, ack_wait ${ackwait}ns"

	sleep "$SETTLE_SECS"
	local c0 c1 ppid=""
	if [[ -n "$pport" ]]; then
		curl -s -o "$dir/idle.cpu.pprof" "http://127.0.0.1:$pport/debug/pprof/profile?seconds=$IDLE_SECS" &
		ppid=$!
		LIVE_PIDS+=("$ppid")
	fi
	c0="$(cpu_ticks "$SERVER_PID")"
	t0=$(date +%s.%N)
	sleep "$IDLE_SECS"
	c1="$(cpu_ticks "$SERVER_PID")"
	t1=$(date +%s.%N)
	if [[ -n "$ppid" ]]; then
		wait "$ppid" || log "$label: profile request failed"
		forget_pid "$ppid"
		log "$label: idle CPU profile in $dir/idle.cpu.pprof"
	fi
	local rss hwm cpu secs pct
	rss="$(status_kib "$SERVER_PID" VmRSS)"
	hwm="$(status_kib "$SERVER_PID" VmHWM)"
	secs="$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f", b-a}')"
	cpu="$(awk -v t=$((c1 - c0)) -v hz="$CLK_TCK" 'BEGIN {printf "%.2f", t/hz}')"
	pct="$(awk -v t=$((c1 - c0)) -v hz="$CLK_TCK" -v s="$secs" 'BEGIN {printf "%.2f", 100*t/hz/s}')"
	log "$label: idle ${secs}s: CPU ${cpu}s (${pct}%), RSS $((rss / 1024)) MiB, peak RSS $((hwm / 1024)) MiB"
	ROWS+=("| $label | $pubs s | $fetchs s | $(printf '%s' "$pending" | sed -E ':a;s/^([0-9]+)([0-9]{3})/\1,\2/;ta') | $cpu s over $secs s | $pct % | $(awk -v k="$rss" 'BEGIN {printf "%.0f", k/1024}') MiB | $(awk -v k="$hwm" 'BEGIN {printf "%.0f", k/1024}') MiB |")
	stop_server
	[[ "${KEEP_WORK:-}" == 1 ]] || rm -rf "$dir/store"
}

main() {
	WORK="$(mktemp -d "${TMPDIR:-/tmp}/cairn-idle.XXXXXX")"
	ensure_idle_tools
	local cairn_v ns_v
	cairn_v="$("$CAIRN_BIN" --version 2>&1 | head -n 1)"
	ns_v="$("$NATS_SERVER_BIN" --version 2>&1 | head -n 1)"
	measure cairn "$CAIRN_BIN"
	measure nats-server "$NATS_SERVER_BIN"

	mkdir -p "$OUT_DIR"
	{
		echo "Idle cost with $(printf '%s' "$MSGS" | sed -E ':a;s/^([0-9]+)([0-9]{3})/\1,\2/;ta') messages pending acknowledgement (file stream, 128 B messages, pull consumer, ack_wait 1h, max_ack_pending -1), measured over ${IDLE_SECS} s after ${SETTLE_SECS} s of settling."
		echo "cairn: $cairn_v; nats-server: $ns_v; $(nproc) CPUs; command: MSGS=$MSGS IDLE_SECS=$IDLE_SECS SETTLE_SECS=$SETTLE_SECS FETCH_BATCH=$FETCH_BATCH bench/idle_pending.sh"
		echo
		echo "| server | publish | fetch, no ack | num_ack_pending | idle CPU (utime+stime) | CPU % of one core | RSS | peak RSS |"
		echo "|---|---:|---:|---:|---:|---:|---:|---:|"
		printf '%s\n' "${ROWS[@]}"
	} | tee "$OUT_DIR/idle_pending.md"
}

main "$@"
