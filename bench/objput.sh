#!/usr/bin/env bash
# Reproduces trial 140: a 100 MB `nats object put` into an R3 bucket with
# the object stream's leader SIGKILLed 0.4 s in (that put fails), the
# killed server restarted, WAIT seconds, then `nats object put --force` of
# the same file, which must succeed. Each round starts three fresh servers
# as README "Run a cluster" does (-m for monitoring), and prints one line:
# label, round, wait, the leader killed, the first put's result, the
# second put's seconds and result, the load average. During the second
# put, with SAMPLE=1, every server's /jsz?streams=true is sampled each
# 0.5 s into $WORK/<label>/r<round>/jsz.n<i>.log, with SAMPLE=raftz
# /raftz?acc=APP each 0.2 s into raftz.log (KEEP=1 keeps $WORK).
# OBJPUT=path (go build ./bench/objput) makes the second put that program's,
# which times each chunk's PubAck, in place of the CLI's.
#
# Usage: bench/objput.sh ROUNDS "WAITS" label=binary ...
#   e.g. bench/objput.sh 10 "0.3 1 3" cairn=/tmp/cairn nats=~/go/bin/nats-server
# Environment: PORT_BASE=25000 (client ports +1..3, cluster +11..13,
# monitoring +21..23), NATS_BIN (natscli), SIZE_MB=100, KEEP=1, SAMPLE=1,
# OBJPUT, KILL_AT=0.4 (seconds into the first put).
set -euo pipefail

