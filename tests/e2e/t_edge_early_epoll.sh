#!/bin/bash
# t_edge_early_epoll — a client that registers its socket with epoll before connect() (nginx's
# upstream connections: EPOLLIN | EPOLLOUT | EPOLLET | EPOLLRDHUP, then connect) reads 16 MiB from a
# pure nonblocking sender that waits for EPOLLOUT edges and never reads after the request (nginx's
# sendfile path) (edge_early_epoll.py), edge-triggered as nginx, and level-triggered for EPOLLIN,
# kernel TCP as the oracle by digest; 12 and 8 preloaded runs, each switched at both ends. Before:
# the registration was not seen (the socket was not a candidate yet), the swap left it on the TCP
# socket, and the reader slept in epoll_wait with the ring full while the sender waited for room:
# every run stalled, both ways, at 2-4 MiB (nginx proxying a preloaded nginx hung at every 50 MiB
# download).
# timeout: 300
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build
export SANSWITCH_STATS=1
size=16777216

for mode in et lt; do
	out=$TMP/k.$mode
	as_t none 60 "$PY" "$E2E_DIR/edge_early_epoll.py" "$size" "$mode" >"$out.out" 2>"$out.err" ||
		{ show "$out.out" "$out.err"; fail "$mode: kernel TCP run failed"; }
	want=$(grep '^got ' "$out.out")
	runs=12
	[ "$mode" = lt ] && runs=8
	for i in $(seq "$runs"); do
		out=$TMP/p.$mode.$i
		rc=0
		as_t pre 60 "$PY" "$E2E_DIR/edge_early_epoll.py" "$size" "$mode" >"$out.out" 2>"$out.err" || rc=$?
		no_preload_errors "$out.err"
		got=$(grep '^got ' "$out.out")
		[ "$rc" -eq 0 ] && [ "$got" = "$want" ] ||
			{ show "$out.out" "$out.err"; fail "$mode run $i: '$got' (exit $rc), kernel TCP: '$want'"; }
		pids_switched "$out.out" "$out.err" 1 "$mode run $i"
	done
	log "$mode: $runs preloaded runs read every byte and the end as over kernel TCP, switched"
done
