#!/bin/bash
# t_switch_verbs_shapes — the server shapes of tests/e2e/t_shape_workers.sh over the verbs
# provider (SANSWITCH_PROVIDER=verbs, both ends preloaded, on the rxe device's address); every
# reply's bytes are checked by the client (tests/e2e/shapes.py exits 1 at the first wrong one),
# and the shape that moves the most bytes runs over kernel TCP too, in the same run:
#   workers.block  the parent listens (its rdma_cm listener is made there), two forked workers
#                  accept on the inherited listener with a blocking accept() (nginx's shape);
#   workers.epoll  the same, each worker in epoll_wait() on the listener;
#   fork+clientfork  the parent accepts, a forked child serves the connection, the parent
#                  closes its copy (the pre-fork daemon's shape); and the client connects, then a
#                  forked child talks and the parent closes its copy (both in one run).
# Every connection must switch onto verbs at both ends: switched_verbs summed over the processes
# that served (the workers, the children) and over those that talked (the client, or its
# children) is the number of connections. Before, none of these switched over verbs: the
# proposal reached the parent's rdma_cm listener, and a forked child had none of its own.
# timeout: 400
set -u
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/../e2e/lib.sh"
need_build
addr=${RXE_VM_ADDR:?RXE_VM_ADDR is not set: run through tests/rxe/run}
# shellcheck source=tests/e2e/shapes_lib.sh
. "$E2E_DIR/shapes_lib.sh"

# Debian's interpreter itself: a wrapper (a pyenv shim) would be slow to start in the guest
[ -x /usr/bin/python3 ] && PY=/usr/bin/python3
export SANSWITCH_STATS=1 SANSWITCH_PROVIDER=verbs SHAPES_HOST=$addr
CONNS=4
# a preloaded python3 that listens loads rdma-core, and the workers shape waits for two forked
# workers too: seconds in the emulated guest on a busy host
PF_WAIT=60
REQS=3

# vshape NAME SHAPE SIZE CLIENT_FORK KERNEL [ENV...] — both ends preloaded (after kernel TCP
# alone when KERNEL is 1); every connection switched onto verbs at both ends. CLIENT_FORK=1: the
# client connects, then a forked child talks.
vshape() {
	local name=$1 shape=$2 size=$3 server=listener c b kernel=
	export CLIENT_FORK=$4
	[ "$5" = 1 ] && kernel=" (and over kernel TCP)"
	[ "$5" = 1 ] && shapes_run "$name.none.$size" none none "$shape" "$size" "$REQS" 0 "${@:6}"
	shapes_run "$name.pre.$size" pre pre "$shape" "$size" "$REQS" 0 "${@:6}"
	case $shape in workers | fork) server=worker ;; esac
	c=$(sum "$name.pre.$size" client switched_verbs) || exit 1
	b=$(sum "$name.pre.$size" "$server" switched_verbs) || exit 1
	[ "$c" -eq "$CONNS" ] && [ "$b" -eq "$CONNS" ] || {
		show "$TMP/$name.pre.$size.cli.out" "$TMP/$name.pre.$size.srv.out"
		grep -h '^sanswitch' "$TMP/$name.pre.$size.cli.err" "$TMP/$name.pre.$size.srv.err" >&2
		fail "$name.$size: expected $CONNS switched onto verbs at both ends, got client $c," \
			"${server}s $b"
	}
	log "$name, $size B requests: $CONNS connections switched onto verbs at both ends," \
		"bytes checked$kernel"
}

# (kernel TCP once, for the shape with the most bytes; the client checks every reply anyway)
vshape workers.epoll workers 300000 0 1 SHAPES_WAIT=epoll
vshape workers.block workers 1000 0 0 SHAPES_WAIT=block
# accept-then-fork at the server and connect-then-fork at the client, in one run
vshape fork+clientfork fork 1000 1 0
log "PASS"
