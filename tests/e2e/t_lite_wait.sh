#!/bin/bash
# t_lite_wait — a lite candidate's blocking receive once its peer may be due (docs/engine.md §3: it
# waits outside the gate, then takes the bytes with MSG_DONTWAIT) ends as kernel TCP's does: a
# signal without SA_RESTART (EINTR), with it (the bytes), SO_RCVTIMEO (EINTR, then EAGAIN at the
# timeout), MSG_WAITALL and MSG_PEEK (sanlitewait). With SANSWITCH_SWITCH_AFTER=4 the server's
# receive after the client's three exchanges waits outside (its peer could be due at its next
# send), while the client, whose next send begins only its 4th exchange, does not propose: the
# connection stays lite; the stats say it did not switch.
# Each mode three times.
# timeout: 120
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build

TOOL=$BUILD/sanlitewait
[ -x "$TOOL" ] || fail "no $TOOL (make)"
export SANSWITCH_STATS=1
export SANSWITCH_LITE=1 # (the default; said here: the subject is the lite path)
for mode in eintr restart timeo waitall peek; do
	for i in 1 2 3; do
		want=$(as_t none 10 "$TOOL" "$mode") || fail "$mode: over kernel TCP: exit $?"
		got=$(as_t pre 10 env SANSWITCH_SWITCH_AFTER=4 "$TOOL" "$mode" 2>"$TMP/$mode.err") ||
			{ show "$TMP/$mode.err"; fail "$mode: preloaded: exit $?"; }
		[ "$got" = "$want" ] || fail "$mode: kernel TCP: '$want'; lite candidate: '$got'"
		grep -q '^sanswitch: pid=[0-9]* switched=0 ' "$TMP/$mode.err" ||
			{ show "$TMP/$mode.err"; fail "$mode: expected no connection switched"; }
	done
	log "$want (3 runs each way, the same)"
done
