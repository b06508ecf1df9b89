#!/bin/bash
# t_switch_et_sender — a switched pure sender (never reads: keeps its TCP fd number) with nonblocking
# sends and EPOLLET EPOLLOUT gets a new edge after every EAGAIN; bytes checked by sha256; the process
# (both ends) must show switched=2.
# timeout: 60
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build

export SANSWITCH_STATS=1
rc=0
as_t pre 40 "$PY" "$E2E_DIR/switch_et_sender.py" >"$TMP/et.out" 2>"$TMP/et.err" || rc=$?
cat "$TMP/et.out"
[ "$rc" -eq 0 ] || { show "$TMP/et.err"; fail "switch_et_sender.py exited $rc"; }
grep -q '^et-sender: ok ' "$TMP/et.out" || fail "no ok line"
# The python3 may be a wrapper whose own processes print lines too: the one that moved bytes.
line=$(grep '^sanswitch: pid=.* switched=2 ' "$TMP/et.err") ||
	{ show "$TMP/et.err"; fail "no process with switched=2"; }
log "$line"
log "pure sender with EPOLLET: every EAGAIN got its EPOLLOUT edge"
