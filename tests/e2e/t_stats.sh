#!/bin/bash
# t_stats — SANSWITCH_STATS=1: one line per process at exit with the TCP bytes the programs really
# moved (switched connections on the SAN, the rest on TCP, with a reason); the live file in /dev/shm; SANSWITCH_DISABLE=1 inert and
# silent; bad SANSWITCH_* values warn once each and the program still works. No line from a process
# that never had a TCP socket; across exec (same pid) an image's counts appear once. SANSWITCH_STATS=log
# with SANSWITCH_LOG_FILE: the line in the log file, not on stderr.
# timeout: 180
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build
need_cmd iperf3

SHM=/dev/shm

# ge NAME A B — A >= B, or fail.
ge() { [ "$2" -ge "$3" ] || fail "$1: $2 < $3"; }

# iperf_bytes FILE KEY — end.<KEY>.bytes from an iperf3 -J report.
iperf_bytes() {
	"$PY" -c 'import json, sys
print(json.load(open(sys.argv[1]))["end"][sys.argv[2]]["bytes"])' "$1" "$2"
}

export SANSWITCH_STATS=1

# ------------------------------------------------------------ iperf3, both ends preloaded
N=$((256 * 1024 * 1024))
start_listener ip.srv pre 4 iperf3 -s -1 -J -B 127.0.0.1 -p '{PORT}'
# The server's listening socket is tracked: its live file exists, private to the user.
f=$SHM/sanswitch.$SERVER_PID
[ -f "$f" ] || fail "no live stats file $f for the preloaded iperf3 server"
[ "$(stat -c %a "$f")" = 600 ] || fail "$f has mode $(stat -c %a "$f"), expected 600"
rc=0
as_t pre 60 iperf3 -c 127.0.0.1 -p "$SERVER_PORT" -J -n "$N" >"$TMP/ip.cli.json" 2>"$TMP/ip.cli.err" || rc=$?
srv_rc=0
wait_pid "$SERVER_PID" 20 || srv_rc=$?
[ "$rc" -eq 0 ] && [ "$srv_rc" -eq 0 ] || {
	show "$TMP/ip.cli.err" "$TMP/ip.srv.err"
	fail "iperf3: client exit $rc, server exit $srv_rc"
}
[ ! -e "$f" ] || fail "$f still there after the server exited"
sent=$(iperf_bytes "$TMP/ip.cli.json" sum_sent)
recvd=$(iperf_bytes "$TMP/ip.srv.out" sum_received)
cl=$(stats_line "$TMP/ip.cli.err") || exit 1
sl=$(stats_line "$TMP/ip.srv.err") || exit 1
log "client: $cl"
log "server: $sl"
[ "$(field "$sl" pid)" = "$SERVER_PID" ] || fail "server line names pid $(field "$sl" pid), not $SERVER_PID"
[ ! -e "$SHM/sanswitch.$(field "$cl" pid)" ] || fail "client's stats file left behind"
for l in "$cl" "$sl"; do
	# iperf3: one control and one data connection, both switched (same host, both preloaded).
	[ "$(field "$l" switched)" -eq 2 ] || fail "switched != 2: $l"
	[ "$(field "$l" fallback)" -eq 0 ] || fail "fallback != 0: $l"
done
[ "$(field "$cl" connects)" -eq 2 ] || fail "client connects != 2"
[ "$(field "$sl" accepts)" -eq 2 ] || fail "server accepts != 2"
ge "client san_tx_bytes vs iperf3 sent" "$(field "$cl" san_tx_bytes)" "$sent"
ge "server san_rx_bytes vs iperf3 received" "$(field "$sl" san_rx_bytes)" "$recvd"
ge "client san_tx_bytes vs -n" "$(field "$cl" san_tx_bytes)" "$N"
log "iperf3: sent=$sent received=$recvd; switched, lines and byte counts agree"

# ------------------------------------------------------------ the verifier: dup'ed fds, half-close
# Every connection is read through a dup() of its socket: it switches with both numbers (it stayed
# TCP before), and is counted once.
C=8
vpair v pre pre "$C" -T 2 --dup --half-close -- -T 2 --dup --half-close -b 3M -s 7
cl=$(stats_line "$TMP/v.cli.err") || exit 1
sl=$(stats_line "$TMP/v.srv.err") || exit 1
log "client: $cl"
log "server: $sl"
for l in "$cl" "$sl"; do
	[ "$(field "$l" switched)" -eq "$C" ] || fail "switched != $C (dup'ed fds counted twice?): $l"
	[ "$(field "$l" fallback)" -eq 0 ] || fail "fallback != 0: $l"
	ge "bytes sent" "$(moved "$l" tx)" "$VBYTES"
	ge "bytes received" "$(moved "$l" rx)" "$VBYTES"
