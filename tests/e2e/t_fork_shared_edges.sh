#!/bin/bash
# t_fork_shared_edges — the edges of a connection shared by fork() (docs/engine.md §7.1) that
# t_fork_shared's byte-for-byte cases do not reach; fork_edges.py runs each:
# (leak) a server forks a child per connection, each child answers and _exits without a close:
# the parent's slab chunks stay as many after 300 connections as after 20 (a child's copies
# come from chunks of its own; taken from the inherited ones, each stayed taken in the parent).
# (thr) a thread of the parent inside a call at the fork: the child's close still lets go of the slot.
# (forkfail) a fork() that fails: the connections it would have shared are the parent's alone again.
# (exitlast) the parent closes first, the child _exits: the exit lets go of the slot too.
# (nomem) no memory at the fork for the child's copies: its switched numbers fail, never pass through.
# timeout: 300
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build
PY=$(python3 -c 'import sys; print(sys.executable)')
HELPER=$E2E_DIR/fork_edges.py

few=$(preload "$PY" "$HELPER" leak 20 2>"$TMP/leak20.err") || { show "$TMP/leak20.err"; fail "leak 20 failed"; }
many=$(preload "$PY" "$HELPER" leak 300 2>"$TMP/leak300.err") || { show "$TMP/leak300.err"; fail "leak 300 failed"; }
no_preload_errors "$TMP/leak20.err" "$TMP/leak300.err"
log "$few; $many"
[ "${few##*: }" -ge 1 ] || fail "leak: no slab chunk seen ($few)"
[ "${few##*: }" = "${many##*: }" ] || fail "leak: the parent's chunks grew with its children ($few, $many)"

# rounds CASE WANT [PREFIX...] — fork_edges.py CASE 3, then 70: its lines are WANT's, and the
# parent's chunks as many after 70 as after 3 (a slot never freed shows as a second chunk)
rounds() {
	local c=$1 want=$2 n got
	local -A chunks
	shift 2
	for n in 3 70; do
		got=$(cd / && tmo 120 "$@" env LD_PRELOAD="$PRELOAD" "$PY" "$HELPER" "$c" $n 2>"$TMP/$c.$n.err")
		no_preload_errors "$TMP/$c.$n.err"
		[ "${got%$'\n'*}" = "$want"$'\nserver: all switched, all ended True\nserver exit 0' ] ||
			{ echo "$got"; show "$TMP/$c.$n.err"; fail "$c $n: not as expected"; }
		chunks[$n]=${got##*: }
	done
	log "$c: chunks after 3: ${chunks[3]}, after 70: ${chunks[70]}"
	[ "${chunks[3]}" = "${chunks[70]}" ] || fail "$c: the parent's chunks grew (${chunks[3]}, then ${chunks[70]})"
}

# (thr) 70 times a client thread sleeps in a receive on the switched connection while the main
# thread forks; the child closes its copy and exits, the parent closes last (the child's count of
# references was the parent's, the sleeping thread's with it: its close never let go of the slot,
# which the parent's last close then could not free)
rounds thr 'client: all switched, the children closed, all read True'

# (exitlast) 70 times the parent closes its copy first, then the child _exits without a close
# (the exit lowered the users, not the holders: the slot stayed taken)
rounds exitlast 'client: all switched, the children exited last, all read True'

# (forkfail) 70 times a switched connection, then a fork() that fails (EAGAIN: RLIMIT_NPROC 1, as
# a user other than root, which the limit does not bind); the parent closes alone: its chunks stay
# as after 3 (glibc runs the parent handlers after a failed fork too: the raise for the child that
# never was stayed, no DISCONNECT was said and the slot was never freed)
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null && [ -x /usr/bin/python3 ]; then
	PY=/usr/bin/python3 rounds forkfail 'client: all switched, all forks failed, all read True' \
		setpriv --reuid=65534 --regid=65534 --clear-groups
else
	log "forkfail: skipped (needs root to become another user, setpriv, /usr/bin/python3)"
fi


# (nomem) SANSWITCH_FAULT=fork_nomem: the fork finds no memory for the child's copies; the child's
# receive on the switched number fails ECONNRESET (it passed through to the notification socket:
# doorbell bytes as data, or a sleep) while the parent goes on
rounds nomem 'client: all switched, the children read ECONNRESET, all read True' env SANSWITCH_FAULT=fork_nomem
