#!/bin/bash
# t_switch_sockapi — switched connections behave like kernel TCP for the application:
# switch_sockapi.py (one process, both ends of every connection) checks MSG_PEEK (small and bulk),
# FIONREAD, MSG_WAITALL, MSG_DONTWAIT and nonblocking I/O, SO_RCVTIMEO/SO_SNDTIMEO, SO_ERROR and
# the names, socket options, shutdown (SHUT_WR, SHUT_RD), close with data in flight, SO_LINGER
# {1,0} (reset), poll/select/epoll readiness (two epoll sets, EPOLLET, EPOLLONESHOT), dup, the
# peer's close and vectored I/O. It runs once on kernel TCP and once preloaded (SANSWITCH_STATS=1):
# the two outputs, '#' note lines left out, must be identical; the preloaded process must show
# switched = 2 x the pairs it made and fallback=0 (the checks really ran switched).
# timeout: 120
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build

export SANSWITCH_STATS=1

# Leave out the idle lines of processes that never had a TCP socket (pyenv shims and such).
SAME_ERR_FILTER='^sanswitch: pid=[0-9]+ switched=0 fallback=0 san_tx_bytes=0 san_rx_bytes=0 tcp_tx_bytes=0 tcp_rx_bytes=0 '
same_as_kernel "$E2E_DIR/switch_sockapi.py"

pairs=$(sed -n 's/^pairs \([0-9][0-9]*\)$/\1/p' "$TMP/pre.out")
[ -n "$pairs" ] && [ "$pairs" -gt 0 ] || { show "$TMP/pre.out"; fail "no 'pairs N' line"; }
pid=$(sed -n 's/^# pid \([0-9][0-9]*\)$/\1/p' "$TMP/pre.out")
[ -n "$pid" ] || { show "$TMP/pre.out"; fail "no '# pid P' line"; }
l=$(pid_line "$TMP/pre.err" "$pid") || exit 1
log "preloaded: $l"
[ "$(field "$l" switched)" -eq $((2 * pairs)) ] && [ "$(field "$l" fallback)" -eq 0 ] ||
	fail "expected switched=$((2 * pairs)) fallback=0 ($pairs pairs, both ends in one process): $l"
[ "$(field "$l" connects)" -eq "$pairs" ] && [ "$(field "$l" accepts)" -eq "$pairs" ] ||
	fail "expected connects=$pairs accepts=$pairs: $l"
if [ "${E2E_PROVIDER:-}" = verbs ]; then
	[ "$(field "$l" switched_verbs)" -eq $((2 * pairs)) ] ||
		fail "expected switched_verbs=$((2 * pairs)) (SANSWITCH_PROVIDER=verbs): $l"
fi
log "all $pairs pairs switched on both ends${E2E_PROVIDER:+ (provider $E2E_PROVIDER)}"
