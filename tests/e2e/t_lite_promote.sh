#!/bin/bash
# t_lite_promote — a server's lite candidate (docs/engine.md §3) registered in an epoll set keeps
# the registration and switches at the client's second request, the set reporting each later
# request (the swap moved it); one made a sock by a dup() with no call inside its gate switches
# too (switched=2: both ends are this process), and so does one whose server is in a blocking send
# held by full buffers when the client proposes; one dup()ed while another thread's receive is in
# the kernel stays TCP (switched=0, the server's fallback not_attempted), every byte checked
# (lite_promote.py). A client's lite candidate whose second request, due, finds its reader
# thread's receive in the kernel switches once that receive has returned (switched=2); one
# dup()ed while that receive is in the kernel stays TCP (switched=0, the client's fallback
# not_attempted). Another thread's epoll_wait (cwatch: switched=4, with the connection switched
# first), SO_RCVBUF and SO_RCVLOWAT (csockopt) while such a receive is inside do not leave the
# client's connection on TCP; a whole upload in one send then shutdown(SHUT_WR) switches at the
# shutdown (cshut). The same with SANSWITCH_LITE=0, where every candidate is a sock from
# accept() and connect(): all switch.
# timeout: 90
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build

# switched at the second exchange (the library's default until 2026-11-30; its default now, 16,
# leaves connections this short on TCP: t_switch_policy)
export SANSWITCH_SWITCH_AFTER=1
export SANSWITCH_STATS=1
export SANSWITCH_LITE=1 # (the default: said here, as the case run with 0 below says its own)
# run CASE WANT_SWITCHED [ENV...]
run() {
	local c=$1 want=$2 rc=0 line
	shift 2
	as_t pre 30 env "$@" "$PY" "$E2E_DIR/lite_promote.py" "$c" >"$TMP/$c.out" 2>"$TMP/$c.err" || rc=$?
	[ "$rc" -eq 0 ] || { show "$TMP/$c.out" "$TMP/$c.err"; fail "$c: lite_promote.py exited $rc"; }
	grep -q "^lite $c: ok" "$TMP/$c.out" || fail "$c: no ok line"
	line=$(grep '^sanswitch: pid=' "$TMP/$c.err") || { show "$TMP/$c.err"; fail "$c: no stats line"; }
	[ "$(field "$line" switched)" -eq "$want" ] || fail "$c ($*): expected switched=$want: $line"
	log "$c ${*:-(lite)}: switched=$want"
}
for i in 1 2 3; do
	run epoll 2
	run dup 2
	run sendfull 2
	run busy 0
	run cwant 2
	run cdup 0
	run cwatch 4
	run csockopt 2
	run cshut 2
done
for c in busy cdup; do
	line=$(grep '^sanswitch: pid=' "$TMP/$c.err")
	[ "$(field "$line" fallback_not_attempted)" -ge 1 ] || fail "$c: expected a not_attempted: $line"
done
run busy 2 SANSWITCH_LITE=0
for c in cwant cdup csockopt cshut; do run "$c" 2 SANSWITCH_LITE=0; done
run cwatch 4 SANSWITCH_LITE=0
log "ok"
