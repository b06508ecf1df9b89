#!/bin/bash
# t_switch_faults — sanverify with both ends preloaded and faults injected (SANSWITCH_FAULT),
# every connection really switched onto shm (SANSWITCH_STATS=1: switched = connections and
# fallback = 0 on both sides) and every byte delivered:
#   a. reg_fail,alloc_fail: a send above the inline size can be neither read from a registered
#      area nor copied, so it fails ENOBUFS (nothing sent, connection usable); sanverify retries
#      the same bytes in smaller pieces. ENOBUFS must really happen at both ends (--expect-enobufs,
#      stats enobufs > 0, and sanverify counts exactly the failures the library counted).
#   b. reg_fail: no READ possible (read_tx_bytes = 0), everything by copy, never ENOBUFS.
#   c. alloc_fail under SANSWITCH_BULK=auto: no copy memory, large sends still go by READ at both
#      ends; the server never sees ENOBUFS, the client may before the server's HELLO (see below).
# Each case blocking (poll), nonblocking (epoll loops on 2 threads) and blocking edge-triggered
# with every send call (--io mix: send, write, sendmsg, writev); 4 conns x 8 MiB (FAULT_BYTES;
# tests/rxe/t_switch_verbs_faults.sh: 4 MiB), writes up to 1 MiB. Each crc32 must equal the
# kernel-only run with the same arguments and seed, and each side's byte counts (san + tcp) must
# be exactly what the verifier moved.
# timeout: 240
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build

export SANSWITCH_STATS=1

# fpair NAME FAULTS BULK CONNS SERVER_ARGS -- CLIENT_ARGS — `vpair NAME pre pre CONNS ...` with
# SANSWITCH_FAULT=FAULTS and SANSWITCH_BULK=BULK (empty: the default) in the environment of this
# run only. Exported variables reach both preloaded processes (spawn and as_t run `env
# LD_PRELOAD=... CMD`, which inherits them); each process must say it injects exactly FAULTS,
# which proves they arrived.
fpair() {
	local name=$1 faults=$2 bulk=$3 f text
	shift 3
	export SANSWITCH_FAULT=$faults
	if [ -n "$bulk" ]; then export SANSWITCH_BULK=$bulk; else unset SANSWITCH_BULK; fi
	vpair "$name" pre pre "$@"
	unset SANSWITCH_FAULT SANSWITCH_BULK
	# (read by the shell, not grep: a program costs a lot in the emulated guest, see lib.sh _now)
	for f in "$TMP/$name.cli.err" "$TMP/$name.srv.err"; do
		text=
		IFS= read -r -d '' text <"$f" || :
		[[ $text == *"warn: SANSWITCH_FAULT: injecting $faults ("* ]] ||
			{ show "$f"; fail "$name: ${f##*/} does not say it injects $faults"; }
	done
}

# base NAME CONNS SERVER_ARGS -- CLIENT_ARGS — the kernel-only run of the same arguments (no
# preload, no fault anywhere in its environment); sets BASE to its crc32.
BASE=
base() {
	local name=$1
	shift
	[ -z "${SANSWITCH_FAULT+x}${SANSWITCH_BULK+x}" ] || fail "$name: a fault setting leaked into the baseline"
	vpair "$name.none" none none "$@"
	BASE=$VCRC
}

# switched NAME CONNS — after fpair NAME: vswitched (lib.sh: every connection switched on both
# sides, byte counts exact). Sets CL and SL (the client's and the server's stats lines), CE and
# SE (sanverify's enobufs= on each side).
CL='' SL='' CE='' SE=''
switched() {
	local name=$1 conns=$2
	vswitched "$name" "$conns"
	CL=$VCL
	SL=$VSL
	CE='' SE=''
	lines_with "$TMP/$name.cli.out" 'sanverify: client ok ' &&
		[[ $LINES =~ \ enobufs=([0-9]+)$ ]] && CE=${BASH_REMATCH[1]}
	lines_with "$TMP/$name.srv.out" 'sanverify: server ok ' &&
		[[ $LINES =~ \ enobufs=([0-9]+)$ ]] && SE=${BASH_REMATCH[1]}
	[ -n "$CE" ] && [ -n "$SE" ] ||
		{ show "$TMP/$name.cli.out" "$TMP/$name.srv.out"; fail "$name: no enobufs= in the ok lines"; }
}

# same_crc NAME — the preloaded run's crc32 is the kernel-only run's.
same_crc() {
	[ "$VCRC" = "$BASE" ] || fail "$1: crc32 $VCRC under the preload, $BASE kernel-only"
}

# The modes: blocking (a reader and a writer thread per connection, poll), nonblocking (epoll
# loops on 2 threads), and blocking edge-triggered with every send entry point (send, write,
# sendmsg, writev: --io mix), so ENOBUFS is seen from each. Writes up to 1 MiB at both ends.
MODES=(block nonblock mix)
margs() {
	case $1 in
	block) ARGS=(-m poll) ;;
	nonblock) ARGS=(-n -m epoll -T 2) ;;
	mix) ARGS=(-m epoll-et --io mix) ;;
	esac
	ARGS+=(--max-write 1M)
}

