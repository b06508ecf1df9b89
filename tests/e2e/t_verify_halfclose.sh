#!/bin/bash
# t_verify_halfclose — the client shuts down its sending side after the stream and must still get
# the whole echo, then EOF: both ends preloaded, and each end alone; blocking and nonblocking.
# timeout: 90
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build

for nb in block nonblock; do
	args=(-T 2 -m epoll)
	[ "$nb" = nonblock ] && args+=(-n)
	vpair "hc.$nb.none" none none 8 "${args[@]}" -- "${args[@]}" --half-close -b 3M -s 41
	base=$VCRC
	for sides in "pre pre" "pre none" "none pre"; do
		read -r s c <<<"$sides"
		vpair "hc.$nb.$s-$c" "$s" "$c" 8 "${args[@]}" -- "${args[@]}" --half-close -b 3M -s 41
		[ "$VCRC" = "$base" ] || fail "hc.$nb (server=$s client=$c): crc32 $VCRC, kernel-only $base"
	done
done
log "all half-close cases ok"
