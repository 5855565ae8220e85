#!/usr/bin/env bash
# federation.sh: a federation of three sites (eu, us, asia) on one machine,
# crawling one websim together across an emulated WAN, to the end.
#
# It builds site, websim and wanproxy, starts websim (a realistic web with a
# GeoIP database), makes the federation's certificates, puts a WAN between
# the sites (scripts/wan.sh, proxy mode: a wanproxy in front of every
# site's federation endpoint, DELAY ± JITTER each way), writes the
# federation file, starts the three sites and prints a progress line every
# few seconds. Every site exits by itself when the whole federation's crawl
# is exhausted; the script then stops websim and the WAN and prints a
# summary: pages per site, WARC files, bytes that crossed between sites,
# and each site's mean and 95th-percentile fetch latency.
#
# Distance is on by default: each site fetches from a loopback address of
# its own (site up --fetch-from: eu 127.0.2.1, us 127.0.2.2, asia
# 127.0.2.3), which websim knows as a client at the site's place (websim
# --clients), so a fetch pays the round trips between the site and the
# host's city, as on the Internet; and the distance partitioner gives each
# host to its nearest site.
# Ctrl-C (or SIGTERM) stops the sites, then websim, then the WAN.
#
#   scripts/federation.sh [flags]
#
# --dir DIR              work directory: bin/, logs, certs/, federation.json,
#                        one data directory per site (default
#                        ./meridian-federation; it must not hold a site yet)
# --hosts N --pages P    websim's size: hosts, mean pages per host (300, 20)
# --ips K                loopback addresses websim spreads its hosts over (16)
# --seed S               websim's seed (7)
# --partitioner NAME     distance or consistent (distance)
# --geo on|off           websim charges each site its distance to the hosts
#                        (on); off: every host is as near as loopback
# --grace D              how long a site may be suspect before its hosts go
#                        to their next owner (30s)
# --delay D --jitter J   the WAN's one-way delay and jitter (40ms, 5ms)
# --port N               first federation port: the sites serve on
#                        127.0.0.1:N, N+1, N+2 (7101)
# --every D              interval of the progress line (5s)
# --kill SITE --after D  SIGKILL SITE D after the start (e.g. --kill us
#                        --after 20s) and restart it --down D later (10s):
#                        nothing is lost; with --down longer than --grace its
#                        hosts go to the others meanwhile
# --timeout D            stop everything and fail if the crawl has not ended
#                        after D (default: no limit)
# Durations are whole seconds, with s or m (20s, 2m); delays as wan.sh takes
# them (0, 20ms, 80ms).
#
# While it runs (from another shell):
#   DIR/bin/site status --data DIR/us      # one site: rounds, fetcher, crawl database, federation
#   tail -f DIR/us.log                     # its own progress line
#
# Environment: MERIDIAN_BIN, a directory holding prebuilt site, websim and
# wanproxy binaries (default: go build them into DIR/bin).
#
# The netem mode of wan.sh is not used here even where the kernel has it:
# websim's hosts live on 127.0.0.0/8, which a site in a network namespace
# cannot reach. Everything stays on loopback.
set -euo pipefail

SITES=(eu us asia)
declare -A LAT=([eu]=53.55 [us]=40.71 [asia]=1.35) LON=([eu]=9.99 [us]=-74.01 [asia]=103.82)
# Each site's source address for fetching (--geo on).
declare -A FROM=([eu]=127.0.2.1 [us]=127.0.2.2 [asia]=127.0.2.3)

die() {
	echo "federation.sh: $*" >&2
	exit 2
}

# seconds D: a duration of whole seconds (20, 20s, 2m) as a number of seconds.
seconds() {
	case $1 in
	*m) [[ ${1%m} =~ ^[0-9]+$ ]] && echo $((${1%m} * 60)) && return ;;
	*s) [[ ${1%s} =~ ^[0-9]+$ ]] && echo "${1%s}" && return ;;
	*) [[ $1 =~ ^[0-9]+$ ]] && echo "$1" && return ;;
	esac
	return 1
}

