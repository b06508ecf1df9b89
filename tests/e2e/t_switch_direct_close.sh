#!/bin/bash
# t_switch_direct_close — a direct grant answered right before the sender's close(): the receiver
# must deliver the bytes, then EOF. switch_direct_close.py stops the receiving process while it
# sleeps in a blocking recv with its buffer offered, sends 1 MiB into it, closes, and continues
# it: the receiver wakes with the WRITE_DONE in its ring and its anchor at EOF together (under
# load, t_switch_sockapi's close_inflight got there by chance: a protocol-error reset, 0 bytes
# delivered). Every round must read every byte then EOF, and the sender's direct_tx_bytes must be
# all of them (the direct grant was what ran).
# timeout: 60
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build

export SANSWITCH_STATS=1
rounds=5
rc=0
as_t pre 45 "$PY" "$E2E_DIR/switch_direct_close.py" "$rounds" >"$TMP/out" 2>"$TMP/err" || rc=$?
no_preload_errors "$TMP/err"
[ "$rc" -eq 0 ] || { show "$TMP/out" "$TMP/err"; fail "exited $rc"; }
pid=$(sed -n 's/^# pid \([0-9][0-9]*\)$/\1/p' "$TMP/out")
want=$(sed -n 's/^direct \([0-9][0-9]*\)$/\1/p' "$TMP/out")
[ -n "$pid" ] && [ -n "$want" ] || { show "$TMP/out"; fail "no '# pid' or 'direct' line"; }
l=$(pid_line "$TMP/err" "$pid") || exit 1
d=$(field "$l" direct_tx_bytes) || exit 1
[ "$d" -eq "$want" ] || fail "direct_tx_bytes=$d, expected $want (the sends did not go direct): $l"
log "$(grep -c '^round .*: ok' "$TMP/out") of $rounds rounds: 1 MiB written into a stopped receiver's buffer, then close: every byte, then EOF"
