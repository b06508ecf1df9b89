#!/bin/bash
# t_verbs_transport — core/san_verbs.c over a real (Soft-RoCE) device: build/sanverbs server and
# client exchange seeded messages of random sizes, every byte checked, credits exercised (the
# client runs out of credits and sleeps on the completion channel); a connect to a port nobody
# listens on fails fast with ECONNREFUSED.
# timeout: 600
set -u

# shellcheck source=tests/rxe/verbs_lib.sh
. "$(dirname -- "$0")/verbs_lib.sh"
port=18500

# pair COUNT MAXSIZE SEED [MODE]: one server, one client; both must say ok with the same totals.
# MODE rdma: rdma-client ROUNDS=COUNT SIZE=MAXSIZE (RDMA READ and WRITE, checked).
pair() {
	local count=$1 max=$2 seed=$3 mode=${4:-} t0 t1 crc src line_c line_s want
	port=$((port + 1))
	rm -f "$tmp"/s.* "$tmp"/c.*
	"$SV" server "$addr" "$port" >"$tmp/s.out" 2>"$tmp/s.err" &
	srv_pid=$!
	srv_pids+=("$srv_pid")
	until_listening "$tmp/s.err" "$srv_pid"
	t0=$(date +%s.%N)
	if [ "$mode" = rdma ]; then
		want="^sanverbs: ok rdma rounds=$count read=$((count * max)) written=$max\$"
		timeout 280 "$SV" rdma-client "$addr" "$port" "$count" "$max" "$seed" \
			>"$tmp/c.out" 2>"$tmp/c.err"
	else
		want="^sanverbs: ok messages=$count bytes=[0-9]+\$"
		timeout 280 "$SV" client "$addr" "$port" "$count" "$max" "$seed" \
			>"$tmp/c.out" 2>"$tmp/c.err"
	fi
	crc=$?
	t1=$(date +%s.%N)
	wait "$srv_pid"
	src=$?
	line_c=$(cat "$tmp/c.out")
	line_s=$(cat "$tmp/s.out")
	local secs
	secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
	if [ "$crc" -eq 0 ] && [ "$src" -eq 0 ] &&
		[[ $line_c =~ $want ]] &&
		[ "$line_c" = "$line_s" ]; then
		echo "ok   ${mode:+$mode }$count x ${mode:-1..}$max seed $seed: $line_c (${secs} s)"
		sed 's/^/       /' "$tmp/c.err" "$tmp/s.err" | grep -v listening
	else
		echo "FAIL ${mode:+$mode }$count x ${mode:-1..}$max seed $seed: client exit $crc, server exit $src"
		for f in c.out c.err s.out s.err; do sed "s/^/       $f: /" "$tmp/$f"; done
		failed=$((failed + 1))
	fi
}

pair 1 1 1
pair 1000 4112 7
pair 100000 64 42
pair 20000 4096 4242
pair 5000 4112 99
pair 3 1 5 rdma
pair 4 1000003 6 rdma
pair 2 16777216 8 rdma

# Nobody listens: REJECTED by the CM, ECONNREFUSED, exit 2, quickly.
t0=$(date +%s%N)
"$SV" client "$addr" 18499 10 10 1 >"$tmp/r.out" 2>"$tmp/r.err"
rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
# The tool's own figure (connect call only; under TCG most of it is librdmacm's device set-up)
# must be under 2 s; the wall time includes loading the program over 9p.
cms=$(sed -n 's/.*ECONNREFUSED) after \([0-9]*\) ms.*/\1/p' "$tmp/r.err")
if [ "$rc" -eq 2 ] && [ -n "$cms" ] && [ "$cms" -lt 2000 ] && [ "$ms" -lt 10000 ]; then
	echo "ok   refused port: exit 2, ${ms} ms wall: $(cat "$tmp/r.err")"
else
	echo "FAIL refused port: exit $rc, ${ms} ms wall: $(cat "$tmp/r.err" "$tmp/r.out")"
	failed=$((failed + 1))
fi

# A peer killed mid-stream: the survivor reports "Connection reset" (exit 1) within seconds,
# it neither hangs nor claims success. $1: which side is killed.
killed() {
	local victim=$1 spid cpid t0 ms rc_other
	port=$((port + 1))
	rm -f "$tmp"/k.*
	"$SV" server "$addr" "$port" >"$tmp/k.s.out" 2>"$tmp/k.s.err" &
	spid=$!
	srv_pids+=("$spid")
	until_listening "$tmp/k.s.err" "$spid"
	"$SV" client "$addr" "$port" 100000000 64 3 >"$tmp/k.c.out" 2>"$tmp/k.c.err" &
	cpid=$!
	sleep 1.5
	if [ "$victim" = server ]; then
		kill -9 "$spid"
		t0=$(date +%s%N)
		{ wait "$spid"; } 2>/dev/null
		timeout 60 tail --pid="$cpid" -f /dev/null
		wait "$cpid"
		rc_other=$?
		err=$(cat "$tmp/k.c.err")
	else
		kill -9 "$cpid"
		t0=$(date +%s%N)
		{ wait "$cpid"; } 2>/dev/null
		timeout 60 tail --pid="$spid" -f /dev/null
		wait "$spid"
		rc_other=$?
		err=$(grep -v listening "$tmp/k.s.err")
	fi
	ms=$((($(date +%s%N) - t0) / 1000000))
	if [ "$rc_other" -eq 1 ] && [[ $err == *"Connection reset"* ]] && [ "$ms" -lt 10000 ]; then
		echo "ok   $victim killed: the other side saw it in ${ms} ms: $err"
	else
		echo "FAIL $victim killed: the other side exited $rc_other after ${ms} ms: $err"
		failed=$((failed + 1))
	fi
}
killed server
killed client

[ "$failed" -eq 0 ]
