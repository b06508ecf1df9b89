#!/bin/bash
# t_verify_conns — sanverify with 1 connection (64 MiB) and with 64 connections on 4 threads,
# blocking and nonblocking, both ends preloaded; crc32 equal to the same run without the preload.
# timeout: 120
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build

# case NAME CONNS SERVER_ARGS -- CLIENT_ARGS: kernel-only run, then preloaded; same crc32.
case_() {
	local name=$1 conns=$2 base
	shift 2
	vpair "$name.none" none none "$conns" "$@"
	base=$VCRC
	vpair "$name.pre" pre pre "$conns" "$@"
	[ "$VCRC" = "$base" ] || fail "$name: crc32 $VCRC under the preload, $base without"
}

case_ one_block 1 -m epoll -- -m epoll -b 64M -s 3
case_ one_nonblock 1 -n -m epoll -- -n -m epoll -b 64M -s 3
case_ many_block 64 -T 4 -m poll -- -T 4 -m poll -b 1M -s 5
case_ many_nonblock 64 -T 4 -n -m epoll-et -- -T 4 -n -m epoll-et -b 1M -s 5
case_ many_nonblock_select 64 -T 4 -n -m select --io mix -- -T 4 -n -m select --io mix -b 1M -s 6
log "all connection-count cases ok"
