#!/bin/bash
# t_edge_seccomp — a program that confines itself with a seccomp filter mid-connection, as
# OpenSSH's pre-authentication child does (prctl(PR_SET_SECCOMP), only read, write, close, futex,
# exit allowed from then on: any other system call kills it with SIGSYS). build/sanseccomp: the
# server reads its client's first request, confines itself, then echoes 20 requests with read()
# and write(). Over kernel TCP, then 10 times with both ends preloaded under the default policy
# (the client proposes at its second request, after the filter): the server must live to the end
# and the client get every echo; the connection stays TCP (the library steps aside in a process
# that confines itself: docs/engine.md §9). Before, the library's own calls (a read() made a
# recvmsg(), waits, getsockopt) killed the server at its next read: a preloaded sshd broke every
# ssh login, even from a client not preloaded.
# timeout: 120
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build
# Under SANITIZE=address the tool itself is built without ASan (Makefile: its runtime's own system
# calls would meet the tool's filter); the library preloaded into it is the sanitized one.
SEC=$BUILD/sanseccomp
[ -x "$SEC" ] || SEC=$ROOT/build/sanseccomp # an older build without the tool
[ -x "$SEC" ] || fail "missing sanseccomp (run make)"
export SANSWITCH_STATS=1
WANT=$'client: 20 exchanges, bytes checked\nserver: 20 exchanges'

for i in kernel $(seq 10); do
	mode=pre
	[ "$i" = kernel ] && mode=none
	rc=0
	as_t "$mode" 30 env -u SANSWITCH_SWITCH_AFTER "$SEC" 20 >"$TMP/$i.out" 2>"$TMP/$i.err" || rc=$?
	no_preload_errors "$TMP/$i.err"
	got=$(sort "$TMP/$i.out")
	if [ "$rc" -ne 0 ] || [ "$got" != "$WANT" ]; then
		show "$TMP/$i.out" "$TMP/$i.err"
		fail "run $i ($mode): exit $rc$([ "$rc" -eq 159 ] && echo ' (SIGSYS: killed by its filter)')"
	fi
	if [ "$mode" = pre ]; then
		l=$(stats_line "$TMP/$i.err") || exit 1 # the client's: the sandboxed server prints none
		[ "$(field "$l" switched)" -eq 0 ] || fail "run $i: the client says it switched: $l"
	fi
done
log "a server confining itself with seccomp mid-connection: 10 preloaded runs as over kernel TCP"

# Logging to a file (one per process) in the process that confines itself: it lives, and its
# lines (debug: the step aside) are in its file, none on stderr. (Its file is opened before the
# filter in any case: san_log_sandbox; no line of the confined thread comes later here.)
mkdir "$TMP/logs"
rc=0
as_t pre 30 env -u SANSWITCH_SWITCH_AFTER SANSWITCH_LOG=debug SANSWITCH_LOG_FILE="$TMP/logs/s.%p" \
	"$SEC" 20 >"$TMP/log.out" 2>"$TMP/log.err" || rc=$?
got=$(sort "$TMP/log.out")
if [ "$rc" -ne 0 ] || [ "$got" != "$WANT" ]; then
	show "$TMP/log.out" "$TMP/log.err"
	fail "logging to a file: exit $rc$([ "$rc" -eq 159 ] && echo ' (SIGSYS: killed by its filter)')"
fi
grep -l 'debug: seccomp: the process confines itself' "$TMP"/logs/s.* >/dev/null ||
	{ head -n 5 "$TMP"/logs/s.* >&2; fail "logging to a file: no process logged its seccomp step aside"; }
! grep -q 'sanswitch\[' "$TMP/log.err" || { show "$TMP/log.err"; fail "logging to a file: library lines on stderr"; }
log "a server confining itself with SANSWITCH_LOG_FILE and debug: lives, its lines in its file"
