#!/bin/bash
# t_edge_et_ring — an EPOLLET reader whose number is still the TCP socket when the peer's bytes
# start coming into the ring (the no-pause switch-over, SANSWITCH_NOPAUSE=1: the peer commits
# wherever its handshake ends, with bytes of its still unread on TCP before its MARK) gets an
# edge for each arrival, as over kernel TCP (edge_et_ring.py: 40 connections, both ends in one
# process, each of them switched). Before: the MARK's arrival was the last edge; the ring's
# later arrivals rang only X, which no set of the application's holds, and the 50 bytes sent
# after it got none (40 connections of 40). The engine now watches X until the swap and gives
# the registrations an edge for frames past the MARK (san_up_watch_rx_edges). The files of every
# connection are closed after it (the watcher holds a reference to its sock).
# timeout: 120
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build
export SANSWITCH_STATS=1 SANSWITCH_NOPAUSE=1
same_as_kernel "$E2E_DIR/edge_et_ring.py"
pid=$(sed -n 's/^# pid \([0-9][0-9]*\)$/\1/p' "$TMP/pre.out")
l=$(pid_line "$TMP/pre.err" "$pid") || exit 1
[ "$(field "$l" switched)" -eq 82 ] || fail "not all 41 connections switched at both ends: $l"
log "41 connections switched, their edges as over kernel TCP: $l"
