#!/usr/bin/env bash
# Compares cairn with nats-server v2.15.2 using `nats bench` (natscli v0.5.0).
#
# For every scenario and every round it starts cairn and nats-server one
# after the other (alternating which goes first) on a free loopback port with
# the same flags, runs the same `nats bench` command against each, and
# records the msgs/s that natscli reports and the server's peak RSS (VmHWM).
# It prints a markdown table of medians and ratios and writes it to
# bench/out/latest.md (raw samples: bench/out/latest-raw.csv).
#
# Usage: bench/compare.sh
# Environment:
#   ROUNDS=5             rounds per scenario (each round runs both servers once)
#   SCENARIOS=regex      run only the scenarios whose name matches (grep -E)
#   CAIRN_BIN=path       use this binary as "cairn" instead of building bin/cairn
#                        (e.g. CAIRN_BIN=~/go/bin/nats-server to test this script)
#   NATS_SERVER_BIN=path nats-server to compare with (default: v2.15.2 from GOBIN)
#   NATS_BIN=path        natscli (default: v0.5.0 from GOBIN)
#   BENCH_TIMEOUT=300    seconds before one `nats bench` command is abandoned
#   DRAIN_GRACE=30       seconds the measured clients may run on after the driver ends
#   KEEP_WORK=1          keep the temporary folder with server logs and outputs
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT_DIR="$ROOT/bench/out"
ROUNDS="${ROUNDS:-5}"
# The command line as run, for the report.
# shellcheck disable=SC2016 # the single quotes are literal text in the report
RUN_CMD="ROUNDS=$ROUNDS${SCENARIOS:+ SCENARIOS='$SCENARIOS'}${CAIRN_BIN:+ CAIRN_BIN=$CAIRN_BIN} bench/compare.sh"
BENCH_TIMEOUT="${BENCH_TIMEOUT:-300}"
DRAIN_GRACE="${DRAIN_GRACE:-30}"
NATS_SERVER_VERSION="v2.15.2"
NATSCLI_VERSION="v0.5.0"

# ---------------------------------------------------------------------------
# Scenarios, one per line:
#   name | extra server flags | setup | measure | drive
# setup, measure and drive are arguments to `nats bench` (the script adds the
# server URL and --no-progress).
#   setup   (optional) runs to completion first, e.g. to fill a stream;
#   measure runs next; its reported msgs/s is the result;
#   drive   (optional) starts once measure's clients are running (natscli
#           logs "[1] Starting ...") and runs alongside it, e.g. the
#           publisher feeding a measured subscriber.
# In the server flags, {STORE} becomes a fresh empty folder per run (for -sd).
# To add a JetStream scenario, e.g.:
#   js pub 128B x200k | -js -sd {STORE} | | js pub bench.js --create --size 128 --msgs 200000 |
SCENARIO_LIST='
pub 128B x1M             | | | pub bench.pub --size 128 --msgs 1000000 |
pub+sub 128B x1M (sub)   | | | sub bench.ps --size 128 --msgs 1000000 | pub bench.ps --size 128 --msgs 1000000
'

