#!/bin/bash
# t_switch_verbs_regcache — READ straight into the application's receive buffer, through the
# registration cache (docs/verbs-registration.md), and the cache's one promise: no registration
# outlives the pages it was made of. build/sanregreuse receives 192 KiB rounds over verbs
# (SANSWITCH_BULK=read) into a buffer that it keeps (the registration is reused: hits), or frees,
# unmaps, discards or reallocs after each round, or that lives on the stack of a thread that
# exits after its round (each new buffer, usually at the old address, must be registered anew:
# misses, no hit), and checks every byte of every round itself. A stale
# registration would place a round's bytes in pages the buffer no longer has: the comparison
# fails. The stats line proves the path: verbs_direct_rx_bytes > 0 (these cases run with
# SANSWITCH_READ_AHEAD=0, so that every round is READ on demand). Last, a receiver that is
# behind (it starts reading a second after the sender sent everything), with read ahead as it is
# by default (auto: the READ window's depth) and fixed at 8: rounds waiting behind the first are
# READ ahead into the mirror (verbs_ahead_rx_bytes > 0), every byte still checked.
# And a receiver whose RLIMIT_MEMLOCK leaves no room to register its buffer: the mirror serves.
# timeout: 300
set -u
# shellcheck source=tests/rxe/switch_lib.sh
. "$(dirname -- "$0")/switch_lib.sh"
RR=$BUILD/sanregreuse
[ -x "$RR" ] || fail "missing $RR (run make)"
export SANSWITCH_BULK=read
rounds=12

for mode in keep malloc mmap madvise realloc thread burst burst8; do
	sargs=()
	case $mode in
	burst) sargs=(--burst) && unset SANSWITCH_READ_AHEAD ;;
	burst8) sargs=(--burst) && export SANSWITCH_READ_AHEAD=8 ;;
	*) export SANSWITCH_READ_AHEAD=0 ;;
	esac
	start_pf "$mode.srv" pre "$RR" server -a "$addr" --port-file '{PORTFILE}' -r "$rounds" "${sargs[@]}"
	rc=0
	as_t pre 90 "$RR" client -a "$addr" -p "$SERVER_PORT" -m "${mode%8}" -r "$rounds" \
		>"$TMP/$mode.cli.out" 2>"$TMP/$mode.cli.err" || rc=$?
	wait_pid "$SERVER_PID" 30 || rc=$((rc ? rc : 99))
	# (the client's line read by the shell, not grep and sed: see _now in tests/e2e/lib.sh)
	if [ "$rc" -ne 0 ] || ! lines_with "$TMP/$mode.cli.out" "sanregreuse: client ok rounds=$rounds " ||
		[[ ! $LINES =~ \ reused=([0-9]+)$ ]]; then
		show "$TMP/$mode.cli.out" "$TMP/$mode.cli.err" "$TMP/$mode.srv.out" "$TMP/$mode.srv.err"
		fail "$mode: the client did not receive every round intact (exit $rc)"
	fi
	reused=${BASH_REMATCH[1]}
	cl=$(stats_line "$TMP/$mode.cli.err") || exit 1
	sl=$(stats_line "$TMP/$mode.srv.err") || exit 1
	for l in "$cl" "$sl"; do
		[ "$(field "$l" switched_verbs)" -eq 1 ] || fail "$mode: not switched onto verbs: $l"
	done
	direct=$(field "$cl" verbs_direct_rx_bytes) || exit 1
	hits=$(field "$cl" verbs_reg_hits) || exit 1
	misses=$(field "$cl" verbs_reg_misses) || exit 1
	ahead=$(field "$cl" verbs_ahead_rx_bytes) || exit 1
	[ "$direct" -gt 0 ] || fail "$mode: nothing was READ into the application's buffer: $cl"
	case $mode in burst*) ;; *) [ "$ahead" -eq 0 ] || fail "$mode: READ ahead with SANSWITCH_READ_AHEAD=0: $cl" ;; esac
	case $mode in
	burst*)
		# rounds that waited behind an unread one were READ ahead; the first was not
		[ "$ahead" -gt 0 ] || fail "$mode: nothing was READ ahead of a receiver that was behind: $cl"
		;;
	keep)
		# one registration, then hits for the rounds after
		[ "$misses" -le 2 ] && [ "$hits" -ge $((rounds / 2)) ] ||
			fail "$mode: expected the registration reused (hits >= $((rounds / 2)), misses <= 2): $cl"
		;;
	*)
		# every buffer is new memory: a hit would be a registration of the old pages
		[ "$hits" -eq 0 ] && [ "$misses" -ge 2 ] ||
			fail "$mode: expected no hit and a registration per round: $cl"
		# and the test is only worth something if a new buffer took an old one's address
		# (realloc: grown in place or moved, the old pages change either way)
		[ "$reused" -ge 1 ] || [ "$mode" = realloc ] ||
			fail "$mode: no round reused an earlier buffer's address"
		;;
	esac
	log "$mode: $rounds rounds intact; direct $direct bytes, ahead $ahead, hits $hits, misses $misses, reused addresses $reused"
done
# ---- RLIMIT_MEMLOCK (without CAP_IPC_LOCK) that admits the connection's slots and bulk area
# (1542 + 2048 KiB) but not a 192 KiB receive buffer: every lookup fails (ibv_reg_mr: ENOMEM),
# and the receives go through the mirror, READ by READ, every byte still right.
export SANSWITCH_READ_AHEAD=0
if command -v setpriv >/dev/null 2>&1; then
	start_pf memlock.srv pre "$RR" server -a "$addr" --port-file '{PORTFILE}' -r "$rounds"
	rc=0
	as_t pre 90 setpriv --inh-caps=-ipc_lock --bounding-set=-ipc_lock prlimit --memlock=$((3700 * 1024)) \
		"$RR" client -a "$addr" -p "$SERVER_PORT" -m keep -r "$rounds" \
		>"$TMP/memlock.cli.out" 2>"$TMP/memlock.cli.err" || rc=$?
	wait_pid "$SERVER_PID" 30 || rc=$((rc ? rc : 99))
	if [ "$rc" -ne 0 ] || ! lines_with "$TMP/memlock.cli.out" "sanregreuse: client ok rounds=$rounds "; then
		show "$TMP/memlock.cli.out" "$TMP/memlock.cli.err" "$TMP/memlock.srv.err"
		fail "memlock: the client did not receive every round intact (exit $rc)"
	fi
	cl=$(stats_line "$TMP/memlock.cli.err") || exit 1
	sl=$(stats_line "$TMP/memlock.srv.err") || exit 1
	[ "$(field "$sl" read_tx_bytes)" -gt 0 ] ||
		fail "memlock: the client's area was not registered (no READ transfers): $sl"
	[ "$(field "$cl" verbs_direct_rx_bytes)" -eq 0 ] && [ "$(field "$cl" verbs_reg_misses)" -gt 0 ] ||
		fail "memlock: expected every registration refused and no direct READ: $cl"
	log "memlock 3700 KiB: area registered, receive buffers not: by the mirror, $rounds rounds intact"
fi
log "READ into the application's buffer: registrations reused, never stale"
