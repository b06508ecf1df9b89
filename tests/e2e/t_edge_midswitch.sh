#!/bin/bash
# t_edge_midswitch — the peer's application ends its side while the switch-over is under way
# (docs/protocol.md §9.2 rule 4): a server that writes its reply and closes (or exits, or is
# killed) after its engine answered ACCEPT but before the client's SWITCH came. Over kernel TCP
# the client reads the reply and then end-of-file; so must it under the switch. The server lets go
# of the switch-over (it sends no SWITCH), the client, which commits only on the server's SWITCH,
# stays on TCP and reads there what the server's kernel already holds. Before, the client committed
# at its own SWITCH and reset the connection when the channel ended: ECONNRESET and no byte (node's
# net server destroy(), 1 run in 10 of t_app_node, and CI).
#
# The order is made certain, not left to timing: the client proposes at its first call (its
# receive: SANSWITCH_SWITCH_AFTER=0) and sends its SWITCH 500 ms after the ACCEPT
# (SANSWITCH_FAULT=switch_late); the server (sanedge send, accepting) sends its bytes and ends
# 100 ms later (--end-after): 400 ms to spare for a loaded machine. A server that closes and lives on (close, --stay 600: its engine
# then takes the SWITCH and lets go) is the case fixed; those whose process ends too (exit,
# kill, shutdown then exit) end the side channel, so the client's SWITCH finds no one and it
# stays on TCP as before. Each case runs once over kernel TCP and ROUNDS times preloaded; the
# reader's line (bytes, first bad byte, how it ended, FNV-1a) must be the kernel's, and the
# preloaded reader must have proposed and fallen back (fallback_state where the server let go,
# fallback_channel where its process had gone), not switched.
# timeout: 120
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build

EDGE=$BUILD/sanedge
[ -x "$EDGE" ] || fail "missing $EDGE (run make)"
# (the paused switch-over's edge: E2E_NOPAUSE does not apply, its handshake has no such wait)
export SANSWITCH_STATS=1 SANSWITCH_SWITCH_AFTER=0 SANSWITCH_FAULT=switch_late SANSWITCH_NOPAUSE=0
ROUNDS=${ROUNDS:-3}
nbad=0 ncase=0

# run MODE ID SERVER... — start SERVER (its port file {PORTFILE}) as MODE, then the reader
# (sanedge read, connecting) as MODE; sets LINE (the reader's line without ms=), MS (its ms=) and
# RERR (its stderr)
run() {
	local mode=$1 id=$2 l
	shift 2
	start_pf "$id.s" "$mode" "$@"
	local spid=$SERVER_PID
	as_t "$mode" 20 "$EDGE" read --connect "$SERVER_PORT" --timeout 10 \
		>"$TMP/$id.r.out" 2>"$TMP/$id.r.err" || :
	if [ -n "${STOP_SERVER:-}" ]; then
		pkill -KILL -P "$spid" 2>/dev/null || :
		stop "$spid"
	else
		wait_pid "$spid" 10 || stop "$spid"
	fi
	IFS= read -r l <"$TMP/$id.r.out" || l=
	LINE=${l% ms=*}
	MS=99999
	[[ $l =~ ms=([0-9]+) ]] && MS=${BASH_REMATCH[1]}
	RERR=$TMP/$id.r.err
}

# case_of NAME REASON SERVER... — one case: the kernel's run, then ROUNDS preloaded, whose reader
# must read what the kernel's did, unswitched, its fallback REASON (fallback_state: the server's
# engine let go; fallback_channel: its process had gone) and within 3 s (not after a 5 s wait)
case_of() {
	local name=$1 reason=$2 want bad='' r sl
	shift 2
	ncase=$((ncase + 1))
	run none "k.$ncase" "$@"
	want=$LINE
	[[ $want == read\ bytes=* ]] || { show "$TMP/k.$ncase.r.out" "$RERR"; fail "$name: no line over kernel TCP"; }
	for ((r = 1; r <= ROUNDS; r++)); do
		run pre "p.$ncase.$r" "$@"
		if [ "$LINE" != "$want" ]; then
			bad+=" round $r: '$LINE'"
			show "$TMP/p.$ncase.$r.r.out" "$RERR" "$TMP/p.$ncase.$r.s.err"
			continue
		fi
		sl=$(stats_line "$RERR") || exit 1
		if [ "$(field "$sl" switched)" != 0 ] || [[ " $sl " != *" $reason=1 "* ]] || [ "$MS" -ge 3000 ]; then
			bad+=" round $r: not the let-go at once ($MS ms; reader's stats: $sl)"
			show "$RERR" "$TMP/p.$ncase.$r.s.err"
		fi
	done
	if [ -n "$bad" ]; then
		nbad=$((nbad + 1))
		log "FAIL $name: kernel '$want';$bad"
	else
		log "ok   $name: '$want' in $ROUNDS preloaded rounds, each let go"
	fi
}

for end in close exit kill shutwr_exit; do
	reason=fallback_channel
	[ "$end" = close ] && reason=fallback_state
	for size in 1 65536; do
		case_of "$end, $size B" "$reason" "$EDGE" send --listen-port-file '{PORTFILE}' \
			--bytes "$size" --end "$end" --end-after 100 --stay 600 --timeout 20
	done
done
# The classic forking server, during the switch-over: it forks once the ACCEPT has gone and
# closes its copy; its child serves (sends 64 KiB, closes) and lives on, holding, as every fork
# child does, a copy of its parent's side channel to the client. The parent's engine lets go;
# the client must hear it at once (B's engine shuts the channel down, not only closes its copy)
# and read what the child sent: before, it waited for the channel's end (the child's) 5 s,
# then reset the connection (ECONNRESET, no byte). (Stopped, server and child, once the
# reader is done: STOP_SERVER.)
STOP_SERVER=1 case_of "the server forks" fallback_state "$PY" "$E2E_DIR/midswitch_fork.py" '{PORTFILE}' 65536
[ "$nbad" -eq 0 ] || fail "$nbad of $ncase cases differ from kernel TCP"
log "$ncase cases as over kernel TCP"
