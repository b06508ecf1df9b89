#!/bin/bash
# t_switch_verbs — sanverify over the verbs provider (SANSWITCH_PROVIDER=verbs: both processes on
# this guest, connected through the rxe device's address): every wait mode x blocking and
# nonblocking under SANSWITCH_BULK=auto (small writes inline, large ones by RDMA by the peer's
# offer), two of them under inline; in both settings many connections, large writes and
# half-close; 1-byte writes under inline (under auto they go inline too: the same path). Each
# crc32 must equal the kernel-only run with the same arguments and seed (the wait-mode cases
# move the same bytes: one kernel-only run for them all, and the one-sided runs below), every
# connection must be switched onto verbs on both sides (switched = switched_verbs = connections,
# fallback = 0), and each side's byte counts must be what the verifier moved; under inline nothing
# goes by RDMA (tests/rxe/switch_lib.sh). Then one end preloaded only: every connection stays TCP
# (fallback no_peer on the preloaded side), same bytes.
#
# The guest runs under TCG: each run costs about 12 s, and the CI's budget is shared. The wait
# modes are the preload's, the same code as over shm (t_verify_modes runs every one of them);
# what verbs adds under them is its notification, the same whatever the bulk setting.
# timeout: 600
set -u
# shellcheck source=tests/rxe/switch_lib.sh
. "$(dirname -- "$0")/switch_lib.sh"

for SANSWITCH_BULK in inline auto; do
	export SANSWITCH_BULK
	for m in poll select epoll epoll-et epoll-oneshot; do
		for nb in block nonblock; do
			[ "$SANSWITCH_BULK" = auto ] || [ "$m.$nb" = poll.block ] ||
				[ "$m.$nb" = epoll-et.nonblock ] || continue
			args=(-m "$m" -T 2)
			[ "$nb" = nonblock ] && args+=(-n)
			VBASE=mode vcase "mode.$m.$nb" 2 "${args[@]}" -- "${args[@]}" -b 512K -s 21
		done
	done
	vcase many.nonblock 16 -T 2 -n -m epoll -- -T 2 -n -m epoll -b 128K -s 22
	# (1-byte writes go inline under auto too: one run, under inline, which also proves it)
	if [ "$SANSWITCH_BULK" = inline ]; then
		vcase tiny1.block 2 --min-write 1 --max-write 1 -- --min-write 1 --max-write 1 -b 16K -s 23
	fi
	vcase large.block 2 -T 2 --max-write 4M --echo-buf 4M -- \
		-T 2 --min-write 256K --max-write 4M -b 6M -s 24
	vcase halfclose.nonblock 4 -T 2 -n -m select -- -T 2 -n -m select --half-close -b 512K -s 25
	log "SANSWITCH_BULK=$SANSWITCH_BULK: every case switched onto verbs, crc32 as kernel-only"
done

# One end preloaded: the other has no listener on the RDMA side, so everything stays TCP. (The
# arguments of mode.poll.block: its kernel-only run is the reference.)
export SANSWITCH_BULK=auto
kcrc=${KBASE[mode]}
args=(-m poll -T 2)
for side in server client; do
	name=oneside.$side
	if [ "$side" = server ]; then
		vpair "$name" pre none 2 -a "$addr" "${args[@]}" -- -a "$addr" "${args[@]}" -b 512K -s 21
		l=$(stats_line "$TMP/$name.srv.err") || exit 1
	else
		vpair "$name" none pre 2 -a "$addr" "${args[@]}" -- -a "$addr" "${args[@]}" -b 512K -s 21
		l=$(stats_line "$TMP/$name.cli.err") || exit 1
	fi
	[ "$VCRC" = "$kcrc" ] || fail "$name: crc32 $VCRC, kernel-only $kcrc"
	[ "$(field "$l" switched)" -eq 0 ] && [ "$(field "$l" fallback)" -eq 2 ] ||
		fail "$name: the preloaded end did not stay on TCP: $l"
	log "$name: preloaded $side only: both connections stayed TCP ($l)"
done

log "all verifier runs over verbs ok"
