#!/bin/bash
# t_stats_fork_child — a server's forked helper that never touches the connections it inherits
# (redis's BGSAVE child) counts none of them in its stats line, whatever state each was in at
# the fork: fallen back on TCP (3 exchanges: never proposed), in the middle of the no-pause
# preparation (18 exchanges under SANSWITCH_NOPAUSE=1: the fork lands there in some runs), or
# switched (40). The server counts each connection once. Before: the helper's exit counted every
# connection's TCP bytes again (fallen back ones as fallback_not_attempted), and a fork during
# the preparation had the server's engine take the client's SWITCH for a protocol violation
# and reset the connection under the application.
# timeout: 300
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build
export SANSWITCH_STATS=1
unset SANSWITCH_SWITCH_AFTER # the default: the 17th exchange is due
RUNS=${RUNS:-10}
N=3

for c in 0:3 1:18 0:40 1:40; do
	set -- "${c%:*}" "${c#*:}"
	for r in $(seq "$RUNS"); do
		out=$TMP/np$1.ex$2.$r
		rc=0
		as_t pre 60 env SANSWITCH_NOPAUSE="$1" "$PY" "$E2E_DIR/stats_fork_child.py" "$N" "$2" \
			>"$out.out" 2>"$out.err" || rc=$?
		[ "$rc" -eq 0 ] || { show "$out.out" "$out.err"; fail "nopause=$1 $2 exchanges run $r: exit status $rc"; }
		grep -qx ok "$out.out" || { show "$out.out" "$out.err"; fail "nopause=$1 $2 exchanges run $r: no ok"; }
		hp=$(sed -n 's/^# helper pid //p' "$out.out")
		l=$(pid_line "$out.err" "$hp") || exit 1
		for f in switched fallback tcp_tx_bytes tcp_rx_bytes; do
			[ "$(field "$l" "$f")" -eq 0 ] || fail "nopause=$1 $2 exchanges run $r: the helper counts $f: $l"
		done
		# the server (the first line's process) counts each of its N connections once
		mp=$(sed -n 's/^sanswitch: pid=\([0-9]*\) .* accepts=[1-9].*/\1/p' "$out.err")
		l=$(pid_line "$out.err" "$mp") || exit 1
		[ $(($(field "$l" switched) + $(field "$l" fallback))) -eq "$N" ] ||
			fail "nopause=$1 $2 exchanges run $r: the server did not count $N connections once: $l"
		[ $(($(field "$l" tcp_rx_bytes) + $(field "$l" san_rx_bytes))) -eq $((N * ($2 + 5) * 10)) ] ||
			fail "nopause=$1 $2 exchanges run $r: the server did not count the $((N * ($2 + 5) * 10)) bytes it read once: $l"
	done
	log "ok   nopause=$1, $2 exchanges before the fork: $RUNS runs"
done
