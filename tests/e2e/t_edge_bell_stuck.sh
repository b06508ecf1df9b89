#!/bin/bash
# t_edge_bell_stuck — a doorbell that lands after its reader gave up waiting for it (docs/protocol.md,
# "Doorbells": the doorbell owed). A reader that found the data without waiting (nonblocking
# receives) waits a bounded time for the doorbell the writer owes before it arms again; with
# SANSWITCH_FAULT=bell_stuck the writer rings 50 ms late, after that. The doorbell must still be
# taken off the reader's socket at its next arm: the reader, idle for 1 s in poll() afterwards,
# may wake a few times at most (edge_bell_stuck.py; kernel TCP: 0). Before: the arm skipped the
# drain with nothing owed, the doorbell stayed, and poll() said readable ~340000 times in 1 s.
# timeout: 120
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build
export SANSWITCH_STATS=1

for mode in none pre pre pre; do
	out=$TMP/stuck.$mode.$RANDOM
	rc=0
	if [ "$mode" = pre ]; then
		SANSWITCH_FAULT=bell_stuck as_t pre 60 "$PY" "$E2E_DIR/edge_bell_stuck.py" \
			>"$out.out" 2>"$out.err" || rc=$?
	else
		as_t none 60 "$PY" "$E2E_DIR/edge_bell_stuck.py" >"$out.out" 2>"$out.err" || rc=$?
	fi
	[ "$rc" -eq 0 ] || { show "$out.out" "$out.err"; fail "$mode: exit $rc"; }
	n=$(sed -n 's/^idle_wakeups //p' "$out.out")
	[ -n "$n" ] && [ "$n" -le 5 ] ||
		{ show "$out.out" "$out.err"; fail "$mode: the idle reader woke $n times in 1 s"; }
	if [ "$mode" = pre ]; then
		no_preload_errors "$out.err"
		pids_switched "$out.out" "$out.err" 1 "$mode"
	fi
	log "$mode: the idle reader woke $n times in 1 s"
done