DIR=meridian-federation HOSTS=300 PAGES=20 IPS=16 SEED=7 PARTITIONER=distance GEO=on GRACE=30s
DELAY=40ms JITTER=5ms PORT=7101 EVERY=5s KILL="" AFTER=20s DOWN=10s TIMEOUT=0
while [ $# -gt 0 ]; do
	case $1 in
	--dir) DIR=${2:?--dir needs a value}; shift 2 ;;
	--hosts) HOSTS=${2:?--hosts needs a value}; shift 2 ;;
	--pages) PAGES=${2:?--pages needs a value}; shift 2 ;;
	--ips) IPS=${2:?--ips needs a value}; shift 2 ;;
	--seed) SEED=${2:?--seed needs a value}; shift 2 ;;
	--partitioner) PARTITIONER=${2:?--partitioner needs a value}; shift 2 ;;
	--geo) GEO=${2:?--geo needs on or off}; shift 2 ;;
	--grace) GRACE=${2:?--grace needs a value}; shift 2 ;;
	--delay) DELAY=${2:?--delay needs a value}; shift 2 ;;
	--jitter) JITTER=${2:?--jitter needs a value}; shift 2 ;;
	--port) PORT=${2:?--port needs a value}; shift 2 ;;
	--every) EVERY=${2:?--every needs a value}; shift 2 ;;
	--kill) KILL=${2:?--kill needs a site}; shift 2 ;;
	--after) AFTER=${2:?--after needs a value}; shift 2 ;;
	--down) DOWN=${2:?--down needs a value}; shift 2 ;;
	--timeout) TIMEOUT=${2:?--timeout needs a value}; shift 2 ;;
	-h | --help)
		sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
		exit 0
		;;
	*) die "unknown argument $1 (see --help)" ;;
	esac
done
for v in HOSTS PAGES IPS SEED PORT; do
	[[ ${!v} =~ ^[0-9]+$ ]] || die "--${v,,} ${!v}: want a number"
done
if [ "$PORT" -lt 1024 ] || [ "$PORT" -gt 65533 ]; then die "--port $PORT: want 1024..65533"; fi
case $PARTITIONER in consistent | distance) ;; *) die "--partitioner $PARTITIONER: want consistent or distance" ;; esac
case $GEO in on | off) ;; *) die "--geo $GEO: want on or off" ;; esac
EVERY_S=$(seconds "$EVERY") || die "--every $EVERY: want e.g. 5s"
[ "$EVERY_S" -gt 0 ] || die "--every $EVERY: want at least 1s"
AFTER_S=$(seconds "$AFTER") || die "--after $AFTER: want e.g. 20s"
DOWN_S=$(seconds "$DOWN") || die "--down $DOWN: want e.g. 10s"
TIMEOUT_S=$(seconds "$TIMEOUT") || die "--timeout $TIMEOUT: want e.g. 5m"
seconds "$GRACE" >/dev/null || die "--grace $GRACE: want e.g. 30s"
if [ -n "$KILL" ]; then
	[[ " ${SITES[*]} " == *" $KILL "* ]] || die "--kill $KILL: want one of ${SITES[*]}"
fi
for i in 0 1 2; do
	# Something answers there: the port is taken.
	if (exec 3<>"/dev/tcp/127.0.0.1/$((PORT + i))") 2>/dev/null; then
		die "port $((PORT + i)) is in use: choose others with --port"
	fi
done

REPO=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
for s in "${SITES[@]}"; do
	[ ! -e "$DIR/$s" ] || die "$DIR already holds a federation: remove it first (rm -rf $DIR) or give another --dir"
done

# What runs, by process id; stop_all stops it in order.
declare -A PID=() EXITED=() STATUS=() SENT=()
WEBSIM="" WAN="" STOPPING=0

# alive PID: the process runs (a zombie does not count).
alive() {
	local state
	state=$(sed 's/.*) //; s/ .*//' "/proc/$1/stat" 2>/dev/null) || return 1
	[ "$state" != Z ]
}

# stop PID NAME SECONDS: SIGTERM, wait up to SECONDS, then SIGKILL.
stop() {
	local pid=$1 name=$2 i
	alive "$pid" || { wait "$pid" 2>/dev/null || true; return 0; }
	kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < $3 * 10; i++)); do
		alive "$pid" || break
		sleep 0.1
	done
	if alive "$pid"; then
		echo "== $name (pid $pid) did not stop within $3 s: SIGKILL"
		kill -KILL "$pid" 2>/dev/null || true
	fi
	wait "$pid" 2>/dev/null || true
}

