# shellcheck shell=bash
# Helpers shared by the benchmark scripts (bench/compare.sh,
# bench/idle_pending.sh): logging, the processes a script started and their
# cleanup, installing nats-server and natscli and building cairn, free
# ports, and starting and stopping a server.
#
# The sourcing script sets, before sourcing: BENCH_TAG (the log prefix),
# ROOT (the repository), NATS_SERVER_VERSION, NATSCLI_VERSION; and may set
# STOP_GRACE (seconds a server gets to exit after SIGTERM, default 10).
# Sourcing installs EXIT/INT/TERM traps that stop every process in
# LIVE_PIDS and remove WORK (unless KEEP_WORK=1).

log() { printf '[%s] %s\n' "$BENCH_TAG" "$*" >&2; }
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
	stop_pid "$SERVER_PID" "${STOP_GRACE:-10}"
	forget_pid "$SERVER_PID"
	SERVER_PID=""
}

