#!/bin/bash
# t_switch_direct — the direct grant (docs/protocol.md, "Direct grant on shm"): a blocking receive
# that sleeps offers its buffer, and a large send writes straight into it with process_vm_writev.
# switch_direct.py (both ends in one process; every byte checked by sha256) runs under:
#   the defaults (auto) and grant: direct_tx_bytes within the [MIN, MAX] the program computed
#     from the sends it made to a sleeping receiver (it waits for that sleep, no timing);
#   SANSWITCH_DIRECT=0, read and inline: no direct writes (direct_tx_bytes=0), the same bytes
#     by READ or copy;
#   auto with SANSWITCH_FAULT=cma_fail (CMA refused, as under Yama): the first claim fails,
#     the stream goes on by READ, direct_tx_bytes=0.
# Every run must switch all its pairs on both ends (switched = 2 x pairs, fallback=0).
# And the case that hung before: under reg_fail,alloc_fail a direct write moves part of a
# blocking send, the rest gets ENOBUFS, the send returns short, and an EPOLLET waiter must still
# get its EPOLLOUT edge (switch_direct.py enobufs).
# timeout: 180
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build

export SANSWITCH_STATS=1

run() { # NAME EXPECT(on|off) [ENV=VALUE...] [-- PROGRAM_ARGS...]
	local name=$1 expect=$2 rc=0 l pid pairs lo hi d
	local -a envs=() args=()
	shift 2
	while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
	[ $# -gt 0 ] && shift && args=("$@")
	(
		for kv in "${envs[@]}"; do export "${kv?}"; done
		as_t pre 120 "$PY" "$E2E_DIR/switch_direct.py" "${args[@]}"
	) >"$TMP/$name.out" 2>"$TMP/$name.err" || rc=$?
	no_preload_errors "$TMP/$name.err"
	[ "$rc" -eq 0 ] || { show "$TMP/$name.out" "$TMP/$name.err"; fail "$name: exited $rc"; }
	pid=$(sed -n 's/^# pid \([0-9][0-9]*\)$/\1/p' "$TMP/$name.out")
	pairs=$(sed -n 's/^pairs \([0-9][0-9]*\)$/\1/p' "$TMP/$name.out")
	read -r lo hi < <(sed -n 's/^direct \([0-9]*\) \([0-9]*\)$/\1 \2/p' "$TMP/$name.out")
	[ -n "$pid" ] && [ -n "$pairs" ] && [ -n "$lo" ] && [ -n "$hi" ] ||
		{ show "$TMP/$name.out"; fail "$name: no pid, pairs or direct line"; }
	l=$(pid_line "$TMP/$name.err" "$pid") || exit 1
	[ "$(field "$l" switched)" -eq $((2 * pairs)) ] && [ "$(field "$l" fallback)" -eq 0 ] ||
		fail "$name: expected switched=$((2 * pairs)) fallback=0: $l"
	d=$(field "$l" direct_tx_bytes) || exit 1
	case $expect in
	on) [ "$d" -ge "$lo" ] && [ "$d" -le "$hi" ] ||
		fail "$name: direct_tx_bytes=$d, expected $lo..$hi: $l" ;;
	off) [ "$d" -eq 0 ] || fail "$name: direct_tx_bytes=$d, expected 0: $l" ;;
	esac
	log "$name: $(grep -c '^case .*: ok' "$TMP/$name.out") cases intact, direct_tx_bytes=$d ($expect)"
}

run default on
run direct_off off SANSWITCH_DIRECT=0
run grant on SANSWITCH_BULK=grant
run read off SANSWITCH_BULK=read
run inline off SANSWITCH_BULK=inline
run cma_fail off SANSWITCH_FAULT=cma_fail
# A direct write, then ENOBUFS for the rest: the blocking send returns short (the application
# sees no error, so none is counted) and an EPOLLET waiter gets its EPOLLOUT edge (a hang before;
# the program checks both).
run enobufs on SANSWITCH_FAULT=reg_fail,alloc_fail -- enobufs
l=$(pid_line "$TMP/enobufs.err" "$(sed -n 's/^# pid \([0-9][0-9]*\)$/\1/p' "$TMP/enobufs.out")") || exit 1
[ "$(field "$l" enobufs)" -eq 0 ] || fail "enobufs: an ENOBUFS counted that no call returned: $l"
