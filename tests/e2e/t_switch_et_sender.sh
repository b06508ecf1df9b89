#!/bin/bash
# t_switch_et_sender — a switched pure sender (never reads: keeps its TCP fd number) with nonblocking
# sends waits for room with EPOLLET, level-triggered epoll, poll and select: each wait must sleep while
# the ring stays full (no busy loop on the TCP socket's own writability) and wake when room comes;
# bytes checked by sha256; the process (both ends of each connection) must show switched=8.
# timeout: 60
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build

export SANSWITCH_STATS=1
rc=0
as_t pre 40 "$PY" "$E2E_DIR/switch_et_sender.py" >"$TMP/et.out" 2>"$TMP/et.err" || rc=$?
cat "$TMP/et.out"
[ "$rc" -eq 0 ] || { show "$TMP/et.err"; fail "switch_et_sender.py exited $rc"; }
for m in epoll-et epoll-lt poll select; do
	grep -q "^et-sender: $m ok " "$TMP/et.out" || fail "no ok line for $m"
done
# The python3 may be a wrapper whose own processes print lines too: the one that moved bytes.
line=$(grep '^sanswitch: pid=.* switched=8 ' "$TMP/et.err") ||
	{ show "$TMP/et.err"; fail "no process with switched=8"; }
log "$line"
log "pure sender: every wait for room slept while the ring was full and woke when room came"
