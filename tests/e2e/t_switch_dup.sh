#!/bin/bash
# t_switch_dup — a dup() taken after the connecting side committed but before it read the peer's
# MARK follows the switch: it reads the peer's bytes, never the MARK (switch_dup.py, sha-checked);
# the process (both ends) shows switched=2.
# timeout: 60
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build

export SANSWITCH_STATS=1
rc=0
as_t pre 30 "$PY" "$E2E_DIR/switch_dup.py" >"$TMP/dup.out" 2>"$TMP/dup.err" || rc=$?
cat "$TMP/dup.out"
[ "$rc" -eq 0 ] || { show "$TMP/dup.err"; fail "switch_dup.py exited $rc"; }
grep -q '^dup: ok ' "$TMP/dup.out" || fail "no ok line"
line=$(grep '^sanswitch: pid=.* switched=2 fallback=0 ' "$TMP/dup.err") ||
	{ show "$TMP/dup.err"; fail "no process with switched=2 fallback=0"; }
log "$line"
