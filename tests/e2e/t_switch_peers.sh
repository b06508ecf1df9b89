#!/bin/bash
# t_switch_peers — switched connections (both ends preloaded, SANSWITCH_STATS=1 proves the switch)
# under peer behaviours the verifier does not show: (a) a server that speaks first (switch_first.py:
# greeting, then echo; sha256 checked); (b) kill -9 of one end mid-transfer: the other end fails
# with an error within a bounded time, never hangs or delivers wrong bytes, and a server whose
# client died still serves a new client; (c) fork+exec of a child holding a switched fd on fd 3
# (switch_exec.py): the child reads EOF, never garbage, and the connection still works both ways.
# timeout: 120
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build

export SANSWITCH_STATS=1

IDLE_RE='^sanswitch: pid=[0-9]+ switched=0 fallback=0 san_tx_bytes=0 san_rx_bytes=0 tcp_tx_bytes=0 tcp_rx_bytes=0 enobufs=0 connects=0 accepts=0( [a-z_]+=0)*$'

# switched_n NAME LINE N — the line says N connections switched and none fell back.
switched_n() {
	[ "$(field "$2" switched)" -eq "$3" ] && [ "$(field "$2" fallback)" -eq 0 ] ||
		fail "$1: expected switched=$3 fallback=0: $2"
}

# out_pid FILE — the pid a helper program printed as "...: pid=P ...".
out_pid() {
	local p
	p=$(sed -n 's/^[a-z]*: pid=\([0-9][0-9]*\) .*/\1/p' "$1" | head -n1)
	[ -n "$p" ] || { show "$1"; fail "$(basename -- "$1"): no pid printed"; }
	echo "$p"
}

# no_wrong_bytes FILE... — sanverify never reported a wrong byte or extra bytes (an early EOF or a
# reset is what a dead peer may legitimately cause; a changed byte never is).
no_wrong_bytes() {
	if grep -E 'data mismatch at offset|extra bytes|header checksum|stream header' "$@"; then
		show "$@"
		fail "sanverify saw wrong bytes (above)"
	fi
}

DATA=$TMP/data
head -c $((4 * 1024 * 1024)) /dev/urandom >"$DATA"
SIZE=$(stat -c %s "$DATA")
WANT=$(sha "$DATA")

# ------------------------------------------------------------ (a) the server speaks first
for g in 3000 262144; do
	name=first.$g
	start_pf "$name.srv" pre "$PY" "$E2E_DIR/switch_first.py" server '{PORTFILE}' "$g"
	rc=0
	as_t pre 60 "$PY" "$E2E_DIR/switch_first.py" client "$SERVER_PORT" "$g" "$DATA" \
		>"$TMP/$name.cli.out" 2>"$TMP/$name.cli.err" || rc=$?
	srv_rc=0
	wait_pid "$SERVER_PID" 20 || srv_rc=$?
	no_preload_errors "$TMP/$name.cli.err" "$TMP/$name.srv.err"
	[ "$rc" -eq 0 ] && [ "$srv_rc" -eq 0 ] || {
		show "$TMP/$name.cli.out" "$TMP/$name.cli.err" "$TMP/$name.srv.out" "$TMP/$name.srv.err"
		fail "$name: client exit $rc, server exit $srv_rc"
	}
	grep -q "^first: pid=[0-9]* greeting ok bytes=$g\$" "$TMP/$name.cli.out" ||
		{ show "$TMP/$name.cli.out"; fail "$name: no 'greeting ok' line"; }
	grep -q "^first: pid=[0-9]* echo ok bytes=$SIZE sha256=$WANT\$" "$TMP/$name.cli.out" ||
		{ show "$TMP/$name.cli.out"; fail "$name: echo not verified (want bytes=$SIZE sha256=$WANT)"; }
	cl=$(pid_line "$TMP/$name.cli.err" "$(out_pid "$TMP/$name.cli.out")") || exit 1
	sl=$(pid_line "$TMP/$name.srv.err" "$(out_pid "$TMP/$name.srv.out")") || exit 1
	log "$name client: $cl"
	log "$name server: $sl"
	switched_n "$name client" "$cl" 1
	switched_n "$name server" "$sl" 1
	# Every byte counted once, whichever way it went (the greeting may go over TCP before the switch).
	[ "$(moved "$cl" tx)" -eq "$SIZE" ] || fail "$name: client sent $SIZE bytes, its line: $cl"
	[ "$(moved "$cl" rx)" -eq $((g + SIZE)) ] || fail "$name: client received $((g + SIZE)) bytes, its line: $cl"
	[ "$(moved "$sl" tx)" -eq $((g + SIZE)) ] || fail "$name: server sent $((g + SIZE)) bytes, its line: $sl"
	[ "$(moved "$sl" rx)" -eq "$SIZE" ] || fail "$name: server received $SIZE bytes, its line: $sl"
	log "$name: greeting of $g bytes, then $SIZE bytes echoed (sha256 ok); switched on both sides"
