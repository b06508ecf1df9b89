#!/bin/bash
# t_edge_fdnumbers — the fd numbers a program gets are the ones it gets over kernel TCP: the
# library's own fds (its engine's epoll set and eventfd, side channels, notification sockets,
# anchors) live above the program's. fd_numbers.py switches a connection in its own process,
# then takes a file, a pipe and a second connection, and prints every number and the open ones
# below 100, once over kernel TCP and once preloaded (SANSWITCH_SWITCH_AFTER=0 and the default
# policy). Before, the engine's epoll set and eventfd took the two lowest free numbers at the
# first TCP socket, and every later number of the program was 2 higher than over TCP. Left: fds
# the library makes while a switch-over is under way (a socketpair, those that come over the side
# channel) take the lowest free numbers for an instant before they move up, and a number the
# program takes at that instant is one higher; the script waits for that to be over.
# timeout: 30
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build
export SANSWITCH_STATS=1
as_t none 20 "$PY" "$E2E_DIR/fd_numbers.py" >"$TMP/none.out" 2>"$TMP/none.err" ||
	{ show "$TMP/none.err"; fail "fd_numbers.py failed over kernel TCP"; }
for after in 0 default; do
	rc=0
	if [ "$after" = default ]; then
		as_t pre 20 env SANSWITCH_SWITCH_AFTER=1 "$PY" "$E2E_DIR/fd_numbers.py" >"$TMP/pre.$after.out" 2>"$TMP/pre.$after.err" || rc=$?
	else
		as_t pre 20 "$PY" "$E2E_DIR/fd_numbers.py" >"$TMP/pre.$after.out" 2>"$TMP/pre.$after.err" || rc=$?
	fi
	[ "$rc" -eq 0 ] || { show "$TMP/pre.$after.err"; fail "fd_numbers.py failed preloaded (switch after $after)"; }
	l=$(stats_line "$TMP/pre.$after.err") || exit 1
	[ "$(field "$l" switched)" -ge 2 ] || fail "switch after $after: the connection did not switch: $l"
	diff "$TMP/none.out" "$TMP/pre.$after.out" ||
		fail "switch after $after: the program got other fd numbers than over kernel TCP (above: < TCP, > switched)"
done
log "the same fd numbers as over kernel TCP: $(head -n1 "$TMP/none.out")"
log "PASS"
