#!/bin/bash
# t_stdio_glibc — what glibc's own standard streams do that the bridged ones (preload/san_stdio.c)
# must do too, in an inetd-shaped program (socat's EXEC with nofork and stderr) whose connection
# switched from its second exchange on: tests/tools/sanstdio's "glibc" modes. Each case runs over
# kernel TCP and then preloaded at both ends; the client's transcript (the bytes, where it waited,
# the ending) must be the same and both ends must switch.
#   big      glibc's stream on a socket buffers st_blksize (4096): the client waits for 4096
#            bytes before it ends its side (a fopencookie stream's 8192: it waited for ever)
#   closed   printf and fclose after fclose(stdout): EOF and EBADF (was a use after free)
#   freopen  freopen(PATH, "w", stdout): the line goes to the file (glibc's freopen of a cookie
#            stream segfaulted)
#   thread   a thread blocked in fgets(stdin) at exit: the exit ends (fflush(NULL) waited for
#            stdin's lock for ever)
#   gone     fwrite() on unbuffered stdout once the client has closed: 100, then 0 with EPIPE
#            (the bridge's write answered -1 to libio, which took it for all of it written)
#   kept     pointers to stdout and stdin taken before their fclose: fprintf and getc through
#            them fail with EBADF (glibc's: the same closed FILE; through the bridged stream they
#            wrote into its buffer, and handed out what it had read ahead)
#   keptreopen  a pointer to stdout taken before freopen(PATH, "w", stdout) (std::cout's):
#            its line goes to the file (it was lost)
#   errno    our side shut, printf, fclose(stdout): -1 with EPIPE, said in PATH (the errno
#            was lost)
#   daemon   daemon(1, 0), then printf in the child, said in PATH: the line goes to /dev/null
#            and the client sees the end (glibc's dup2s inside libc were unseen: the line went
#            to the client)
#   writer   a thread writes numbered lines through stdout, the client not reading yet, while
#            the program exits: preloaded, the client gets them in order, none twice (glibc's
#            flush at exit wrote the buffer the thread was writing: a piece came twice, 4 runs in
#            4; over kernel TCP glibc's race shows too, in some runs: not compared)
# STDIO_CASES="big thread" runs only those.
# timeout: 120
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build
need_cmd socat
# switched at the second exchange (the library's default until 2026-11-30; its default now, 16,
# leaves connections this short on TCP: t_switch_policy)
export SANSWITCH_SWITCH_AFTER=1
export SANSWITCH_STATS=log   # the server's stderr is the connection: its lines go to files
SANSTDIO=$BUILD/sanstdio
[ -x "$SANSTDIO" ] || fail "no $SANSTDIO (make)"
mkdir -p "$TMP/logs"

run() { # MODE CASE
	local name=$1.$2 rc=0 arg=() n
	case $2 in freopen | gone | keptreopen | errno | daemon) arg=("$TMP/$name.file") ;; esac
	SANSWITCH_LOG_FILE="$TMP/logs/$name.srv.%p" start_listener "socat.$name" "$1" 4 \
		socat "TCP-LISTEN:{PORT},bind=127.0.0.1,reuseaddr" "EXEC:$SANSTDIO glibc $2 ${arg[*]},nofork,stderr"
	SANSWITCH_LOG_FILE="$TMP/logs/$name.cli.%p" as_t "$1" 60 "$PY" - "$SERVER_PORT" "$2" \
		>"$TMP/cli.$name.out" 2>"$TMP/cli.$name.err" <<'EOF' || rc=$?
import os, socket, struct, sys
port, case = int(sys.argv[1]), sys.argv[2]
s = socket.create_connection(("127.0.0.1", port))
for k, size in enumerate((2000, 1000, 500, 700)):
    d = os.urandom(size)
    s.sendall(struct.pack("!Q", size) + d)
    b = bytearray()
    while len(b) < size:
        r = s.recv(size - len(b))
        if not r:
            sys.exit("exchange %d: EOF after %d bytes" % (k, len(b)))
        b += r
    if bytes(b) != d[::-1]:
        sys.exit("exchange %d: WRONG reply" % k)