done

# ------------------------------------------------------------ (b) kill -9 of a peer mid-transfer
# The streams are far too long to finish (16 GiB): the transfer is surely running when the kill
# comes, about a second in. A client whose peer vanished must fail (exit 2: reset or broken pipe;
# or 1 for an early EOF) within 20 s; 124 (our limit) or 3 (its own -t 15) means it hung.
for nb in block nonblock; do
	args=()
	[ "$nb" = nonblock ] && args=(-n -m epoll)

	# The server dies: the client must notice.
	name=kill_server.$nb
	start_server "$name.srv" pre --conns-total 1 -t 60 "${args[@]}"
	spawn "$name.cli" pre "$SANVERIFY" client -p "$SERVER_PORT" -b 16G -t 15 "${args[@]}"
	cpid=$SPAWN_PID
	sleep 1
	alive "$SERVER_PID" && alive "$cpid" || {
		show "$TMP/$name.cli.out" "$TMP/$name.cli.err" "$TMP/$name.srv.out" "$TMP/$name.srv.err"
		fail "$name: a side ended before the kill"
	}
	kill -KILL "$SERVER_PID"
	wait "$SERVER_PID" 2>/dev/null
	rc=0
	wait_pid "$cpid" 20 || rc=$?
	no_wrong_bytes "$TMP/$name.cli.out" "$TMP/$name.cli.err"
	case $rc in
	2) ;;
	1) grep -q 'unexpected EOF after' "$TMP/$name.cli.err" ||
		{ show "$TMP/$name.cli.err"; fail "$name: client exit 1 without 'unexpected EOF'"; } ;;
	0) fail "$name: client exited 0 though its server was killed mid-stream" ;;
	3 | 124) show "$TMP/$name.cli.err"; fail "$name: client hung after its server was killed (exit $rc)" ;;
	*) show "$TMP/$name.cli.err"; fail "$name: client exit $rc" ;;
	esac
	err=$(grep -m1 '^sanverify: client conn 0: ' "$TMP/$name.cli.err") ||
		{ show "$TMP/$name.cli.err"; fail "$name: client printed no error for conn 0"; }
	cl=$(stats_line "$TMP/$name.cli.err") || exit 1
	switched_n "$name client" "$cl" 1
	log "$name: client exit $rc: ${err#sanverify: }; it had switched ($cl)"

	# The client dies: the server must notice, and still serve (and verify) a new client.
	name=kill_client.$nb
	start_server "$name.srv" pre -t 60 "${args[@]}"
	spid=$SERVER_PID
	port=$SERVER_PORT
	spawn "$name.cli" pre "$SANVERIFY" client -p "$port" -b 16G -t 15 "${args[@]}"
	cpid=$SPAWN_PID
	sleep 1
	alive "$spid" && alive "$cpid" || {
		show "$TMP/$name.cli.out" "$TMP/$name.cli.err" "$TMP/$name.srv.out" "$TMP/$name.srv.err"
		fail "$name: a side ended before the kill"
	}
	kill -KILL "$cpid"
	wait "$cpid" 2>/dev/null
	end=$(($(date +%s) + 20))
	until grep -q '^sanverify: server conn 0 from ' "$TMP/$name.srv.err"; do
		alive "$spid" || { show "$TMP/$name.srv.out" "$TMP/$name.srv.err"; fail "$name: the server died"; }
		[ "$(date +%s)" -lt "$end" ] ||
			{ show "$TMP/$name.srv.err"; fail "$name: the server did not notice its client's death in 20 s"; }
		sleep 0.05
	done
	err=$(grep -m1 '^sanverify: server conn 0 from ' "$TMP/$name.srv.err")
	rc=0
	as_t pre 30 "$SANVERIFY" client -p "$port" -c 2 -b 1M -s 9 -t 20 "${args[@]}" \
		>"$TMP/$name.new.out" 2>"$TMP/$name.new.err" || rc=$?
	[ "$rc" -eq 0 ] || { show "$TMP/$name.new.out" "$TMP/$name.new.err" "$TMP/$name.srv.err"; fail "$name: new client exit $rc"; }
	line=$(grep '^sanverify: client ok conns=2 ' "$TMP/$name.new.out") ||
		{ show "$TMP/$name.new.out"; fail "$name: new client: no 'client ok conns=2' line"; }
	nl=$(stats_line "$TMP/$name.new.err") || exit 1
	switched_n "$name new client" "$nl" 2
	# The server ends on SIGTERM: one connection failed (exit 2 for a system error, 1 for a
	# truncated stream), the new client's two were verified.
	kill -TERM "$spid"
	rc=0
	wait_pid "$spid" 20 || rc=$?
	no_wrong_bytes "$TMP/$name.srv.out" "$TMP/$name.srv.err"
	[ "$rc" -eq 1 ] || [ "$rc" -eq 2 ] || { show "$TMP/$name.srv.out" "$TMP/$name.srv.err"; fail "$name: server exit $rc on SIGTERM, expected 1 or 2 (one connection failed)"; }
	grep -q '^sanverify: server FAILED conns=3 failed=1$' "$TMP/$name.srv.out" "$TMP/$name.srv.err" ||
		{ show "$TMP/$name.srv.out" "$TMP/$name.srv.err"; fail "$name: expected 'server FAILED conns=3 failed=1'"; }
	sl=$(stats_line "$TMP/$name.srv.err") || exit 1
	switched_n "$name server" "$sl" 3
	[ "$(field "$sl" accepts)" -eq 3 ] || fail "$name: server accepts != 3: $sl"
	log "$name: server noticed (${err#sanverify: }); then verified a new client ($line);" \
		"all 3 connections switched ($sl)"
