#!/bin/bash
# t_switch_verify — sanverify with both ends preloaded, and every connection really switched onto
# shm (SANSWITCH_STATS=1: switched = connections and fallback = 0 on both sides): every wait mode
# (poll, select, epoll, epoll-et, epoll-oneshot) x blocking/nonblocking, 4 conns x 8 MiB on 2
# threads; 1 conn; 64 conns on 4 threads; 1-byte writes; 1..8 MiB writes on a 32 MiB stream;
# half-close. All of it under each SANSWITCH_BULK (inline, read, grant, auto).
# Each crc32 must equal the kernel-only run with the same arguments and seed, and each side's
# byte counts (san + tcp) must be exactly what the verifier moved. Where writes go above the
# inline threshold, read_tx_bytes (sent by READ) must move under read and auto only, and
# grant_tx_bytes (written into the peer's grant) under grant only; under inline neither; direct
# writes (direct_tx_bytes) never under read or inline; direct reads (direct_read_tx_bytes: the
# peer read a waiting send's own buffer) never under grant or inline.
# timeout: 300
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build

export SANSWITCH_STATS=1

# switched NAME CONNS BIG — vswitched (lib.sh), and how the large writes travelled.
switched() {
	local name=$1 conns=$2 big=$3 l
	vswitched "$name" "$conns"
	# How the large writes travelled: only the forced mode's counter moves (and with BIG=0,
	# every write was inline: neither).
	# Direct writes (into a receive asleep with its buffer offered) may take some of them
	# under auto and grant, as the timing goes: t_switch_direct counts those exactly.
	local rd gr dt dr
	for l in "$VCL" "$VSL"; do
		rd=$(field "$l" read_tx_bytes)
		gr=$(field "$l" grant_tx_bytes)
		dt=$(field "$l" direct_tx_bytes)
		dr=$(field "$l" direct_read_tx_bytes)
		case $SANSWITCH_BULK.$big in
		inline.* | *.0) [ $((rd + gr + dt + dr)) -eq 0 ] ;;
		read.1) [ $((rd + dr)) -gt 0 ] && [ "$gr" -eq 0 ] && [ "$dt" -eq 0 ] ;;
		auto.1) [ $((rd + dt + dr)) -gt 0 ] && [ "$gr" -eq 0 ] ;;
		grant.1) [ "$rd" -eq 0 ] && [ "$dr" -eq 0 ] && [ $((gr + dt)) -gt 0 ] ;;
		esac || fail "$name: SANSWITCH_BULK=$SANSWITCH_BULK, yet read_tx_bytes=$rd" \
			"grant_tx_bytes=$gr direct_tx_bytes=$dt direct_read_tx_bytes=$dr: $l"
	done
}

# case_ NAME CONNS BIG SERVER_ARGS -- CLIENT_ARGS: the preloaded run under $SANSWITCH_BULK: the
# crc32 of the kernel-only run with the same arguments (made once, by the first mode), and
# switched on both sides.
declare -A KBASE
case_() {
	local name=$1 conns=$2 big=$3
	shift 3
	if [ -z "${KBASE[$name]:-}" ]; then
		vpair "$name.none" none none "$conns" "$@"
		KBASE[$name]=$VCRC
	fi
	vpair "$name.$SANSWITCH_BULK" pre pre "$conns" "$@"
	[ "$VCRC" = "${KBASE[$name]}" ] ||
		fail "$name.$SANSWITCH_BULK: crc32 $VCRC under the preload, ${KBASE[$name]} kernel-only"
	switched "$name.$SANSWITCH_BULK" "$conns" "$big"
}

for SANSWITCH_BULK in inline read grant auto; do
	export SANSWITCH_BULK
	# -------------------------------------------------------- every wait mode x (non)blocking
	for m in poll select epoll epoll-et epoll-oneshot; do
		for nb in block nonblock; do
			args=(-m "$m" -T 2)
			[ "$nb" = nonblock ] && args+=(-n)
			case_ "mode.$m.$nb" 4 1 "${args[@]}" -- "${args[@]}" -b 8M -s 11
		done
	done
	# -------------------------------------------------------- one, and many connections
	case_ one.block 1 1 -- -b 4M -s 16
	case_ many.block 64 1 -T 4 -- -T 4 -b 1M -s 12
	case_ many.nonblock 64 1 -T 4 -n -m epoll -- -T 4 -n -m epoll -b 1M -s 12
	# -------------------------------------------------------- write sizes, 1 B .. 8 MiB
	case_ tiny1.block 2 0 --min-write 1 --max-write 1 -- --min-write 1 --max-write 1 -b 64K -s 13
	case_ tiny1.nonblock 2 0 -n -m epoll-et --min-write 1 --max-write 1 -- \
		-n -m epoll-et --min-write 1 --max-write 1 -b 64K -s 13
	case_ large.block 2 1 -T 2 --max-write 8M --echo-buf 8M -- \
		-T 2 --min-write 1M --max-write 8M -b 32M -s 14
	case_ large.nonblock 2 1 -n -m poll --max-write 8M --echo-buf 8M -- \
		-n -m poll --min-write 1M --max-write 8M -b 32M -s 14
	# -------------------------------------------------------- half-close
	case_ halfclose.block 8 1 -T 2 -m epoll -- -T 2 -m epoll --half-close -b 3M -s 15
	case_ halfclose.nonblock 8 1 -T 2 -n -m select -- -T 2 -n -m select --half-close -b 3M -s 15
	log "SANSWITCH_BULK=$SANSWITCH_BULK: every case switched on both sides, crc32 as kernel-only"
done

log "all switched verifier runs ok"
