#!/bin/bash
# t_app_memcached — memcached with 4 worker threads, preloaded or not, and memcached_probe.py (the
# text protocol on plain sockets) preloaded or not, in the same run: set/get of values from 1 B to
# 1 MB by digest, a multi-key get, 40 connections at once from threads, each storing and reading
# back its own keys then saying "quit", a "quit" with a reply still to read, and a value over the
# item limit. Every observation must be the kernel run's; preloaded, the probe's connections
# switch (30 of 43 at least), and as many at the server.
# timeout: 90
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build
need_cmd memcached
unset SANSWITCH_SWITCH_AFTER # the default policy
export SANSWITCH_STATS=1
for mode in none pre; do
	start_listener "mc.$mode" "$mode" 4 memcached -u root -l 127.0.0.1 -p '{PORT}' -U 0 -t 4 -m 256 -c 1024
	mpid=$SERVER_PID
	rc=0
	as_t "$mode" 60 "$PY" "$E2E_DIR/memcached_probe.py" "$SERVER_PORT" \
		>"$TMP/probe.$mode.out" 2>"$TMP/probe.$mode.err" || rc=$?
	stop "$mpid"
	[ "$rc" -eq 0 ] || { show "$TMP/probe.$mode.out" "$TMP/probe.$mode.err"; fail "$mode: the probe exited $rc"; }
done
grep -q 'sizes 1000000 set=STORED get_same=True' "$TMP/probe.none.out" &&
	grep -q 'all answered=True' "$TMP/probe.none.out" || { show "$TMP/probe.none.out"; fail "the kernel run itself went wrong"; }
same_as_tcp "$TMP/probe.none.out" "$TMP/probe.pre.out" "the probe"
cl=$(probe_line "$TMP/probe.pre.out" "$TMP/probe.pre.err") || exit 1
sl=$(pid_line "$TMP/mc.pre.err" "$mpid") || exit 1
# most switch; a few of the 40 simultaneous ones fall back at the switch-over ("state", 1 to 6
# in a run here: report of branch realapps), their bytes right on TCP
[ "$(field "$cl" switched)" -ge 30 ] || fail "the probe's connections did not switch: $cl"
[ "$(field "$sl" switched)" -eq "$(field "$cl" switched)" ] || fail "server $(field "$sl" switched), probe $(field "$cl" switched) switched: $sl"
log "memcached -t 4: as over kernel TCP, $(field "$cl" switched) of $(field "$cl" connects) connections switched at both ends (client fallbacks: $(field "$cl" fallback))"
log "PASS"
