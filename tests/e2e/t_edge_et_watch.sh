#!/bin/bash
# t_edge_et_watch — EPOLLET registrations of switched connections, whose waits find their edges
# in the rings (core/san_rxwatch.h: the peer rings no doorbell per arrival while a wait watches or
# the connection is quiet; an edge is the ring moving past where the registration was last
# reported): edge_et_watch.py's cases (a partial read, a burst, a wake-up from a sleeping wait,
# bytes left unread while waits come and go, the fd in a second set whose waiter sleeps in the
# kernel, bytes left unread beside a busy neighbour with work between waits, a switch to
# level-triggered, a dup of the fd in a second set) give kernel TCP's edges, 20 connections and a
# neighbour each, all switched at both ends; the debug log shows that the edges were watched (before: every arrival rang a
# doorbell and no wait watched an edge-triggered registration).
# timeout: 240
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build
export SANSWITCH_STATS=1
# (the one known difference, an extra edge right after a partial read: edge_et_watch.py's doc)
SAME_EXEMPT='partial, at once' SANSWITCH_LOG=debug same_as_kernel "$E2E_DIR/edge_et_watch.py"
pid=$(sed -n 's/^# pid \([0-9][0-9]*\)$/\1/p' "$TMP/pre.out")
l=$(pid_line "$TMP/pre.err" "$pid") || exit 1
[ "$(field "$l" switched)" -eq 80 ] || fail "not all 40 connections (20, and their neighbours) switched at both ends: $l"
n=$(grep -c "EPOLLET registration is its only one: waits watch its ring" "$TMP/pre.err")
[ "$n" -ge 1 ] || { show "$TMP/pre.err"; fail "no wait watched an EPOLLET registration in its ring"; }
log "40 connections switched, their edges as over kernel TCP, watched in the rings ($n logged): $l"
