#!/bin/bash
# t_edge_rcvlowat — SO_RCVLOWAT at the switch-over, kernel TCP as the oracle (edge_rcvlowat.py):
# 20 connections of 20 exchanges of 100 bytes, SO_RCVLOWAT=100 set by the server, the client, both,
# or both after the fifth exchange; each receive waits at most 5 s; each side reads the value back
# at the end. Over kernel TCP and with both ends preloaded (the suite's policy, then the default
# one), the lines must be identical and every connection switched at both ends. Before, a
# connection whose application had set a low-water mark above 16 hung at the switch: the peer's
# 16-byte MARK never made its socket readable (docs/engine.md §9, "SO_RCVLOWAT").
# timeout: 300
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build
export SANSWITCH_STATS=1
N=20

for mode in timeout block; do
for who in server client both late; do
	as_t none 60 "$PY" "$E2E_DIR/edge_rcvlowat.py" "$N" "$who" "$mode" >"$TMP/$who.none.out" 2>"$TMP/$who.none.err" ||
		{ show "$TMP/$who.none.out" "$TMP/$who.none.err"; fail "$who ($mode): kernel TCP run failed"; }
	want=$(grep -v '^#' "$TMP/$who.none.out" | sort)
	[ "$(grep -cE ': 20 exchanges, SO_RCVLOWAT (1|100)$' <<<"$want")" -eq $((2 * N)) ] ||
		{ show "$TMP/$who.none.out"; fail "$who ($mode): kernel TCP gave other lines than expected"; }
	for pol in suite default; do
		out=$TMP/$who.$pol
		rc=0
		if [ "$pol" = default ]; then
			as_t pre 60 env -u SANSWITCH_SWITCH_AFTER "$PY" "$E2E_DIR/edge_rcvlowat.py" "$N" "$who" "$mode" \
				>"$out.out" 2>"$out.err" || rc=$?
		else
			as_t pre 60 "$PY" "$E2E_DIR/edge_rcvlowat.py" "$N" "$who" "$mode" >"$out.out" 2>"$out.err" || rc=$?
		fi
		no_preload_errors "$out.err"
		got=$(grep -v '^#' "$out.out" | sort)
		if [ "$rc" -ne 0 ] || [ "$got" != "$want" ]; then
			show "$out.out" "$out.err"
			diff <(echo "$want") <(echo "$got") >&2 || true
			fail "$who ($mode, $pol policy): the switched run differs from kernel TCP's (exit $rc)"
		fi
		pids_switched "$out.out" "$out.err" "$N" "$who ($mode, $pol policy)"
	done
	log "SO_RCVLOWAT 100 set by $who, $mode receives: $N connections, as kernel TCP, all switched (both policies)"
done
done
