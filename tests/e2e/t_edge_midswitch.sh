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

# one MODE END SIZE ID — one run; sets LINE (the reader's line without ms=) and RERR (its stderr)
one() {
	local mode=$1 end=$2 size=$3 id=$4 l
	start_pf "$id.s" "$mode" "$EDGE" send --listen-port-file '{PORTFILE}' --bytes "$size" \
		--end "$end" --end-after 100 --stay 600 --timeout 20
	local spid=$SERVER_PID
	as_t "$mode" 20 "$EDGE" read --connect "$SERVER_PORT" --timeout 10 \
		>"$TMP/$id.r.out" 2>"$TMP/$id.r.err" || :
	wait_pid "$spid" 10 || stop "$spid"
	IFS= read -r l <"$TMP/$id.r.out" || l=
	LINE=${l% ms=*}
	RERR=$TMP/$id.r.err
}

for end in close exit kill shutwr_exit; do
	for size in 1 65536; do
		ncase=$((ncase + 1))
		one none "$end" "$size" "k.$end.$size"
		want=$LINE
		[[ $want == read\ bytes=* ]] || { show "$TMP/k.$end.$size.r.out" "$RERR"; fail "$end $size: no line over kernel TCP"; }
		bad=
		for ((r = 1; r <= ROUNDS; r++)); do
			id=p.$end.$size.$r
			one pre "$end" "$size" "$id"
			if [ "$LINE" != "$want" ]; then
				bad+=" round $r: '$LINE'"
				show "$TMP/$id.r.out" "$RERR" "$TMP/$id.s.err"
				continue
			fi
			sl=$(stats_line "$RERR") || exit 1
			# proposed, accepted, let go: the server's engine answered, so not no_peer
			reason=fallback_channel
			[ "$end" = close ] && reason=fallback_state
			if [ "$(field "$sl" switched)" != 0 ] || [[ " $sl " != *" $reason=1 "* ]]; then
				bad+=" round $r: not the let-go (reader's stats: $sl)"
				show "$RERR" "$TMP/$id.s.err"
			fi
		done
		if [ -n "$bad" ]; then
			nbad=$((nbad + 1))
			log "FAIL $end, $size B: kernel '$want';$bad"
		else
			log "ok   $end, $size B: '$want' in $ROUNDS preloaded rounds, each let go"
		fi
	done
done
[ "$nbad" -eq 0 ] || fail "$nbad of $ncase cases differ from kernel TCP"
log "$ncase cases as over kernel TCP"
