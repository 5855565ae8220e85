#!/usr/bin/env bash
# wan.sh: an emulated WAN between Meridian's sites on one machine.
#
# Where the kernel has sch_netem, every site gets a network namespace of its
# own, joined to the others by veth links on a bridge, and `tc netem` delays
# what goes from one site to another ("netem" mode). Where it has not, a
# wanproxy (cmd/wanproxy, package wan) is put in front of every site's
# site-to-site endpoint instead ("proxy" mode). Either way DELAY is one-way
# and applies in each direction: a round trip between two sites pays
# 2×DELAY. The script says loudly which mode it chose.
#
#   scripts/wan.sh --probe
#       Print "netem" or "proxy", the mode --mode auto chooses on this
#       machine, and why (on stderr). Changes nothing that outlives it.
#
#   scripts/wan.sh [--mode auto|netem|proxy] [--delay 40ms] [--jitter 5ms]
#                  [--dir DIR] --site NAME=HOST:PORT [--site ...] [--run COMMAND]
#       Set the WAN up, write DIR/endpoints.json, run COMMAND once per site
#       (inside the site's namespace in netem mode) and wait. When every
#       COMMAND has exited, or on SIGINT/SIGTERM, stop the COMMANDs, print
#       the bytes that crossed between the sites and tear the WAN down.
#       Without --run it waits for SIGINT/SIGTERM: start the sites yourself
#       from DIR/endpoints.json.
#
#   scripts/wan.sh --cleanup
#       Remove the namespaces and bridge that a killed netem run left.
#
# --site NAME=HOST:PORT  A site and its site-to-site endpoint (repeat per
#                        site; NAME: letters, digits, - and _). Proxy mode:
#                        the site listens on HOST:PORT (HOST in 127.0.0.0/8)
#                        and the others dial its proxy. Netem mode: the site
#                        listens on PORT at its namespace's address, and the
#                        others dial it there.
# --delay, --jitter      One-way delay, e.g. 0, 20ms, 40ms, 80ms; each delay
#                        varies uniformly within DELAY ± JITTER (default 0).
# --dir DIR              Logs, endpoints.json, the wanproxy binary
#                        (default ./meridian-wan).
# --run COMMAND          A bash command run per site, its output in
#                        DIR/NAME.log, with WAN_SITE (NAME), WAN_LISTEN (the
#                        host:port to serve site-to-site on), WAN_HOST (the
#                        address at which this machine's own services, such
#                        as websim, are reached undelayed), WAN_MODE, WAN_DIR
#                        and WAN_ENDPOINTS (DIR/endpoints.json) set. Start
#                        the long-running program with exec, so that SIGTERM
#                        reaches it.
#
# DIR/endpoints.json, written before any COMMAND starts:
#   {"mode": "proxy", "delay": "40ms", "jitter": "5ms",
#    "sites": [{"name": "eu", "listen": "127.0.0.1:7101", "dial": "127.0.0.1:41234", "netns": ""}, ...]}
# A site serves on "listen"; the other sites reach it at "dial".
#
# Example: three sites 40 ms ± 5 ms apart, each started by a command:
#   scripts/wan.sh --delay 40ms --jitter 5ms --site eu=127.0.0.1:7101 \
#       --site us=127.0.0.1:7102 --site asia=127.0.0.1:7103 \
#       --run 'exec ./bin/site up --region "$WAN_SITE" --federation fed.json'
#
# Environment: WANPROXY, a wanproxy binary to use (default: go build into
# DIR/bin); WAN_PREFIX, the prefix of namespace and interface names
# (default mwan-); WAN_SUBNET, the first three octets of the sites' /24 in
# netem mode (default 169.254.77: link-local, so it never leaves the bridge).
# Netem mode needs root, iproute2 and the kernel's sch_netem, sch_prio and
# cls_u32; with jitter, netem may reorder packets (TCP puts them back in
# order).
set -euo pipefail

