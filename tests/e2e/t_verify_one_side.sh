#!/bin/bash
# t_verify_one_side — only one end preloaded (server only, client only), blocking and nonblocking,
# IPv4 and IPv6: the other end is plain kernel TCP and the bytes must be the same as kernel-only.
# timeout: 90
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build

run_side() {
	local name=$1 base
	shift
	vpair "$name.none" none none 16 "$@"
	base=$VCRC
	vpair "$name.server_only" pre none 16 "$@"
	[ "$VCRC" = "$base" ] || fail "$name: server-only crc32 $VCRC, kernel-only $base"
	vpair "$name.client_only" none pre 16 "$@"
	[ "$VCRC" = "$base" ] || fail "$name: client-only crc32 $VCRC, kernel-only $base"
}

run_side block4 -4 -T 4 -m epoll -- -4 -T 4 -m epoll -b 2M -s 31
run_side nonblock4 -4 -T 2 -n -m epoll-et --io vec -- -4 -T 2 -n -m epoll-et --io msg -b 2M -s 32
if v6_ok block6 nonblock6; then
	run_side block6 -6 -T 4 -m select --io rw -- -6 -T 4 -m select --io rw -b 2M -s 33
	run_side nonblock6 -6 -n -m epoll-oneshot -- -6 -n -m poll -b 2M -s 34
fi
log "all one-sided cases ok"
