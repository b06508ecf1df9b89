#!/bin/bash
# t_edge_ready — honest readiness at the switch-over: whenever select, poll or epoll says a
# socket is readable, a receive returns data (edge_ready.py), for the side that waits for the
# first bytes being the server (a request) and the client (a greeting). Each run: 100
# connections, every one switched (both processes' stats lines), over kernel TCP and switched;
# the count of waits that said readable before a receive said EAGAIN must be 0, as the kernel's.
# Before: a side's MARK went on TCP at its commit, before its first bytes were in the ring, so
# the peer, woken by the MARK, found nothing (server side: 77 of 200 connections; client side:
# most). Now the MARK goes with the first stream bytes or the end (docs/protocol.md §9).
# timeout: 240
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build
export SANSWITCH_STATS=1
N=100

for side in server client; do
	for w in select poll epoll; do
		for mode in none pre; do
			out=$TMP/$side.$w.$mode
			rc=0
			as_t "$mode" 120 "$PY" "$E2E_DIR/edge_ready.py" "$N" "$side" "$w" >"$out.out" 2>"$out.err" || rc=$?
			[ "$rc" -eq 0 ] || { show "$out.out" "$out.err"; fail "$side $w ($mode): exit $rc"; }
			line=$(grep '^readable-then-EAGAIN' "$out.out") || { show "$out.out"; fail "$side $w ($mode): no result"; }
			[ "$line" = "readable-then-EAGAIN 0 of $N" ] ||
				fail "$side $w ($mode): a wait said readable and the receive said EAGAIN: $line"
			[ "$mode" = pre ] && pids_switched "$out.out" "$out.err" "$N" "$side $w"
		done
		log "$side waits ($w): $N connections, switched, no wait said readable before its data"
	done
done
