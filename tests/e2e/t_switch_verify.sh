#!/bin/bash
# t_switch_verify — sanverify with both ends preloaded, and every connection really switched onto
# shm (SANSWITCH_STATS=1: switched = connections and fallback = 0 on both sides): every wait mode
# (poll, select, epoll, epoll-et, epoll-oneshot) x blocking/nonblocking, 4 conns x 8 MiB on 2
# threads; 64 conns on 4 threads; 1-byte writes; 1..8 MiB writes on a 32 MiB stream; half-close.
# Each crc32 must equal the kernel-only run with the same arguments and seed, and each side's
# byte counts (san + tcp) must be exactly what the verifier moved.
# timeout: 90
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build

export SANSWITCH_STATS=1

# switched NAME CONNS — after `vpair NAME pre pre CONNS ...`: on both sides every connection was
# switched and none fell back; the client opened CONNS, the server accepted CONNS; and the byte
# counts are the application's payload exactly: the client sent a 32-byte header and the stream
# on each connection, the server echoed the stream (VBYTES, over all connections).
switched() {
	local name=$1 conns=$2 cl sl l up down
	cl=$(stats_line "$TMP/$name.cli.err") || exit 1
	sl=$(stats_line "$TMP/$name.srv.err") || exit 1
	for l in "$cl" "$sl"; do
		[ "$(field "$l" switched)" -eq "$conns" ] && [ "$(field "$l" fallback)" -eq 0 ] || {
			show "$TMP/$name.cli.err" "$TMP/$name.srv.err"
			fail "$name: not all $conns connections switched: $l"
		}
	done
	[ "$(field "$cl" connects)" -eq "$conns" ] || fail "$name: client connects != $conns: $cl"
	[ "$(field "$sl" accepts)" -eq "$conns" ] || fail "$name: server accepts != $conns: $sl"
	up=$((VBYTES + 32 * conns))
	down=$VBYTES
	[ "$(moved "$cl" tx)" -eq "$up" ] || fail "$name: client sent $up bytes, its line says $(moved "$cl" tx): $cl"
	[ "$(moved "$sl" rx)" -eq "$up" ] || fail "$name: server received $up bytes, its line says $(moved "$sl" rx): $sl"
	[ "$(moved "$sl" tx)" -eq "$down" ] || fail "$name: server sent $down bytes, its line says $(moved "$sl" tx): $sl"
	[ "$(moved "$cl" rx)" -eq "$down" ] || fail "$name: client received $down bytes, its line says $(moved "$cl" rx): $cl"
}

# case_ NAME CONNS SERVER_ARGS -- CLIENT_ARGS: the kernel-only run, then the preloaded one: same
# crc32, and switched on both sides.
case_() {
	local name=$1 conns=$2 base
	shift 2
	vpair "$name.none" none none "$conns" "$@"
	base=$VCRC
	vpair "$name.pre" pre pre "$conns" "$@"
	[ "$VCRC" = "$base" ] || fail "$name: crc32 $VCRC under the preload, $base kernel-only"
	switched "$name.pre" "$conns"
	log "$name: $conns conns switched on both sides, crc32=$VCRC as kernel-only"
}

# ------------------------------------------------------------ every wait mode x (non)blocking
SEED=11 BYTES=8M CONNS=4
vpair base none none "$CONNS" -T 2 -- -T 2 -b "$BYTES" -s "$SEED"
BASE=$VCRC
n=0
for m in poll select epoll epoll-et epoll-oneshot; do
	for nb in block nonblock; do
		args=(-m "$m" -T 2)
		[ "$nb" = nonblock ] && args+=(-n)
		vpair "mode.$m.$nb" pre pre "$CONNS" "${args[@]}" -- "${args[@]}" -b "$BYTES" -s "$SEED"
		[ "$VCRC" = "$BASE" ] || fail "mode.$m.$nb: crc32 $VCRC, kernel-only run gave $BASE"
		switched "mode.$m.$nb" "$CONNS"
		n=$((n + 1))
	done
done
log "$n wait-mode runs: $CONNS conns switched on both sides each, crc32=$BASE like kernel-only"

# ------------------------------------------------------------ many connections
case_ many.block 64 -T 4 -- -T 4 -b 1M -s 12
case_ many.nonblock 64 -T 4 -n -m epoll -- -T 4 -n -m epoll -b 1M -s 12

# ------------------------------------------------------------ write sizes
case_ tiny1.block 2 --min-write 1 --max-write 1 -- --min-write 1 --max-write 1 -b 64K -s 13
case_ tiny1.nonblock 2 -n -m epoll-et --min-write 1 --max-write 1 -- \
	-n -m epoll-et --min-write 1 --max-write 1 -b 64K -s 13
case_ large.block 2 -T 2 --max-write 8M --echo-buf 8M -- \
	-T 2 --min-write 1M --max-write 8M -b 32M -s 14
case_ large.nonblock 2 -n -m poll --max-write 8M --echo-buf 8M -- \
	-n -m poll --min-write 1M --max-write 8M -b 32M -s 14

# ------------------------------------------------------------ half-close
case_ halfclose.block 8 -T 2 -m epoll -- -T 2 -m epoll --half-close -b 3M -s 15
case_ halfclose.nonblock 8 -T 2 -n -m select -- -T 2 -n -m select --half-close -b 3M -s 15

log "all switched verifier runs ok"
