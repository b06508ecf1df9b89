#!/bin/bash
# t_sanstat — sanstat(8) while iperf3 runs: both ends preloaded, the data connection is seen on shm,
# switched, its SAN bytes growing between two looks and never above what iperf3 says it moved; one
# end preloaded, it is seen on tcp, fallback no_peer, its TCP bytes (the kernel's) growing; --json
# parses with jq; -p, --port and --state filter; another user sees none of it; a forking server's
# child shows the connection it serves, its parent not; a connection a fork shared is in each
# process's own file, the child's bytes only in the child's; a broken file is skipped with a note; bad
# options and an unknown pid are errors.
# timeout: 120
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build
need_cmd iperf3
need_cmd jq

SANSTAT=$BUILD/sanstat
[ -x "$SANSTAT" ] || fail "no $SANSTAT (make builds it)"

# look NAME ARGS... — sanstat --json ARGS into $TMP/NAME.json; it must exit 0 and jq must parse it.
look() {
	local name=$1 rc=0
	shift
	"$SANSTAT" --json "$@" >"$TMP/$name.json" 2>"$TMP/$name.err" || rc=$?
	[ "$rc" -eq 0 ] || { show "$TMP/$name.json" "$TMP/$name.err"; fail "sanstat --json $*: exit $rc"; }
	jq -e . "$TMP/$name.json" >/dev/null || { show "$TMP/$name.json"; fail "sanstat --json $*: not JSON"; }
}

# conn FILE PID FILTER — the connections of PID in FILE that pass the jq FILTER, one per line
# (compact JSON).
conn() {
	jq -c --argjson pid "$2" ".processes[] | select(.pid == \$pid) | .connections[] | select($3)" "$1"
}

# iperf_bytes FILE — end.sum_sent.bytes of an iperf3 -J report.
iperf_bytes() {
	jq -e '.end.sum_sent.bytes' "$1" || { show "$1"; fail "no end.sum_sent.bytes in $1"; }
}

# wait_conn NAME PID FILTER — look (at most 10 s) until PID has exactly one connection passing
# FILTER; leaves it in CONN. (Proves PID runs the library: only then has it a file.)
CONN=
wait_conn() {
	local name=$1 pid=$2 filter=$3 i n
	for ((i = 0; i < 100; i++)); do
		# (exit 1 until the process has made its file)
		"$SANSTAT" --json -p "$pid" >"$TMP/$name.json" 2>"$TMP/$name.err"
		jq -e . "$TMP/$name.json" >/dev/null || { show "$TMP/$name.json"; fail "$name: not JSON"; }
		n=$(conn "$TMP/$name.json" "$pid" "$filter" | wc -l)
		if [ "$n" -eq 1 ]; then
			CONN=$(conn "$TMP/$name.json" "$pid" "$filter")
			return 0
		fi
		sleep 0.1
	done
	show "$TMP/$name.json" "$TMP/$name.err"
	fail "$name: pid $pid: $n connections with $filter (want 1)"
}

jn() { jq -r "$2" <<<"$1"; }

# ------------------------------------------------------------ both ends preloaded: shm
start_listener sw.srv pre 4 iperf3 -s -1 -J -B 127.0.0.1 -p '{PORT}'
SRV=$SERVER_PID
PORT=$SERVER_PORT
spawn sw.cli pre iperf3 -c 127.0.0.1 -p "$PORT" -t 8 -J
CLI=$SPAWN_PID
# iperf3's data connection (its control connection moves a few hundred bytes only)
data='.peer.port == '"$PORT"' and .san_tx_bytes > 1000000'
wait_conn sw1 "$CLI" "$data"
c1=$CONN
log "client's data connection, first look: $c1"
[ "$(jn "$c1" .state)" = switched ] || fail "client's data connection is not switched: $c1"
[ "$(jn "$c1" .provider)" = shm ] || fail "client's data connection is not on shm: $c1"
[ "$(jn "$c1" .role)" = client ] || fail "client's data connection has role $(jn "$c1" .role)"
[ "$(jn "$c1" .fallback_reason)" = null ] || fail "a switched connection with a reason: $c1"
[ "$(jn "$c1" .local.addr)" = 127.0.0.1 ] && [ "$(jn "$c1" .peer.addr)" = 127.0.0.1 ] ||
	fail "client's data connection addresses: $c1"
