#!/bin/bash
# t_iperf3 — iperf3 under the preload: both ends, client only, server only; reverse; parallel; IPv6.
# timeout: 120
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build
need_cmd iperf3

N=$((1024 * 1024 * 1024)) # bytes per -n run

# bytes FILE KEY — end.<KEY>.bytes from an iperf3 -J report (-1 if absent or unparsable).
bytes() {
	"$PY" -c 'import json, sys
try:
    print(json.load(open(sys.argv[1]))["end"][sys.argv[2]]["bytes"])
except Exception:
    print(-1)' "$1" "$2"
}

# run NAME FAMILY SERVER_MODE CLIENT_MODE CLIENT_ARGS... — one iperf3 test over loopback. With -n
# the sender must have sent N bytes (or one block more); the receiver at most that (iperf3 stops
# counting at the test end, even with -n, so its count may be a little short), and more than zero.
run() {
	local name=$1 fam=$2 smode=$3 cmode=$4 rc=0 srv_rc=0 reverse=0 exact=0 a addr
	local sent recv ssent srecv
	shift 4
	for a in "$@"; do
		[ "$a" = -R ] && reverse=1
		[ "$a" = -n ] && exact=1
	done
	addr=127.0.0.1
	[ "$fam" = 6 ] && addr=::1
	start_listener "$name.srv" "$smode" "$fam" iperf3 -s -1 -J -B "$addr" -p '{PORT}'
	as_t "$cmode" 60 iperf3 -c "$addr" -p "$SERVER_PORT" -J "$@" \
		>"$TMP/$name.cli.json" 2>"$TMP/$name.cli.err" || rc=$?
	wait_pid "$SERVER_PID" 20 || srv_rc=$?
	no_preload_errors "$TMP/$name.cli.err" "$TMP/$name.srv.err"
	if [ "$rc" -ne 0 ] || [ "$srv_rc" -ne 0 ]; then
		show "$TMP/$name.cli.json" "$TMP/$name.cli.err" "$TMP/$name.srv.out" "$TMP/$name.srv.err"
		fail "$name: iperf3 client exit $rc, server exit $srv_rc"
	fi
	sent=$(bytes "$TMP/$name.cli.json" sum_sent)
	recv=$(bytes "$TMP/$name.cli.json" sum_received)
	ssent=$(bytes "$TMP/$name.srv.out" sum_sent)
	srecv=$(bytes "$TMP/$name.srv.out" sum_received)
	log "$name: server=$smode client=$cmode $*: client report sent=$sent received=$recv;" \
		"server report sent=$ssent received=$srecv"
	if [ "$sent" -le 0 ] || [ "$recv" -le 0 ]; then
		fail "$name: client report shows no bytes moved"
	fi
	[ "$recv" -le "$sent" ] || fail "$name: received $recv > sent $sent"
	# iperf3 -n stops once at least N bytes went out; its send loop may write one more block
	# (128 KiB) before it notices, more likely when writes complete at once (into a ring).
	if [ "$exact" -eq 1 ]; then
		[ "$sent" -ge "$N" ] && [ "$sent" -le $((N + 131072)) ] ||
			fail "$name: sender sent $sent of $N bytes"
	fi
	# No cross-check of the two reports: the client's figures for the server's side (received,
	# or sent with -R) are the server's own, handed over at the test end, so they would agree
	# by construction. What is worth checking is that the server, preloaded or not, finished
	# and wrote a report of its own with bytes on its side of the data (received; sent with -R,
	# all N of them with -n).
	if [ "$reverse" -eq 1 ]; then
		[ "$ssent" -gt 0 ] || { show "$TMP/$name.srv.out"; fail "$name: server report sent $ssent"; }
		[ "$exact" -eq 0 ] || { [ "$ssent" -ge "$N" ] && [ "$ssent" -le $((N + 131072)) ]; } ||
			fail "$name: server sent $ssent of $N bytes"
	else
		[ "$srecv" -gt 0 ] || { show "$TMP/$name.srv.out"; fail "$name: server report received $srecv"; }
	fi
}

run both 4 pre pre -n "$N"
run client_only 4 none pre -n "$N"
run server_only 4 pre none -n "$N"
run reverse_both 4 pre pre -n "$N" -R
run reverse_client_only 4 none pre -n "$N" -R
run reverse_server_only 4 pre none -n "$N" -R
if v6_ok ipv6_both; then
	run ipv6_both 6 pre pre -n "$N"
fi
run parallel4_both 4 pre pre -t 2 -P 4
log "all iperf3 runs ok"
