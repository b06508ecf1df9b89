#!/bin/bash
# t_shape_workers — server shapes (shapes.py), both ends preloaded, switching at the second
# exchange (SANSWITCH_SWITCH_AFTER=1: a connection switches at the send that begins its second
# exchange, or after 256 KiB), against kernel TCP in the same run. Each connection makes 3 request/reply
# exchanges; every reply's bytes are checked. Shapes: "single" (one process listens, accepts,
# serves), "thread" (one thread accepts, another serves), "workers" (the parent listens, two
# forked workers accept on the listener they inherited, as nginx's), "reuseport" (two workers,
# each with its own SO_REUSEPORT listener on the same port: only one of them can have the
# listener's side-channel name), "activated" (the listener handed to an exec'd program, as with
# systemd's socket activation) and "passed" (an exec'd program receives it over SCM_RIGHTS): those
# programs never saw the listener made, and adopt it at its first accept(); "fork" (the parent
# accepts, a forked child serves once the parent has closed its copy: the pre-fork daemon's shape),
# "clientfork" (the client connects, a forked child talks) and "forkhelper" (the server forks a
# child that closes its copy and exits, then serves the connection itself), "inetd" (the parent
# accepts, a forked child puts the connection on its stdin and stdout and execs the program that
# serves it with read(2) and write(2), after closing every other fd as inetd services do: that
# program adopts the connection at load; "inetdspawn": the same through Python's subprocess, whose
# vfork child dup2()s the connection in the parent's memory), "dup" (one
# process dup()s each connection, reads through one number and writes through the other, and
# closes the first after the first reply). Every
# connection must
# switch at both ends (the workers' connections through their own per-connection names), and no
# first request may wait for the switch: it goes over TCP, within 250 ms (a stall is seconds, or
# the old 500 ms; on this machine a request takes about a millisecond). Before, the workers'
# connections never switched and each first request waited 0.5 s; "activated", "passed" and the
# fork shapes never switched either, nor did "inetd" (its exec'd program never saw the connection
# made) and "dup" (a candidate's second number kept it on TCP). An inetd first request includes the exec of a python3, and a
# clientfork one the client's fork() (457 ms once on a loaded machine), which TCP's run pays
# too: their limit is TCP's worst plus the same margin. Then connections that must stay TCP:
# "handoff", "forkshared", "forkmoved", "inetdstdio" with SANSWITCH_STDIO=0 and "stdio" (below).
# timeout: 240
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build
# switched at the second exchange (the library's default until 2026-11-30; its default now, 16,
# leaves connections this short on TCP: t_switch_policy)
export SANSWITCH_SWITCH_AFTER=1
export SANSWITCH_STATS=1
CONNS=12
REQS=3
LIMIT_MS=250

# shellcheck source=tests/e2e/shapes_lib.sh
. "$E2E_DIR/shapes_lib.sh"

export SANSTDIO=$BUILD/sanstdio
[ -x "$SANSTDIO" ] || fail "no $SANSTDIO (make)"

run() { # SHAPE MODE(pre|none) SIZE [BASE_MS] (clientfork: the single server, the client forks)
	local shape=$1 limit=$((LIMIT_MS + ${4:-0})) try
	[ "$shape" = clientfork ] && shape=single
	# kernel TCP's run is the oracle: what it takes is measured, not judged (an inetd first
	# request, a python3 exec, took 307 ms there once on a loaded machine). A switched run over
	# the limit runs again, twice at most: a stall makes every first request wait, a loaded
	# machine one fork now and then (clientfork 278 ms against 254 once, under ASan, with a
	# Soft-RoCE guest and another sanitized suite on the same 2 CPUs)
	for try in 1 2 3; do
		CLIENT_FORK=$([ "$1" = clientfork ] && echo 1 || echo 0) \
			shapes_run "$1.$2.$3" "$2" "$2" "$shape" "$3" "$REQS" 0
		[ "$2" = none ] || [ "$RUN_WORST" -lt "$limit" ] && return 0
		[ "$try" -lt 3 ] && log "note: $1.$2.$3: a first request took $RUN_WORST ms" \
			"(limit $limit): again"
	done
	show "$TMP/$1.$2.$3.cli.out"
	fail "$1.$2.$3: a first request took $RUN_WORST ms (limit $limit) in 3 runs"
}

