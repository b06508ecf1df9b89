#!/bin/bash
# t_stdio_bridge — a program handed its connection on stdin, stdout and stderr at exec (socat's
# EXEC with nofork and stderr: inetd's shape) that talks through read(2)/write(2) first and
# through C stdio once the connection has switched (git upload-pack's shape with protocol v2):
# tests/tools/sanstdio's "late" mode. Its first exchange goes with system calls, the four others
# (1000, 300000, 10 and 20000 bytes) through fread/fwrite (the client proposes at each of them
# until one is taken: a socat parent slow to close its copy under load makes the first wait);
# after the client's half-close it writes
# "err 5" on stderr (unbuffered) and "bye 5" on stdout, left in stdio's buffer for the exit's
# flush ("exit") or for an fclose(stdout) ("fclose"). The client checks every reply, then reads
# to the end: the bytes after the replies and the ending (EOF or reset) must be kernel TCP's in
# the same run, and every connection must switch at both ends. The standard streams go through
# the library (preload/san_stdio.c): before, stdio's writes after the switch went to the
# notification socket, and the client waited for them forever.
# timeout: 120
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build
need_cmd socat
unset SANSWITCH_SWITCH_AFTER # the default policy: the first exchange over TCP
export SANSWITCH_STATS=log   # the server's stderr is the connection: its lines go to files
SANSTDIO=$BUILD/sanstdio
[ -x "$SANSTDIO" ] || fail "no $SANSTDIO (make)"
CONNS=6
mkdir -p "$TMP/logs"

run() { # MODE END
	local name=$1.$2 rc=0 l n
	SANSWITCH_LOG_FILE="$TMP/logs/$name.srv.%p" start_listener "socat.$name" "$1" 4 \
		socat "TCP-LISTEN:{PORT},bind=127.0.0.1,fork,reuseaddr" "EXEC:$SANSTDIO late $2,nofork,stderr"
	SANSWITCH_LOG_FILE="$TMP/logs/$name.cli.%p" as_t "$1" 60 "$PY" - "$SERVER_PORT" "$CONNS" \
		>"$TMP/cli.$name.out" 2>"$TMP/cli.$name.err" <<'EOF' || rc=$?
import os, socket, struct, sys
port, conns = int(sys.argv[1]), int(sys.argv[2])
for i in range(conns):
    s = socket.create_connection(("127.0.0.1", port))
    for k, size in enumerate((2000, 1000, 300000, 10, 20000)):
        d = os.urandom(size)
        s.sendall(struct.pack("!Q", size) + d)
        b = bytearray()
        while len(b) < size:
            r = s.recv(65536)
            if not r:
                sys.exit("conn %d exchange %d: EOF after %d bytes" % (i, k, len(b)))
            b += r
        if bytes(b) != d[::-1]:
            sys.exit("conn %d exchange %d: WRONG reply" % (i, k))
    s.shutdown(socket.SHUT_WR)
    rest, end = bytearray(), "EOF"
    try:
        while True:
            r = s.recv(65536)
            if not r:
                break
            rest += r
    except OSError as e:
        end = os.strerror(e.errno)
    s.close()
    print("conn %d: after the replies %r, then %s" % (i, bytes(rest), end))
print("client ok pid=%d" % os.getpid())
EOF
	# each sanstdio writes its line (to its file) as it exits
	for _ in $(seq 100); do
		[ "$1" != pre ] || [ "$(cat "$TMP/logs/$name.srv."* 2>/dev/null | grep -c '^sanswitch: pid=')" -ge "$CONNS" ] && break
		sleep 0.1
	done
	stop "$SERVER_PID"
	no_preload_errors "$TMP/cli.$name.err" "$TMP/socat.$name.err"
	[ "$rc" -eq 0 ] && grep -q '^client ok' "$TMP/cli.$name.out" ||
		{ show "$TMP/cli.$name.out" "$TMP/cli.$name.err" "$TMP/socat.$name.err"; fail "$name: client exit $rc"; }
	grep '^conn ' "$TMP/cli.$name.out" >"$TMP/$name.ends"
	[ "$1" = pre ] || return 0
	cmp -s "$TMP/none.$2.ends" "$TMP/$name.ends" || {
		show "$TMP/none.$2.ends" "$TMP/$name.ends"
		fail "$name: what came after the replies, or the ending, differs from kernel TCP's"
	}
	l=$(cat "$TMP/logs/$name.cli."* | grep '^sanswitch: pid=' | grep " switched=$CONNS ") ||
		{ cat "$TMP/logs/$name.cli."*; fail "$name: the client did not switch its $CONNS connections"; }
	n=$(cat "$TMP/logs/$name.srv."* | grep -c '^sanswitch: pid=[0-9]* switched=1 ')
	[ "$n" -eq "$CONNS" ] ||
		{ cat "$TMP/logs/$name.srv."*; fail "$name: $n of $CONNS server programs switched"; }
}

for end in exit fclose; do
	run none $end
	grep -qx "conn 0: after the replies b'err 5\\\\nbye 5\\\\n', then EOF" "$TMP/none.$end.ends" ||
		{ show "$TMP/none.$end.ends"; fail "kernel TCP, $end: not the expected ending"; }
	run pre $end
	log "$end: $CONNS connections switched at both ends; replies through stdio after the switch," \
		"and the line stdio's $end flush sends, as over kernel TCP: $(head -1 "$TMP/pre.$end.ends")"
done
log "PASS"
