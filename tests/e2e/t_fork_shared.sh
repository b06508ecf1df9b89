#!/bin/bash
# t_fork_shared — a connection switched onto shm, then shared by fork() (docs/engine.md §7.1):
# parent and child use the one connection as they would a TCP socket, and every case gives what
# kernel TCP gives in the same run (the same bytes, the same ending). fork_shared.py says the cases:
# (a) the child reads while the parent writes (rsync's daemon client), (b) the child takes over and
# the parent closes its copy, (c) the parent goes on and the child only exits, (d) the parent exits
# first while the child still reads, (e) the server forks, (g) the child execs a shell that exits
# (the parent's close then ends it through the anchor: the exec'd image never lets go). Before the
# shared connections, a fork child's copy failed ECONNRESET. FORK_SHARED_RUNS (default 10) runs of
# each case preloaded; FORK_SHARED_CASES picks cases (a to e, g); (f), below, kills a sharer inside
# the lock. The even runs use the default policy (the first request over TCP): the TCP bytes the
# client's processes' stats lines count must be the server's, counted once by the last sharer to
# let go (every closing sharer counted them before).
# timeout: 600
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build
PY=$(python3 -c 'import sys; print(sys.executable)')
HELPER=$E2E_DIR/fork_shared.py
RUNS=${FORK_SHARED_RUNS:-10}

# one MODE CASE RUN — run a case; its outputs (server's, client's, client child's) in $TMP/NAME.all
one() {
	local mode=$1 c=$2 name="$2.$1.$3" port rc=0 src=0 i
	rm -f "$TMP/$name.port" "$TMP/$name.res.child"
	spawn "$name.srv" "$mode" env "${POLICY[@]}" SANSWITCH_STATS=1 "${FAULT[@]}" "$PY" "$HELPER" server "$TMP/$name.port" "$c"
	local spid=$SPAWN_PID
	for ((i = 0; i < 200; i++)); do
		[ -s "$TMP/$name.port" ] && break
		sleep 0.05
	done
	port=$(cat "$TMP/$name.port" 2>/dev/null) || { stop "$spid"; fail "$name: the server did not listen"; }
	as_t "$mode" 90 env "${POLICY[@]}" SANSWITCH_STATS=1 "${FAULT[@]}" "$PY" "$HELPER" client "$port" "$c" "$TMP/$name.res" \
		>"$TMP/$name.cli.out" 2>"$TMP/$name.cli.err" || rc=$?
	wait_pid "$spid" 90 || src=$?
	# the client's child reports in a file, in case d after its close (which may end the
	# server before the report is written: an ASan run once read the file too early)
	case $c in a | b | d)
		for ((i = 0; i < 200; i++)); do
			[ -s "$TMP/$name.res.child" ] && break
			sleep 0.05
		done
		;;
	esac
	no_preload_errors "$TMP/$name.cli.err" "$TMP/$name.srv.err"
	cat "$TMP/$name.srv.out" "$TMP/$name.cli.out" "$TMP/$name.res.child" 2>/dev/null >"$TMP/$name.all"
	echo "client exit $rc, server exit $src" >>"$TMP/$name.all"
	if [ "$rc" -ne 0 ] || [ "$src" -ne 0 ] || grep -q 'match=NO' "$TMP/$name.all"; then
		show "$TMP/$name.all" "$TMP/$name.cli.err" "$TMP/$name.srv.err"
		fail "$name: client exit $rc, server exit $src"
	fi
	if [ "$mode" = pre ]; then
		# the pings ended only once both fds were switched; each side's processes say so too
		if ! grep -qE '^sanswitch: pid=[0-9]+ switched=1 ' "$TMP/$name.cli.err" ||
			! grep -qE '^sanswitch: pid=[0-9]+ switched=1 ' "$TMP/$name.srv.err"; then
			show "$TMP/$name.cli.err" "$TMP/$name.srv.err"
			fail "$name: no stats line says switched=1"
		fi
		# What went over TCP before the switch is counted once per side, by the sharing
		# process that closes or exits last (before, every closing sharer counted it). Not in
		# g, whose exec'd sharer never lets go: nobody is last there, and nobody counts them.
		# (Bytes go over TCP only where the client waits before it proposes: the even runs below.)
		local ctx crx stx srx
		ctx=$(sum_field "$TMP/$name.cli.err" tcp_tx_bytes) crx=$(sum_field "$TMP/$name.cli.err" tcp_rx_bytes)
		stx=$(sum_field "$TMP/$name.srv.err" tcp_tx_bytes) srx=$(sum_field "$TMP/$name.srv.err" tcp_rx_bytes)
		if [ "$c" != f ] && [ "$c" != g ] && { [ "$ctx" -ne "$srx" ] || [ "$crx" -ne "$stx" ]; }; then
			show "$TMP/$name.cli.err" "$TMP/$name.srv.err"
			fail "$name: TCP bytes counted $ctx/$crx (client's processes, sent/received) against $stx/$srx (server's)"
		fi
	fi
}

# sum_field FILE FIELD — FIELD summed over FILE's stats lines (one per process that exited)
sum_field() {
	awk -v f="$2" '/^sanswitch: pid=/ { for (i = 1; i <= NF; i++) if (index($i, f "=") == 1) t += substr($i, length(f) + 2) } END { print t + 0 }' "$1"
}

FAULT=() POLICY=()
for c in ${FORK_SHARED_CASES:-a b c d e g}; do
	one none "$c" 0
	for ((r = 1; r <= RUNS; r++)); do
		# the even runs under the default policy (the client's first request over TCP), the
		# odd ones with the suite's SANSWITCH_SWITCH_AFTER
		POLICY=()
		((r % 2)) || POLICY=(-u SANSWITCH_SWITCH_AFTER)
		one pre "$c" "$r"
		cmp -s "$TMP/$c.none.0.all" "$TMP/$c.pre.$r.all" || {
			diff -u "$TMP/$c.none.0.all" "$TMP/$c.pre.$r.all"
			fail "case $c, run $r: not what kernel TCP gave"
		}
	done
	log "case $c: $RUNS runs switched, as kernel TCP: $(head -c 300 "$TMP/$c.none.0.all" | tr '\n' ';')"
done

# (f) a process that shares the connection dies holding its lock (SANSWITCH_FAULT=fork_die_locked:
# the child kills itself in its first send): the parent's next call takes the lock over
# (EOWNERDEAD) and resets the connection, which the server reads as a reset. No kernel TCP run:
# TCP has no lock to die in.
FAULT=(SANSWITCH_FAULT=fork_die_locked) POLICY=()
for r in 1 2 3; do
	one pre f "$r"
	want=$'server: rx=e3b0c44298fc1c14 bytes=0 match=yes end=ECONNRESET\nclient: child killed by signal 9\nclient: a send after it: ECONNRESET\nclient exit 0, server exit 0'
	[ "$(cat "$TMP/f.pre.$r.all")" = "$want" ] || {
		show "$TMP/f.pre.$r.all" "$TMP/f.pre.$r.cli.err"
		fail "case f, run $r: not the reset expected"
	}
	grep -q 'died holding its lock: reset' "$TMP/f.pre.$r.cli.err" ||
		{ show "$TMP/f.pre.$r.cli.err"; fail "case f, run $r: no word of the lock taken over"; }
done
log "case f: a process dead holding the lock: the connection reset at both ends (3 runs)"