done
log "sanverify: $C conns, $VBYTES bytes verified; each side counted $C connections"

# One side only: the plain side prints nothing, the preloaded one its line.
vpair one pre none 2 -- -b 1M
stats_line "$TMP/one.srv.err" >/dev/null || exit 1
! grep -q '^sanswitch' "$TMP/one.cli.err" || fail "a client without the preload printed a stats line"

# ------------------------------------------------------------ fork and exec
# Every process prints at most one line, for its own pid; no file is left behind.
head -c $((2 * 1024 * 1024)) /dev/urandom >"$TMP/data"
rc=0
as_t pre 60 "$PY" "$E2E_DIR/forkexec.py" "$TMP/data" >"$TMP/fe.out" 2>"$TMP/fe.err" || rc=$?
[ "$rc" -eq 0 ] || { show "$TMP/fe.out" "$TMP/fe.err"; fail "forkexec.py exited $rc"; }
grep '^sanswitch: pid=' "$TMP/fe.err" | sed 's/^sanswitch: pid=\([0-9]*\) .*/\1/' | sort >"$TMP/fe.pids"
[ -s "$TMP/fe.pids" ] || fail "forkexec: no stats lines at all"
dups=$(uniq -d "$TMP/fe.pids")
[ -z "$dups" ] || { show "$TMP/fe.err"; fail "forkexec: more than one line for pid(s) $dups"; }
if grep '^sanswitch: pid=' "$TMP/fe.err" | grep -Ev "$STATS_LINE_RE"; then
	fail "forkexec: malformed stats line(s) above"
fi
while read -r p; do
	[ ! -e "$SHM/sanswitch.$p" ] || fail "forkexec: $SHM/sanswitch.$p left behind"
done <"$TMP/fe.pids"
log "fork/exec: $(wc -l <"$TMP/fe.pids") processes, one line each"

# ------------------------------------------------------------ no TCP socket, no line
# A process that never had a TCP socket prints nothing: a shell and its command substitutions
# (fork children), python3 with only a socketpair (AF_UNIX is never tracked), and $PY, which may be
# a wrapper script (a pyenv shim: shells and their children) around python3.
SYSPY=/usr/bin/python3
[ -x "$SYSPY" ] || SYSPY=$PY
rc=0
# shellcheck disable=SC2016 # the script expands its own $(...)
as_t pre 30 bash -c 'x=$(echo sub); y=$(cd / && ls | head -n 1); [ "$x" = sub ] && [ -n "$y" ]' \
	>"$TMP/q.bash.out" 2>"$TMP/q.bash.err" || rc=$?
[ "$rc" -eq 0 ] || { show "$TMP/q.bash.err"; fail "quiet: bash exited $rc"; }
for py in "$SYSPY" "$PY"; do
	rc=0
	as_t pre 30 "$py" -c 'import socket
a, b = socket.socketpair()
a.sendall(b"x")
assert b.recv(1) == b"x"' >>"$TMP/q.py.out" 2>>"$TMP/q.py.err" || rc=$?
	[ "$rc" -eq 0 ] || { show "$TMP/q.py.err"; fail "quiet: $py with a socketpair exited $rc"; }
done
bad=
for e in "$TMP/q.bash.err" "$TMP/q.py.err"; do
	grep -q '^sanswitch' "$e" && show "$e" && bad="$bad $(basename -- "$e")"
done
[ -z "$bad" ] || fail "a process without a TCP socket printed a stats line in:$bad"
# A python3 that opens a TCP socket and never uses it prints its line (of zeros); through $PY too,
# and that line is the only one.
for py in "$SYSPY" "$PY"; do
	rc=0
	as_t pre 30 "$py" -c 'import os, socket; s = socket.socket(); print(os.getpid())' \
		>"$TMP/u.out" 2>"$TMP/u.err" || rc=$?
	[ "$rc" -eq 0 ] || { show "$TMP/u.err"; fail "unused socket: $py exited $rc"; }
	l=$(pid_line "$TMP/u.err" "$(cat "$TMP/u.out")") || exit 1
	[ "$(field "$l" connects)" -eq 0 ] && [ "$(field "$l" fallback)" -eq 0 ] ||
		fail "unused socket: $py counted something: $l"
	n=$(grep -c '^sanswitch' "$TMP/u.err")
	[ "$n" -eq 1 ] || { show "$TMP/u.err"; fail "unused socket: $n stats lines from $py, expected 1"; }
done
log "no TCP socket: no line (bash, socketpair); an unused TCP socket: one line"

