#!/bin/bash
# t_app_node — node's http and net modules (libuv: epoll, nonblocking sockets, and every fd
# closed by syscall(SYS_close)), server and client both preloaded or neither, against kernel TCP
# in the same run (node_probe.js): 2 x 20 parallel GETs on a keep-alive agent, bodies 1 B to
# 20 MB with Content-Length or chunked, by digest; 6 chunked uploads (0 B to 20 MB); a client
# that destroys its request 1 MB into a 50 MB response; net echo with end() at the client, end()
# and destroy() at the server, destroy() at the client with data unread; and what the server saw
# of each ending. Every observation must be the kernel run's, except one left to the log: after
# the client's destroy() while the echo flows, the server sometimes (1 run in 15 to 1 in 2 on a
# loaded machine) reads end-of-file, or its send fails EPIPE, where over kernel TCP it gets
# ECONNRESET at once. Both are
# what TCP gives: a reset if the client's close finds echoed bytes unread, a FIN if it finds none
# (its ring emptied, the next echo not yet there); on the loopback's kernel the echo is always
# there first. Preloaded, most of the client's connections switch (see below), and as many at
# the server. Before syscall(SYS_close) was seen, every
# request after the first closed switched connection failed (EPIPE, ECONNRESET).
# timeout: 120
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build
need_cmd node
unset SANSWITCH_SWITCH_AFTER # the default policy: what a user of node gets
export SANSWITCH_STATS=1

for mode in none pre; do
	start_pf "srv.$mode" "$mode" node "$E2E_DIR/node_probe.js" server '{PORTFILE}'
	hport=$SERVER_PORT
	nport=$(sed -n 2p "$TMP/srv.$mode.port")
	spid=$SERVER_PID
	rc=0
	as_t "$mode" 90 node "$E2E_DIR/node_probe.js" client "$hport" "$nport" \
		>"$TMP/cli.$mode.out" 2>"$TMP/cli.$mode.err" || rc=$?
	stop "$spid" # node exits on SIGTERM (its handler): the stats line is printed
	[ "$rc" -eq 0 ] || { show "$TMP/cli.$mode.out" "$TMP/cli.$mode.err" "$TMP/srv.$mode.err"; fail "$mode: the client exited $rc"; }
done
# the one known difference: the client's destroy() after a FIN rather than a reset (its ring
# held no echoed byte unread at that moment), which the server sees as an end-of-file before its
# send fails, or as that send failing EPIPE (TCP's error for an RST after the peer's FIN), where
# over loopback TCP the echo is always queued at the client first and its close resets
extra='^server saw: net ECHO: (end after [0-9]* bytes|error EPIPE)'
for mode in none pre; do
	grep -v '^# pid' "$TMP/cli.$mode.out" | grep -Ev "$extra" | grep -v '5000000 bytes' >"$TMP/cmp.$mode"
	grep -E "$extra" "$TMP/cli.$mode.out" | grep -v ' 5000000 bytes' >"$TMP/extra.$mode" || true
done
if [ -s "$TMP/extra.pre" ]; then
	log "known difference (not failed): the server saw $(tr '\n' ' ' <"$TMP/extra.pre")"
	# (then its ending is not TCP's reset: compare the rest)
	for mode in none pre; do
		grep -v '^server saw: net ECHO: error ' "$TMP/cmp.$mode" >"$TMP/cmp2.$mode" || true
		mv "$TMP/cmp2.$mode" "$TMP/cmp.$mode"
	done
fi
[ -s "$TMP/extra.none" ] && fail "over kernel TCP the server saw end-of-file before a reset: $(cat "$TMP/extra.none")"
grep -q 'server saw: net ECHO: end after 5000000 bytes' "$TMP/cli.pre.out" || fail "the 5 MB echo did not end well"
[ "$(grep -c ' want ' "$TMP/cmp.none")" -ge 49 ] || { show "$TMP/cli.none.out"; fail "the kernel run did too little"; }
diff "$TMP/cmp.none" "$TMP/cmp.pre" ||
	fail "node under the switch saw something else than over kernel TCP (above: < TCP, > switched)"
cl=$(probe_line "$TMP/cli.pre.out" "$TMP/cli.pre.err") || exit 1
sl=$(pid_line "$TMP/srv.pre.err" "$spid") || exit 1
c=$(field "$cl" connects) || exit 1
# Most of the agent's 20 connections switch; not all, every run: in 16 runs of 2026-12-01 (this
# tree and the one before the session's change alike) the client switched 19 to 23 of its 25,
# falling back where the server had closed the connection before the proposal came (refused:
# not_owner) or its stream moved under the count check (state). Both are right; the old
# threshold of 20 failed 1 run in 8 (once in a fresh clone's make check).
[ "$(field "$cl" switched)" -ge 17 ] || fail "fewer than 17 of the agent's 20 connections switched at the client: $cl"
# Both ends count a connection whose stream moved either way (one end committed, the other
# closed before it did: node's destroy() mid-switch); counted by each end's own commit, they
# differed by 1 or 2 in 1 run in 8 (5 in 21 on a loaded machine).
[ "$(field "$sl" switched)" -eq "$(field "$cl" switched)" ] || fail "the server switched $(field "$sl" switched), the client $(field "$cl" switched): $sl"
log "node http and net: as over kernel TCP; client switched $(field "$cl" switched) of $c connections, server the same"
log "PASS"
