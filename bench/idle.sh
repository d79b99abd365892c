#!/usr/bin/env bash
# idle.sh: the idle node of issue 20. Starts `iacp-node run` on the defaults (a fresh data
# directory, loopback listen addresses) ROUNDS times and prints, per run: how long from exec
# until it prints its local API's address (the API is serving by then), and after SETTLE seconds its RSS split into anonymous memory
# (the node's own) and file-backed pages (the binary's code and read-only data, mapped from
# the page cache and shared by every process that runs the same file).
# Usage: bench/idle.sh [BIN] (default bin/iacp-node; `make idle` builds it first).
# With FLOOR=1, BIN (default bin/barehost, built from bench/barehost by `make idle-floor`) is
# a go-libp2p host on its defaults and nothing else, the floor under the node: it is started
# as it is, and ready means its "ready" line.
set -euo pipefail
FLOOR=${FLOOR:-0}
if [ "$FLOOR" = 1 ]; then BIN=${1:-bin/barehost}; else BIN=${1:-bin/iacp-node}; fi
ROUNDS=${ROUNDS:-5}
SETTLE=${SETTLE:-10}
printf '%-5s %9s %9s %9s %9s\n' run ready_ms rss_kb anon_kb file_kb
for i in $(seq 1 "$ROUNDS"); do
	dir=$(mktemp -d)
	fifo="$dir/out"
	mkfifo "$fifo"
	if [ "$FLOOR" = 1 ]; then
		t0=$(date +%s%N)
		"$BIN" >"$fifo" 2>/dev/null &
		pid=$!
		want=ready
	else
		"$BIN" init --data-dir "$dir" >/dev/null 2>&1
		port=$((20000 + RANDOM % 20000))
		t0=$(date +%s%N)
		"$BIN" run --data-dir "$dir" --api "127.0.0.1:$port" \
			--listen /ip4/127.0.0.1/tcp/0 --listen /ip4/127.0.0.1/udp/0/quic-v1 >"$fifo" 2>/dev/null &
		pid=$!
		want=api
	fi
	exec 3<"$fifo"
	ready=0
	while IFS= read -r line <&3; do
		case $line in "$want"*) ready=1 && break ;; esac
	done
	[ "$ready" = 1 ] || { echo "run $i: $BIN ended without printing its \"$want\" line" >&2; exit 1; }
	t1=$(date +%s%N)
	cat <&3 >/dev/null &
	drain=$!
	if [ "$FLOOR" != 1 ]; then
		code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/healthz" || true)
		[ "$code" = 200 ] || { echo "run $i: /healthz answered $code" >&2; exit 1; }
	fi
	sleep "$SETTLE"
	rss=$(awk '/^VmRSS/{print $2}' "/proc/$pid/status")
	anon=$(awk '/^RssAnon/{print $2}' "/proc/$pid/status")
	file=$(awk '/^RssFile/{print $2}' "/proc/$pid/status")
	printf '%-5s %9d %9d %9d %9d\n' "$i" $(((t1 - t0) / 1000000)) "$rss" "$anon" "$file"
	kill "$pid"
	wait "$pid" || true
	wait "$drain" || true
	exec 3<&-
	rm -rf "$dir"
done