# ------------------------------------------------------------ exec: an image's counts appear once
# stats_exec.py counts one connection to itself (connects=1 accepts=1, 10 bytes sent and 10
# received), then execs, same pid. The counts appear once: in the next image's line when it runs
# the library (it took them over: /bin/sh, which opens no socket; this script again, which adds a
# connection of its own), else in the image's own line printed at the exec (the next program runs
# without LD_PRELOAD; or that exec fails: the process goes on, and prints at exit only what it
# counted since, if anything).
# exec_case NAME CASE CONNS LINES — the pid printed LINES lines, no other process any, and they add
# up to CONNS such connections; its file is gone.
exec_case() {
	local name=$1 conns=$3 lines=$4 rc=0 p l n c=0 a=0 tx=0 rx=0
	as_t pre 30 "$SYSPY" "$E2E_DIR/stats_exec.py" "$2" >"$TMP/$name.out" 2>"$TMP/$name.err" || rc=$?
	no_preload_errors "$TMP/$name.err"
	[ "$rc" -eq 0 ] || { show "$TMP/$name.out" "$TMP/$name.err"; fail "exec $name: exit $rc"; }
	p=$(head -n1 "$TMP/$name.out")
	n=$(grep -c '^sanswitch: pid=' "$TMP/$name.err")
	[ "$n" -eq "$lines" ] && [ "$(grep -c "^sanswitch: pid=$p " "$TMP/$name.err")" -eq "$lines" ] ||
		{ show "$TMP/$name.err"; fail "exec $name: $n stats lines, expected $lines, for pid $p"; }
	while read -r l; do
		[[ $l =~ $STATS_LINE_RE ]] || fail "exec $name: malformed stats line: $l"
		c=$((c + $(field "$l" connects))) a=$((a + $(field "$l" accepts)))
		tx=$((tx + $(moved "$l" tx))) rx=$((rx + $(moved "$l" rx)))
	done < <(grep '^sanswitch: pid=' "$TMP/$name.err")
	[ "$c" -eq "$conns" ] && [ "$a" -eq "$conns" ] && [ "$tx" -eq $((10 * conns)) ] &&
		[ "$rx" -eq $((10 * conns)) ] || {
		show "$TMP/$name.err"
		fail "exec $name: connects=$c accepts=$a tx=$tx rx=$rx, expected $conns connection(s) of 10 bytes each way"
	}
	[ ! -e "$SHM/sanswitch.$p" ] || fail "exec $name: $SHM/sanswitch.$p left behind"
	log "exec $name: $lines line(s) for pid $p, $conns connection(s) counted once"
}
exec_case ex.sh sh 1 1
exec_case ex.again again 2 1
exec_case ex.clean clean 1 1
exec_case ex.failed failed 1 1
exec_case ex.failed2 failed+ 2 2

# ------------------------------------------------------------ SANSWITCH_STATS=log: the line in the log file
# With SANSWITCH_LOG_FILE (one file per process: %p) the line goes there, as do the debug lines, and
# stderr gets nothing from the library; the counts are the same as on stderr (vswitched).
mkdir "$TMP/lg"
SANSWITCH_STATS=log SANSWITCH_LOG=debug SANSWITCH_LOG_FILE=$TMP/lg/s.%p vpair lg pre pre 4 -- -b 1M -s 11
for e in "$TMP/lg.cli.err" "$TMP/lg.srv.err"; do
	! grep -q sanswitch "$e" || { show "$e"; fail "SANSWITCH_LOG_FILE set, but the library wrote to $(basename -- "$e")"; }
done
n=$(find "$TMP/lg" -name 's.*' | wc -l)
[ "$n" -eq 2 ] || { ls -l "$TMP/lg"; fail "SANSWITCH_STATS=log: $n log files, expected 2 (client, server)"; }
[ -f "$TMP/lg/s.$SERVER_PID" ] || { ls -l "$TMP/lg"; fail "no log file s.$SERVER_PID for the server"; }
[ "$(stat -c %a "$TMP/lg/s.$SERVER_PID")" = 600 ] || fail "log file mode $(stat -c %a "$TMP/lg/s.$SERVER_PID"), expected 600"
cp "$TMP/lg/s.$SERVER_PID" "$TMP/lg.srv.err"
cat "$(find "$TMP/lg" -name 's.*' ! -name "s.$SERVER_PID")" >"$TMP/lg.cli.err"
for e in "$TMP/lg.cli.err" "$TMP/lg.srv.err"; do
	p=$(field "$(stats_line "$e")" pid) || exit 1
	# every library line in a process's file is that process's (its pid in the name and prefix)
	if grep -v "^sanswitch: pid=$p " "$e" | grep -v "^sanswitch\[$p\]: debug: "; then
		fail "SANSWITCH_STATS=log: lines of another process, or not debug lines, in pid $p's log (above)"
	fi
	grep -q "^sanswitch\[$p\]: debug: fd [0-9]*: " "$e" || { show "$e"; fail "no debug lines in pid $p's log"; }