# stop_all stops the sites, then websim, then the WAN (wan.sh stops its
# wanproxy and prints the bytes that crossed each link). It runs once.
stop_all() {
	local s
	[ "$STOPPING" = 0 ] || return 0
	STOPPING=1
	for s in "${SITES[@]}"; do
		if [ -n "${PID[$s]:-}" ] && alive "${PID[$s]}"; then kill -TERM "${PID[$s]}" 2>/dev/null || true; fi
	done
	for s in "${SITES[@]}"; do
		[ -z "${PID[$s]:-}" ] || stop "${PID[$s]}" "site $s" 20
	done
	[ -z "$WEBSIM" ] || stop "$WEBSIM" websim 5
	if [ -n "$WAN" ]; then
		stop "$WAN" wan.sh 15
		# wan.sh stops wanproxy; make sure, should wan.sh have been killed.
		if [ -s "$DIR/wan/wanproxy.pid" ]; then
			stop "$(cat "$DIR/wan/wanproxy.pid")" wanproxy 5
		fi
	fi
}
trap stop_all EXIT
trap 'echo; echo "== stopping (sites, then websim, then the WAN)"; stop_all; echo "== stopped"; exit 130' INT
trap 'echo "== stopping (sites, then websim, then the WAN)"; stop_all; echo "== stopped"; exit 143' TERM

# Binaries.
if [ -n "${MERIDIAN_BIN:-}" ]; then
	BIN=$(cd "$MERIDIAN_BIN" && pwd)
	for b in site websim wanproxy; do
		[ -x "$BIN/$b" ] || die "MERIDIAN_BIN=$MERIDIAN_BIN has no $b"
	done
	echo "== binaries: $BIN"
else
	BIN=$DIR/bin
	mkdir -p "$BIN"
	echo "== building site, websim and wanproxy into $BIN"
	for b in site websim wanproxy; do
		(cd "$REPO" && go build -o "$BIN/$b" "./cmd/$b")
	done
fi

# Each long-running process leads a session of its own (setsid), so that a
# Ctrl-C at the terminal reaches only this script, which stops them in
# order.
echo "== websim: $HOSTS realistic hosts × $PAGES pages on $IPS loopback addresses (seed $SEED)"
rm -f "$DIR/websim.ready"
geo_args=()
if [ "$GEO" = on ]; then
	for s in "${SITES[@]}"; do
		echo "${FROM[$s]} ${LAT[$s]} ${LON[$s]} $s"
	done >"$DIR/clients.txt"
	geo_args=(--clients "$DIR/clients.txt")
	echo "== websim: distance on: each site fetches from its own address, which pays its round trips to the hosts' cities ($DIR/clients.txt)"
fi
setsid "$BIN/websim" serve --hosts "$HOSTS" --pages "$PAGES" --ips "$IPS" --seed "$SEED" --profile realistic \
	--port 0 --dns 127.0.0.1:0 --admin 127.0.0.1:0 --progress 0 --geoip "$DIR/geoip.mmdb" "${geo_args[@]}" \
	--truth "$DIR/truth.jsonl" --seeds-out "$DIR/seeds.txt" --ready-file "$DIR/websim.ready" \
	>"$DIR/websim.log" 2>&1 &
WEBSIM=$!
for _ in $(seq 300); do
	[ -s "$DIR/websim.ready" ] && break
	alive "$WEBSIM" || break
	sleep 0.1
done
DNS=$(sed -n 's/.* dns=\([^ ]*\).*/\1/p' "$DIR/websim.ready" 2>/dev/null || true)
ADMIN=$(sed -n 's/.* admin=\([^ ]*\).*/\1/p' "$DIR/websim.ready" 2>/dev/null || true)
[ -n "$DNS" ] || die "websim did not start: see $DIR/websim.log"
echo "== websim: pid $WEBSIM, DNS $DNS, statistics http://$ADMIN/_websim/stats"

echo "== certificates: one CA, one pair per site and per node (REGION-1), in $DIR/certs"
"$BIN/site" certs --dir "$DIR/certs" --sites "$(
	IFS=,
	echo "${SITES[*]}"
)" --nodes "$(
	IFS=,
	n=("${SITES[@]/%/-1}")
	echo "${n[*]}"
)" >"$DIR/certs.log"

echo "== WAN: scripts/wan.sh --probe says $("$REPO/scripts/wan.sh" --probe 2>/dev/null || echo unknown);" \
	"this script uses proxy mode (websim is on loopback, out of a namespace's reach)"