(($# >= 3)) || { sed -n '2,18p' "$0" >&2; exit 2; }
ROUNDS=$1 WAITS=$2
shift 2
PORT_BASE="${PORT_BASE:-25000}"
NATS_BIN="${NATS_BIN:-$(go env GOPATH)/bin/nats}"
SIZE_MB="${SIZE_MB:-100}"
WORK="$(mktemp -d /tmp/objput.XXXXXX)"
declare -A PIDS=()

stop_servers() {
	local i
	for i in "${!PIDS[@]}"; do kill -TERM "${PIDS[$i]}" 2>/dev/null || true; done
	for i in "${!PIDS[@]}"; do wait "${PIDS[$i]}" 2>/dev/null || true; done
	PIDS=()
}
cleanup() {
	stop_servers
	if [[ "${KEEP:-}" == 1 ]]; then echo "kept $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

cat >"$WORK/cluster.conf" <<'EOF'
accounts {
  SYS { users = [ { user: admin, password: admin } ] }
  APP { jetstream: enabled, users = [ { user: app, password: app } ] }
}
system_account: SYS
EOF
head -c $((SIZE_MB * 1000 * 1000)) /dev/urandom >"$WORK/big.bin"
SERVERS="nats://127.0.0.1:$((PORT_BASE + 1)),nats://127.0.0.1:$((PORT_BASE + 2)),nats://127.0.0.1:$((PORT_BASE + 3))"
ROUTES="nats://127.0.0.1:$((PORT_BASE + 11)),nats://127.0.0.1:$((PORT_BASE + 12)),nats://127.0.0.1:$((PORT_BASE + 13))"

nats_app() { "$NATS_BIN" --no-context -s "$SERVERS" --user app --password app "$@" </dev/null; }

start_server() { # bin dir i
	local bin=$1 dir=$2 i=$3
	"$bin" -c "$WORK/cluster.conf" -js -sd "$dir/n$i" -a 127.0.0.1 -p $((PORT_BASE + i)) -n "n$i" \
		-m $((PORT_BASE + 20 + i)) --cluster "nats://127.0.0.1:$((PORT_BASE + 10 + i))" \
		--cluster_name c1 --routes "$ROUTES" >>"$dir/server$i.log" 2>&1 &
	PIDS[$i]=$!
}

sample_jsz() { # dir : until killed
	local dir=$1 i
	set +e
	while :; do
		for i in 1 2 3; do
			{
				printf '%s ' "$(date +%T.%N | cut -c1-12)"
				curl -s -m 0.4 "http://127.0.0.1:$((PORT_BASE + 20 + i))/jsz?streams=true" |
					jq -c '[.account_details[]?.stream_detail[]? | {n: .name, l: .cluster.leader, m: .state.messages, b: .state.bytes, ls: .state.last_seq, r: [.cluster.replicas[]? | {n: .name, c: .current, a: .active, g: .lag}]}]' 2>/dev/null || echo '?'
			} >>"$dir/jsz.n$i.log"
		done
		sleep 0.5
	done
}

sample_raftz() { # dir : until killed; every 0.2 s, one line a server
	local dir=$1 i
	set +e
	while :; do
		for i in 1 2 3; do
			printf '%s n%d %s\n' "$(date +%T.%N | cut -c1-12)" "$i" \
				"$(curl -s -m 0.5 "http://127.0.0.1:$((PORT_BASE + 20 + i))/raftz?acc=APP" | tr -d '\n ')" >>"$dir/raftz.log"
		done
		sleep 0.2
	done
}

# round label bin n wait
round() {
	local label=$1 bin=$2 n=$3 wait=$4 i j leader="" idx first t0 t1 rc second
	local dir="$WORK/$label/r$n"
	mkdir -p "$dir"
	for i in 1 2 3; do start_server "$bin" "$dir" "$i"; done
	for ((j = 0; j < 600; j++)); do
		nats_app object add OB --replicas 3 >/dev/null 2>&1 && break
		sleep 0.1
	done
	for ((j = 0; j < 100; j++)); do
		leader="$(nats_app stream info OBJ_OB --json 2>/dev/null | jq -r '.cluster.leader // empty')" || true
		[[ -n "$leader" ]] && break
		sleep 0.1
	done
	idx=${leader#n}
	nats_app object put OB "$WORK/big.bin" --name big100.bin >"$dir/put1.out" 2>&1 &
	local putpid=$!
	sleep "${KILL_AT:-0.4}"
	kill -KILL "${PIDS[$idx]}"
	wait "${PIDS[$idx]}" 2>/dev/null || true
	if wait "$putpid"; then first=ok; else first=fail; fi
	echo "=== restart $(date +%T.%N)" >>"$dir/server$idx.log"
	start_server "$bin" "$dir" "$idx"
	sleep "$wait"
	local sampler=""
	if [[ "${SAMPLE:-}" == 1 ]]; then sample_jsz "$dir" & sampler=$!; fi
	if [[ "${SAMPLE:-}" == raftz ]]; then sample_raftz "$dir" & sampler=$!; fi
	t0=$(date +%s.%N)
	echo "put2 start $(date +%T.%N)" >"$dir/put2.out"
	rc=0
	if [[ -n "${OBJPUT:-}" ]]; then
		"$OBJPUT" -v -s "$SERVERS" -user app -pass app -bucket OB -size $((SIZE_MB * 1000 * 1000)) >>"$dir/put2.out" 2>&1 || rc=$?
		grep -q ' late=0 missing=0 errors=0' "$dir/put2.out" || rc=1
	else
		nats_app object put OB "$WORK/big.bin" --name big100.bin --force >>"$dir/put2.out" 2>&1 || rc=$?
	fi
	t1=$(date +%s.%N)
	echo "put2 end $(date +%T.%N)" >>"$dir/put2.out"
	if [[ -n "$sampler" ]]; then kill "$sampler" 2>/dev/null || true; wait "$sampler" 2>/dev/null || true; fi
	if ((rc == 0)); then second=ok; else second="FAIL:$(grep -o 'nats: .*' "$dir/put2.out" | head -1 | tr ' ' _ || true)"; fi
	if [[ -n "${OBJPUT:-}" ]]; then second="$second $(grep -o 'late=.*' "$dir/put2.out" | head -1 || true)"; fi
	printf '%s r%d wait=%s killed=%s put1=%s put2=%.2fs %s load=%s\n' "$label" "$n" "$wait" "$leader" "$first" \
		"$(echo "$t1 - $t0" | bc)" "$second" "$(cut -d' ' -f1 /proc/loadavg)"
	stop_servers
	if [[ "$second" == ok && "${KEEP:-}" != 1 ]]; then rm -rf "$dir"; else rm -rf "$dir"/n?; fi
}

n=0
for ((r = 0; r < ROUNDS; r++)); do
	for w in $WAITS; do
		for spec in "$@"; do
			n=$((n + 1))
			round "${spec%%=*}" "${spec#*=}" "$n" "$w"
		done
	done
done
