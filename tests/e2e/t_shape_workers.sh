#!/bin/bash
# t_shape_workers — server shapes (shapes.py), both ends preloaded, against kernel TCP in the same
# run: every reply's bytes are checked; no connection waits for the switch. "single" (one process
# listens, accepts, serves) must switch every connection. "workers" (the parent listens, two
# forked workers accept on the listener they inherited, as nginx's) does not switch yet (the
# proposal reaches the parent's engine, which does not own the connection: fallback_not_owner),
# but must cost what TCP costs: before, every connection's first request waited 0.5 s for the
# parent's engine to give up. A first request may take up to 250 ms (a stall is seconds, or the
# old 500 ms; on this machine a request takes about a millisecond).
# timeout: 120
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build
export SANSWITCH_STATS=1
CONNS=20
LIMIT_MS=250

run() { # SHAPE MODE(pre|none) SIZE
	local shape=$1 mode=$2 size=$3 name="$1.$2.$3" rc=0 srv_rc=0 worst
	start_pf "$name.srv" "$mode" "$PY" "$E2E_DIR/shapes.py" server "$shape" '{PORTFILE}' "$CONNS"
	as_t "$mode" 60 "$PY" "$E2E_DIR/shapes.py" client "$SERVER_PORT" "$CONNS" "$size" \
		>"$TMP/$name.cli.out" 2>"$TMP/$name.cli.err" || rc=$?
	wait_pid "$SERVER_PID" 30 || srv_rc=$?
	no_preload_errors "$TMP/$name.cli.err" "$TMP/$name.srv.err"
	[ "$rc" -eq 0 ] && [ "$srv_rc" -eq 0 ] || {
		show "$TMP/$name.cli.out" "$TMP/$name.cli.err" "$TMP/$name.srv.out" "$TMP/$name.srv.err"
		fail "$name: client exit $rc, server exit $srv_rc"
	}
	worst=$(sed -n 's/^client ok conns=[0-9]* worst_ms=\([0-9]*\)\..*/\1/p' "$TMP/$name.cli.out")
	[ -n "$worst" ] || { show "$TMP/$name.cli.out"; fail "$name: no 'client ok' line"; }
	[ "$worst" -lt "$LIMIT_MS" ] ||
		{ show "$TMP/$name.cli.out"; fail "$name: a first request took $worst ms (limit $LIMIT_MS)"; }
	RUN_WORST=$worst
}

# switched_line NAME ROLE — the stats line of the process that printed "# pid P ROLE".
role_line() {
	local pid f
	for f in "$TMP/$1.cli.out" "$TMP/$1.srv.out"; do
		pid=$(sed -n "s/^# pid \([0-9]*\) $2\$/\1/p" "$f" | head -n1)
		[ -n "$pid" ] && break
	done
	[ -n "$pid" ] || fail "$1: no pid for $2"
	pid_line "$TMP/$1.$( [ "$2" = client ] && echo cli || echo srv).err" "$pid"
}

for size in 10 300000; do
	run single none $size
	run single pre $size
	cl=$(role_line "single.pre.$size" client) || exit 1
	sl=$(role_line "single.pre.$size" listener) || exit 1
	[ "$(field "$cl" switched)" -eq "$CONNS" ] && [ "$(field "$sl" switched)" -eq "$CONNS" ] ||
		fail "single.$size: expected $CONNS switched at both ends: $cl / $sl"
	log "single, $size B requests: $CONNS connections switched, bytes checked (worst first request ${RUN_WORST} ms)"

	run workers none $size
	tcp=$RUN_WORST
	run workers pre $size
	cl=$(role_line "workers.pre.$size" client) || exit 1
	log "workers, $size B requests: bytes checked, worst first request ${RUN_WORST} ms (TCP: $tcp ms);" \
		"client: switched=$(field "$cl" switched) fallback_not_owner=$(field "$cl" fallback_not_owner)"
done