wan_sites=()
for i in "${!SITES[@]}"; do
	wan_sites+=(--site "${SITES[$i]}=127.0.0.1:$((PORT + i))")
done
mkdir -p "$DIR/wan"
rm -f "$DIR/wan/endpoints.json"
WANPROXY="$BIN/wanproxy" setsid "$REPO/scripts/wan.sh" --mode proxy --delay "$DELAY" --jitter "$JITTER" \
	--dir "$DIR/wan" "${wan_sites[@]}" >"$DIR/wan.log" 2>&1 &
WAN=$!
for _ in $(seq 300); do
	[ -s "$DIR/wan/endpoints.json" ] && break
	alive "$WAN" || break
	sleep 0.1
done
[ -s "$DIR/wan/endpoints.json" ] || {
	cat "$DIR/wan.log" >&2
	die "the WAN did not start: see $DIR/wan.log"
}
grep '^== WAN mode' "$DIR/wan.log" || true
echo "== WAN: wan.sh pid $WAN, wanproxy pid $(cat "$DIR/wan/wanproxy.pid" 2>/dev/null || echo '?'), delay $DELAY ± $JITTER each way"

# The federation file: each site serves on its listen address; the others
# dial its proxy (endpoints.json has one site a line).
said=()
{
	printf '{"partitioner": "%s", "replicas": 200, "grace": "%s", "sites": [' "$PARTITIONER" "$GRACE"
	sep=""
	for s in "${SITES[@]}"; do
		line=$(grep "\"name\": \"$s\"" "$DIR/wan/endpoints.json")
		listen=$(sed -n 's/.*"listen": "\([^"]*\)".*/\1/p' <<<"$line")
		dial=$(sed -n 's/.*"dial": "\([^"]*\)".*/\1/p' <<<"$line")
		if [ -z "$listen" ] || [ -z "$dial" ]; then die "no endpoints for $s in $DIR/wan/endpoints.json"; fi
		printf '%s\n  {"name": "%s", "lat": %s, "lon": %s, "endpoint": "%s", "listen": "%s"}' \
			"$sep" "$s" "${LAT[$s]}" "${LON[$s]}" "$dial" "$listen"
		said+=("== site $s: serves the federation on $listen, the others dial its proxy at $dial")
		sep=","
	done
	printf '\n]}\n'
} >"$DIR/federation.json"
printf '%s\n' "${said[@]}"
echo "== federation file: $DIR/federation.json (partitioner $PARTITIONER, grace $GRACE)"

# start_site NAME: one site, every site with the same seeds and file (each
# keeps its own hosts' seeds); its status address is free loopback port.
start_site() {
	local s=$1 from=()
	[ "$GEO" = off ] || from=(--fetch-from "${FROM[$s]}")
	# Each site is a site of shards (the default: 24 shards on its one
	# node). bench/README's figures of this script before issue 36 are
	# of sites of one crawl database (--unsharded).
	setsid "$BIN/site" up "${from[@]}" --region "$s" --data "$DIR/$s" --listen 127.0.0.1:0 \
		--federation "$DIR/federation.json" --certs "$DIR/certs" --geoip "$DIR/geoip.mmdb" \
		--seeds "$DIR/seeds.txt" --dns "$DNS" --allow-private \
		--host-delay 200ms --ip-delay 20ms --max-crawl-delay 1s --width 2000 --per-host 10 \
		--progress 5s >>"$DIR/$s.log" 2>&1 &
	PID[$s]=$!
	unset "EXITED[$s]"
	echo "== site $s: pid ${PID[$s]}, log $DIR/$s.log, status: $BIN/site status --data $DIR/$s"
}
for s in "${SITES[@]}"; do
	start_site "$s"
done

# fields FILE: a site's status JSON as "pages sent received outbox hit% wanbytes peers"
# (peers: those not up, or -). python3, else jq, else grep on the raw JSON.
if command -v python3 >/dev/null; then
	PARSER=python3
elif command -v jq >/dev/null; then
	PARSER=jq
else
	PARSER="grep"
