#!/bin/bash
# t_app_socat_fork — a real forking server from Debian: `socat TCP-LISTEN:port,fork EXEC:/bin/cat`
# accepts each connection, forks a child that serves it (relaying between the socket and a cat)
# and closes its own copy: the pre-fork daemon's shape. A client makes CONNS connections of 3
# exchanges of 20000 random bytes each and checks every echo, over kernel TCP and then both ends
# preloaded, in the same run. Preloaded, every connection must switch at both ends: the client's
# stats line says switched=CONNS, and each socat child's says switched=1 (docs/protocol.md §9.8);
# the listening socat, whose copies were all closed while a child held them, counts none.
# Then inetd's shape from the same program: `EXEC:/bin/cat,nofork` makes each child exec cat with
# the connection as its stdin and stdout, so the program that serves never saw the connection
# made; it adopts it at load (docs/protocol.md §9.8). cat closes its stderr at exit (coreutils'
# close_stdout), so it prints no stats line: the client's, switched at every connection, says
# that both ends switched (neither commits alone), and every echo is checked.
# timeout: 120
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build
need_cmd socat
# switched at the second exchange (the library's default until 2026-11-30; its default now, 16,
# leaves connections this short on TCP: t_switch_policy)
export SANSWITCH_SWITCH_AFTER=1
export SANSWITCH_STATS=1
CONNS=6

run() { # MODE [nofork]
	local mode=$1 rc=0 l n exe=EXEC:/bin/cat
	[ -n "${2:-}" ] && exe=$exe,nofork && mode=$mode.$2
	start_listener "socat.$mode" "$1" 4 socat "TCP-LISTEN:{PORT},bind=127.0.0.1,fork,reuseaddr" \
		"$exe"
	as_t "$1" 60 "$PY" - "$SERVER_PORT" "$CONNS" >"$TMP/cli.$mode.out" 2>"$TMP/cli.$mode.err" <<'EOF' || rc=$?
import os, socket, sys
port, conns = int(sys.argv[1]), int(sys.argv[2])
for i in range(conns):
    s = socket.create_connection(("127.0.0.1", port))
    for k in range(3):
        d = os.urandom(20000)
        s.sendall(d)
        b = bytearray()
        while len(b) < len(d):
            r = s.recv(65536)
            if not r:
                sys.exit("conn %d exchange %d: EOF after %d bytes" % (i, k, len(b)))
            b += r
        if bytes(b) != d:
            sys.exit("conn %d exchange %d: WRONG echo" % (i, k))
    s.close()
print("client ok conns=%d pid=%d" % (conns, os.getpid()))
EOF
	# each child ends with its connection and prints its line (preloaded); then the listener
	for _ in $(seq 100); do
		[ "$mode" != pre ] ||
			[ "$(grep -c '^sanswitch: pid=' "$TMP/socat.$mode.err")" -ge "$CONNS" ] && break
		sleep 0.1
	done
	stop "$SERVER_PID"
	no_preload_errors "$TMP/cli.$mode.err" "$TMP/socat.$mode.err"
	[ "$rc" -eq 0 ] && grep -q '^client ok' "$TMP/cli.$mode.out" ||
		{ show "$TMP/cli.$mode.out" "$TMP/cli.$mode.err" "$TMP/socat.$mode.err"; fail "$mode: client exit $rc"; }
	[ "$1" = pre ] || return 0
	l=$(pid_line "$TMP/cli.$mode.err" "$(sed -n 's/^client ok .*pid=\([0-9]*\)$/\1/p' "$TMP/cli.$mode.out")") ||
		exit 1
	[ "$(field "$l" switched)" -eq "$CONNS" ] ||
		{ show "$TMP/socat.$mode.err"; fail "$mode: the client switched $(field "$l" switched) of $CONNS: $l"; }
	[ "$mode" = pre ] || return 0
	n=$(grep -c '^sanswitch: pid=[0-9]* switched=1 fallback=0 ' "$TMP/socat.$mode.err")
	[ "$n" -eq "$CONNS" ] ||
		{ show "$TMP/socat.$mode.err"; fail "pre: $n socat children switched, expected $CONNS"; }
	# each child's first exchange (20000 bytes each way) went over TCP, and its line says so,
	# though it exits with the switched connection open
	while IFS= read -r l; do
		[ "$(field "$l" tcp_rx_bytes)" -ge 20000 ] && [ "$(field "$l" tcp_tx_bytes)" -ge 20000 ] ||
			fail "pre: a socat child's line misses its bytes over TCP: $l"
	done < <(grep '^sanswitch: pid=[0-9]* switched=1 fallback=0 ' "$TMP/socat.$mode.err")
}

run none
log "kernel TCP: $CONNS connections through socat's forked children, every echo checked"
run pre
log "preloaded: $CONNS connections, each switched in its socat child and in the client, every echo checked"
run none nofork
log "kernel TCP, inetd's shape (EXEC:/bin/cat,nofork): $CONNS connections, every echo checked"
run pre nofork
log "preloaded, inetd's shape: $CONNS connections, each adopted by its exec'd cat and switched" \
	"at both ends, every echo checked"
