#!/bin/bash
# t_switch_verbs_relisten — a server that closes its listener and listens again on the same port
# between clients (iperf3 -s does so after every test). The rdma_cm listener of the closed one
# lingers (2 s, for connections accepted just before the close) and holds the port in the RDMA
# port space, so a new rdma_cm listener there fails: the new TCP listener must take the
# lingering one over, or once the linger ends every connection to it stays on TCP. Three rounds,
# each a new client process streaming 4 MiB (READ transfers) 3 s after the listener reopened
# (past the linger): every one switched onto verbs at both ends, the server's SHA-256 of what it
# received equal to the client's.
# timeout: 200
set -u
# shellcheck source=tests/rxe/switch_lib.sh
. "$(dirname -- "$0")/switch_lib.sh"
RL=$(dirname -- "$0")/relisten.py
rounds=3
# Debian's interpreter itself (install-deps has it): a wrapper such as a pyenv shim runs
# processes of its own under the preload, each with a stats line of its own.
[ -x /usr/bin/python3 ] && PY=/usr/bin/python3

spawn relisten.srv pre "$PY" "$RL" server "$addr" "$TMP" "$rounds"
srv=$SPAWN_PID
for ((n = 0; n < rounds; n++)); do
	for ((i = 0; i < 300; i++)); do
		[ -f "$TMP/ready.$n" ] && break
		sleep 0.1
	done
	[ -f "$TMP/ready.$n" ] || { show "$TMP/relisten.srv.err"; fail "round $n: the server did not listen again"; }
	port=$(cat "$TMP/ready.$n")
	[ "$n" -gt 0 ] && sleep 3 # past the 2 s the closed listener's rdma_cm listener lingers
	rc=0
	as_t pre 120 "$PY" "$RL" client "$addr" "$port" $((4 << 20)) "$n" \
		>"$TMP/c$n.out" 2>"$TMP/c$n.err" || rc=$?
	[ "$rc" -eq 0 ] && grep -q '^relisten: client ok ' "$TMP/c$n.out" ||
		{ show "$TMP/c$n.out" "$TMP/c$n.err" "$TMP/relisten.srv.err"; fail "round $n: client exit $rc"; }
	l=$(stats_line "$TMP/c$n.err") || exit 1
	[ "$(field "$l" switched_verbs)" -eq 1 ] || fail "round $n (port $port): not switched onto verbs: $l"
	[ "$(field "$l" read_tx_bytes)" -gt 0 ] || fail "round $n: no bytes went by READ: $l"
	log "round $n, a new listener on port $port: switched onto verbs, digest as sent"
done
wait_pid "$srv" 30 || fail "the server did not end after $rounds rounds"
l=$(stats_line "$TMP/relisten.srv.err") || exit 1
[ "$(field "$l" switched_verbs)" -eq "$rounds" ] || fail "server: not every connection on verbs: $l"
log "a listener closed and opened again $rounds times: every connection on verbs; $l"