sleep 1
look sw2 -p "$CLI"
# the same connection (fd and generation), further along
c2=$(conn "$TMP/sw2.json" "$CLI" ".fd == $(jn "$c1" .fd) and .generation == $(jn "$c1" .generation)")
[ -n "$c2" ] || { show "$TMP/sw2.json"; fail "the data connection is gone at the second look"; }
log "second look: $c2"
tx1=$(jn "$c1" .san_tx_bytes)
tx2=$(jn "$c2" .san_tx_bytes)
[ "$tx2" -gt "$tx1" ] || fail "client's SAN bytes did not grow: $tx1 then $tx2"
# the server's side of it: received over the SAN, sent nothing
look sw3 -p "$SRV"
s=$(conn "$TMP/sw3.json" "$SRV" ".local.port == $PORT and .peer.port == $(jn "$c1" .local.port)")
[ -n "$s" ] || { show "$TMP/sw3.json"; fail "the server shows no connection from port $(jn "$c1" .local.port)"; }
log "server's side: $s"
[ "$(jn "$s" .state)/$(jn "$s" .provider)/$(jn "$s" .role)" = switched/shm/server ] ||
	fail "server's side is not switched/shm/server: $s"
[ "$(jn "$s" .san_rx_bytes)" -gt "$tx1" ] || fail "server received $(jn "$s" .san_rx_bytes) <= $tx1"
[ "$(jn "$s" .san_tx_bytes)" -eq 0 ] || fail "server sent over the data connection: $s"
# -p: only that process
[ "$(jq '[.processes[].pid] | unique' -c "$TMP/sw3.json")" = "[$SRV]" ] ||
	{ show "$TMP/sw3.json"; fail "-p $SRV shows other processes"; }
# --port: both processes' connections of that port, none of another
look swp --port "$PORT"
[ "$(jq -c '[.processes[].pid] | sort' "$TMP/swp.json")" = "$(printf '%s\n' "$SRV" "$CLI" | sort -n | jq -sc .)" ] ||
	{ show "$TMP/swp.json"; fail "--port $PORT does not show exactly the server and the client"; }
[ "$(jq "[.processes[].connections[] | select(.local.port != $PORT and .peer.port != $PORT)] | length" "$TMP/swp.json")" -eq 0 ] ||
	{ show "$TMP/swp.json"; fail "--port $PORT shows connections of other ports"; }
look swf -p "$CLI" --state fallback
[ "$(jq '[.processes[].connections[]] | length' "$TMP/swf.json")" -eq 0 ] ||
	{ show "$TMP/swf.json"; fail "--state fallback shows switched connections"; }
# text: one line for it, with the numbers
"$SANSTAT" -p "$CLI" >"$TMP/sw.txt" 2>&1 || { show "$TMP/sw.txt"; fail "sanstat -p $CLI: exit $?"; }
grep -E "^switched +shm +client +127\.0\.0\.1:[0-9]+ +127\.0\.0\.1:$PORT +[0-9]+ +$CLI/iperf3 +[0-9]+" "$TMP/sw.txt" >/dev/null ||
	{ show "$TMP/sw.txt"; fail "no text line of the switched data connection"; }
# another user sees none of them (the files are mode 0600), and -p says why
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null &&
	setpriv --reuid=65534 --regid=65534 --clear-groups true 2>/dev/null; then
	rc=0
	setpriv --reuid=65534 --regid=65534 --clear-groups "$SANSTAT" -p "$SRV" >"$TMP/other.txt" 2>&1 || rc=$?
	[ "$rc" -eq 1 ] && grep -q "sanswitch.$SRV: Permission denied (another user's process" "$TMP/other.txt" ||
		{ show "$TMP/other.txt"; fail "another user's sanstat -p $SRV: exit $rc"; }
	rc=0
	setpriv --reuid=65534 --regid=65534 --clear-groups "$SANSTAT" --json --port "$PORT" >"$TMP/other.json" 2>&1 || rc=$?
	[ "$rc" -eq 0 ] && jq -e '.processes == []' "$TMP/other.json" >/dev/null ||
		{ show "$TMP/other.json"; fail "another user's sanstat shows root's processes (exit $rc)"; }
