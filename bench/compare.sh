#!/usr/bin/env bash
# Compares cairn with nats-server v2.15.2 using `nats bench` (natscli v0.5.0).
#
# For every scenario and every round it starts cairn and nats-server one
# after the other (rotating which goes first) on a free loopback port with
# the same flags, runs the same `nats` commands against each, and records the
# msgs/s that natscli reports and the server's peak RSS (VmHWM). A scenario
# may name an anchor: a third server, nats-server again with a JetStream
# configuration file (e.g. `sync_interval: always`), run in the same rounds.
# It prints a markdown table of medians and ratios and writes it to
# bench/out/latest.md (raw samples: bench/out/latest-raw.csv).
#
# Usage: bench/compare.sh
# Environment:
#   ROUNDS=5             rounds per scenario (each round runs every server once)
#   SCENARIOS=regex      run only the scenarios whose name matches (grep -E),
#                        e.g. SCENARIOS=js for the JetStream ones
#   CAIRN_BIN=path       use this binary as "cairn" instead of building bin/cairn
#                        (e.g. CAIRN_BIN=~/go/bin/nats-server to test this script)
#   BASE_BIN=path        also run this cairn binary (e.g. one built from main) as
#                        "base" in the same rounds, for a before/after on a busy
#                        machine; the table gets its median, base/nats-server
#                        and cairn/base
#   NATS_SERVER_BIN=path nats-server to compare with (default: v2.15.2 from GOBIN)
#   NATS_BIN=path        natscli (default: v0.5.0 from GOBIN)
#   BENCH_TIMEOUT=300    seconds before one `nats` command is abandoned
#   DRAIN_GRACE=30       seconds the measured clients may run on after the driver ends
#   KEEP_WORK=1          keep the temporary folder with server logs and outputs
#   NO_ANCHOR=1          skip the scenarios' anchors (nats-server with their
#                        jetstream options), which take long
#   SCRAPE=1             also run cairn with monitoring on (-m) while a scraper
#                        GETs /metrics and /jsz?streams=true&consumers=true
#                        every SCRAPE_EVERY seconds (default 0.1) during the
#                        measure, as "cairn+scrape" in the same rounds; the
#                        table gets its median and the ratio cairn+scrape/cairn
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT_DIR="$ROOT/bench/out"
ROUNDS="${ROUNDS:-5}"
# The command line as run, for the report.
# shellcheck disable=SC2016 # the single quotes are literal text in the report
RUN_CMD="ROUNDS=$ROUNDS${SCENARIOS:+ SCENARIOS='$SCENARIOS'}${CAIRN_BIN:+ CAIRN_BIN=$CAIRN_BIN}${BASE_BIN:+ BASE_BIN=$BASE_BIN}${SCRAPE:+ SCRAPE=$SCRAPE}${NO_ANCHOR:+ NO_ANCHOR=$NO_ANCHOR} bench/compare.sh"
SCRAPE="${SCRAPE:-}"
BASE_BIN="${BASE_BIN:-}"
BASE_BIN="${BASE_BIN/#\~/$HOME}"
SCRAPE_EVERY="${SCRAPE_EVERY:-0.1}"
SCRAPE_BIN=""
BENCH_TIMEOUT="${BENCH_TIMEOUT:-300}"
DRAIN_GRACE="${DRAIN_GRACE:-30}"
NATS_SERVER_VERSION="v2.15.2"
NATSCLI_VERSION="v0.5.0"