PREFIX=${WAN_PREFIX:-mwan-}
SUBNET=${WAN_SUBNET:-169.254.77}
BRIDGE="${PREFIX}br"
HERE=${BASH_SOURCE[0]%/*}
[ "$HERE" != "${BASH_SOURCE[0]}" ] || HERE=.
REPO=$(cd "$HERE/.." && pwd)

die() {
	echo "wan.sh: $*" >&2
	exit 2
}

# probe_netem succeeds if netem mode can work here; otherwise it sets
# REASON. On a veth in a scratch namespace, which it removes, it tries a
# netem qdisc, then what netem mode builds: a prio qdisc, netem in its
# third band, a u32 filter.
REASON=""
probe_netem() {
	if ! command -v ip >/dev/null || ! command -v tc >/dev/null; then
		REASON="no ip/tc commands (iproute2)"
		return 1
	fi
	if command -v modprobe >/dev/null; then
		modprobe -a sch_netem sch_prio cls_u32 2>/dev/null || true
	fi
	local ns="${PREFIX}probe-$$"
	if ! ip netns add "$ns" 2>/dev/null; then
		REASON="cannot make a network namespace (root is needed)"
		return 1
	fi
	local ok=0
	if ! ip -n "$ns" link add "${PREFIX}p0" type veth peer name "${PREFIX}p1" 2>/dev/null; then
		REASON="cannot make a veth pair in a network namespace"
		ok=1
	elif ! tc -n "$ns" qdisc add dev "${PREFIX}p0" root netem delay 1ms 2>/dev/null; then
		REASON="the kernel has no sch_netem (tc qdisc add ... netem failed)"
		ok=1
	elif ! tc -n "$ns" qdisc del dev "${PREFIX}p0" root 2>/dev/null ||
		! tc -n "$ns" qdisc add dev "${PREFIX}p0" root handle 1: prio 2>/dev/null; then
		REASON="the kernel has no sch_prio (tc qdisc add ... prio failed)"
		ok=1
	elif ! tc -n "$ns" qdisc add dev "${PREFIX}p0" parent 1:3 handle 30: netem delay 1ms 2>/dev/null; then
		REASON="netem cannot sit under a prio qdisc"
		ok=1
	elif ! tc -n "$ns" filter add dev "${PREFIX}p0" parent 1: protocol ip prio 1 u32 \
		match ip dst "$SUBNET.0/24" flowid 1:3 2>/dev/null; then
		REASON="the kernel has no cls_u32 (tc filter add ... u32 failed)"
		ok=1
	fi
	ip netns del "$ns" 2>/dev/null || true
	return $ok
}

# choose_mode sets MODE (and REASON) for a --mode value: the decision that
# --probe shows.
choose_mode() {
	case $1 in
	proxy)
		MODE=proxy
		REASON="proxy mode requested"
		;;
	netem)
		probe_netem || die "netem mode requested, but $REASON"
		MODE=netem
		REASON="netem mode requested; the kernel has sch_netem"
		;;
	auto)
		if probe_netem; then
			MODE=netem
			REASON="the kernel has sch_netem"
		else
			MODE=proxy
		fi
		;;
	*) die "--mode $1: want auto, netem or proxy" ;;
	esac
}

cleanup_netem() {
	local ns
	for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$PREFIX" || true); do
		ip netns del "$ns" 2>/dev/null || true
	done
	ip link del "$BRIDGE" 2>/dev/null || true
}

# A delay as tc and Go both read it: digits with us, ms or s, or 0.
valid_delay() {
	[[ $1 =~ ^([0-9]+(\.[0-9]+)?(us|ms|s)|0)$ ]]
}

MODE_FLAG=auto DELAY=0 JITTER=0 DIR=meridian-wan RUN="" PROBE=0 MODE=""
NAMES=()
declare -A HOST PORT LISTEN DIAL NETNS
while [ $# -gt 0 ]; do
	case $1 in
	--probe) PROBE=1; shift ;;
	--cleanup)
		cleanup_netem
		exit 0
		;;
	--mode) MODE_FLAG=${2:?--mode needs a value}; shift 2 ;;
	--delay) DELAY=${2:?--delay needs a value}; shift 2 ;;
	--jitter) JITTER=${2:?--jitter needs a value}; shift 2 ;;
	--dir) DIR=${2:?--dir needs a value}; shift 2 ;;
	--run) RUN=${2:?--run needs a value}; shift 2 ;;
	--site)
		spec=${2:?--site needs NAME=HOST:PORT}
		shift 2
		[[ $spec =~ ^([A-Za-z0-9_-]{1,32})=([0-9.]+):([0-9]{1,5})$ ]] || die "--site $spec: want NAME=HOST:PORT"
		name=${BASH_REMATCH[1]}
		[ -z "${PORT[$name]:-}" ] || die "--site $name given twice"
		NAMES+=("$name")
		HOST[$name]=${BASH_REMATCH[2]}
		PORT[$name]=${BASH_REMATCH[3]}
		;;
	-h | --help)
		sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
		exit 0
		;;
	*) die "unknown argument $1 (see --help)" ;;
	esac
done
if [ "$PROBE" = 1 ]; then
	choose_mode "$MODE_FLAG"
	echo "$MODE"
	echo "wan.sh: $MODE mode: $REASON" >&2
	exit 0
fi
[ ${#NAMES[@]} -gt 0 ] || die "no --site given (see --help)"
valid_delay "$DELAY" || die "--delay $DELAY: want e.g. 0, 20ms, 40ms, 80ms"
valid_delay "$JITTER" || die "--jitter $JITTER: want e.g. 0, 2ms, 5ms"

choose_mode "$MODE_FLAG"
if [ "$MODE" = netem ]; then
	if [ -n "$(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$PREFIX" || true)" ] ||
		ip link show "$BRIDGE" >/dev/null 2>&1; then
		die "namespaces or bridge of another run exist: stop it, or scripts/wan.sh --cleanup"
	fi
else
	for name in "${NAMES[@]}"; do
		[[ ${HOST[$name]} =~ ^127\. ]] || die "--site $name: proxy mode serves loopback only (127.0.0.0/8), not ${HOST[$name]}"
	done
fi
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)

echo "=========================================================================="
if [ "$MODE" = netem ]; then
	echo "== WAN mode: NETEM ($REASON)"
	echo "==   each site in a network namespace, tc netem delay $DELAY ± $JITTER each way"
else
	echo "== WAN mode: PROXY ($REASON)"
	echo "==   a wanproxy in front of every site endpoint, delay $DELAY ± $JITTER each way"
fi
echo "=========================================================================="

PIDS=()
WANPROXY_PID=""
SLEEP_PID=""

# shellcheck disable=SC2317 # (alive and teardown run from the EXIT trap)
# alive succeeds while process $1 runs (a zombie does not count).
alive() {
	local state
	state=$(sed 's/.*) //; s/ .*//' "/proc/$1/stat" 2>/dev/null) || return 1
	[ "$state" != Z ]
}