else
	log "note: not root (or no setpriv): another user's view not checked"
fi
# -s: the counters
"$SANSTAT" -s -p "$SRV" >"$TMP/sws.txt" 2>&1 || { show "$TMP/sws.txt"; fail "sanstat -s: exit $?"; }
grep -Eq "^$SRV/iperf3: 2 connections open" "$TMP/sws.txt" && grep -Eq " switched=2 .* accepts=2 " "$TMP/sws.txt" ||
	{ show "$TMP/sws.txt"; fail "sanstat -s: not the server's 2 switched connections"; }
wait_pid "$CLI" 30 || { show "$TMP/sw.cli.err"; fail "iperf3 client failed"; }
wait_pid "$SRV" 30 || { show "$TMP/sw.srv.err"; fail "iperf3 server failed"; }
sent=$(iperf_bytes "$TMP/sw.cli.out") || exit 1
[ "$tx2" -le "$sent" ] || fail "sanstat said $tx2 bytes sent, iperf3 sent $sent in all"
log "iperf3 sent $sent bytes in all; sanstat saw $tx1 then $tx2"
# gone with their processes
look swgone --port "$PORT"
[ "$(jq '.processes | length' "$TMP/swgone.json")" -eq 0 ] ||
	{ show "$TMP/swgone.json"; fail "connections shown after their processes exited"; }

# ------------------------------------------------------------ only the client preloaded: tcp
start_listener fb.srv none 4 iperf3 -s -1 -J -B 127.0.0.1 -p '{PORT}'
SRV=$SERVER_PID
PORT=$SERVER_PORT
spawn fb.cli pre iperf3 -c 127.0.0.1 -p "$PORT" -t 8 -J
CLI=$SPAWN_PID
data='.peer.port == '"$PORT"' and .tcp_tx_bytes > 1000000'
wait_conn fb1 "$CLI" "$data"
c1=$CONN
log "fallback data connection, first look: $c1"
[ "$(jn "$c1" .state)/$(jn "$c1" .provider)" = fallback/tcp ] || fail "not fallback/tcp: $c1"
[ "$(jn "$c1" .fallback_reason)" = no_peer ] || fail "fallback reason is not no_peer: $c1"
[ "$(jn "$c1" .tcp_bytes_from)" = kernel ] || fail "TCP bytes not from the kernel: $c1"
[ "$(jn "$c1" .san_tx_bytes)" -eq 0 ] && [ "$(jn "$c1" .san_rx_bytes)" -eq 0 ] ||
	fail "SAN bytes on a connection that stayed TCP: $c1"
sleep 1
look fb2 -p "$CLI"
c2=$(conn "$TMP/fb2.json" "$CLI" ".fd == $(jn "$c1" .fd) and .generation == $(jn "$c1" .generation)")
[ -n "$c2" ] || { show "$TMP/fb2.json"; fail "the fallback connection is gone at the second look"; }
tx1=$(jn "$c1" .tcp_tx_bytes)
tx2=$(jn "$c2" .tcp_tx_bytes)
[ "$tx2" -gt "$tx1" ] || fail "the fallback connection's TCP bytes did not grow: $tx1 then $tx2"
"$SANSTAT" -p "$CLI" --state fallback >"$TMP/fb.txt" 2>&1 || { show "$TMP/fb.txt"; fail "sanstat: exit $?"; }
grep -Eq "^fallback +tcp +client .*127\.0\.0\.1:$PORT .* no_peer$" "$TMP/fb.txt" ||
	{ show "$TMP/fb.txt"; fail "no text line of the fallback connection with its reason"; }
# the plain server has no file: -p of it is an error that says so
rc=0
"$SANSTAT" -p "$SRV" >"$TMP/fbsrv.txt" 2>&1 || rc=$?
[ "$rc" -eq 1 ] && grep -q "no stats file for pid $SRV" "$TMP/fbsrv.txt" ||
	{ show "$TMP/fbsrv.txt"; fail "sanstat -p of an unpreloaded process: exit $rc"; }
