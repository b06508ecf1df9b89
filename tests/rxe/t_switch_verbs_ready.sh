#!/bin/bash
# t_switch_verbs_ready — tests/e2e/t_edge_ready.sh over verbs: honest readiness at the
# switch-over. edge_ready.py makes N connections in turn on the rxe device's address; the side
# that waits for the first bytes (the server for a request, then the client for a greeting) is
# nonblocking and waits with select, poll and epoll in turn (mix). Whenever a wait says readable,
# the receive must return the bytes: the count of receives that said EAGAIN right after must be
# 0, as it is on kernel TCP (run first, same script), and every connection must be switched onto
# verbs in both processes.
# On main's code before the fix (the verbs provider wrote its MARK on TCP at its commit, while
# its first bytes were still to cross the fabric, or to be taken off the CQ by the engine
# thread) a reader woken by the MARK found its ring empty: server side, 59 of 120. Now the MARK
# goes once the first frame with stream bytes (or the end) is acknowledged by the peer's HCA, and
# the reader takes in its CQ itself after the MARK (docs/protocol.md §9.2, rule 3).
# timeout: 300
set -u
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/../e2e/lib.sh"
need_build
export E2E_ADDR=${RXE_VM_ADDR:?RXE_VM_ADDR is not set: run through tests/rxe/run}
export SANSWITCH_STATS=1 SANSWITCH_PROVIDER=verbs
N=${READY_N:-120}
bad=() # every case runs: the counts of both sides are worth seeing

for side in server client; do
	for mode in none pre; do
		out=$TMP/$side.$mode
		rc=0
		as_t "$mode" 200 "$PY" "$E2E_DIR/edge_ready.py" "$N" "$side" mix >"$out.out" 2>"$out.err" || rc=$?
		[ "$rc" -eq 0 ] || { show "$out.out" "$out.err"; fail "$side ($mode): exit $rc"; }
		line=$(grep '^readable-then-EAGAIN' "$out.out") || { show "$out.out"; fail "$side ($mode): no result"; }
		log "$side waits ($mode): $line"
		[ "$line" = "readable-then-EAGAIN 0 of $N" ] || bad+=("$side ($mode): $line")
		[ "$mode" = none ] && continue
		for pid in $(sed -n 's/^# pid \([0-9]*\)$/\1/p' "$out.out"); do
			l=$(pid_line "$out.err" "$pid") || exit 1
			[ "$(field "$l" switched_verbs)" -eq "$N" ] || fail "$side: not all $N switched onto verbs: $l"
		done
	done
done
[ ${#bad[@]} -eq 0 ] || fail "a wait said readable and the receive said EAGAIN: ${bad[*]}"
log "$N connections each way switched onto verbs, no wait said readable before the data"
