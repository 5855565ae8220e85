#!/usr/bin/env bash
# A site of three nodes on one machine, crawling a websim of its own to the
# end. Each node is a `site up` process with its own data directory, status
# address and Raft address; the second and third join the first.
#
#   scripts/three-nodes.sh [DIR]          # DIR defaults to ./meridian-3nodes
#
# While it runs (from another shell):
#   DIR/bin/site status --data DIR/n2                     # a node, and the site's nodes
#   kill -9 "$(cat DIR/n2/pid)"                           # kill a node: its hosts go to the others
#   DIR/bin/site up --region local --data DIR/n2 >>DIR/n2.log 2>&1 &   # restart it: it rejoins, takes work again
#   DIR/bin/site leave --data DIR/n3                      # take a node out of the site for good
# Every node exits by itself when the crawl is exhausted; the script then
# checks the crawl against websim's truth and stops websim.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-meridian-3nodes}
if [ -e "$DIR/n1" ]; then
	echo "$DIR already holds a site: remove it first (rm -rf $DIR)" >&2
	exit 1
fi
mkdir -p "$DIR/bin"
echo "== building site and websim into $DIR/bin"
go build -o "$DIR/bin/site" ./cmd/site
go build -o "$DIR/bin/websim" ./cmd/websim

echo "== websim: 300 realistic hosts on 16 loopback addresses"
rm -f "$DIR/websim.ready"
"$DIR/bin/websim" serve --hosts 300 --pages 20 --profile realistic --seed 7 --ips 16 \
	--port 0 --dns 127.0.0.1:0 --admin 127.0.0.1:0 --progress 0 \
	--truth "$DIR/truth.jsonl" --seeds-out "$DIR/seeds.txt" --ready-file "$DIR/websim.ready" \
	>"$DIR/websim.log" 2>&1 &
WEBSIM=$!
trap 'kill $WEBSIM 2>/dev/null || true' EXIT
for _ in $(seq 100); do [ -s "$DIR/websim.ready" ] && break; sleep 0.1; done
DNS=$(sed -n 's/.* dns=\([^ ]*\).*/\1/p' "$DIR/websim.ready")
ADMIN=$(sed -n 's/.* admin=\([^ ]*\).*/\1/p' "$DIR/websim.ready")
[ -n "$DNS" ] || { echo "websim did not start: see $DIR/websim.log" >&2; exit 1; }

# The crawl settings live with the first node; the others take them when
# they join. --check-cash checks OPIC's cash after every round.
start() { # name listen raft [flags...]
	local name=$1 listen=$2 raft=$3
	shift 3
	"$DIR/bin/site" up --region local --node "$name" --data "$DIR/$name" --listen "$listen" --raft "$raft" \
		--progress 5s "$@" >>"$DIR/$name.log" 2>&1 &
	echo $! >"$DIR/$name.pid.tmp"
}
echo "== n1: starts the site (seeds, settings)"
start n1 127.0.0.1:7081 127.0.0.1:7181 --seeds "$DIR/seeds.txt" --dns "$DNS" --allow-private \
	--host-delay 200ms --ip-delay 20ms --max-crawl-delay 1s --width 2000 --per-host 10 --check-cash
for _ in $(seq 100); do "$DIR/bin/site" status --addr 127.0.0.1:7081 >/dev/null 2>&1 && break; sleep 0.1; done
echo "== n2, n3: join through n1"
start n2 127.0.0.1:7082 127.0.0.1:7182 --join 127.0.0.1:7081
start n3 127.0.0.1:7083 127.0.0.1:7183 --join 127.0.0.1:7081
for n in n1 n2 n3; do
	for _ in $(seq 100); do [ -s "$DIR/$n/site.json" ] && break; sleep 0.1; done
	mv "$DIR/$n.pid.tmp" "$DIR/$n/pid"
done
echo "== crawling; status: $DIR/bin/site status --data $DIR/n1   websim: http://$ADMIN/_websim/stats"
# Wait until no node of the site runs (restarted nodes included).
while pgrep -f -- "--data $DIR/n[123]( |\$)" >/dev/null || pgrep -f -- "--data $DIR/n[123]\$" >/dev/null; do sleep 1; done
echo "== the crawl is over; checking it against websim's truth"
go run ./cmd/bench check --data "$DIR/n1" --truth "$DIR/truth.jsonl"
# websim's view of politeness (per host and address: requests, least
# interval between two, robots violations), kept before websim stops.
if command -v curl >/dev/null; then
	curl -s "http://$ADMIN/_websim/stats" >"$DIR/websim-stats.json" && echo "== websim's statistics: $DIR/websim-stats.json"
fi