s.settimeout(10)
if case == "big":
    b = bytearray()
    try:
        while len(b) < 4096:
            r = s.recv(4096 - len(b))
            if not r:
                break
            b += r
    except socket.timeout:
        pass
    print("before our end: %d bytes" % len(b))
if case == "writer":
    import time
    time.sleep(1.5)  # (the writer thread waits in its write meanwhile, and the program exits)
    b = bytearray()
    while True:
        r = s.recv(1 << 20)
        if not r:
            break
        b += r
    lines = bytes(b).split(b"\n")
    ok = all(l == b"line %09d" % i for i, l in enumerate(lines[:-1]))
    print("writer: lines in order, none twice: %s" % ok)
    sys.exit(0)
if case == "gone":
    s.close()
    print("closed")
    sys.exit(0)
if case != "thread":
    s.shutdown(socket.SHUT_WR)
rest, end = bytearray(), "EOF"
try:
    while True:
        r = s.recv(65536)
        if not r:
            break
        rest += r
except socket.timeout:
    end = "no end in 10 s"
except OSError as e:
    end = os.strerror(e.errno)
print("then %r, then %s" % (bytes(rest).replace(b"x" * 904, b"x*904"), end))
EOF
	if [ "$2" = gone ] || [ "$2" = errno ] || [ "$2" = daemon ]; then # (its answers may come after the client's end)
		for _ in $(seq 50); do [ "$(grep -c 'fwrite\|fclose\|daemon:' "$TMP/$name.file" 2>/dev/null)" -ge "$([ "$2" = gone ] && echo 4 || echo 1)" ] && break; sleep 0.1; done
	fi
	stop "$SERVER_PID"
	no_preload_errors "$TMP/cli.$name.err"
	[ "$rc" -eq 0 ] || { show "$TMP/cli.$name.out" "$TMP/cli.$name.err" "$TMP/socat.$name.err"; fail "$name: client exit $rc"; }
	[ "${#arg[@]}" -eq 0 ] || echo "file: $(cat "$TMP/$name.file" 2>/dev/null)" >>"$TMP/cli.$name.out"
	# the oracle ran the case (a program that did nothing would match itself preloaded)
	[ "$2" != errno ] || grep -q "^file: errno: fclose" "$TMP/cli.$name.out" ||
		{ show "$TMP/cli.$name.out" "$TMP/socat.$name.err"; fail "$name: the program said nothing"; }
	[ "$2" != daemon ] || grep -q "^file: daemon: printf 13, 1 is a character device" "$TMP/cli.$name.out" ||
		{ show "$TMP/cli.$name.out" "$TMP/socat.$name.err"; fail "$name: the program said nothing"; }
	case $2 in big | gone | errno | writer | daemon) ;; *) grep -q "then b'[^']" "$TMP/cli.$name.out" ||
		{ show "$TMP/cli.$name.out" "$TMP/socat.$name.err"; fail "$name: the program said nothing"; } ;;
	esac
	[ "$1" = pre ] || return 0
	# writer: glibc's own exit flush races the thread over kernel TCP too (a piece twice, some
	# runs): no oracle there; through the bridge, the lines in order is what must hold
	[ "$2" != writer ] || grep -q "none twice: True" "$TMP/cli.$name.out" || {
		show "$TMP/cli.none.$2.out" "$TMP/cli.$name.out"
		fail "$2: lines out of order or twice"
	}
	[ "$2" = writer ] || cmp -s "$TMP/cli.none.$2.out" "$TMP/cli.$name.out" || {
		show "$TMP/cli.none.$2.out" "$TMP/cli.$name.out" "$TMP/socat.$name.err"
		fail "$2: not kernel TCP's transcript"
	}
	n=$(cat "$TMP/logs/$name.cli."* | grep -c '^sanswitch: pid=[0-9]* switched=1 ')
	[ "$n" -eq 1 ] || { cat "$TMP/logs/$name.cli."*; fail "$2: the client did not switch"; }
}

for c in ${STDIO_CASES:-big closed freopen thread gone kept keptreopen errno daemon writer}; do
	run none $c
	run pre $c
	log "$c: as kernel TCP, switched: $(tr '\n' ' ' <"$TMP/cli.pre.$c.out")"
done
log "PASS"
