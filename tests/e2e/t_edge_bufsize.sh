#!/bin/bash
# t_edge_bufsize — SO_SNDBUF / SO_RCVBUF set by both applications bound what a switched
# connection holds, as they bound TCP's queues (edge_bufsize.py, both ends at 4 KiB): a sender
# whose reader closes after 1 KiB gets TCP's error (send: ECONNRESET; sendfile: EPIPE) instead
# of seeing its 256 KiB vanish into the ring; a nonblocking sender meets EAGAIN after as few
# KiB as over TCP (compared in 16 KiB steps); a slow reader still gets every byte. Each case
# over kernel TCP, then three times with both preloaded (both ends switched), lines compared.
# Before: the ring took the whole 256 KiB and the sender saw success.
# timeout: 180
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build
export SANSWITCH_STATS=1
bad=0

one() { # CASE MODE
	local out=$TMP/$1.$2 rc=0 pid l
	as_t "$2" 60 "$PY" "$E2E_DIR/edge_bufsize.py" "$1" >"$out.out" 2>"$out.err" || rc=$?
	[ "$rc" -eq 0 ] || { show "$out.out" "$out.err"; fail "$1 ($2): exit $rc"; }
	if [ "$2" = pre ]; then
		for pid in $(sed -n 's/^# pid \([0-9]*\)$/\1/p' "$out.out"); do
			l=$(pid_line "$out.err" "$pid") || exit 1
			[ "$(field "$l" switched)" -eq 1 ] || fail "$1: not switched: $l"
		done
	fi
	grep -v '^# pid' "$out.out" | sort | tr '\n' ' '
}

for c in close-send close-sendfile fill slow; do
	k=$(one "$c" none) || exit 1
	for r in 1 2 3; do
		p=$(one "$c" pre) || exit 1
		if [ "$k" = "$p" ]; then
			log "ok   $c round $r: $p"
		else
			log "DIFF $c round $r: tcp: $k / switch: $p"
			bad=$((bad + 1))
		fi
	done
done
[ "$bad" -eq 0 ] || fail "$bad cases differ from kernel TCP (above)"
