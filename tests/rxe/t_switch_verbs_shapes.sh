#!/bin/bash
# t_switch_verbs_shapes — the server shapes of tests/e2e/t_shape_workers.sh over the verbs
# provider (SANSWITCH_PROVIDER=verbs, both ends preloaded, on the rxe device's address), each
# against kernel TCP in the same run (tests/e2e/shapes.py: every reply's bytes are checked by the
# client, which exits 1 at the first wrong one):
#   workers.block  the parent listens (its rdma_cm listener is made there), two forked workers
#                  accept on the inherited listener with a blocking accept() (nginx's shape);
#   workers.epoll  the same, each worker in epoll_wait() on the listener;
#   fork           the parent accepts, a forked child serves the connection, the parent closes
#                  its copy (the pre-fork daemon's shape);
#   clientfork     the client connects, then a forked child talks and the parent closes its copy.
# Every connection must switch onto verbs at both ends: switched_verbs summed over the processes
# that served (the workers, the children) and over those that talked (the client, or its
# children) is the number of connections. Before, none of these switched over verbs: the
# proposal reached the parent's rdma_cm listener, and a forked child had none of its own.
# timeout: 300
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

# vshape NAME SHAPE SIZE [ENV...] — kernel TCP, then both ends preloaded; every connection
# switched onto verbs at both ends.
vshape() {
	local name=$1 shape=$2 size=$3 server=listener c b
	shift 3
	[ "$shape" = clientfork ] && shape=single
	CLIENT_FORK=$([ "$name" = clientfork ] && echo 1 || echo 0) \
		shapes_run "$name.none.$size" none none "$shape" "$size" "$REQS" 0 "$@"
	CLIENT_FORK=$([ "$name" = clientfork ] && echo 1 || echo 0) \
		shapes_run "$name.pre.$size" pre pre "$shape" "$size" "$REQS" 0 "$@"
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
		"bytes checked (kernel TCP: the same bytes)"
}

vshape workers.block workers 1000 SHAPES_WAIT=block
vshape workers.epoll workers 300000 SHAPES_WAIT=epoll
vshape fork fork 1000
vshape clientfork clientfork 1000
log "PASS"
