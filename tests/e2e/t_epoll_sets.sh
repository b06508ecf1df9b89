#!/bin/bash
# t_epoll_sets — an event-loop echo server whose connections sit in three epoll sets at once
# (level-triggered A; B level- or edge-triggered; C edge-triggered, half of them), 8 connections,
# 300 rounds, against a client waiting in poll() and select() in turn (epoll_sets.py): kernel
# TCP is the oracle by digest, then 3 preloaded runs of each mode, switched at both ends. The
# waits find switched connections ready in their rings (core/san_rxwatch.h) with the peers'
# doorbells off: every request must still be seen, in every set, no level-triggered event may
# come for a connection with nothing to read (beyond a few: kernel TCP has none), a poll or
# select with timeout 0 after a read that left bytes must say readable, and the server
# asleep in epoll_wait with idle connections must cost no CPU (2 s: at most 30 ms, a few clock
# ticks). Set C is only looked at (timeout 0): holding half the connections, a wait there could
# sleep while the others have requests, on kernel TCP too.
# timeout: 400
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build
export SANSWITCH_STATS=1
conns=8
rounds=300

for mode in lt et; do
	out=$TMP/k.$mode
	as_t none 90 "$PY" "$E2E_DIR/epoll_sets.py" "$mode" "$conns" "$rounds" >"$out.out" 2>"$out.err" ||
		{ show "$out.out" "$out.err"; fail "$mode: kernel TCP run failed"; }
	want=$(grep '^echo ' "$out.out")
	[ -n "$want" ] || { show "$out.out" "$out.err"; fail "$mode: no digest from kernel TCP"; }
	[ "$(sed -n 's/^zero_misses //p' "$out.out")" = 0 ] ||
		{ show "$out.out" "$out.err"; fail "$mode: kernel TCP: a zero-timeout wait missed unread bytes"; }
	[ "$(sed -n 's/^spurious //p' "$out.out")" = 0 ] ||
		{ show "$out.out" "$out.err"; fail "$mode: kernel TCP had spurious level-triggered events"; }
	for i in 1 2 3; do
		out=$TMP/p.$mode.$i
		rc=0
		as_t pre 90 "$PY" "$E2E_DIR/epoll_sets.py" "$mode" "$conns" "$rounds" >"$out.out" 2>"$out.err" || rc=$?
		no_preload_errors "$out.err"
		got=$(grep '^echo ' "$out.out")
		[ "$rc" -eq 0 ] && [ "$got" = "$want" ] ||
			{ show "$out.out" "$out.err"; fail "$mode run $i: '$got' (exit $rc), kernel TCP: '$want'"; }
		sp=$(sed -n 's/^spurious //p' "$out.out")
		idle=$(sed -n 's/^idle_ms //p' "$out.out")
		[ -n "$sp" ] && [ "$sp" -le $((conns * rounds / 100)) ] ||
			{ show "$out.out" "$out.err"; fail "$mode run $i: $sp spurious level-triggered events"; }
		[ "$(sed -n 's/^zero_misses //p' "$out.out")" = 0 ] ||
			{ show "$out.out" "$out.err"; fail "$mode run $i: a poll or select with timeout 0 missed unread bytes"; }
		[ -n "$idle" ] && [ "$idle" -le 30 ] ||
			{ show "$out.out" "$out.err"; fail "$mode run $i: the idle server took ${idle} ms of CPU in 2 s"; }
		pids_switched "$out.out" "$out.err" "$conns" "$mode run $i"
		log "$mode run $i: same echo as kernel TCP, spurious $sp, idle CPU ${idle} ms"
	done
done
