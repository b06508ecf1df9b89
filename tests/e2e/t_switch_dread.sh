#!/bin/bash
# t_switch_dread — the direct read (docs/protocol.md, "Direct read on shm"): a blocking send to a
# peer whose application waits for data offers its own buffer, and the peer reads it with
# process_vm_readv straight into its receive buffer. switch_dread.py (every byte checked) runs:
#   the defaults (auto) and read: direct_read_tx_bytes > 0 (case stream sends 16 MiB, each MiB to
#     a receiver asleep in poll);
#   SANSWITCH_DIRECT=0, grant and inline: none (direct_read_tx_bytes=0), the same bytes otherwise;
#   auto with SANSWITCH_FAULT=cma_fail (process_vm_readv refused, as under Yama): the first read
#     fails, the sender takes its bytes back and sends them through the area, none read directly.
# Each run also has partial reads of an offer, FIONREAD and MSG_PEEK over one, both ends sending
# before reading (offers withdrawn, no deadlock), and a sender SIGKILLed mid-stream (the receiver
# never delivers a byte that is not the sender's). Every connection must switch (fallback=0).
# timeout: 240
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build

export SANSWITCH_STATS=1

run() { # NAME EXPECT(on|off) [ENV=VALUE...]
	local name=$1 expect=$2 rc=0 l pid sw dr
	shift 2
	(
		for kv in "$@"; do export "${kv?}"; done
		cd "$E2E_DIR" && as_t pre 120 "$PY" "$E2E_DIR/switch_dread.py"
	) >"$TMP/$name.out" 2>"$TMP/$name.err" || rc=$?
	no_preload_errors "$TMP/$name.err"
	[ "$rc" -eq 0 ] || { show "$TMP/$name.out" "$TMP/$name.err"; fail "$name: exited $rc"; }
	pid=$(sed -n 's/^# pid \([0-9][0-9]*\)$/\1/p' "$TMP/$name.out")
	sw=$(sed -n 's/^switched \([0-9][0-9]*\)$/\1/p' "$TMP/$name.out")
	[ -n "$pid" ] && [ -n "$sw" ] || { show "$TMP/$name.out"; fail "$name: no pid or switched line"; }
	[ "$(grep -c '^case .*: ok' "$TMP/$name.out")" -eq 5 ] ||
		{ show "$TMP/$name.out"; fail "$name: not every case ok"; }
	l=$(pid_line "$TMP/$name.err" "$pid") || exit 1
	[ "$(field "$l" switched)" -eq "$sw" ] && [ "$(field "$l" fallback)" -eq 0 ] ||
		fail "$name: expected switched=$sw fallback=0: $l"
	dr=$(field "$l" direct_read_tx_bytes) || exit 1
	case $expect in
	on) [ "$dr" -gt 0 ] || fail "$name: direct_read_tx_bytes=0, expected some: $l" ;;
	off) [ "$dr" -eq 0 ] || fail "$name: direct_read_tx_bytes=$dr, expected 0: $l" ;;
	esac
	log "$name: 5 cases intact, direct_read_tx_bytes=$dr ($expect)"
}

run default on
run read on SANSWITCH_BULK=read
run direct_off off SANSWITCH_DIRECT=0
run grant off SANSWITCH_BULK=grant
run inline off SANSWITCH_BULK=inline
run cma_fail off SANSWITCH_FAULT=cma_fail
