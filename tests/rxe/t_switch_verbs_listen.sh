#!/bin/bash
# t_switch_verbs_listen — a client that connects the moment a preloaded server listens, and sends
# at once, switches onto verbs: the server's rdma_cm listener must be there as soon as the TCP
# one is. Each run is a new server process (build/sanquick: its listen() is its first, the one
# that loads rdma-core: the slowest) taking one connection from the client, both preloaded; the
# client is one process for all runs (tests/rxe/quick_listen.py):
#   spin   the server binds a port, then listens; the client, already spinning, connects again
#          and again until the kernel takes it (what a client that retries until its server is
#          up, or a harness that polls for the port, does);
#   told   the server listens on an ephemeral port and prints it the moment listen() returned;
#          the client connects then.
# Every connection must be switched onto verbs at both ends (no fallback: no_peer was the race)
# and the server's CRC-32 of what it received equal to the client's. All runs are made, then the
# ones that were not are counted. (The server is a C program, not a Python one: what the test
# repeats is the moment its listen() returns, not an interpreter's start, which took 2 to 3 s of
# each run's 3.4 in the emulated guest.)
# timeout: 800
set -u
# shellcheck source=tests/rxe/switch_lib.sh
. "$(dirname -- "$0")/switch_lib.sh"
QL=$(dirname -- "$0")/quick_listen.py
QS=$BUILD/sanquick
[ -x "$QS" ] || fail "missing $QS (run make)"
# Debian's interpreter itself (see t_switch_verbs_relisten)
[ -x /usr/bin/python3 ] && PY=/usr/bin/python3
spins=${QL_SPINS:-20}
tolds=${QL_TOLDS:-10}
N=$((256 << 10))
export SANSWITCH_LOG=info # a connection that stays on TCP says why, for the report
bad=0

mkfifo "$TMP/cmd" "$TMP/res" "$TMP/port" || fail "mkfifo failed"
_menv pre "$PY"
(_exec_menv "$PY" "$QL" client "$addr" "$N") <"$TMP/cmd" >"$TMP/res" 2>"$TMP/cli.err" &
cli=$!
_PIDS+=("$cli")
exec 3>"$TMP/cmd" 4<"$TMP/res"

# verdict NAME SERVER_RC CLIENT_LINE — one run's: the server's exit and stats line, the client's
# word on the digest.
verdict() {
	local name=$1 why='' l
	if [ "$2" -ne 0 ] || [[ $3 != "ok "* ]]; then
		why="server exit $2, client: ${3:-nothing}"
	else
		l=$(stats_line "$TMP/$name.srv.err") || exit 1
		[ "$(field "$l" switched_verbs)" -eq 1 ] && [ "$(field "$l" fallback)" -eq 0 ] ||
			why="not switched onto verbs: server's $l"
	fi
	if [ -n "$why" ]; then
		bad=$((bad + 1))
		log "$name: $why"
		show "$TMP/$name.srv.err"
	fi
}

for ((i = 0; i < spins; i++)); do
	name=spin$i
	echo "spin $i" >&3
	read -r -t 60 -u 4 w port || fail "$name: the client named no port"
	[ "$w" = port ] || fail "$name: the client said '$w $port'"
	src=0 res=''
	as_t pre 60 "$QS" "$addr" "$port" >/dev/null 2>"$TMP/$name.srv.err" || src=$?
	read -r -t 60 -u 4 res
	verdict "$name" "$src" "$res"
done
for ((i = 0; i < tolds; i++)); do
	name=told$i
	as_t pre 60 "$QS" "$addr" 0 >"$TMP/port" 2>"$TMP/$name.srv.err" &
	srv=$!
	_PIDS+=("$srv")
	src=0 res='' port=''
	read -r -t 60 port <"$TMP/port" && echo "connect $port $((100 + i))" >&3 && read -r -t 60 -u 4 res
	wait_pid "$srv" 60 || src=$?
	verdict "$name" "$src" "$res"
done
exec 3>&-
wait_pid "$cli" 30 || fail "the client exit $?"
l=$(stats_line "$TMP/cli.err") || exit 1
[ "$bad" -eq 0 ] ||
	fail "$bad of $((spins + tolds)) connections made the moment the server listened not switched; client's $l"
[ "$(field "$l" switched_verbs)" -eq $((spins + tolds)) ] && [ "$(field "$l" fallback)" -eq 0 ] ||
	fail "the client: not every connection switched onto verbs: $l"
log "$spins clients connecting the moment the port listened, $tolds the moment listen() returned: every connection switched onto verbs at both ends, digests as sent; client's $l"