done
vpair new_base none none 2 -- -b 1M -s 9
[ "$VCRC" = "$(sed -n 's/.* crc32=\([0-9a-f]*\).*/\1/p' "$TMP/kill_client.block.new.out")" ] &&
	[ "$VCRC" = "$(sed -n 's/.* crc32=\([0-9a-f]*\).*/\1/p' "$TMP/kill_client.nonblock.new.out")" ] ||
	fail "the new clients' crc32 differ from the kernel-only run's $VCRC"
log "the new clients' crc32 equal the kernel-only run's ($VCRC)"

# ------------------------------------------------------------ (c) exec with a switched fd inherited
rc=0
mkdir -p "$TMP/exec"
as_t pre 90 "$PY" "$E2E_DIR/switch_exec.py" "$TMP/exec" >"$TMP/exec.out" 2>"$TMP/exec.err" || rc=$?
no_preload_errors "$TMP/exec.err"
sed "s/^/[$TEST_NAME] /" "$TMP/exec.out"
if [ "$rc" -ne 0 ]; then
	# Leave out the idle lines of processes that never had a TCP socket (sh, cat, pyenv shims).
	grep -Ev "$IDLE_RE" "$TMP/exec.err" >"$TMP/exec.err.busy"
	show "$TMP/exec.err.busy"
	fail "switch_exec.py exited $rc (see its lines above)"
fi
grep -q '^exec: pid=[0-9]* all 9 exec cases ok$' "$TMP/exec.out" || fail "switch_exec.py: not all cases ok"
l=$(pid_line "$TMP/exec.err" "$(out_pid "$TMP/exec.out")") || exit 1
log "exec: $l"
# Both ends were in that process: two connections (one a pure sender's), four switched ends.
switched_n exec "$l" 4
[ "$(field "$l" connects)" -eq 2 ] && [ "$(field "$l" accepts)" -eq 2 ] ||
	fail "exec: expected connects=2 accepts=2: $l"
# ... and every byte one end sent, the other received (and nothing else): tx = rx.
[ "$(moved "$l" tx)" -eq "$(moved "$l" rx)" ] ||
	fail "exec: both ends in one process, yet it sent $(moved "$l" tx) bytes and received $(moved "$l" rx): $l"
log "all peer cases ok"