# ---------------------------------------------------------------------------
log() { printf '[compare] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

trim() { local s="$1"; s="${s#"${s%%[![:space:]]*}"}"; s="${s%"${s##*[![:space:]]}"}"; printf '%s' "$s"; }

# Processes this script started and has not reaped yet; cleanup stops them.
declare -a LIVE_PIDS=()
WORK=""

stop_pid() { # pid [grace seconds]
	local pid="$1" grace="${2:-10}" i
	kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null || true; return 0; }
	kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < grace * 10; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$pid" 2>/dev/null; then
		log "pid $pid ignored SIGTERM for ${grace}s; killing it"
		kill -KILL "$pid" 2>/dev/null || true
	fi
	wait "$pid" 2>/dev/null || true
}

forget_pid() {
	local p keep=()
	for p in "${LIVE_PIDS[@]}"; do [[ "$p" == "$1" ]] || keep+=("$p"); done
	LIVE_PIDS=("${keep[@]+"${keep[@]}"}")
}

cleanup() {
	local rc=$? p
	trap - EXIT INT TERM
	for p in "${LIVE_PIDS[@]+"${LIVE_PIDS[@]}"}"; do stop_pid "$p" 3; done
	if [[ -n "$WORK" && -d "$WORK" ]]; then
		if [[ "${KEEP_WORK:-}" == 1 ]]; then log "kept $WORK"; else rm -rf "$WORK"; fi
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---------------------------------------------------------------------------
# tools

gobin() {
	local d
	d="$(go env GOBIN)"
	[[ -n "$d" ]] || d="$(go env GOPATH)/bin"
	printf '%s' "$d"
}

ensure_tools() {
	command -v go >/dev/null || die "go is not installed"
	local bindir
	bindir="$(gobin)"
	export PATH="$bindir:$PATH"

	if [[ -z "${NATS_SERVER_BIN:-}" ]]; then
		NATS_SERVER_BIN="$bindir/nats-server"
		if ! "$NATS_SERVER_BIN" --version 2>/dev/null | grep -qF "$NATS_SERVER_VERSION"; then
			log "installing nats-server $NATS_SERVER_VERSION into $bindir"
			(cd "$ROOT" && go install "github.com/nats-io/nats-server/v2@$NATS_SERVER_VERSION")
		fi
	fi
	if [[ -z "${NATS_BIN:-}" ]]; then
		NATS_BIN="$bindir/nats"
		if ! "$NATS_BIN" --version 2>/dev/null | grep -qxF "$NATSCLI_VERSION"; then
			log "installing natscli $NATSCLI_VERSION into $bindir"
			(cd "$ROOT" && go install "github.com/nats-io/natscli/nats@$NATSCLI_VERSION")
		fi
	fi
	[[ -x "$NATS_SERVER_BIN" ]] || die "nats-server not found at $NATS_SERVER_BIN"
	[[ -x "$NATS_BIN" ]] || die "nats (natscli) not found at $NATS_BIN"

	if [[ -z "${CAIRN_BIN:-}" ]]; then
		log "building cairn: go build -o bin/cairn ./cmd/cairn"
		(cd "$ROOT" && go build -o bin/cairn ./cmd/cairn)
		CAIRN_BIN="$ROOT/bin/cairn"
	fi
	CAIRN_BIN="${CAIRN_BIN/#\~/$HOME}"
	[[ -x "$CAIRN_BIN" ]] || die "cairn binary not found at $CAIRN_BIN"
}

# ---------------------------------------------------------------------------
# servers

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

SERVER_PID=""
SERVER_PORT=""

# start_server label binary logfile flags... ; sets SERVER_PID and SERVER_PORT
start_server() {
	local label="$1" bin="$2" logf="$3" attempt i port
	shift 3
	for ((attempt = 1; attempt <= 5; attempt++)); do
		port="$(free_port)" || die "no free port found"
		"$bin" -a 127.0.0.1 -p "$port" "$@" >"$logf" 2>&1 &
		SERVER_PID=$!
		LIVE_PIDS+=("$SERVER_PID")
		for ((i = 0; i < 200; i++)); do # 20 s
			if ! kill -0 "$SERVER_PID" 2>/dev/null; then break; fi
			if port_open "$port"; then
				SERVER_PORT="$port"
				return 0
			fi
			sleep 0.1
		done
		log "$label did not come up on port $port (attempt $attempt); its log:"
		tail -n 20 "$logf" >&2 || true
		stop_pid "$SERVER_PID" 3
		forget_pid "$SERVER_PID"
	done
	die "$label failed to start"
}

stop_server() {
	stop_pid "$SERVER_PID" 10
	forget_pid "$SERVER_PID"
	SERVER_PID=""
}

peak_rss_kib() { awk '/^VmHWM:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }

# ---------------------------------------------------------------------------
# one measurement

# rate_of file: the msgs/sec of the (aggregated) stats line natscli prints.
rate_of() {
	sed -nE 's/.*stats: ([0-9,]+) msgs\/sec.*/\1/p' "$1" | tail -n 1 | tr -d ,
}

# bench_bg outfile url args... : starts `nats bench` in the background, bounded
# by BENCH_TIMEOUT; sets BG_PID. Waiting on a background job (rather than
# running it in the foreground) keeps Ctrl-C and TERM responsive: the traps
# run at once and stop everything this script started.
BG_PID=""
bench_bg() {
	local out="$1" url="$2"
	shift 2
	timeout -k 5 "$BENCH_TIMEOUT" "$NATS_BIN" --no-context -s "$url" bench "$@" --no-progress >"$out" 2>&1 &
	BG_PID=$!
	LIVE_PIDS+=("$BG_PID")
}

# bench_wait pid : waits for a bench_bg job; returns its exit status.
bench_wait() {
	local rc=0
	wait "$1" || rc=$?
	forget_pid "$1"
	return "$rc"
}

# run_once label binary scenario_index round ; sets RUN_RATE (msgs/s or FAIL)
# and RUN_RSS (server peak RSS in KiB). Runs in the main shell (never in $(...))
# so that the EXIT trap knows every process it started.
RUN_RATE=""
RUN_RSS=""
run_once() {
	local label="$1" bin="$2" idx="$3" round="$4"
	local flags="${SC_FLAGS[$idx]}" setup="${SC_SETUP[$idx]}" measure="${SC_MEASURE[$idx]}" drive="${SC_DRIVE[$idx]}"
	local dir="$WORK/s$idx-r$round-$label"
	mkdir -p "$dir"
	flags="${flags//\{STORE\}/$dir/store}"
	local -a fl=() setup_a=() measure_a=() drive_a=()
	read -r -a fl <<<"$flags"
	read -r -a setup_a <<<"$setup"
	read -r -a measure_a <<<"$measure"
	read -r -a drive_a <<<"$drive"

	start_server "$label" "$bin" "$dir/server.log" "${fl[@]+"${fl[@]}"}"
	local url="nats://127.0.0.1:$SERVER_PORT" ok=1 mpid i

	if ((${#setup_a[@]})); then
		bench_bg "$dir/setup.out" "$url" "${setup_a[@]}"
		bench_wait "$BG_PID" || { ok=0; log "$label: setup failed:"; tail -n 5 "$dir/setup.out" >&2; }
	fi

	if ((ok)); then
		bench_bg "$dir/measure.out" "$url" "${measure_a[@]}"
		mpid="$BG_PID"
		if ((${#drive_a[@]})); then
			# natscli logs "[n] Starting ..." just before its clients subscribe.
			for ((i = 0; i < 200; i++)); do
				grep -qE '\[[0-9]+\] Starting' "$dir/measure.out" 2>/dev/null && break
				kill -0 "$mpid" 2>/dev/null || break
				sleep 0.1
			done
			sleep 0.5
			bench_bg "$dir/drive.out" "$url" "${drive_a[@]}"
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

	RUN_RSS="$(peak_rss_kib "$SERVER_PID")"
	if ! kill -0 "$SERVER_PID" 2>/dev/null; then
		ok=0
		log "$label died during the run; its log:"
		tail -n 20 "$dir/server.log" >&2 || true
	fi
	stop_server
	RUN_RATE="$(rate_of "$dir/measure.out")"
	if ((!ok)) || [[ -z "$RUN_RATE" ]]; then RUN_RATE=FAIL; fi
	[[ -n "$RUN_RSS" ]] || RUN_RSS=0
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
	mkdir -p "$OUT_DIR"
	WORK="$(mktemp -d "${TMPDIR:-/tmp}/cairn-bench.XXXXXX")"

	declare -ga SC_NAME=() SC_FLAGS=() SC_SETUP=() SC_MEASURE=() SC_DRIVE=()
	local line name flags setup measure drive
	while IFS= read -r line; do
		[[ -z "$(trim "$line")" || "$(trim "$line")" == \#* ]] && continue
		IFS='|' read -r name flags setup measure drive <<<"$line"
		name="$(trim "$name")"
		if [[ -n "${SCENARIOS:-}" ]] && ! grep -qE -- "$SCENARIOS" <<<"$name"; then continue; fi
		[[ -n "$(trim "$measure")" ]] || die "scenario '$name' has no measure command"
		SC_NAME+=("$name")
		SC_FLAGS+=("$(trim "$flags")")
		SC_SETUP+=("$(trim "$setup")")
		SC_MEASURE+=("$(trim "$measure")")
		SC_DRIVE+=("$(trim "${drive:-}")")
	done <<<"$SCENARIO_LIST"
	((${#SC_NAME[@]})) || die "no scenario matches SCENARIOS='${SCENARIOS:-}'"

	log "cairn:       $CAIRN_BIN"
	log "nats-server: $NATS_SERVER_BIN ($("$NATS_SERVER_BIN" --version 2>&1 | head -n 1))"
	log "nats:        $NATS_BIN ($("$NATS_BIN" --version 2>&1 | head -n 1))"
	log "rounds: $ROUNDS, scenarios: ${#SC_NAME[@]}, cores: $(nproc)"

	local raw="$OUT_DIR/latest-raw.csv"
	echo "scenario,round,server,msgs_per_sec,peak_rss_kib" >"$raw"

	local -a rows=()
	local failures=0 idx round order label bin rate rss
	for idx in "${!SC_NAME[@]}"; do
		local -a c_rate=() n_rate=() c_rss=() n_rss=()
		local c_fail=0 n_fail=0
		for ((round = 1; round <= ROUNDS; round++)); do
			if ((round % 2)); then order="cairn nats-server"; else order="nats-server cairn"; fi
			for label in $order; do
				if [[ "$label" == cairn ]]; then bin="$CAIRN_BIN"; else bin="$NATS_SERVER_BIN"; fi
				run_once "$label" "$bin" "$idx" "$round"
				rate="$RUN_RATE"
				rss="$RUN_RSS"
				log "$(printf '%-26s round %d/%d  %-11s %12s msgs/s  peak RSS %s MiB' "${SC_NAME[$idx]}" "$round" "$ROUNDS" "$label" "$(commas "$rate")" "$(mib "$rss")")"
				echo "\"${SC_NAME[$idx]}\",$round,$label,$rate,$rss" >>"$raw"
				if [[ "$label" == cairn ]]; then
					c_rss+=("$rss")
					if [[ "$rate" == FAIL ]]; then c_fail=$((c_fail + 1)); else c_rate+=("$rate"); fi
				else
					n_rss+=("$rss")
					if [[ "$rate" == FAIL ]]; then n_fail=$((n_fail + 1)); else n_rate+=("$rate"); fi
				fi
			done
		done
		failures=$((failures + c_fail + n_fail))
		local cm nm note=""
		cm="$(median "${c_rate[@]+"${c_rate[@]}"}")"
		nm="$(median "${n_rate[@]+"${n_rate[@]}"}")"
		((c_fail)) && note+=" (cairn failed $c_fail/$ROUNDS)"
		((n_fail)) && note+=" (nats-server failed $n_fail/$ROUNDS)"
		rows+=("| ${SC_NAME[$idx]}$note | $(commas "$cm") | $(commas "$nm") | $(ratio "$cm" "$nm") | $(mib "$(maxof "${c_rss[@]}")") | $(mib "$(maxof "${n_rss[@]}")") |")
	done

	local table
	table="$(
		echo "| scenario | cairn msgs/s (median) | nats-server msgs/s (median) | cairn/nats-server | cairn peak RSS MiB | nats-server peak RSS MiB |"
		echo "|---|---:|---:|---:|---:|---:|"
		printf '%s\n' "${rows[@]}"
		echo
		echo "$ROUNDS rounds per scenario, servers alternating, each started fresh with \`-a 127.0.0.1 -p <free port>\`;" \
			"msgs/s as reported by \`nats bench\` (the subscriber's rate where a publisher drives a subscriber);" \
			"peak RSS is the largest VmHWM over the rounds."
		echo "Measured $(date -u +%Y-%m-%dT%H:%MZ) on $(nproc) cores ($(uname -sm)) with" \
			"cairn \`$(basename "$CAIRN_BIN")\` ($("$CAIRN_BIN" --version 2>&1 | head -n 1))," \
			"nats-server $("$NATS_SERVER_BIN" --version 2>&1 | head -n 1 | sed 's/^nats-server: //')," \
			"natscli $("$NATS_BIN" --version 2>&1 | head -n 1); command: \`$RUN_CMD\`."
		echo
		echo "Scenarios (arguments to \`nats bench\`):"
		for idx in "${!SC_NAME[@]}"; do
			local d="- ${SC_NAME[$idx]}:"
			[[ -n "${SC_FLAGS[$idx]}" ]] && d+=" server flags \`${SC_FLAGS[$idx]}\`;"
			[[ -n "${SC_SETUP[$idx]}" ]] && d+=" setup \`${SC_SETUP[$idx]}\`;"
			d+=" measured \`${SC_MEASURE[$idx]}\`"
			[[ -n "${SC_DRIVE[$idx]}" ]] && d+=" while \`${SC_DRIVE[$idx]}\` runs"
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
