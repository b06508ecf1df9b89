#!/bin/bash
# t_edge_bell — honest readiness after a doorbell that lands late (docs/protocol.md, "Doorbells":
# the doorbell owed). A switched connection, a writer sending 100-byte messages at random
# moments, a reader that waits (select, poll, epoll), receives until EAGAIN and, like wrk, looks
# again a moment later without waiting (edge_bell.py). Over kernel TCP, under the switch, and
# under the switch with SANSWITCH_FAULT=bell_late (the writer rings 300 us after taking the
# reader's flag, as a writer descheduled between the two would): the count of waits that said
# readable before a receive said EAGAIN must be 0, the bytes the kernel's, both ends switched.
# Before: the reader drained its doorbell socket before the late doorbell landed, which then
# made it readable over an empty ring (with the fault, about 1 wait in 4; through haproxy, wrk
# counted read errors in 1 run of 3).
# timeout: 180
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build
export SANSWITCH_STATS=1
N=1500

for w in select poll epoll; do
	ksum=
	for mode in none pre late; do
		out=$TMP/$w.$mode
		rc=0
		if [ "$mode" = late ]; then
			SANSWITCH_FAULT=bell_late as_t pre 120 "$PY" "$E2E_DIR/edge_bell.py" "$N" "$w" \
				>"$out.out" 2>"$out.err" || rc=$?
		else
			as_t "$mode" 120 "$PY" "$E2E_DIR/edge_bell.py" "$N" "$w" >"$out.out" 2>"$out.err" || rc=$?
		fi
		[ "$rc" -eq 0 ] || { show "$out.out" "$out.err"; fail "$w ($mode): exit $rc"; }
		line=$(grep '^readable-then-EAGAIN' "$out.out") || { show "$out.out"; fail "$w ($mode): no result"; }
		set -- $line
		[ "$2" -eq 0 ] || fail "$w ($mode): a wait said readable and the receive said EAGAIN: $line"
		[ "$6" -eq $((N * 100)) ] || fail "$w ($mode): $6 bytes, expected $((N * 100))"
		if [ "$mode" = none ]; then
			ksum=$8
		else
			[ "$8" = "$ksum" ] || fail "$w ($mode): sha256 $8, kernel TCP's $ksum"
			pids_switched "$out.out" "$out.err" 1 "$w ($mode)"
		fi
	done
	log "$w: $N messages, switched, with and without a late doorbell: no wait said readable for nothing, bytes as over kernel TCP"
done