fi
fields() {
	case $PARSER in
	python3)
		python3 - "$1" <<-'EOF'
			import json, sys
			d = json.load(open(sys.argv[1]))
			f = d.get("federation") or {}
			peers = f.get("peers") or []
			bad = ",".join(p["name"] + ":" + p["state"] for p in peers if p.get("state") != "up") or "-"
			print(((d.get("crawldb") or {}).get("by_status") or {}).get("fetched", 0), f.get("sent_urls", 0),
			      f.get("received_urls", 0), f.get("outbox_entries", 0), round(100 * f.get("sent_cache_hit_rate", 0)),
			      sum(p.get("bytes_out", 0) for p in peers), bad)
		EOF
		;;
	jq)
		jq -r '(.federation // {}) as $f | [(.crawldb.by_status.fetched // 0), ($f.sent_urls // 0),
			($f.received_urls // 0), ($f.outbox_entries // 0), (($f.sent_cache_hit_rate // 0) * 100 | round),
			([$f.peers[]?.bytes_out] | add // 0),
			([$f.peers[]? | select(.state != "up") | "\(.name):\(.state)"] | join(",") | if . == "" then "-" else . end)]
			| map(tostring) | join(" ")' "$1"
		;;
	*)
		# Raw counts: the fetcher's responses stand in for pages.
		local j n k out=()
		j=$(tr -d ' \n' <"$1")
		for k in "done" sent_urls received_urls outbox_entries; do
			n=$(grep -o "\"$k\":[0-9]*" <<<"$j" | head -1 | cut -d: -f2)
			out+=("${n:-0}")
		done
		n=$(grep -o '"sent_cache_hit_rate":[0-9.e-]*' <<<"$j" | cut -d: -f2)
		out+=("$(awk -v r="${n:-0}" 'BEGIN { printf "%d", r * 100 + 0.5 }')")
		out+=("$(grep -o '"bytes_out":[0-9]*' <<<"$j" | cut -d: -f2 | awk '{ s += $1 } END { print s + 0 }')" -)
		echo "${out[*]}"
		;;
	esac
}

# websim_stats HOST:PORT: websim's statistics (GET /_websim/stats), the body
# only, over bash's /dev/tcp.
websim_stats() {
	local hp=$1
	exec 4<>"/dev/tcp/${hp%:*}/${hp##*:}" || return 1
	printf 'GET /_websim/stats HTTP/1.0\r\nHost: %s\r\n\r\n' "$hp" >&4
	sed '1,/^\r\{0,1\}$/d' <&4
	exec 4<&-
}

# latency FILE ADDR: the mean and 95th-percentile delay websim made the
# client ADDR pay, "MEAN P95" in ms ("? ?" if unknown).
latency() {
	local f=$1 a=$2
	[ -s "$f" ] || { echo "? ?"; return; }
	case $PARSER in
	python3)
		python3 - "$f" "$a" <<-'EOF'
			import json, sys
			c = (json.load(open(sys.argv[1])).get("clients") or {}).get(sys.argv[2]) or {}
			f = lambda v: "?" if v is None else "%.0f" % v
			print(f(c.get("mean_delay_ms")), f(c.get("p95_delay_ms")))
		EOF
		;;
	jq) jq -r --arg a "$a" '(.clients[$a] // {}) | [(.mean_delay_ms // "?"), (.p95_delay_ms // "?")]
		| map(if type == "number" then (. + 0.5 | floor | tostring) else . end) | join(" ")' "$f" ;;
	*)
		# The body is indented JSON: one field a line.
		awk -v a="\"$a\": {" 'index($0, a) { on = 1 } on && /"mean_delay_ms"/ { m = $2 } on && /"p95_delay_ms"/ { p = $2; on = 0 }
			END { gsub(/[,]/, "", m); gsub(/[,]/, "", p); if (m == "" || m == "null") m = "?"; if (p == "" || p == "null") p = "?";
				if (m != "?") m = sprintf("%.0f", m); if (p != "?") p = sprintf("%.0f", p); print m, p }' "$f"
		;;
	esac
}

