#!/bin/bash
# t_app_asyncio — Python's asyncio streams (a selector loop: epoll, nonblocking sockets, a
# transport's own write buffer) server and client, both preloaded or neither, against kernel TCP
# in the same run (asyncio_probe.py): 200 connections at once echoing 20 KB each in 4 rounds,
# then write_eof and end-of-file; 5 connections whose writer.close() comes with most of a megabyte
# still in the transport's buffer (the server must read all of it, then end-of-file); and a server
# that starts reading 5 MB a second late. Every observation must be the kernel run's; preloaded,
# the 200 echo connections switch at both ends.
# timeout: 90
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build
# switched at the second exchange (the library's default until 2026-11-30; its default now, 16,
# leaves connections this short on TCP: t_switch_policy)
export SANSWITCH_SWITCH_AFTER=1
export SANSWITCH_STATS=1
for mode in none pre; do
	start_pf "srv.$mode" "$mode" "$PY" "$E2E_DIR/asyncio_probe.py" server '{PORTFILE}'
	spid=$SERVER_PID
	rc=0
	as_t "$mode" 60 "$PY" "$E2E_DIR/asyncio_probe.py" client "$SERVER_PORT" \
		>"$TMP/cli.$mode.out" 2>"$TMP/cli.$mode.err" || rc=$?
	stop "$spid" # SIGTERM: the probe exits through sys.exit, the stats line is printed
	[ "$rc" -eq 0 ] || { show "$TMP/cli.$mode.out" "$TMP/cli.$mode.err" "$TMP/srv.$mode.err"; fail "$mode: the client exited $rc"; }
done
grep -q "200 echo connections: 200 echoed every byte and read end-of-file; others: \[\]" "$TMP/cli.none.out" &&
	[ "$(grep -c '^server saw sink' "$TMP/cli.none.out")" -eq 5 ] ||
	{ show "$TMP/cli.none.out"; fail "the kernel run itself went wrong"; }
same_as_tcp "$TMP/cli.none.out" "$TMP/cli.pre.out" asyncio
cl=$(probe_line "$TMP/cli.pre.out" "$TMP/cli.pre.err") || exit 1
sl=$(pid_line "$TMP/srv.pre.err" "$spid") || exit 1
[ "$(field "$cl" switched)" -ge 200 ] || fail "the 200 echo connections did not all switch at the client: $cl"
[ "$(field "$sl" switched)" -eq "$(field "$cl" switched)" ] || fail "server $(field "$sl" switched), client $(field "$cl" switched): $sl"
log "asyncio streams: as over kernel TCP; $(field "$cl" switched) of $(field "$cl" connects) connections switched at both ends"
log "PASS"
