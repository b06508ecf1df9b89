#!/bin/bash
# t_verify_modes — sanverify, both ends preloaded, in every wait mode (poll, select, epoll,
# epoll-et, epoll-oneshot) x blocking/nonblocking x IPv4/IPv6, cycling through the byte-moving
# calls (send, rw, msg, vec, mix) and dup()ed fds; the client's crc32 must equal a kernel-only run.
# timeout: 120
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build

SEED=11 BYTES=8M CONNS=4
IOS=(send rw msg vec mix)

vpair base none none "$CONNS" -T 2 -- -T 2 -b "$BYTES" -s "$SEED"
BASE=$VCRC
i=0
for fam in 4 6; do
	if [ "$fam" = 6 ] && ! v6_ok "the v6.* runs"; then
		continue
	fi
	for m in poll select epoll epoll-et epoll-oneshot; do
		for nb in block nonblock; do
			io=${IOS[i % ${#IOS[@]}]}
			common=("-$fam" -m "$m" --io "$io" -T 2)
			[ "$nb" = nonblock ] && common+=(-n)
			[ $((i % 3)) -eq 2 ] && common+=(--dup)
			i=$((i + 1))
			vpair "v$fam.$m.$nb.$io" pre pre "$CONNS" "${common[@]}" -- "${common[@]}" \
				-b "$BYTES" -s "$SEED"
			[ "$VCRC" = "$BASE" ] || fail "v$fam.$m.$nb: crc32 $VCRC, kernel-only run gave $BASE"
		done
	done
done
log "$i preloaded runs, all crc32=$BASE like the kernel-only run"
