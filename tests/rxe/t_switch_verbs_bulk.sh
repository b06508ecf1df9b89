#!/bin/bash
# t_switch_verbs_bulk — large transfers over verbs by RDMA: SANSWITCH_BULK=read (the receiver
# RDMA-READs each region the sender announces with SRC_AVAIL, then READ_DONE frees it) and
# SANSWITCH_BULK=grant (the sender RDMA-WRITEs into the receiver's standing grant, then
# WRITE_DONE), docs/verbs.md §4. Each case: the crc32 equals the kernel-only run's, every
# connection is switched onto verbs at both ends, each side's byte counts are what the verifier
# moved, and the bulk counters prove the path: read_tx_bytes > 0 and grant_tx_bytes = 0 under
# read, the reverse under grant. Then a client whose RLIMIT_MEMLOCK admits the control slots but
# not the bulk area: switched, by copy, bytes verified.
# timeout: 600
set -u
# shellcheck source=tests/rxe/switch_lib.sh
. "$(dirname -- "$0")/switch_lib.sh"

for SANSWITCH_BULK in read grant; do
	export SANSWITCH_BULK
	# (every wait mode runs under auto, which reads, in t_switch_verbs)
	vcase mode.poll.block 2 -m poll -T 2 -- -m poll -T 2 -b 2M -s 31
	vcase mode.epoll-et.nonblock 2 -m epoll-et -T 2 -n -- -m epoll-et -T 2 -n -b 2M -s 31
	vcase large.block 2 -T 2 --max-write 4M --echo-buf 4M -- \
		-T 2 --min-write 256K --max-write 4M -b 8M -s 32
	vcase many.nonblock 8 -T 2 -n -m epoll -- -T 2 -n -m epoll -b 1M -s 33
	vcase halfclose.nonblock 2 -T 2 -n -m select -- -T 2 -n -m select --half-close -b 2M -s 34
	log "SANSWITCH_BULK=$SANSWITCH_BULK: every case by RDMA, crc32 as kernel-only"
done
# ---- A bulk area larger than a short link gets (docs/verbs.md §4, "Window": agreed at set-up,
# SANSWITCH_VERBS_AREA): 4 MiB each way at both ends, by READ and by GRANT, each side's debug
# line saying 4 MiB (offsets past the first MiB, in the regions and in the mirror); then a
# client that proposes 8 to a server that allows 2: both use 2.
area_line() { grep -c "verbs: bulk area $2 MiB each way" "$1"; }
for SANSWITCH_BULK in read grant; do
	export SANSWITCH_BULK SANSWITCH_VERBS_AREA=4 SANSWITCH_LOG=debug
	vcase area4.large.block 2 -T 2 --max-write 4M --echo-buf 4M -- \
		-T 2 --min-write 256K --max-write 4M -b 8M -s 36
	for f in cli srv; do
		e=$TMP/area4.large.block.$SANSWITCH_BULK.$f.err
		[ "$(area_line "$e" 4)" -eq 2 ] ||
			{ grep -E 'bulk area|warn|error' "$e" | head -n 20; fail "area4.$SANSWITCH_BULK: $f: not both connections with a 4 MiB area"; }
	done
done
unset SANSWITCH_VERBS_AREA
export SANSWITCH_BULK=read
vpair area.none none none 1 -a "$addr" -- -a "$addr" -b 4M -s 37
kcrc=$VCRC
export SANSWITCH_VERBS_AREA=2
start_server area.srv pre --conns-total 1 -t 60 -a "$addr"
export SANSWITCH_VERBS_AREA=8
rc=0
as_t pre 90 "$SANVERIFY" client -a "$addr" -p "$SERVER_PORT" -c 1 -b 4M -s 37 -t 60 \
	>"$TMP/area.cli.out" 2>"$TMP/area.cli.err" || rc=$?
wait_pid "$SERVER_PID" 30 || true
unset SANSWITCH_VERBS_AREA SANSWITCH_LOG
[ "$rc" -eq 0 ] || { show "$TMP/area.cli.out" "$TMP/area.cli.err"; fail "area 8/2: client exit $rc"; }
grep -q "crc32=$kcrc" "$TMP/area.cli.out" || fail "area 8/2: crc32 differs from kernel-only"
[ "$(area_line "$TMP/area.cli.err" 2)" -eq 1 ] && [ "$(area_line "$TMP/area.srv.err" 2)" -eq 1 ] ||
	{ grep -E 'bulk area|warn|error' "$TMP/area.cli.err" "$TMP/area.srv.err"; fail "area 8/2: the agreed area is not 2 MiB at both ends"; }
grep -q 'verbs: bulk area 2 MiB each way (8 proposed)' "$TMP/area.srv.err" ||
	{ grep -E 'bulk area|warn|error' "$TMP/area.srv.err"; fail "area 8/2: the server did not see the client's 8 MiB proposal"; }
log "bulk area 4 MiB each way (read and grant), and 8 proposed / 2 allowed: 2 at both ends; crc32 as kernel-only"
# ---- RLIMIT_MEMLOCK enough for the control slots, not for the bulk area (rxe enforces the limit
# only without CAP_IPC_LOCK; each connection pins about 1.5 MiB of slots, 64 receive and 32 send
# of 16 KiB, and its area would pin 2 MiB more, so 3.25 MiB admits both connections' slots and
# neither area): the client's connections switch, say that their area is not
# registered, and send by copy; the server has areas but its peer offers neither READ nor a
# grant, so it copies too. Same bytes, nothing by RDMA.
if command -v setpriv >/dev/null 2>&1; then
	export SANSWITCH_BULK=read
	vpair memlock.none none none 2 -a "$addr" -- -a "$addr" -b 2M -s 35
	kcrc=$VCRC
	start_server memlock.srv pre --conns-total 2 -t 60 -a "$addr"
	rc=0
	as_t pre 90 setpriv --inh-caps=-ipc_lock --bounding-set=-ipc_lock \
		prlimit --memlock=$((3328 * 1024)) "$SANVERIFY" client -a "$addr" -p "$SERVER_PORT" \
		-c 2 -b 2M -s 35 -t 60 >"$TMP/memlock.cli.out" 2>"$TMP/memlock.cli.err" || rc=$?
	wait_pid "$SERVER_PID" 30 || true
	[ "$rc" -eq 0 ] || { show "$TMP/memlock.cli.out" "$TMP/memlock.cli.err"; fail "memlock: client exit $rc"; }
	grep -q "crc32=$kcrc" "$TMP/memlock.cli.out" || fail "memlock: crc32 differs from kernel-only"
	# one warning per process (later connections say it at info level)
	n=$(grep -c 'warn: fd [0-9]*: verbs: bulk area (2048 KiB) not registered .*raise RLIMIT_MEMLOCK' \
		"$TMP/memlock.cli.err")
	[ "$n" -eq 1 ] || { show "$TMP/memlock.cli.err"; fail "memlock: $n warnings of why no area, expected 1"; }
	for f in cli srv; do
		l=$(stats_line "$TMP/memlock.$f.err") || exit 1
		[ "$(field "$l" switched_verbs)" -eq 2 ] && [ "$(field "$l" read_tx_bytes)" -eq 0 ] &&
			[ "$(field "$l" grant_tx_bytes)" -eq 0 ] ||
			fail "memlock: $f: expected 2 connections on verbs, nothing by RDMA: $l"
	done
	log "memlock 3328 KiB without CAP_IPC_LOCK: switched, no area, by copy, bytes verified"
fi

log "bulk over verbs ok"