done
vswitched lg 4
log "SANSWITCH_STATS=log: the line and the debug lines in each process's log file, none on stderr"

# ------------------------------------------------------------ SANSWITCH_STATS=0: no file, no line
export SANSWITCH_STATS=0
start_server off.srv pre --conns-total 1 -t 30
[ ! -e "$SHM/sanswitch.$SERVER_PID" ] || fail "SANSWITCH_STATS=0 still made $SHM/sanswitch.$SERVER_PID"
as_t pre 30 "$SANVERIFY" client -p "$SERVER_PORT" -b 1M >"$TMP/off.cli.out" 2>"$TMP/off.cli.err" ||
	fail "SANSWITCH_STATS=0: client failed"
wait_pid "$SERVER_PID" 20 || fail "SANSWITCH_STATS=0: server failed"
! grep -q '^sanswitch' "$TMP/off.cli.err" "$TMP/off.srv.err" || fail "SANSWITCH_STATS=0 printed a stats line"
export SANSWITCH_STATS=1

# ------------------------------------------------------------ SANSWITCH_DISABLE=1: inert, silent
# Even with debug logging, bad values and stats asked for: not one byte on stderr, no file.
export SANSWITCH_DISABLE=1 SANSWITCH_LOG=debug SANSWITCH_BULK=bogus
vpair dis pre pre 4 -- -b 1M -s 3
for e in "$TMP/dis.cli.err" "$TMP/dis.srv.err"; do
	! grep -q sanswitch "$e" || { show "$e"; fail "SANSWITCH_DISABLE=1 but the library wrote to $(basename -- "$e")"; }
done
start_server dis2.srv pre --conns-total 1 -t 30
[ ! -e "$SHM/sanswitch.$SERVER_PID" ] || fail "SANSWITCH_DISABLE=1 still made a stats file"
as_t pre 30 "$SANVERIFY" client -p "$SERVER_PORT" -b 64K >/dev/null 2>&1 || fail "disabled: client failed"
wait_pid "$SERVER_PID" 20 || fail "disabled: server failed"
# The positive control: the same run without DISABLE does track (debug lines) and count.
unset SANSWITCH_DISABLE SANSWITCH_BULK
vpair dbg pre pre 1 -- -b 64K
grep -Eq '^sanswitch\[[0-9]+\]: debug: fd [0-9]+: (tracked tcp socket|passive)' "$TMP/dbg.srv.err" ||
	{ show "$TMP/dbg.srv.err"; fail "positive control: no tracking debug lines without DISABLE"; }
unset SANSWITCH_LOG
log "SANSWITCH_DISABLE=1: silent and untracked; without it: tracked"

# ------------------------------------------------------------ bad values: one warning each, still works
export SANSWITCH_BULK=bogus SANSWITCH_INLINE_MAX=9M SANSWITCH_SPIN_US=-3 SANSWITCH_PROVIDER=ib \
	SANSWITCH_FAULT=reg_fail,nope SANSWITCH_DISABLE=yes SANSWITCH_STATS=2
vpair bad pre pre 2 -- -b 2M -s 5
for e in "$TMP/bad.cli.err" "$TMP/bad.srv.err"; do
	for want in 'SANSWITCH_BULK=bogus not understood (accepted: auto|read|grant|inline), using auto' \
		'SANSWITCH_INLINE_MAX=9M out of range (accepted: 0..1M bytes' \
		'SANSWITCH_SPIN_US=-3 not understood (accepted: 0..1000000 microseconds), using 50' \
		'SANSWITCH_PROVIDER=ib not understood (accepted: auto|shm|verbs|none), using auto' \
		'SANSWITCH_FAULT=reg_fail,nope not understood (accepted: a comma list of reg_fail,' \
		'SANSWITCH_DISABLE=yes not understood (accepted: 0|1), using 0' \
		'SANSWITCH_STATS=2 not understood (accepted: 0|1|log)'; do
		n=$(grep -cF -- "$want" "$e")
		[ "$n" -eq 1 ] || { show "$e"; fail "$(basename -- "$e"): '$want' seen $n times, expected once"; }
	done
	# Nothing but those seven warnings (and no stats line: SANSWITCH_STATS fell back to no line).
	n=$(grep -c sanswitch "$e")
	[ "$n" -eq 7 ] || { show "$e"; fail "$(basename -- "$e"): $n lines from the library, expected 7"; }
done
log "bad values: 7 warnings per process, bytes verified ($VBYTES)"
