#!/bin/bash
# t_spin_bells — a ping-pong whose waits spin does not make the peer ring for every message
# (issue 17 item 1: the kernel is entered only to sleep). sockperf's client waits in a blocking
# recvfrom; its server too (sockperf sr -i/-p), or in epoll_wait or poll (a feed file, -F).
# Both ends preloaded, on shm. Until 2026-12-02 the first wait that slept left the reader's
# flag up for good: each read that emptied the ring armed it again, so every later message
# cost the writer a doorbell (a sendto) and the reader its removal (a recvmmsg), though the
# reader's spin caught the frame: 125,048 doorbells in 125,133 messages. Counted from both
# ends' stats lines:
# - a read puts the flag up again only for another thread's wait, or for a wait that does not
#   watch the ring (poll's): so the client's shm_read_arms, and a recvfrom or epoll server's,
#   must stay under 1 in 100 messages (it was one per message, on a quiet host or a crowded
#   one alike); a poll server's reads must arm again (its poll sleeps on the flag);
# - a doorbell answers a flag: each end's shm_bells at most the other end's shm_arms.
# Doorbells themselves depend on the host (a spin that runs out arms, and the peer rings):
# logged, not bounded (about 1 in 20 to 200 messages on a quiet 2-vCPU host).
# timeout: 120
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build
need_cmd sockperf
export SANSWITCH_STATS=1

for run in recvfrom1 recvfrom2 epoll poll; do
	name=pp.$run
	case $run in
	recvfrom*) start_listener "$name.srv" pre 4 sockperf sr --tcp -i 127.0.0.1 -p '{PORT}' ;;
	*)
		# (sockperf waits in epoll_wait or poll only for the connections of a feed file)
		# shellcheck disable=SC2016 # (for the sh -c)
		start_listener "$name.srv" pre 4 sh -c 'echo "T:127.0.0.1:$1" >"$2" && exec sockperf sr -f "$2" -F "$3"' \
			sh '{PORT}' "$TMP/$name.feed" "${run:0:1}"
		;;
	esac
	rc=0
	# (--mps: scripts/benchlib/tcp.sh, bench_sockperf)
	as_t pre 60 sockperf pp --tcp -i 127.0.0.1 -p "$SERVER_PORT" -t 2 -m 64 --mps=2000000 \
		>"$TMP/$name.cli.out" 2>"$TMP/$name.cli.err" || rc=$?
	out=$TMP/$name.cli.txt
	sed 's/\x1b\[[0-9;]*m//g' "$TMP/$name.cli.out" "$TMP/$name.cli.err" >"$out"
	[ "$rc" -eq 0 ] || { show "$out" "$TMP/$name.srv.err"; fail "$name: sockperf pp exited $rc"; }
	kill -INT "$SERVER_PID" # (sockperf ends on SIGINT and prints; SIGTERM kills it unprinted)
	wait_pid "$SERVER_PID" 20 || fail "$name: the sockperf server did not end on SIGINT"
	no_preload_errors "$out" "$TMP/$name.srv.err"
	grep -q '# dropped messages = 0; # duplicated messages = 0; # out-of-order messages = 0' "$out" ||
		{ show "$out"; fail "$name: messages dropped, duplicated or reordered"; }
	msgs=$(sed -n 's/.*\[Total Run\].*ReceivedMessages=\([0-9]*\).*/\1/p' "$out")
	[ "${msgs:-0}" -ge 1000 ] || { show "$out"; fail "$name: only ${msgs:-0} messages"; }
	cli=$(stats_line "$out") || exit 1
	srv=$(stats_line "$TMP/$name.srv.err") || exit 1
	[ "$(field "$cli" switched)" -eq 1 ] || fail "$name: the client did not switch: $cli"
	[ "$(field "$srv" switched)" -eq 1 ] || fail "$name: the server did not switch: $srv"
	for k in bells arms read_arms; do
		field_is "$cli" "shm_$k"
		eval "c_$k=\$FIELD"
		field_is "$srv" "shm_$k"
		eval "s_$k=\$FIELD"
	done
	# shellcheck disable=SC2154 # (set by the eval above)
	log "$name: $msgs messages each way; client: bells $c_bells, arms $c_arms, by reads" \
		"$c_read_arms; server: bells $s_bells, arms $s_arms, by reads $s_read_arms"
	[ $((100 * c_read_arms)) -lt "$msgs" ] ||
		fail "$name: the client's reads put its flag up again $c_read_arms times in $msgs messages"
	if [ "$run" = poll ]; then
		[ "$s_read_arms" -gt 0 ] ||
			fail "$name: the server's reads never put its flag up again for its poll"
	else
		[ $((100 * s_read_arms)) -lt "$msgs" ] ||
			fail "$name: the server's reads put its flag up again $s_read_arms times in $msgs messages"
	fi
	[ "$c_bells" -le "$s_arms" ] || fail "$name: the client rang $c_bells doorbells for $s_arms flags"
	[ "$s_bells" -le "$c_arms" ] || fail "$name: the server rang $s_bells doorbells for $c_arms flags"
done
log "reads leave the flags down; doorbells only for flags"
