#!/bin/bash
# t_edge_cork — the kernel is the oracle for what a reader sees of a sender that corks its
# socket (TCP_CORK: nginx's tcp_nopush, around each response): edge_cork.py, corked sends of
# 100 bytes uncorked 300 ms later, never uncorked (TCP's 200 ms cork timer sends them), 64 KiB
# in 1 KiB sends never uncorked, 100 bytes then close, 100 and 1000 bytes 20 ms apart then the
# uncork (TCP sends them as one segment: one read of 1100; a switched sender that rang for the
# first woke its reader twice, reads 100+1000); the reader asleep in a blocking recv,
# poll, or an EPOLLET epoll. Over kernel TCP and switched (the sender's connection must have
# switched), ROUNDS times, in the same run; the lines must be the same. Switched, a corked send
# holds its doorbell (core/san_cork.h): a hold nothing ended would leave the reader asleep
# (it reports after 1.5 s what came: short of the bytes, a difference).
# timeout: 240
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build
export SANSWITCH_STATS=1
ROUNDS=${ROUNDS:-2}
bad=0

one() { # CASE WAIT MODE -> the reader's line (the sender's stats line checked)
	local out=$TMP/$1.$2.$3 pid l rc=0
	as_t "$3" 30 "$PY" "$E2E_DIR/edge_cork.py" "$1" "$2" >"$out.out" 2>"$out.err" || rc=$?
	[ "$rc" -eq 0 ] || { show "$out.out" "$out.err"; fail "$1 $2 ($3): exit status $rc (124: hung)"; }
	if [ "$3" = pre ]; then
		pid=$(sed -n 's/^# pid \([0-9]*\)$/\1/p' "$out.out")
		l=$(pid_line "$out.err" "$pid") || exit 1
		[ "$(field "$l" switched)" -eq 1 ] || fail "$1 $2: the sender's connection did not switch: $l"
	fi
	grep -v '^# pid' "$out.out"
}

for c in uncork never big close pieces; do
	for w in block poll epoll_et; do
		k=$(one "$c" "$w" none) || exit 1
		for r in $(seq "$ROUNDS"); do
			p=$(one "$c" "$w" pre) || exit 1
			if [ "$k" = "$p" ]; then
				log "ok   $c $w round $r: ${p%%$'\n'*}"
			else
				log "DIFF $c $w round $r: tcp: $k"
				log "                    switch: $p"
				bad=$((bad + 1))
			fi
		done
	done
done
[ "$bad" -eq 0 ] || fail "$bad cases differ from kernel TCP (above)"
log "PASS"
