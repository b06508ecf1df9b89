#!/bin/bash
# t_verify_sizes — sanverify with tiny writes and reads (1 byte, 1..100 bytes) and large ones
# (up to 8 MiB per call, 256 MiB per connection), both ends preloaded; crc32 equal to kernel-only.
# timeout: 150
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build

case_() {
	local name=$1 conns=$2 base
	shift 2
	vpair "$name.none" none none "$conns" "$@"
	base=$VCRC
	vpair "$name.pre" pre pre "$conns" "$@"
	[ "$VCRC" = "$base" ] || fail "$name: crc32 $VCRC under the preload, $base without"
}

case_ tiny1_block 2 -T 2 --max-write 1 -- -T 2 --max-write 1 -b 256K -s 21
case_ tiny1_nonblock 2 -n -m poll --max-write 1 -- -n -m poll --max-write 1 -b 256K -s 21
case_ small_mix 4 -T 2 --max-write 100 --io mix -- -T 2 --min-write 1 --max-write 100 --io mix -b 2M -s 22
case_ small_nonblock_et 4 -n -m epoll-et --max-write 100 -- -n -m epoll-et --max-write 100 -b 2M -s 23
case_ large_block 2 -T 2 --max-write 8M --echo-buf 8M -- \
	-T 2 --min-write 1M --max-write 8M -b 256M -s 24
case_ large_nonblock 2 -n -m epoll --max-write 8M --echo-buf 8M -- \
	-n -m epoll --min-write 1M --max-write 8M -b 256M -s 25
log "all write-size cases ok"