# progress prints one line: per site, pages fetched, URLs sent>received,
# outbox, URL-sent cache hit rate; then the bytes the sites sent each
# other (the federation's own count).
progress() {
	local s line cell f wan=0
	local -a v
	line=$(printf '%5ss' "$((SECONDS - START))")
	for s in "${SITES[@]}"; do
		if [ -n "${EXITED[$s]:-}" ]; then
			cell="exited (${EXITED[$s]})"
		elif ! alive "${PID[$s]}"; then
			cell="down"
		elif timeout 5 "$BIN/site" status --json --data "$DIR/$s" >"$DIR/$s.status.tmp" 2>/dev/null &&
			f=$(fields "$DIR/$s.status.tmp") && [ -n "$f" ]; then
			mv "$DIR/$s.status.tmp" "$DIR/$s.status.json"
			read -r -a v <<<"$f"
			cell=$(printf '%5d pg %6d>%-6d ob %-4d %3d%%' "${v[0]}" "${v[1]}" "${v[2]}" "${v[3]}" "${v[4]}")
			[ "${v[6]}" = - ] || cell+=" ${v[6]}"
			SENT[$s]=${v[5]}
		elif [ -s "$DIR/$s.status.json" ]; then
			cell="no answer"
		else
			cell="starting"
		fi
		line+=$(printf ' | %-36s' "$cell")
		wan=$((wan + ${SENT[$s]:-0}))
	done
	echo "$line | $((wan / 1024)) KiB"
}

echo "== progress every ${EVERY_S}s (parsed with $PARSER): per site, pages fetched, URLs sent>received," \
	"outbox entries, URL-sent cache hit rate; then KiB the sites sent each other"
printf '  time | %-36s | %-36s | %-36s | WAN\n' "${SITES[@]}"

START=$SECONDS
KILLED=0 RESTART_AT=0 next=$((SECONDS + EVERY_S))
while :; do
	running=0
	for s in "${SITES[@]}"; do
		[ -z "${EXITED[$s]:-}" ] || continue
		if alive "${PID[$s]}"; then
			running=$((running + 1))
		elif [ "$KILLED" = 1 ] && [ "$s" = "$KILL" ] && [ "$RESTART_AT" -gt 0 ]; then
			: # killed on purpose; restarted below
		else
			rc=0
			wait "${PID[$s]}" 2>/dev/null || rc=$?
			EXITED[$s]=$rc
			STATUS[$s]=$rc
			echo "== site $s exited with status $rc after $((SECONDS - START))s"
		fi
	done
	if [ -n "$KILL" ] && [ "$KILLED" = 0 ] && [ $((SECONDS - START)) -ge "$AFTER_S" ]; then
		KILLED=1
		if [ -z "${EXITED[$KILL]:-}" ]; then
			echo "== SIGKILL site $KILL (pid ${PID[$KILL]}); it restarts in ${DOWN_S}s"
			kill -KILL "${PID[$KILL]}" 2>/dev/null || true
			wait "${PID[$KILL]}" 2>/dev/null || true
			RESTART_AT=$((SECONDS + DOWN_S))
			running=$((running + 1))
		else
			echo "== --kill $KILL: the site has already exited; nothing to kill"
		fi
	fi
	if [ "$RESTART_AT" -gt 0 ] && [ "$SECONDS" -ge "$RESTART_AT" ]; then
		RESTART_AT=0
		echo "== restarting site $KILL"
		start_site "$KILL"
		running=$((running + 1))
	fi
	[ "$running" -gt 0 ] || [ "$RESTART_AT" -gt 0 ] || break
	if [ "$TIMEOUT_S" -gt 0 ] && [ $((SECONDS - START)) -ge "$TIMEOUT_S" ]; then
		echo "== the crawl has not ended after $TIMEOUT: stopping"
		stop_all
		exit 1
	fi
	if [ "$SECONDS" -ge "$next" ]; then
		progress
		next=$((SECONDS + EVERY_S))
	fi
	sleep 1
done
ELAPSED=$((SECONDS - START))

rc=0
for s in "${SITES[@]}"; do
	[ "${STATUS[$s]}" = 0 ] || rc=1
done
if [ "$rc" = 0 ]; then
	echo "== the federation's crawl is over after ${ELAPSED}s: every site exited 0 by itself"
else
	echo "== the sites have exited after ${ELAPSED}s, not all with status 0: see $DIR/*.log"
fi
# websim's statistics (each site's fetch latency), while it still runs.
websim_stats "$ADMIN" >"$DIR/websim-stats.json" 2>/dev/null || rm -f "$DIR/websim-stats.json"
echo "== stopping websim and the WAN"
stop_all
trap - EXIT