# shellcheck disable=SC2317
# teardown stops what the script started, by process id, and removes the
# WAN. It runs on every exit once the WAN is being set up.
teardown() {
	local pid ns
	trap - EXIT INT TERM
	for pid in "${PIDS[@]}"; do
		kill -TERM -- "-$pid" 2>/dev/null || true
	done
	for pid in "${PIDS[@]}"; do
		for _ in $(seq 100); do alive "$pid" || break; sleep 0.1; done
		kill -KILL -- "-$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	if [ -n "$SLEEP_PID" ]; then
		kill "$SLEEP_PID" 2>/dev/null || true
		wait "$SLEEP_PID" 2>/dev/null || true
	fi
	if [ -n "$WANPROXY_PID" ]; then
		kill -TERM "$WANPROXY_PID" 2>/dev/null || true
		wait "$WANPROXY_PID" 2>/dev/null || true
		rm -f "$DIR/wanproxy.pid"
		echo "== bytes through each site's proxy (upstream: to the site; downstream: its answers):"
		grep '^bytes ' "$DIR/wanproxy.log" || true
	fi
	if [ "$MODE" = netem ]; then
		echo "== bytes each site sent to the others (its netem qdisc):"
		for name in "${NAMES[@]}"; do
			ns="$PREFIX$name"
			echo "bytes $name sent=$(tc -s -n "$ns" qdisc show dev eth0 2>/dev/null | awk '/^qdisc netem/ {n = 1; next} n && /Sent/ {print $2; exit}')"
		done
		cleanup_netem
	fi
	echo "== WAN torn down"
}
trap teardown EXIT
trap 'echo "== wan.sh: stopping"; exit 0' INT TERM

if [ "$MODE" = netem ]; then
	WAN_HOST="$SUBNET.254"
	JITTER_ARG=()
	[ "$JITTER" = 0 ] || JITTER_ARG=("$JITTER")
	ip link add "$BRIDGE" type bridge
	ip addr add "$WAN_HOST/24" dev "$BRIDGE"
	ip link set "$BRIDGE" up
	i=0
	for name in "${NAMES[@]}"; do
		i=$((i + 1))
		ns="$PREFIX$name"
		ip netns add "$ns"
		ip link add "${PREFIX}v$i" type veth peer name eth0 netns "$ns"
		ip link set "${PREFIX}v$i" master "$BRIDGE" up
		ip -n "$ns" link set lo up
		ip -n "$ns" addr add "$SUBNET.$i/24" dev eth0
		ip -n "$ns" link set eth0 up
		# Delay only what goes to another site: netem sits in band 3 of a
		# prio qdisc, and filters send the sites' /24 there, except the
		# bridge's own address (this machine's services).
		tc -n "$ns" qdisc add dev eth0 root handle 1: prio
		tc -n "$ns" qdisc add dev eth0 parent 1:3 handle 30: netem delay "$DELAY" "${JITTER_ARG[@]}"
		tc -n "$ns" filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip dst "$WAN_HOST/32" flowid 1:1
		tc -n "$ns" filter add dev eth0 parent 1: protocol ip prio 2 u32 match ip dst "$SUBNET.0/24" flowid 1:3
		LISTEN[$name]="$SUBNET.$i:${PORT[$name]}"
		DIAL[$name]=${LISTEN[$name]}
		NETNS[$name]=$ns
	done
