#!/bin/bash
# t_spin_bells — a ping-pong whose waits' spins catch the replies rings no doorbells (issue 17
# item 1: the kernel is entered only to sleep). sockperf's client waits in a blocking recvfrom,
# its server in epoll_wait; both ends preloaded, on shm. Until 2026-12-02 the first wait that
# slept left the reader's flag up for good (each read that emptied the ring armed it again), so
# every later message cost the writer a doorbell (a sendto) and the reader its removal (a
# recvmmsg): about one doorbell per message at each end. Counted from both ends' stats lines
# (shm_bells), against the context switches of the end that was rung (tests/e2e/ctxsw.py): a
# doorbell the flag asked for can only have been for a wait that slept, and each sleep is a
# context switch. Now about 1 doorbell in 200 messages on a quiet host; on a crowded one the
# spins stop and every wait sleeps (then the check says little, but holds). Three runs.
# timeout: 120
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build
need_cmd sockperf
export SANSWITCH_STATS=1

for run in 1 2 3; do
	name=pp$run
	start_listener "$name.srv" pre 4 "$PY" "$E2E_DIR/ctxsw.py" "$TMP/$name.srv.cs" \
		sockperf sr --tcp -i 127.0.0.1 -p '{PORT}'
	rc=0
	as_t pre 60 "$PY" "$E2E_DIR/ctxsw.py" "$TMP/$name.cli.cs" sockperf pp --tcp -i 127.0.0.1 -p "$SERVER_PORT" -t 2 -m 64 \
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
	cb=$(field "$cli" shm_bells) || exit 1
	sb=$(field "$srv" shm_bells) || exit 1
	read -r ccs <"$TMP/$name.cli.cs" || fail "$name: no context switch count of the client"
	read -r scs <"$TMP/$name.srv.cs" || fail "$name: no context switch count of the server"
	log "$name: $msgs messages each way; doorbells rung by the client $cb, by the server $sb;" \
		"context switches of the client $ccs, of the server $scs"
	[ "$sb" -le $((ccs + 10)) ] ||
		fail "$name: the server rang $sb doorbells, the client switched only $ccs times (rung while it spun)"
	[ "$cb" -le $((scs + 10)) ] ||
		fail "$name: the client rang $cb doorbells, the server switched only $scs times (rung while it spun)"
done
log "doorbells only for waits that slept"
