#!/bin/bash
# t_app_redis — redis-server, connections switched at their second exchange
# (SANSWITCH_SWITCH_AFTER=1), against kernel TCP in the same run
# (both ends preloaded, or neither). redis_probe.py, a client on plain sockets, does: SET/GET of
# values from 1 B to 50 MB by digest, 2000 pipelined commands, MULTI/EXEC, pub/sub (200 messages
# up to 1 MB), CLIENT KILL of a connected client (what the victim reads), DEBUG SLEEP while 8
# clients wait, and BGSAVE: redis forks a child that writes the dump while 20 connections stay
# open and busy, slowed so that they overlap it, and the child ends with _exit. Then a replica
# (a second redis-server, --replicaof: a full sync, diskless, from a forked child of the
# master) must hold the master's data (DEBUG DIGEST), and redis-benchmark (-P 16, -c 50) must
# finish without errors. Every line the probe prints must be the kernel run's; preloaded, the
# probe's connections all switch, and as many in the server, and the replica's link switches;
# the master's forked children count no byte in their stats lines.
# timeout: 150
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build
need_cmd redis-server redis-cli redis-benchmark
# switched at the second exchange (the library's default until 2026-11-30; its default now, 16,
# leaves connections this short on TCP: t_switch_policy)
export SANSWITCH_SWITCH_AFTER=1
export SANSWITCH_STATS=1
CASES=(sizes pipeline multi pubsub kill sleep bgsave digest)

# redis MODE NAME ARGS... — start a redis-server as MODE on a free port (SERVER_PORT, SERVER_PID).
redis() {
	local mode=$1 name=$2
	shift 2
	mkdir -p "$TMP/$name"
	start_listener "$name" "$mode" 4 redis-server --port '{PORT}' --bind 127.0.0.1 --save '' \
		--appendonly no --dir "$TMP/$name" --enable-debug-command yes \
		--proto-max-bulk-len 100mb --repl-diskless-sync yes --repl-diskless-sync-delay 0 "$@"
}

# info PORT SECTION KEY — one field of INFO, asked by a redis-cli that is never preloaded.
info() { env -u LD_PRELOAD redis-cli -p "$1" info "$2" | tr -d '\r' | sed -n "s/^$3://p"; }

for mode in none pre; do
	redis "$mode" "srv.$mode"
	mport=$SERVER_PORT mpid=$SERVER_PID
	rc=0
	as_t "$mode" 90 "$PY" "$E2E_DIR/redis_probe.py" "$mport" "${CASES[@]}" \
		>"$TMP/probe.$mode.out" 2>"$TMP/probe.$mode.err" || rc=$?
	[ "$rc" -eq 0 ] || { show "$TMP/probe.$mode.out" "$TMP/probe.$mode.err" "$TMP/srv.$mode.out"; fail "$mode: the probe exited $rc"; }
	# a replica: the master forks a child that streams the data set to it
	redis "$mode" "rep.$mode" --replicaof 127.0.0.1 "$mport"
	rport=$SERVER_PORT rpid=$SERVER_PID
	as_t "$mode" 60 redis-benchmark -p "$mport" -P 16 -c 50 -n 10000 -q -t set,get,incr,lpush,mset \
		>"$TMP/bench.$mode.out" 2>"$TMP/bench.$mode.err" || { show "$TMP/bench.$mode.out" "$TMP/bench.$mode.err"; fail "$mode: redis-benchmark failed"; }
	if tr '\r' '\n' <"$TMP/bench.$mode.out" | grep -qi 'error'; then
		show "$TMP/bench.$mode.out"
		fail "$mode: redis-benchmark reported errors"
	fi
	[ "$(tr '\r' '\n' <"$TMP/bench.$mode.out" | grep -c 'requests per second')" -eq 5 ] ||
		{ show "$TMP/bench.$mode.out"; fail "$mode: redis-benchmark did not finish its 5 tests"; }
	end=$(($(date +%s) + 30))
	until [ "$(info "$rport" replication master_link_status)" = up ] &&
		[ "$(info "$mport" replication master_repl_offset)" = "$(info "$rport" replication slave_repl_offset)" ]; do
		[ "$(date +%s)" -lt "$end" ] || { show "$TMP/rep.$mode.out"; fail "$mode: the replica did not catch up in 30 s"; }
		sleep 0.2
	done
	want=$(env -u LD_PRELOAD redis-cli -p "$mport" debug digest)
	got=$(env -u LD_PRELOAD redis-cli -p "$rport" debug digest)
	[ -n "$want" ] && [ "$want" = "$got" ] || fail "$mode: the replica's digest $got, the master's $want"
	log "$mode: replica in step with the master (digest $got, $(env -u LD_PRELOAD redis-cli -p "$rport" dbsize) keys)"
	stop "$rpid"
	stop "$mpid" # redis exits on SIGTERM: every process prints its stats line
done

same_as_tcp "$TMP/probe.none.out" "$TMP/probe.pre.out" "the probe"
grep -q 'sizes 50000000 set=OK get_same=True' "$TMP/probe.none.out" || { show "$TMP/probe.none.out"; fail "the kernel run itself went wrong"; }
grep -q "bgsave \['rdb_last_bgsave_status:ok'\] lastsave_changed=True.*: True" "$TMP/probe.pre.out" ||
	{ show "$TMP/probe.pre.out"; fail "BGSAVE with open connections did not end well"; }
cl=$(probe_line "$TMP/probe.pre.out" "$TMP/probe.pre.err") || exit 1
conns=$(field "$cl" connects) || exit 1
# every probe connection lives past its first exchange: all switch
[ "$(field "$cl" switched)" -eq "$conns" ] && [ "$conns" -ge 30 ] ||
	fail "the probe's $conns connections did not all switch: $cl"
sl=$(pid_line "$TMP/srv.pre.err" "$mpid") || exit 1
[ "$(field "$sl" switched)" -ge "$conns" ] || fail "the server switched fewer than the probe's $conns: $sl"
# redis's forked children (BGSAVE's, the replica's sync) move no byte of the connections they
# share: their lines count none (the parent does, at its close; a child exiting counted every
# connection's TCP bytes again)
n=0
while IFS= read -r l; do
	[ "$(field "$l" tcp_tx_bytes)" -eq 0 ] && [ "$(field "$l" tcp_rx_bytes)" -eq 0 ] &&
		[ "$(field "$l" switched)" -eq 0 ] || fail "a forked child of redis counts bytes it never moved: $l"
	n=$((n + 1))
done < <(grep '^sanswitch: pid=' "$TMP/srv.pre.err" | grep -v "^sanswitch: pid=$mpid ")
[ "$n" -ge 2 ] || { grep '^sanswitch' "$TMP/srv.pre.err"; fail "$n lines of forked children, expected BGSAVE's and the sync's"; }
bl=$(stats_line "$TMP/bench.pre.err") || exit 1
[ "$(field "$bl" switched)" -ge 50 ] || fail "redis-benchmark's 50 clients did not switch: $bl"
rl=$(pid_line "$TMP/rep.pre.err" "$rpid") || exit 1
[ "$(field "$rl" connects)" -ge 1 ] && [ "$(field "$rl" switched)" -eq "$(field "$rl" connects)" ] ||
	fail "the replica's link to the master did not switch: $rl"
log "probe: ${#CASES[@]} cases as over kernel TCP, $conns connections switched at both ends" \
	"(server $(field "$sl" switched)); BGSAVE's child came and went; replica and" \
	"redis-benchmark (-P 16 -c 50, $(field "$bl" switched) switched) fine"
log "PASS"