else
	WAN_HOST=127.0.0.1
	links=()
	for name in "${NAMES[@]}"; do
		LISTEN[$name]="${HOST[$name]}:${PORT[$name]}"
		NETNS[$name]=""
		links+=(--link "$name=${HOST[$name]}:0>${LISTEN[$name]}")
	done
	WANPROXY=${WANPROXY:-}
	if [ -z "$WANPROXY" ]; then
		echo "== building wanproxy into $DIR/bin"
		(cd "$REPO" && go build -o "$DIR/bin/wanproxy" ./cmd/wanproxy)
		WANPROXY="$DIR/bin/wanproxy"
	fi
	rm -f "$DIR/wanproxy.ready"
	"$WANPROXY" --delay "$DELAY" --jitter "$JITTER" "${links[@]}" --stats 127.0.0.1:0 \
		--ready-file "$DIR/wanproxy.ready" >"$DIR/wanproxy.log" 2>&1 &
	WANPROXY_PID=$!
	echo "$WANPROXY_PID" >"$DIR/wanproxy.pid"
	for _ in $(seq 100); do
		[ -s "$DIR/wanproxy.ready" ] && break
		kill -0 "$WANPROXY_PID" 2>/dev/null || break
		sleep 0.1
	done
	[ -s "$DIR/wanproxy.ready" ] || die "wanproxy did not start: see $DIR/wanproxy.log"
	while read -r kind name listen _; do
		case $kind in
		link) DIAL[$name]=$listen ;;
		stats) echo "== wanproxy statistics: $name (POST /delay?delay=80ms changes the delay live)" ;;
		esac
	done <"$DIR/wanproxy.ready"
fi

{
	printf '{"mode": "%s", "delay": "%s", "jitter": "%s", "sites": [' "$MODE" "$DELAY" "$JITTER"
	sep=""
	for name in "${NAMES[@]}"; do
		printf '%s\n  {"name": "%s", "listen": "%s", "dial": "%s", "netns": "%s"}' \
			"$sep" "$name" "${LISTEN[$name]}" "${DIAL[$name]}" "${NETNS[$name]}"
		sep=","
	done
	printf ']}\n'
} >"$DIR/endpoints.json.tmp"
mv "$DIR/endpoints.json.tmp" "$DIR/endpoints.json"
for name in "${NAMES[@]}"; do
	echo "== site $name: listens on ${LISTEN[$name]}, the other sites dial ${DIAL[$name]}${NETNS[$name]:+ (namespace ${NETNS[$name]})}"
done
echo "== endpoints: $DIR/endpoints.json"

if [ -z "$RUN" ]; then
	echo "== WAN up; SIGINT or SIGTERM tears it down"
	sleep 2147483647 &
	SLEEP_PID=$!
	wait "$SLEEP_PID" || true
	exit 0
fi

for name in "${NAMES[@]}"; do
	vars=(WAN_SITE="$name" WAN_LISTEN="${LISTEN[$name]}" WAN_HOST="$WAN_HOST" WAN_MODE="$MODE"
		WAN_DIR="$DIR" WAN_ENDPOINTS="$DIR/endpoints.json")
	# setsid: each command leads its own process group, which teardown stops.
	if [ "$MODE" = netem ]; then
		setsid ip netns exec "${NETNS[$name]}" env "${vars[@]}" bash -c "$RUN" >"$DIR/$name.log" 2>&1 &
	else
		setsid env "${vars[@]}" bash -c "$RUN" >"$DIR/$name.log" 2>&1 &
	fi
	PIDS+=($!)
	echo "== site $name: started (pid $!, log $DIR/$name.log)"
done
status=0
for pid in "${PIDS[@]}"; do
	wait "$pid" || status=1
done
echo "== every site's command has exited (status $status)"
exit $status