# ---------------------------------------------------------------------------
# Scenarios, one per line:
#   name | extra server flags | setup | measure | drive | anchor
# measure and drive are arguments to `nats bench` (the script adds the server
# URL and --no-progress).
#   setup   (optional) runs to completion first, e.g. to create or fill a
#           stream: one or more steps separated by ";". A step is arguments
#           to `nats bench`, or, after the prefix "nats:", arguments to any
#           `nats` command (the script adds --no-context and the server URL),
#           e.g. "nats: stream add S --subjects s --storage file --defaults";
#           after the prefix "bg:", arguments to `nats bench` that keep
#           running in the background (e.g. service responders) until the
#           measure is done: the next step starts once its clients started;
#   measure runs next; its reported msgs/s is the result;
#   drive   (optional) starts once measure's clients are running (natscli
#           logs "[1] Starting ...") and runs alongside it, e.g. the
#           publisher feeding a measured subscriber;
#   anchor  (optional) options for a jetstream block, e.g.
#           "sync_interval: always": then a third server, nats-server with
#           the same flags (less -sd) plus `-c <file>` holding
#           `jetstream { store_dir: "{STORE}", <anchor> }`, runs in every round
#           too, and the table gets its median and the ratio cairn/anchor.
# In the server flags, {STORE} becomes a fresh empty folder per run (for -sd).
# The server flag {CLUSTER3} starts three servers instead of one, joined as a
# cluster with nats-server's flags (--cluster, --cluster_name, --routes
# listing all three); a command (setup step, measure or drive) starting with
# @N then runs against server N (default @1), and the peak RSS reported is
# the largest of the three servers'.
#
# Most JetStream scenarios create the stream with a plain `nats stream add`;
# the "--create" ones let `nats bench js pub --create` create it, as most
# users run it: file storage, max_bytes 1 GB, discard new, a 2 minute
# duplicate window, allow_direct, allow_atomic and allow_batched. `nats
# bench js pub sync` has no --batch (one publish in flight per client);
# async keeps up to 500 in flight per client.
JS_FLAGS='-js -sd {STORE}'
# A JetStream cluster's servers each keep their own store ({NODE}: n1..n3),
# and its stream has three replicas (the "cluster3 js" scenarios).
JS_FLAGS_NODE='-js -sd {STORE}/{NODE}'
JS_ADD_R3='nats: stream add benchstream --subjects bench.js --storage file --replicas 3 --defaults'
# 100 users with 20 permission rules each (the "perms" scenarios).
PERMS_CONF="$ROOT/bench/perms100.conf"
# TLS for clients (the "tls" scenarios): a certificate for 127.0.0.1 from
# a throwaway CA whose key was deleted (bench/tls/README).
TLS_DIR="$ROOT/bench/tls"
TLS_FLAGS="--tls --tlscert $TLS_DIR/server.pem --tlskey $TLS_DIR/server-key.pem"
JS_ADD_FILE='nats: stream add benchstream --subjects bench.js --storage file --defaults'
JS_ADD_MEM='nats: stream add benchstream --subjects bench.js --storage memory --defaults'
# persist_mode async (ADR-56): cairn acknowledges once written, before the
# fsync; nats-server before the write (docs/durability.md section 3).
JS_ADD_FILE_ASYNC='nats: stream add benchstream --subjects bench.js --storage file --persist-mode async --defaults'
JS_ADD_INTEREST='nats: stream add benchstream --subjects bench.js --storage file --retention interest --defaults'
JS_ADD_WQ='nats: stream add benchstream --subjects bench.js --storage file --retention work --defaults'
JS_ADD_COUNTER='nats: stream add benchstream --subjects bench.js --storage file --allow-counter --defaults'
# A counter increment (ADR-49): an empty payload with Nats-Incr, all on
# one subject (one counter), so each one reads the value the last left.
JS_INCR='bench.js --stream benchstream --payload /dev/null -H Nats-Incr:1'
JS_PUB='bench.js --stream benchstream --size 128'
JS_FILL="js pub async $JS_PUB --batch 500 --msgs 200000"
SCENARIO_LIST="
pub 128B x1M             | | | pub bench.pub --size 128 --msgs 1000000 |
pub+sub 128B x1M (sub)   | | | sub bench.ps --size 128 --msgs 1000000 | pub bench.ps --size 128 --msgs 1000000
js pub async file 1c x200k | $JS_FLAGS | $JS_ADD_FILE | js pub async $JS_PUB --batch 500 --msgs 200000 --clients 1 | | sync_interval: always
js pub async file 4c x200k | $JS_FLAGS | $JS_ADD_FILE | js pub async $JS_PUB --batch 500 --msgs 200000 --clients 4 | | sync_interval: always
js pub async --create 1c x200k | $JS_FLAGS | | js pub async $JS_PUB --batch 500 --msgs 200000 --clients 1 --create |
js pub async --create 4c x200k | $JS_FLAGS | | js pub async $JS_PUB --batch 500 --msgs 200000 --clients 4 --create |
js pub sync file 1c x10k   | $JS_FLAGS | $JS_ADD_FILE | js pub sync $JS_PUB --msgs 10000 --clients 1 | | sync_interval: always
js pub sync file 4c x10k   | $JS_FLAGS | $JS_ADD_FILE | js pub sync $JS_PUB --msgs 10000 --clients 4 | | sync_interval: always
js pub async file persist async 1c x200k | $JS_FLAGS | $JS_ADD_FILE_ASYNC | js pub async $JS_PUB --batch 500 --msgs 200000 --clients 1 |
js pub async file persist async 4c x200k | $JS_FLAGS | $JS_ADD_FILE_ASYNC | js pub async $JS_PUB --batch 500 --msgs 200000 --clients 4 |
js pub sync file persist async 1c x10k | $JS_FLAGS | $JS_ADD_FILE_ASYNC | js pub sync $JS_PUB --msgs 10000 --clients 1 |
js pub sync file persist async 4c x10k | $JS_FLAGS | $JS_ADD_FILE_ASYNC | js pub sync $JS_PUB --msgs 10000 --clients 4 |
js pub async mem 1c x200k  | $JS_FLAGS | $JS_ADD_MEM | js pub async $JS_PUB --batch 500 --msgs 200000 --clients 1 |
js pub async mem 4c x200k  | $JS_FLAGS | $JS_ADD_MEM | js pub async $JS_PUB --batch 500 --msgs 200000 --clients 4 |
js pub sync mem 1c x20k    | $JS_FLAGS | $JS_ADD_MEM | js pub sync $JS_PUB --msgs 20000 --clients 1 |
js pub sync mem 4c x20k    | $JS_FLAGS | $JS_ADD_MEM | js pub sync $JS_PUB --msgs 20000 --clients 4 |
js fetch file x200k        | $JS_FLAGS | $JS_ADD_FILE; $JS_FILL | js fetch --stream benchstream --msgs 200000 --batch 500 --acks explicit |
js consume file x200k      | $JS_FLAGS | $JS_ADD_FILE; $JS_FILL | js consume --stream benchstream --msgs 200000 --batch 500 --acks explicit |
js consume file doubleack 1c x20k | $JS_FLAGS | $JS_ADD_FILE; $JS_FILL | js consume --stream benchstream --msgs 20000 --batch 500 --acks explicit --doubleack --clients 1 | | sync_interval: always
js consume file doubleack 4c x20k | $JS_FLAGS | $JS_ADD_FILE; $JS_FILL | js consume --stream benchstream --msgs 20000 --batch 500 --acks explicit --doubleack --clients 4 | | sync_interval: always
js ordered file x200k      | $JS_FLAGS | $JS_ADD_FILE; $JS_FILL | js ordered --stream benchstream --msgs 200000 |
js get batch 10k file x200k | $JS_FLAGS | $JS_ADD_FILE; $JS_FILL | js get batch --stream benchstream --msgs 200000 --batch 10000 |
js pub async file interest, no consumers, 1c x200k | $JS_FLAGS | $JS_ADD_INTEREST | js pub async $JS_PUB --batch 500 --msgs 200000 --clients 1 |
js consume file workqueue x200k | $JS_FLAGS | $JS_ADD_WQ; $JS_FILL | js consume --stream benchstream --msgs 200000 --batch 500 --acks explicit |
js counter incr async file 1c x200k | $JS_FLAGS | $JS_ADD_COUNTER | js pub async $JS_INCR --batch 500 --msgs 200000 --clients 1 | | sync_interval: always
js counter incr async file 4c x200k | $JS_FLAGS | $JS_ADD_COUNTER | js pub async $JS_INCR --batch 500 --msgs 200000 --clients 4 | | sync_interval: always
js counter incr sync file 4c x10k | $JS_FLAGS | $JS_ADD_COUNTER | js pub sync $JS_INCR --msgs 10000 --clients 4 | | sync_interval: always
cluster3 js pub sync R3 file 1c x5k | {CLUSTER3} $JS_FLAGS_NODE | $JS_ADD_R3 | js pub sync $JS_PUB --msgs 5000 --clients 1 | | sync_interval: always
cluster3 js pub sync R3 file 4c x10k | {CLUSTER3} $JS_FLAGS_NODE | $JS_ADD_R3 | js pub sync $JS_PUB --msgs 10000 --clients 4 | | sync_interval: always
cluster3 js pub async R3 file 1c x100k | {CLUSTER3} $JS_FLAGS_NODE | $JS_ADD_R3 | js pub async $JS_PUB --batch 500 --msgs 100000 --clients 1 | | sync_interval: always
cluster3 js pub async R3 file 4c x100k | {CLUSTER3} $JS_FLAGS_NODE | $JS_ADD_R3 | js pub async $JS_PUB --batch 500 --msgs 100000 --clients 4 | | sync_interval: always
cluster3 js fetch R3 file x50k | {CLUSTER3} $JS_FLAGS_NODE | $JS_ADD_R3; js pub async $JS_PUB --batch 500 --msgs 50000 | js fetch --stream benchstream --msgs 50000 --batch 500 --acks explicit |
cluster3 js consume R3 file x50k | {CLUSTER3} $JS_FLAGS_NODE | $JS_ADD_R3; js pub async $JS_PUB --batch 500 --msgs 50000 | js consume --stream benchstream --msgs 50000 --batch 500 --acks explicit |
cluster3 js consume R3 file doubleack 1c x5k | {CLUSTER3} $JS_FLAGS_NODE | $JS_ADD_R3; js pub async $JS_PUB --batch 500 --msgs 5000 | js consume --stream benchstream --msgs 5000 --batch 500 --acks explicit --doubleack --clients 1 |
perms pub 128B x1M, 100 users x 20 rules | -c $PERMS_CONF | | pub bench.pub --size 128 --msgs 1000000 --user u7 --password p |
perms pub+sub 128B x1M, 100 users x 20 rules (sub) | -c $PERMS_CONF | | sub bench.ps --size 128 --msgs 1000000 --user u8 --password p | pub bench.ps --size 128 --msgs 1000000 --user u7 --password p
tls pub 128B x1M | $TLS_FLAGS | | pub bench.pub --size 128 --msgs 1000000 --tlsca $TLS_DIR/ca.pem |
tls pub+sub 128B x1M (sub) | $TLS_FLAGS | | sub bench.ps --size 128 --msgs 1000000 --tlsca $TLS_DIR/ca.pem | pub bench.ps --size 128 --msgs 1000000 --tlsca $TLS_DIR/ca.pem
cluster3 pub n1 sub n2 128B x1M (sub) | {CLUSTER3} | | @2 sub bench.ps --size 128 --msgs 1000000 | @1 pub bench.ps --size 128 --msgs 1000000
cluster3 queue group on n1+n2+n3, requests on n1, 4c x50k | {CLUSTER3} | @1 bg: service serve bench.svc --clients 1; @2 bg: service serve bench.svc --clients 1; @3 bg: service serve bench.svc --clients 1 | @1 service request bench.svc --clients 4 --msgs 50000 |
"