C=4
B=${FAULT_BYTES:-8M}
for mode in "${MODES[@]}"; do
	margs "$mode"
	base "$mode" "$C" "${ARGS[@]}" -- "${ARGS[@]}" -b "$B" -s 31

	# ---------------------------------------------------- a. no registration, no copy memory
	# Every send above the inline size (4096) fails ENOBUFS at both ends, and sanverify's count is
	# the library's: each failed send reached the application whole (nothing of it sent).
	name=a.both.$mode
	fpair "$name" reg_fail,alloc_fail "" "$C" --expect-enobufs "${ARGS[@]}" -- \
		--expect-enobufs "${ARGS[@]}" -b "$B" -s 31
	same_crc "$name"
	switched "$name" "$C"
	[ "$(field "$CL" enobufs)" -gt 0 ] || fail "$name: no ENOBUFS counted by the client's library: $CL"
	[ "$(field "$SL" enobufs)" -gt 0 ] || fail "$name: no ENOBUFS counted by the server's library: $SL"
	[ "$(field "$CL" enobufs)" -eq "$CE" ] ||
		fail "$name: the client's library counted $(field "$CL" enobufs) ENOBUFS, sanverify saw $CE"
	[ "$(field "$SL" enobufs)" -eq "$SE" ] ||
		fail "$name: the server's library counted $(field "$SL" enobufs) ENOBUFS, sanverify saw $SE"
	for l in "$CL" "$SL"; do
		[ "$(field "$l" read_tx_bytes)" -eq 0 ] || fail "$name: bytes went by READ though reg_fail: $l"
	done
	log "$name: crc32 as kernel-only; ENOBUFS client $CE, server $SE, all retried"

	# ---------------------------------------------------- b. no registration: copy, never ENOBUFS
	# Under the default (auto) and under read, which would READ every large send if it could.
	for bulk in auto read; do
		name=b.reg.$bulk.$mode
		fpair "$name" reg_fail "$bulk" "$C" "${ARGS[@]}" -- "${ARGS[@]}" -b "$B" -s 31
		same_crc "$name"
		switched "$name" "$C"
		for l in "$CL" "$SL"; do
			[ "$(field "$l" enobufs)" -eq 0 ] || fail "$name: ENOBUFS though copy memory was there: $l"
			[ "$(field "$l" read_tx_bytes)" -eq 0 ] || fail "$name: bytes went by READ though reg_fail: $l"
		done
		[ "$CE" -eq 0 ] && [ "$SE" -eq 0 ] || fail "$name: sanverify saw ENOBUFS (client $CE, server $SE)"
		log "$name: crc32 as kernel-only; no READ, no ENOBUFS"
	done

	# ---------------------------------------------------- c. no copy memory: READ still works
	# auto prefers READ from 16 KiB up; without temporary memory it sends by READ whatever the
	# size (proto/san_bulk.c: san_bulk_choose), so once the peer's HELLO has said it can READ, no
	# send fails, 4..16 KiB included. Before that HELLO a large send can neither READ nor copy and
	# fails ENOBUFS: that happens at the start of a client connection only (seen: 0 to 32 a run,
	# all within the first ~340 KB of a connection's stream, at sizes from 4 KiB to 1 MiB), so
	# the client's count is not asserted. The server never sends before it has the client's
	# HELLO (the first frame of its inbound ring): its count must be 0.
	# The client's library may count more than sanverify saw (a blocking send that fails after
	# moving some bytes returns the count moved), never fewer.
	name=c.alloc.auto.$mode
	fpair "$name" alloc_fail auto "$C" "${ARGS[@]}" -- "${ARGS[@]}" -b "$B" -s 31
	same_crc "$name"
	switched "$name" "$C"
	[ "$(field "$CL" read_tx_bytes)" -gt 0 ] || fail "$name: no byte went by READ from the client: $CL"
	[ "$(field "$SL" read_tx_bytes)" -gt 0 ] || fail "$name: no byte went by READ from the server: $SL"
	[ "$(field "$SL" enobufs)" -eq 0 ] && [ "$SE" -eq 0 ] ||
		fail "$name: the server's sends failed ENOBUFS (sanverify saw $SE) though it can READ: $SL"
	[ "$(field "$CL" enobufs)" -ge "$CE" ] ||
		fail "$name: sanverify saw $CE ENOBUFS, more than the client's library counted: $CL"
	log "$name: crc32 as kernel-only; READ client $(field "$CL" read_tx_bytes) B," \
		"server $(field "$SL" read_tx_bytes) B; ENOBUFS client $CE, server $SE"
done

log "all fault runs switched on both sides, crc32 as kernel-only"
