#!/bin/bash
# t_sockperf — sockperf TCP ping-pong (64 B) and throughput under the preload: server, client, both.
# timeout: 120
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build
need_cmd sockperf

# run NAME SERVER_MODE CLIENT_MODE pp|tp SECONDS [SERVER_ARGS...] — one sockperf run. The server
# must still be alive at the end; ping-pong must report a latency and no dropped, duplicated or
# reordered message (sockperf checks its sequence numbers); throughput a message count > 0.
run() {
	local name=$1 smode=$2 cmode=$3 kind=$4 secs=$5 rc=0 out v
	shift 5
	# (a ping-pong at sockperf's default rate, "max", aborts past about 700k messages a
	# second, which the switch reaches: scripts/benchlib/tcp.sh, bench_sockperf)
	local -a rate=()
	[ "$kind" = pp ] && rate=(--mps=2000000)
	start_listener "$name.srv" "$smode" 4 sockperf sr --tcp -i 127.0.0.1 -p '{PORT}' "$@"
	as_t "$cmode" $((secs + 30)) sockperf "$kind" --tcp -i 127.0.0.1 -p "$SERVER_PORT" -t "$secs" \
		-m 64 "${rate[@]}" >"$TMP/$name.cli.out" 2>"$TMP/$name.cli.err" || rc=$?
	out=$TMP/$name.cli.txt
	sed 's/\x1b\[[0-9;]*m//g' "$TMP/$name.cli.out" "$TMP/$name.cli.err" >"$out"
	no_preload_errors "$out" "$TMP/$name.srv.err"
	if [ "$rc" -ne 0 ]; then
		show "$out" "$TMP/$name.srv.out" "$TMP/$name.srv.err"
		fail "$name: sockperf $kind exited $rc"
	fi
	if ! alive "$SERVER_PID"; then
		show "$out" "$TMP/$name.srv.out" "$TMP/$name.srv.err"
		fail "$name: sockperf server died"
	fi
	stop "$SERVER_PID"
	if [ "$kind" = pp ]; then
		v=$(sed -n 's/.*percentile 50\.000 = *\([0-9.]*\).*/\1/p' "$out")
		awk -v v="${v:-0}" 'BEGIN { exit !(v > 0) }' || { show "$out"; fail "$name: no p50 latency"; }
		grep -q '# dropped messages = 0; # duplicated messages = 0; # out-of-order messages = 0' "$out" ||
			{ show "$out"; fail "$name: messages dropped, duplicated or reordered"; }
		grep -Eq 'Valid Duration.*ReceivedMessages=[1-9]' "$out" ||
			{ show "$out"; fail "$name: no message received"; }
		log "$name: server=$smode client=$cmode ping-pong p50=${v}us"
	else
		v=$(sed -n 's/.*Total of \([0-9]*\) messages sent.*/\1/p' "$out")
		[ "${v:-0}" -gt 0 ] || { show "$out"; fail "$name: no messages sent"; }
		log "$name: server=$smode client=$cmode throughput msgs=$v"
	fi
}

run pp_both pre pre pp 2
run pp_server_only pre none pp 2
run pp_client_only none pre pp 2
run tp_both pre pre tp 2
run tp_server_only pre none tp 2
run tp_client_only none pre tp 2
# A nonblocking server that reads until EAGAIN.
run pp_both_srv_nonblocking pre pre pp 1 --nonblocked --recv_looping_num=-1
log "all sockperf runs ok"