# Bytes through each site's proxy: what the other sites sent it, and its
# answers.
declare -A WANBYTES=()
wan_total=0
while read -r _ name up down _; do
	WANBYTES[$name]=$((${up#upstream=} + ${down#downstream=}))
	wan_total=$((wan_total + WANBYTES[$name]))
done < <(grep '^bytes ' "$DIR/wan.log" || true)

# round_files SITE: the site's round statistics: one file for a site of
# one crawl database, one per shard for a site of shards.
round_files() {
	shopt -s nullglob
	local files=("$DIR/$1"/stats/rounds.jsonl "$DIR/$1"/shards/*/stats/rounds.jsonl)
	shopt -u nullglob
	local f
	for f in "${files[@]}"; do
		[ ! -s "$f" ] || echo "$f"
	done
}

# pages SITE: the pages the site's crawl database holds as fetched, from
# the progress line the site printed last (when it exited); else the pages
# fetched in each of its rounds (of every shard), summed.
pages() {
	local n files
	n=$(sed -n 's/.*| db [0-9]* URLs, frontier [0-9]*, fetched \([0-9]*\) |.*/\1/p' "$DIR/$1.log" 2>/dev/null | tail -1)
	[ -z "$n" ] || { echo "$n"; return; }
	mapfile -t files < <(round_files "$1")
	[ ${#files[@]} -gt 0 ] || { echo 0; return; }
	case $PARSER in
	python3) python3 -c 'import json, sys; print(sum((json.loads(l).get("by_status") or {}).get("fetched", 0) for f in sys.argv[1:] for l in open(f) if l.strip()))' "${files[@]}" ;;
	jq) jq -s 'map(.by_status.fetched // 0) | add // 0' "${files[@]}" ;;
	*) cat "${files[@]}" | awk '{ i = index($0, "\"by_status\":{"); s = substr($0, i); s = substr(s, 1, index(s, "}"));
		if (match(s, /"fetched":[0-9]+/)) n += substr(s, RSTART + 10, RLENGTH - 10) } END { print n + 0 }' ;;
	esac
}

# rounds SITE: the rounds the site ran: of a site of shards, the most any
# one shard ran.
rounds() {
	local f n most=0
	while read -r f; do
		n=$(wc -l <"$f")
		[ "$n" -le "$most" ] || most=$n
	done < <(round_files "$1")
	echo "$most"
}

echo "== summary ($DIR)"
printf '   %-5s %7s %7s %6s %11s %10s %10s %6s %12s %14s\n' site pages rounds WARCs "WARC bytes" "URLs sent" received "cache" "WAN bytes in" "fetch ms (p95)"
total_pages=0
for s in "${SITES[@]}"; do
	p=$(pages "$s")
	total_pages=$((total_pages + p))
	r=$(rounds "$s")
	shopt -s nullglob
	warcs=("$DIR/$s"/warc/*.warc*)
	shopt -u nullglob
	wb=0
	[ ${#warcs[@]} = 0 ] || wb=$(cat "${warcs[@]}" | wc -c)
	sent="?" recv="?" rate="?"
	if [ -s "$DIR/$s.status.json" ] && f=$(fields "$DIR/$s.status.json"); then
		read -r -a v <<<"$f"
		sent=${v[1]} recv=${v[2]} rate="${v[4]}%"
	fi
	lat="-"
	if [ "$GEO" = on ]; then
		read -r mean p95 <<<"$(latency "$DIR/websim-stats.json" "${FROM[$s]}")"
		lat="$mean ($p95)"
	fi
	printf '   %-5s %7d %7d %6d %11d %10s %10s %6s %12s %14s\n' "$s" "$p" "$r" "${#warcs[@]}" "$wb" "$sent" "$recv" "$rate" "${WANBYTES[$s]:-?}" "$lat"
done
echo "   pages fetched, all sites: $total_pages; URLs sent/received and the cache hit rate as of each site's last status (since its last start)"
if [ "$wan_total" -gt 0 ] && [ "$total_pages" -gt 0 ]; then
	echo "   bytes that crossed between the sites (both ways, through the WAN proxies): $wan_total ($((wan_total / total_pages)) per page)"
else
	echo "   bytes that crossed between the sites: $wan_total"
fi
if [ "$GEO" = on ]; then
	echo "   fetch ms: the mean (and 95th percentile) round trips websim made the site's fetches wait, by its distance to the hosts (--geo off: none)"
fi
echo "   logs: $DIR/{websim,wan,eu,us,asia}.log   crawl data: $DIR/{eu,us,asia}"
exit "$rc"
