#!/bin/bash
# t_verbs_multi — several connections per listener: one server accepts 4 clients that connect at
# once (each its own seed and sizes, one of them with held slots) and serves them concurrently,
# one thread each; every stream is checked byte for byte and both sides' ok lines must agree.
# timeout: 400
set -u
source "$(dirname -- "$0")/verbs_lib.sh"
port=18700

multi() {
	local n=$1 count=$2 t0 secs i pids=() rc=0 src
	start_server s -- "$n"
	t0=$(date +%s.%N)
	for i in $(seq "$n"); do
		# client i: seed 100+i, MAXSIZE varies, the last one holds its messages at the server
		local max=$(( i % 2 ? 4112 : 200 + i )) hold=0
		[ "$i" -eq "$n" ] && hold=1000
		timeout 280 "$SV" client "$addr" "$port" "$count" "$max" $((100 + i)) $hold \
			>"$tmp/c$i.out" 2>"$tmp/c$i.err" &
		pids+=($!)
	done
	for i in $(seq "$n"); do
		wait "${pids[i - 1]}" || rc=$((rc + 1))
	done
	secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
	wait_server "$srv_pid"
	src=$?
	local cl sl nok act
	cl=$(cat "$tmp"/c*.out | sort)
	sl=$(sort "$tmp/s.out")
	nok=$(grep -c '^sanverbs: ok messages=' <<<"$cl")
	act=$(sed -n 's/.*max_active=\([0-9]*\).*/\1/p' "$tmp/s.err")
	if [ "$rc" -eq 0 ] && [ "$src" -eq 0 ] && [ "$nok" -eq "$n" ] && [ "$cl" = "$sl" ] &&
		[ "${act:-0}" -ge 2 ]; then
		ok "$n clients at once, $count messages each: all checked, max_active=$act (${secs} s)"
		sed 's/^/       /' <<<"$cl"
		show "$tmp"/c*.err "$tmp/s.err"
	else
		bad "$n clients at once: $rc clients failed, server exit $src, $nok ok lines," \
			"max_active=${act:-?}"
		for f in "$tmp"/c*.out "$tmp"/c*.err "$tmp"/s.out "$tmp"/s.err; do
			sed "s|^|       $(basename "$f"): |" "$f"
		done
	fi
}

multi 4 3000
multi 8 500

[ "$failed" -eq 0 ]