wait_pid "$CLI" 30 || { show "$TMP/fb.cli.err"; fail "iperf3 client failed"; }
wait_pid "$SRV" 30 || { show "$TMP/fb.srv.err"; fail "iperf3 server failed"; }
sent=$(iperf_bytes "$TMP/fb.cli.out") || exit 1
[ "$tx2" -le "$sent" ] || fail "sanstat said $tx2 bytes sent over TCP, iperf3 sent $sent in all"

# ------------------------------------------------------------ a forking server's child
# The child serves the connection it inherited; the parent closed its copy. The child's own file
# shows it (from the child's first data call), the parent's shows nothing.
start_pf fk.srv pre "$PY" "$E2E_DIR/sanstat_fork.py" server '{PORTFILE}' "$TMP/fk.pid"
SRV=$SERVER_PID
spawn fk.cli pre "$PY" "$E2E_DIR/sanstat_fork.py" client "$SERVER_PORT" "$TMP/fk.pid" 4
CLI=$SPAWN_PID
for ((i = 0; i < 100; i++)); do
	[ -s "$TMP/fk.pid" ] && break
	sleep 0.05
done
CHILD=$(cat "$TMP/fk.pid" 2>/dev/null)
[ -n "$CHILD" ] || fail "the forking server's child did not start"
moved='(.san_rx_bytes + .tcp_rx_bytes)'
wait_conn fk1 "$CHILD" ".local.port == $SERVER_PORT and .role == \"server\" and $moved > 0"
c1=$CONN
log "the child's connection: $c1"
sleep 1
look fk2 -p "$CHILD"
c2=$(conn "$TMP/fk2.json" "$CHILD" ".fd == $(jn "$c1" .fd) and .generation == $(jn "$c1" .generation)")
[ -n "$c2" ] || { show "$TMP/fk2.json"; fail "the child's connection is gone at the second look"; }
[ "$(jn "$c2" "$moved")" -gt "$(jn "$c1" "$moved")" ] ||
	fail "the child's connection did not move more bytes: $c1 then $c2"
look fkp --port "$SERVER_PORT"
[ "$(jq -c "[.processes[] | select(.pid == $SRV) | .connections[]] | length" "$TMP/fkp.json")" -eq 0 ] ||
	{ show "$TMP/fkp.json"; fail "the parent still shows the connection it closed"; }
[ "$(jq -c "[.processes[] | select(.pid == $CHILD) | .connections[]] | length" "$TMP/fkp.json")" -eq 1 ] ||
	{ show "$TMP/fkp.json"; fail "--port does not show the child's connection once"; }
wait_pid "$CLI" 30 || { show "$TMP/fk.cli.err"; fail "the forking server's client failed"; }
wait_pid "$SRV" 30 || { show "$TMP/fk.srv.err"; fail "the forking server failed"; }

# ------------------------------------------------------------ a connection a fork shared
# Switched before the fork, then shared (engine.md §7.1): the child serves it, the parent keeps its
# copy open and moves nothing. Each process's slot is in its own file: the child's shows it
# switched and growing, the parent's stays as it was (a child writing through the parent's slot
# pointer would grow it).
start_pf sh.srv pre "$PY" "$E2E_DIR/sanstat_fork.py" share-server '{PORTFILE}' "$TMP/sh.pid"
SRV=$SERVER_PID
spawn sh.cli pre "$PY" "$E2E_DIR/sanstat_fork.py" share-client "$SERVER_PORT" "$TMP/sh.pid" 4
CLI=$SPAWN_PID
for ((i = 0; i < 100; i++)); do
	[ -s "$TMP/sh.pid" ] && break
	sleep 0.05
done
CHILD=$(cat "$TMP/sh.pid" 2>/dev/null)
[ -n "$CHILD" ] || fail "the sharing server's child did not start"
wait_conn sh1 "$CHILD" ".local.port == $SERVER_PORT and .role == \"server\" and .san_rx_bytes > 0"
c1=$CONN
log "the child's shared connection: $c1"
[ "$(jn "$c1" .state)/$(jn "$c1" .provider)" = switched/shm ] || fail "the child's shared connection: $c1"
wait_conn shp1 "$SRV" ".local.port == $SERVER_PORT"
p1=$CONN
log "the parent's: $p1"
[ "$(jn "$p1" .state)" = switched ] || fail "the parent's shared connection is not switched: $p1"
sleep 1
look sh2 -p "$CHILD"
c2=$(conn "$TMP/sh2.json" "$CHILD" ".fd == $(jn "$c1" .fd) and .generation == $(jn "$c1" .generation)")
[ -n "$c2" ] || { show "$TMP/sh2.json"; fail "the child's shared connection is gone at the second look"; }
[ "$(jn "$c2" .san_rx_bytes)" -gt "$(jn "$c1" .san_rx_bytes)" ] ||
	fail "the child's shared connection did not receive more: $c1 then $c2"