for size in 10 300000; do
	for shape in single dup thread workers reuseport activated passed fork clientfork forkhelper \
		inetd inetdspawn; do
		run "$shape" none $size
		tcp=$RUN_WORST
		base=0
		case $shape in inetd* | clientfork) base=$tcp ;; esac
		run "$shape" pre $size $base
		server=listener
		case $shape in workers | reuseport | activated | passed | fork | inetd*) server=worker ;; esac
		c=$(sum "$shape.pre.$size" client switched)
		b=$(sum "$shape.pre.$size" "$server" switched)
		[ "$c" -eq "$CONNS" ] && [ "$b" -eq "$CONNS" ] || {
			show "$TMP/$shape.pre.$size.cli.out" "$TMP/$shape.pre.$size.srv.out"
			grep -h '^sanswitch' "$TMP/$shape.pre.$size.cli.err" "$TMP/$shape.pre.$size.srv.err" |
				grep -v ' switched=0 fallback=0 ' >&2
			fail "$shape.$size: expected $CONNS switched at both ends, got client $c, ${server}s $b"
		}
		log "$shape, $size B requests: $CONNS connections switched at both ends, bytes checked," \
			"worst first request ${RUN_WORST} ms (TCP: $tcp ms)"
	done
done

# A connection handed to another process over SCM_RIGHTS while the acceptor keeps its copy: the
# acceptor's engine would answer a proposal for a connection another process reads (the MARK
# would land in that process's data). It must stay TCP, its bytes intact.
run handoff pre 10
c=$(sum handoff.pre.10 client switched)
[ "$c" -eq 0 ] || fail "handoff: expected every connection on TCP, $c switched"
log "handoff over SCM_RIGHTS (the acceptor keeps its copy): $CONNS connections on TCP, bytes checked"

# A forked connection that another process still holds (the parent keeps its copy until the child
# is done), or on which another process moved bytes (the parent read the first request's length,
# then closed its copy): the child's counts cannot say where the stream is. Both stay TCP.
for shape in forkshared forkmoved; do
	run $shape pre 10
	c=$(sum $shape.pre.10 client switched)
	f=$(sum $shape.pre.10 client fallback)
	[ "$c" -eq 0 ] && [ "$f" -eq "$CONNS" ] ||
		fail "$shape: expected every connection on TCP, $c switched, $f fallbacks"
	log "$shape: $CONNS connections on TCP, bytes checked"
done

# A program that speaks through C stdio: glibc makes its read(2) and write(2) inside libc, behind
# the preload. Exec'd as inetd's child ("inetdstdio": it reads each request's length with read(2),
# the rest through stdio on stdin and stdout), the connection it adopts at load has its standard
# streams bridged through the library (preload/san_stdio.c): every connection switches at both
# ends, bytes checked. Before, each stayed TCP (the counts check saw the bytes stdio moved).
# With SANSWITCH_STDIO=0 the streams are glibc's, and the counts check keeps each on TCP. As a
# server that fdopen()s what it accepts ("stdio": never touched, refused at the client's last
# proposal), it stays TCP; before, that one hung (the server's engine took the proposal and
# switched with counts of zero).
run inetdstdio pre 10
c=$(sum inetdstdio.pre.10 client switched)
b=$(sum inetdstdio.pre.10 worker switched)
[ "$c" -eq "$CONNS" ] && [ "$b" -eq "$CONNS" ] ||
	fail "inetdstdio: expected $CONNS switched at both ends, got client $c, workers $b"
log "inetdstdio (stdio bridged): $CONNS connections switched at both ends, bytes checked"
SANSWITCH_STDIO=0 run inetdstdio pre 10
c=$(sum inetdstdio.pre.10 client switched)
f=$(sum inetdstdio.pre.10 client fallback)
[ "$c" -eq 0 ] && [ "$f" -eq "$CONNS" ] ||
	fail "inetdstdio, SANSWITCH_STDIO=0: expected every connection on TCP, $c switched, $f fallbacks"
log "inetdstdio, SANSWITCH_STDIO=0: $CONNS connections on TCP, bytes checked"
for size in 10 300000; do
	start_pf "stdio.$size.srv" pre "$SANSTDIO" listen '{PORTFILE}' "$CONNS"
	rc=0
	as_t pre 60 "$PY" "$E2E_DIR/shapes.py" client "$SERVER_PORT" "$CONNS" "$size" "$REQS" 0 0 \
		>"$TMP/stdio.$size.cli.out" 2>"$TMP/stdio.$size.cli.err" || rc=$?
	srv_rc=0
	wait_pid "$SERVER_PID" 30 || srv_rc=$?
	[ "$rc" -eq 0 ] && [ "$srv_rc" -eq 0 ] || {
		show "$TMP/stdio.$size.cli.out" "$TMP/stdio.$size.cli.err" "$TMP/stdio.$size.srv.err"
		fail "stdio.$size: client exit $rc, server exit $srv_rc"
	}
	no_preload_errors "$TMP/stdio.$size.cli.err" "$TMP/stdio.$size.srv.err"
	c=$(sum "stdio.$size" client switched)
	f=$(sum "stdio.$size" client fallback)
	[ "$c" -eq 0 ] && [ "$f" -eq "$CONNS" ] ||
		fail "stdio.$size: expected every connection on TCP, $c switched, $f fallbacks"
	log "stdio server, $size B requests: $CONNS connections on TCP, bytes checked"
done