# ---------------------------------------------------------------------------
BENCH_TAG=compare
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"

peak_rss_kib() { awk '/^VmHWM:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }

# ---------------------------------------------------------------------------
# one measurement

# rate_of file: the msgs/sec of the (aggregated) stats line natscli prints.
rate_of() {
	[[ -f "$1" ]] || return 0
	sed -nE 's/.*stats: ([0-9,]+) msgs\/sec.*/\1/p' "$1" | tail -n 1 | tr -d ,
}

# nats_bg outfile url args... : starts `nats --no-context -s url args...` in
# the background, bounded by BENCH_TIMEOUT; sets BG_PID. Waiting on a
# background job (rather than running it in the foreground) keeps Ctrl-C and
# TERM responsive: the traps run at once and stop everything this script
# started.
BG_PID=""
nats_bg() {
	local out="$1" url="$2"
	shift 2
	timeout -k 5 "$BENCH_TIMEOUT" "$NATS_BIN" --no-context -s "$url" "$@" </dev/null >"$out" 2>&1 &
	BG_PID=$!
	LIVE_PIDS+=("$BG_PID")
}

# bench_bg outfile url args... : `nats bench args... --no-progress` via nats_bg.
bench_bg() {
	local out="$1" url="$2"
	shift 2
	nats_bg "$out" "$url" bench "$@" --no-progress
}

# bench_wait pid : waits for a nats_bg/bench_bg job; returns its exit status.
bench_wait() {
	local rc=0
	wait "$1" || rc=$?
	forget_pid "$1"
	return "$rc"
}

# target_of command : sets TARGET_URL to the server a command runs against
# (its @N prefix, default server 1) and TARGET_CMD to the command without it.
TARGET_URL=""
TARGET_CMD=""
target_of() {
	local cmd="$1" n=1
	if [[ "$cmd" =~ ^@([1-9])[[:space:]]+(.*)$ ]]; then
		n="${BASH_REMATCH[1]}"
		cmd="${BASH_REMATCH[2]}"
	fi
	((n <= ${#SERVER_PORTS[@]})) || die "command '$1' names server $n of ${#SERVER_PORTS[@]}"
	TARGET_URL="nats://127.0.0.1:${SERVER_PORTS[n - 1]}"
	TARGET_CMD="$cmd"
}

# run_setup dir url setup : runs the setup steps (see SCENARIO_LIST) in order;
# returns 1 at the first that fails. Background steps go to SETUP_BG_PIDS.
declare -a SETUP_BG_PIDS=()
run_setup() {
	local dir="$1" url="$2" setup="$3" step n=0
	local -a steps=() args=()
	IFS=';' read -r -a steps <<<"$setup"
	for step in "${steps[@]+"${steps[@]}"}"; do
		step="$(trim "$step")"
		[[ -n "$step" ]] || continue
		n=$((n + 1))
		target_of "$step"
		step="$TARGET_CMD"
		url="$TARGET_URL"
		if [[ "$step" == bg:* ]]; then
			read -r -a args <<<"${step#bg:}"
			bench_bg "$dir/setup$n.out" "$url" "${args[@]}"
			SETUP_BG_PIDS+=("$BG_PID")
			local i
			for ((i = 0; i < 200; i++)); do
				grep -qE '\[[0-9]+\] Starting' "$dir/setup$n.out" 2>/dev/null && break
				kill -0 "$BG_PID" 2>/dev/null || { log "background setup step $n ended early: $step"; return 1; }
				sleep 0.1
			done
			continue
		fi
		if [[ "$step" == nats:* ]]; then
			read -r -a args <<<"${step#nats:}"
			nats_bg "$dir/setup$n.out" "$url" "${args[@]}"
		else
			read -r -a args <<<"$step"
			bench_bg "$dir/setup$n.out" "$url" "${args[@]}"
		fi
		if ! bench_wait "$BG_PID"; then
			log "setup step $n failed: $step"
			tail -n 5 "$dir/setup$n.out" >&2
			return 1
		fi
	done
}

# run_once label binary scenario_index round ; sets RUN_RATE (msgs/s or FAIL)
# and RUN_RSS (server peak RSS in KiB). The label "anchor" runs the binary
# with the scenario's anchor configuration file (see SCENARIO_LIST). Runs in
# the main shell (never in $(...)) so that the EXIT trap knows every process
# it started.
RUN_RATE=""
RUN_RSS=""
run_once() {
	local label="$1" bin="$2" idx="$3" round="$4"
	local flags="${SC_FLAGS[$idx]}" setup="${SC_SETUP[$idx]}" measure="${SC_MEASURE[$idx]}" drive="${SC_DRIVE[$idx]}"
	local dir="$WORK/s$idx-r$round-$label" i cluster=0
	mkdir -p "$dir"
	flags="${flags//\{STORE\}/$dir/store}"
	if [[ "$flags" == *"{CLUSTER3}"* ]]; then
		cluster=1
		flags="${flags//\{CLUSTER3\}/}"
	fi
	local -a fl=() measure_a=() drive_a=()
	read -r -a fl <<<"$flags"
	if [[ "$label" == anchor ]]; then
		# nats-server refuses a store_dir in both the file and the flags, so
		# the file gets it and -sd/--store_dir leaves the flags.
		local -a kept=()
		for ((i = 0; i < ${#fl[@]}; i++)); do
			case "${fl[i]}" in
			-sd | --sd | -store_dir | --store_dir) i=$((i + 1)) ;;
			*) kept+=("${fl[i]}") ;;
			esac
		done
		if ((cluster)); then
			# One file per server, each with its own store; start_cluster3
			# puts the server's name where {NODE} is.
			for i in 1 2 3; do
				printf 'jetstream {\n  store_dir: "%s"\n  %s\n}\n' "$dir/store/n$i" "${SC_ANCHOR[$idx]}" >"$dir/anchor-n$i.conf"
			done
			fl=("${kept[@]+"${kept[@]}"}" -c "$dir/anchor-{NODE}.conf")
		else
			printf 'jetstream {\n  store_dir: "%s"\n  %s\n}\n' "$dir/store" "${SC_ANCHOR[$idx]}" >"$dir/anchor.conf"
			fl=("${kept[@]+"${kept[@]}"}" -c "$dir/anchor.conf")
		fi
	fi

	local mport=""
	if [[ "$label" == cairn+scrape ]]; then
		mport="$(free_port)" || die "no free port found"
		fl+=(-m "$mport")
	fi
	if ((cluster)); then
		start_cluster3 "$label" "$bin" "$dir" "${fl[@]+"${fl[@]}"}"
	else
		start_server "$label" "$bin" "$dir/server.log" "${fl[@]+"${fl[@]}"}"
		SERVER_PIDS=("$SERVER_PID")
		SERVER_PORTS=("$SERVER_PORT")
	fi
	local url="nats://127.0.0.1:$SERVER_PORT" ok=1 mpid measure_url drive_url
	target_of "$measure"
	measure_url="$TARGET_URL"
	read -r -a measure_a <<<"$TARGET_CMD"
	drive_url="$url"
	if [[ -n "$drive" ]]; then
		target_of "$drive"
		drive_url="$TARGET_URL"
		read -r -a drive_a <<<"$TARGET_CMD"
	fi

	SETUP_BG_PIDS=()
	if [[ -n "$setup" ]] && ! run_setup "$dir" "$url" "$setup"; then
		ok=0
		log "$label: setup failed"
	fi
	# Background setup clients subscribed; give their interest a moment to
	# cross the routes (as for drive, below).
	((${#SETUP_BG_PIDS[@]} == 0)) || sleep 0.5

	local spid=""
	if ((ok)) && [[ -n "$mport" ]]; then
		scrape_loop "http://127.0.0.1:$mport" "$dir/scrapes" &
		spid=$!
		LIVE_PIDS+=("$spid")
	fi
	if ((ok)); then
		bench_bg "$dir/measure.out" "$measure_url" "${measure_a[@]}"
		mpid="$BG_PID"
		if ((${#drive_a[@]})); then
			# natscli logs "[n] Starting ..." just before its clients subscribe.
			for ((i = 0; i < 200; i++)); do
				grep -qE '\[[0-9]+\] Starting' "$dir/measure.out" 2>/dev/null && break
				kill -0 "$mpid" 2>/dev/null || break
				sleep 0.1
			done
			sleep 0.5
			bench_bg "$dir/drive.out" "$drive_url" "${drive_a[@]}"
			bench_wait "$BG_PID" || { ok=0; log "$label: drive failed:"; tail -n 5 "$dir/drive.out" >&2; }
			# Once the driver is done, the measured clients get DRAIN_GRACE
			# seconds to finish (a subscriber that lost messages never would).
			for ((i = 0; i < DRAIN_GRACE * 10; i++)); do
				kill -0 "$mpid" 2>/dev/null || break
				sleep 0.1
			done
			if kill -0 "$mpid" 2>/dev/null; then
				log "$label: measured clients still running ${DRAIN_GRACE}s after the driver finished (messages lost?); stopping them"
				kill -TERM "$mpid" 2>/dev/null || true
				ok=0
			fi
		fi
		bench_wait "$mpid" || ok=0
		if ((!ok)) || grep -q 'WARNING:' "$dir/measure.out"; then
			ok=0
			log "$label: measure failed or warned:"
			tail -n 5 "$dir/measure.out" >&2
		fi
	fi

	if [[ -n "$spid" ]]; then
		stop_pid "$spid" 3
		forget_pid "$spid"
		local scrapes
		scrapes="$(wc -l <"$dir/scrapes" 2>/dev/null || echo 0)"
		if grep -qv '^200 200$' "$dir/scrapes" 2>/dev/null; then
			ok=0
			log "$label: a scrape failed: $(grep -v '^200 200$' "$dir/scrapes" | head -n 1)"
		fi
		log "$label: $scrapes scrapes of /metrics and /jsz during the measure"
	fi
	local pid rss
	for pid in "${SETUP_BG_PIDS[@]+"${SETUP_BG_PIDS[@]}"}"; do
		stop_pid "$pid" 3
		forget_pid "$pid"
	done
	SETUP_BG_PIDS=()
	RUN_RSS=0
	for pid in "${SERVER_PIDS[@]}"; do
		rss="$(peak_rss_kib "$pid")"
		((rss > RUN_RSS)) && RUN_RSS="$rss"
		if ! kill -0 "$pid" 2>/dev/null; then
			ok=0
			log "$label (pid $pid) died during the run; its logs:"
			tail -n 20 "$dir"/server*.log >&2 || true
		fi
	done
	for pid in "${SERVER_PIDS[@]}"; do
		SERVER_PID="$pid"
		stop_server
	done
	SERVER_PIDS=()
	SERVER_PORTS=()
	RUN_RATE="$(rate_of "$dir/measure.out")"
	if ((!ok)) || [[ -z "$RUN_RATE" ]]; then RUN_RATE=FAIL; fi
	[[ -n "$RUN_RSS" ]] || RUN_RSS=0
}

# scrape_loop url file : runs bench/scrape, which every SCRAPE_EVERY
# seconds GETs url/metrics and url/jsz?streams=true&consumers=true, as
# Prometheus and a JetStream dashboard would, writing both HTTP status
# codes per round to file, until killed.
scrape_loop() {
	exec "$SCRAPE_BIN" -every "${SCRAPE_EVERY}s" "$1/metrics" "$1/jsz?streams=true&consumers=true" >"$2"
}

# start_cluster3 label binary dir flags... : starts three servers joined by
# routes (each with --routes naming all three, as the README's "Run a
# cluster" does) and waits until each lists the three in INFO connect_urls;
# sets SERVER_PIDS, SERVER_PORTS, and SERVER_PID/SERVER_PORT to server 1's.
declare -a SERVER_PIDS=() SERVER_PORTS=()
start_cluster3() {
	local label="$1" bin="$2" dir="$3" i j p
	shift 3
	local -a cports=() rports=()
	for ((i = 0; i < 6; i++)); do
		for ((j = 0; j < 50; j++)); do
			p="$(free_port)" || die "no free port found"
			[[ " ${cports[*]-} ${rports[*]-} " == *" $p "* ]] || break
		done
		if ((i < 3)); then cports+=("$p"); else rports+=("$p"); fi
	done
	local routes="nats://127.0.0.1:${rports[0]},nats://127.0.0.1:${rports[1]},nats://127.0.0.1:${rports[2]}"
	SERVER_PIDS=()
	SERVER_PORTS=("${cports[@]}")
	local -a nfl=()
	local f
	for ((i = 0; i < 3; i++)); do
		nfl=()
		for f in "$@"; do nfl+=("${f//\{NODE\}/n$((i + 1))}"); done # {NODE}: each server its own store
		"$bin" -a 127.0.0.1 -p "${cports[i]}" -n "n$((i + 1))" --cluster "nats://127.0.0.1:${rports[i]}" \
			--cluster_name bench --routes "$routes" "${nfl[@]+"${nfl[@]}"}" >"$dir/server$((i + 1)).log" 2>&1 &
		SERVER_PIDS+=("$!")
		LIVE_PIDS+=("$!")
	done
	for ((i = 0; i < 3; i++)); do
		for ((j = 0; j < 200; j++)); do # 20 s
			[[ "$(connect_urls_count "${cports[i]}")" == 3 ]] && break
			kill -0 "${SERVER_PIDS[i]}" 2>/dev/null || die "$label server $((i + 1)) exited at start: $(tail -n 5 "$dir/server$((i + 1)).log")"
			sleep 0.1
		done
		((j < 200)) || die "$label cluster did not form: $(tail -n 5 "$dir/server$((i + 1)).log")"
	done
	if [[ " $* " == *" -js "* ]]; then
		# The JetStream cluster is ready once an R3 stream can be placed.
		for ((j = 0; j < 300; j++)); do # 30 s
			"$NATS_BIN" --no-context -s "nats://127.0.0.1:${cports[0]}" stream add benchready --subjects bench.ready \
				--replicas 3 --storage memory --defaults </dev/null >/dev/null 2>&1 && break
			sleep 0.1
		done
		((j < 300)) || die "$label JetStream cluster did not form: $(tail -n 5 "$dir/server1.log")"
		"$NATS_BIN" --no-context -s "nats://127.0.0.1:${cports[0]}" stream rm -f benchready </dev/null >/dev/null 2>&1
	fi
	SERVER_PID="${SERVER_PIDS[0]}"
	SERVER_PORT="${cports[0]}"
}

# connect_urls_count port : the number of connect_urls in the INFO the
# server on port sends a new client (0 if none or unreachable).
connect_urls_count() {
	local line
	line="$( (exec 3<>"/dev/tcp/127.0.0.1/$1" && timeout 1 head -n 1 <&3) 2>/dev/null)" || { echo 0; return; }
	if [[ "$line" =~ \"connect_urls\":\[([^]]*)\] ]]; then
		tr ',' '\n' <<<"${BASH_REMATCH[1]}" | grep -c .
	else
		echo 0
	fi
}

# ---------------------------------------------------------------------------
# stats and formatting

median() { # numbers... ; prints the median (empty if none)
	printf '%s\n' "$@" | { grep -E '^[0-9]+$' || true; } | sort -n | awk '{a[NR]=$1} END {if (NR==0) exit; if (NR%2) print a[(NR+1)/2]; else printf "%.0f\n", (a[NR/2]+a[NR/2+1])/2}'
}
maxof() { printf '%s\n' "$@" | sort -n | tail -n 1; }
commas() { [[ -z "$1" ]] && { printf 'n/a'; return; }; printf '%s' "$1" | sed -E ':a;s/^([0-9]+)([0-9]{3})/\1,\2/;ta'; }
mib() { awk -v k="$1" 'BEGIN {printf "%.1f", k/1024}'; }
ratio() { [[ -z "$1" || -z "$2" ]] && { printf 'n/a'; return; }; awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a/b}'; }

# ---------------------------------------------------------------------------

main() {
	[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || die "ROUNDS must be a positive integer"
	ensure_tools
	[[ -z "$BASE_BIN" || -x "$BASE_BIN" ]] || die "BASE_BIN: no cairn binary at $BASE_BIN"
	mkdir -p "$OUT_DIR"
	WORK="$(mktemp -d "${TMPDIR:-/tmp}/cairn-bench.XXXXXX")"
	if [[ -n "$SCRAPE" ]]; then
		SCRAPE_BIN="$WORK/scrape"
		(cd "$ROOT" && go build -o "$SCRAPE_BIN" ./bench/scrape) || die "cannot build bench/scrape"
	fi

	declare -ga SC_NAME=() SC_FLAGS=() SC_SETUP=() SC_MEASURE=() SC_DRIVE=() SC_ANCHOR=()
	local line name flags setup measure drive anchor
	while IFS= read -r line; do
		[[ -z "$(trim "$line")" || "$(trim "$line")" == \#* ]] && continue
		anchor=""
		IFS='|' read -r name flags setup measure drive anchor <<<"$line"
		[[ -z "${NO_ANCHOR:-}" ]] || anchor=""
		name="$(trim "$name")"
		if [[ -n "${SCENARIOS:-}" ]] && ! grep -qE -- "$SCENARIOS" <<<"$name"; then continue; fi
		[[ -n "$(trim "$measure")" ]] || die "scenario '$name' has no measure command"
		[[ "$anchor" != *'|'* ]] || die "scenario '$name' has too many columns"
		SC_NAME+=("$name")
		SC_FLAGS+=("$(trim "$flags")")
		SC_SETUP+=("$(trim "$setup")")
		SC_MEASURE+=("$(trim "$measure")")
		SC_DRIVE+=("$(trim "${drive:-}")")
		SC_ANCHOR+=("$(trim "${anchor:-}")")
	done <<<"$SCENARIO_LIST"
	((${#SC_NAME[@]})) || die "no scenario matches SCENARIOS='${SCENARIOS:-}'"

	# The anchor columns appear only if a selected scenario has an anchor;
	# their heading names its options if all scenarios share them.
	local anchors anchor_name="anchor"
	anchors="$(printf '%s\n' "${SC_ANCHOR[@]}" | { grep -v '^$' || true; } | sort -u)"
	if [[ -n "$anchors" && "$(wc -l <<<"$anchors")" -eq 1 ]]; then
		anchor_name="nats-server \`$anchors\`"
	fi

	log "cairn:       $CAIRN_BIN"
	[[ -z "$BASE_BIN" ]] || log "base:        $BASE_BIN"
	log "nats-server: $NATS_SERVER_BIN ($("$NATS_SERVER_BIN" --version 2>&1 | head -n 1))"
	log "nats:        $NATS_BIN ($("$NATS_BIN" --version 2>&1 | head -n 1))"
	log "rounds: $ROUNDS, scenarios: ${#SC_NAME[@]}, cores: $(nproc), load average: $(cut -d' ' -f1-3 /proc/loadavg)"
	[[ -z "$anchors" ]] || log "anchor: $NATS_SERVER_BIN with jetstream { $(tr '\n' ' ' <<<"$anchors")}"

	local raw="$OUT_DIR/latest-raw.csv"
	echo "scenario,round,server,msgs_per_sec,peak_rss_kib" >"$raw"

	local -a rows=()
	local failures=0 idx round label bin rate rss i n
	for idx in "${!SC_NAME[@]}"; do
		# Servers of this scenario, in the order of round 1; each round
		# rotates the order by one, so every server goes first in turn.
		local -a servers=(cairn nats-server) order=()
		[[ -z "$SCRAPE" ]] || servers=(cairn cairn+scrape nats-server)
		[[ -z "$BASE_BIN" ]] || servers=("${servers[0]}" base "${servers[@]:1}")
		[[ -z "${SC_ANCHOR[$idx]}" ]] || servers+=(anchor)
		n=${#servers[@]}
		declare -A rates=() rsses=() fails=()
		for label in "${servers[@]}"; do rates[$label]=""; rsses[$label]=""; fails[$label]=0; done
		for ((round = 1; round <= ROUNDS; round++)); do
			order=()
			for ((i = 0; i < n; i++)); do order+=("${servers[(round - 1 + i) % n]}"); done
			for label in "${order[@]}"; do
				case "$label" in
				cairn*) bin="$CAIRN_BIN" ;;
				base) bin="$BASE_BIN" ;;
				*) bin="$NATS_SERVER_BIN" ;;
				esac
				run_once "$label" "$bin" "$idx" "$round"
				rate="$RUN_RATE"
				rss="$RUN_RSS"
				log "$(printf '%-26s round %d/%d  %-11s %12s msgs/s  peak RSS %s MiB' "${SC_NAME[$idx]}" "$round" "$ROUNDS" "$label" "$(commas "$rate")" "$(mib "$rss")")"
				echo "\"${SC_NAME[$idx]}\",$round,$label,$rate,$rss" >>"$raw"
				rsses[$label]+=" $rss"
				if [[ "$rate" == FAIL ]]; then
					fails[$label]=$((${fails[$label]} + 1))
				else
					rates[$label]+=" $rate"
				fi
			done
		done
		local -A med=() peak=()
		local note=""
		for label in "${servers[@]}"; do
			failures=$((failures + ${fails[$label]}))
			# shellcheck disable=SC2086 # the lists are space-separated numbers
			med[$label]="$(median ${rates[$label]})"
			# shellcheck disable=SC2086
			peak[$label]="$(maxof ${rsses[$label]})"
			((${fails[$label]})) && note+=" ($label failed ${fails[$label]}/$ROUNDS)"
		done
		local row
		row="| ${SC_NAME[$idx]}$note | $(commas "${med[cairn]}") | $(commas "${med[nats-server]}") | $(ratio "${med[cairn]}" "${med[nats-server]}") |"
		if [[ -n "$anchors" ]]; then
			if [[ -n "${SC_ANCHOR[$idx]}" ]]; then
				row+=" $(commas "${med[anchor]}") | $(ratio "${med[cairn]}" "${med[anchor]}") |"
			else
				row+=" – | – |"
			fi
		fi
		[[ -z "$SCRAPE" ]] || row+=" $(commas "${med[cairn+scrape]}") | $(ratio "${med[cairn+scrape]}" "${med[cairn]}") |"
		[[ -z "$BASE_BIN" ]] || row+=" $(commas "${med[base]}") | $(ratio "${med[base]}" "${med[nats-server]}") | $(ratio "${med[cairn]}" "${med[base]}") |"
		row+=" $(mib "${peak[cairn]}") | $(mib "${peak[nats-server]}") |"
		if [[ -n "$anchors" ]]; then
			if [[ -n "${SC_ANCHOR[$idx]}" ]]; then row+=" $(mib "${peak[anchor]}") |"; else row+=" – |"; fi
		fi
		rows+=("$row")
		unset rates rsses fails med peak
	done

	local table
	table="$(
		local head="| scenario | cairn msgs/s (median) | nats-server msgs/s (median) | cairn/nats-server |" rule="|---|---:|---:|---:|"
		if [[ -n "$anchors" ]]; then
			head+=" $anchor_name msgs/s (median) | cairn/$anchor_name |"
			rule+="---:|---:|"
		fi
		if [[ -n "$SCRAPE" ]]; then
			head+=" cairn+scrape msgs/s (median) | cairn+scrape/cairn |"
			rule+="---:|---:|"
		fi
		if [[ -n "$BASE_BIN" ]]; then
			head+=" base msgs/s (median) | base/nats-server | cairn/base |"
			rule+="---:|---:|---:|"
		fi
		head+=" cairn peak RSS MiB | nats-server peak RSS MiB |"
		rule+="---:|---:|"
		if [[ -n "$anchors" ]]; then
			head+=" $anchor_name peak RSS MiB |"
			rule+="---:|"
		fi
		echo "$head"
		echo "$rule"
		printf '%s\n' "${rows[@]}"
		echo
		echo "$ROUNDS rounds per scenario, servers in rotating order, each started fresh with \`-a 127.0.0.1 -p <free port>\`;" \
			"msgs/s as reported by \`nats bench\` (the subscriber's rate where a publisher drives a subscriber);" \
			"peak RSS is the largest VmHWM over the rounds."
		if [[ -n "$BASE_BIN" ]]; then
			echo "base is cairn \`$(basename "$BASE_BIN")\` ($("$BASE_BIN" --version 2>&1 | head -n 1)), run like cairn in the same rounds."
		fi
		if [[ -n "$SCRAPE" ]]; then
			echo "cairn+scrape is cairn with \`-m <free port>\` while \`bench/scrape\` GETs \`/metrics\` and" \
				"\`/jsz?streams=true&consumers=true\` every ${SCRAPE_EVERY} s during the measure (one process, keep-alive)."
		fi
		if [[ -n "$anchors" ]]; then
			echo "The anchor is nats-server with the scenario's flags (less \`-sd\`) plus \`-c <file>\`, the file holding" \
				"\`jetstream { store_dir: \"<the run's store>\", <anchor options> }\`; \"–\": the scenario has no anchor."
		fi
		echo "Measured $(date -u +%Y-%m-%dT%H:%MZ) on $(nproc) cores ($(uname -sm), load average at the end $(cut -d' ' -f1-3 /proc/loadavg)) with" \
			"cairn \`$(basename "$CAIRN_BIN")\` ($("$CAIRN_BIN" --version 2>&1 | head -n 1))," \
			"nats-server $("$NATS_SERVER_BIN" --version 2>&1 | head -n 1 | sed 's/^nats-server: //')," \
			"natscli $("$NATS_BIN" --version 2>&1 | head -n 1); command: \`$RUN_CMD\`."
		echo
		echo "Scenarios (\`nats bench\` arguments; setup steps after \"nats:\" are other \`nats\` commands):"
		for idx in "${!SC_NAME[@]}"; do
			local d="- ${SC_NAME[$idx]}:"
			[[ -n "${SC_FLAGS[$idx]}" ]] && d+=" server flags \`${SC_FLAGS[$idx]}\`;"
			[[ -n "${SC_SETUP[$idx]}" ]] && d+=" setup \`${SC_SETUP[$idx]}\`;"
			d+=" measured \`${SC_MEASURE[$idx]}\`"
			[[ -n "${SC_DRIVE[$idx]}" ]] && d+=" while \`${SC_DRIVE[$idx]}\` runs"
			[[ -n "${SC_ANCHOR[$idx]}" ]] && d+="; anchor \`jetstream { ${SC_ANCHOR[$idx]} }\`"
			echo "$d"
		done
	)"
	printf '%s\n' "$table" >"$OUT_DIR/latest.md"
	echo
	printf '%s\n' "$table"
	echo
	log "table written to bench/out/latest.md, samples to bench/out/latest-raw.csv"
	if ((failures)); then
		log "$failures run(s) failed"
		return 1
	fi
}

main "$@"