look shp2 -p "$SRV"
p2=$(conn "$TMP/shp2.json" "$SRV" ".fd == $(jn "$p1" .fd) and .generation == $(jn "$p1" .generation)")
[ -n "$p2" ] || { show "$TMP/shp2.json"; fail "the parent's shared connection is gone at the second look"; }
bytes='[.san_tx_bytes, .san_rx_bytes, .tcp_tx_bytes, .tcp_rx_bytes]'
[ "$(jn "$p2" "$bytes | tostring")" = "$(jn "$p1" "$bytes | tostring")" ] ||
	fail "the parent's slot counted the child's bytes: $p1 then $p2"
wait_pid "$CLI" 30 || { show "$TMP/sh.cli.err"; fail "the sharing server's client failed"; }
wait_pid "$SRV" 30 || { show "$TMP/sh.srv.err"; fail "the sharing server failed"; }

# ------------------------------------------------------------ broken files, bad options
mkdir "$TMP/shm"
head -c 4096 /dev/urandom >"$TMP/shm/sanswitch.4242"
printf 'SNST' >"$TMP/shm/sanswitch.4243"
: >"$TMP/shm/sanswitch.4244"
mkfifo "$TMP/shm/sanswitch.4245"
cp "$TMP/shm/sanswitch.4242" "$TMP/shm/sanswitch.notapid"
rc=0
tmo 10 "$SANSTAT" -d "$TMP/shm" >"$TMP/broken.out" 2>"$TMP/broken.err" || rc=$?
[ "$rc" -eq 0 ] || { show "$TMP/broken.out" "$TMP/broken.err"; fail "sanstat on broken files: exit $rc"; }
for p in 4242 4243 4244 4245; do
	grep -q "sanswitch.$p: skipped: not a stats file" "$TMP/broken.err" ||
		{ show "$TMP/broken.err"; fail "no note for the broken file sanswitch.$p"; }
done
! grep -q notapid "$TMP/broken.err" || fail "a file not named sanswitch.<pid> was read"
[ "$(grep -c . "$TMP/broken.out")" -eq 1 ] || { show "$TMP/broken.out"; fail "broken files showed connections"; }
tmo 10 "$SANSTAT" -d "$TMP/shm" --json 2>/dev/null | jq -e '.processes == []' >/dev/null ||
	fail "broken files: --json is not an empty process list"
for bad in "--state nosuch" "-p 0" "-p x" "--port 70000" "-i 0" "-c 3" "--nosuch" "extra"; do
	rc=0
	# shellcheck disable=SC2086
	"$SANSTAT" $bad >"$TMP/bad.out" 2>&1 || rc=$?
	[ "$rc" -eq 2 ] || { show "$TMP/bad.out"; fail "sanstat $bad: exit $rc, want 2"; }
	grep -q . "$TMP/bad.out" || fail "sanstat $bad: no message"
done
rc=0
"$SANSTAT" -d "$TMP/nosuch" >"$TMP/nodir.out" 2>&1 || rc=$?
[ "$rc" -eq 1 ] && grep -q "cannot read the directory $TMP/nosuch" "$TMP/nodir.out" ||
	{ show "$TMP/nodir.out"; fail "sanstat -d of a missing directory: exit $rc"; }
# -i/-c: that many looks
"$SANSTAT" -d "$TMP/shm" -j -i 0.1 -c 3 2>/dev/null >"$TMP/rep.json"
[ "$(jq -s length "$TMP/rep.json")" -eq 3 ] || { show "$TMP/rep.json"; fail "-i 0.1 -c 3: not 3 looks"; }
log "ok"
