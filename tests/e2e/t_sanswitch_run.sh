#!/bin/bash
# t_sanswitch_run — sanswitch-run, from the build tree and installed (make install PREFIX=...):
# iperf3 client and server under it switch (their stats lines say so) and map the library it
# found; it execs (same pid) and passes the exit status through; LD_PRELOAD's own entries stay
# (first), another libsanswitch.so leaves; options become SANSWITCH_* variables; bad usage, a
# missing program and a missing library are errors that say what is wrong.
# timeout: 180
# shellcheck disable=SC2016 # the sh -c scripts expand their own variables
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build
need_cmd iperf3
need_cmd make

RUN=$BUILD/sanswitch-run
[ -x "$RUN" ] || fail "no $RUN (make builds it)"
LIB=$(cd -P -- "$BUILD" && pwd -P)/libsanswitch.so
# A sanitized build needs its runtime first in LD_PRELOAD; sanswitch-run keeps it there.
BASE=${SAN_PRELOAD% "$SO"}
[ "$BASE" = "$SAN_PRELOAD" ] && BASE=

# runs NAME CMD... — run CMD (no preload of ours: only sanswitch-run's), status in RC, output in
# $TMP/NAME.out and .err.
RC=0
runs() {
	local name=$1
	shift
	RC=0
	tmo 30 env ${BASE:+LD_PRELOAD="$BASE"} "$@" >"$TMP/$name.out" 2>"$TMP/$name.err" </dev/null || RC=$?
}

# ------------------------------------------------------------ exit status, exec, variables
runs false "$RUN" false
[ "$RC" -eq 1 ] || fail "sanswitch-run false: exit $RC, expected 1"
runs seven "$RUN" sh -c 'exit 7'
[ "$RC" -eq 7 ] || fail "sanswitch-run sh -c 'exit 7': exit $RC, expected 7"
# exec: the program has the pid the script had.
runs pid sh -c 'echo $$; exec "$0" sh -c "echo \$\$"' "$RUN"
[ "$RC" -eq 0 ] && [ "$(sed -n 1p "$TMP/pid.out")" = "$(sed -n 2p "$TMP/pid.out")" ] ||
	{ show "$TMP/pid.out" "$TMP/pid.err"; fail "the program does not have the script's pid (no exec?)"; }
runs maps "$RUN" sh -c 'grep -c libsanswitch "/proc/$$/maps"'
[ "$RC" -eq 0 ] && [ "$(cat "$TMP/maps.out")" -gt 0 ] || { show "$TMP/maps.err"; fail "the program does not map the library"; }
runs vars "$RUN" --provider none --log=info --log-file "$TMP/l.%p" --stats=log --conf /dev/null -- \
	sh -c 'echo "$SANSWITCH_PROVIDER|$SANSWITCH_LOG|$SANSWITCH_LOG_FILE|$SANSWITCH_STATS|$SANSWITCH_CONF"'
[ "$(cat "$TMP/vars.out")" = "none|info|$TMP/l.%p|log|/dev/null" ] ||
	{ show "$TMP/vars.out" "$TMP/vars.err"; fail "options did not become the variables"; }
runs stats1 "$RUN" --stats sh -c 'echo "$SANSWITCH_STATS"'
[ "$(cat "$TMP/stats1.out")" = 1 ] || fail "--stats did not set SANSWITCH_STATS=1"
runs version "$RUN" --version
[ "$RC" -eq 0 ] && grep -q '^sanswitch-run (libsanswitch) ' "$TMP/version.out" || fail "--version: exit $RC"
runs help "$RUN" --help
[ "$RC" -eq 0 ] && grep -q -- '--log-file' "$TMP/help.out" || fail "--help: exit $RC"
log "exit status passes through (1, 7); exec keeps the pid; options set the variables"

# ------------------------------------------------------------ LD_PRELOAD
# The caller's entries stay, before ours (libm.so.6: a library that is always there, and defines
# none of the functions the library looks up behind itself: libc.so.6 there would hide them).
runs keep env LD_PRELOAD="${BASE:+$BASE }libm.so.6" "$RUN" sh -c 'printf %s "$LD_PRELOAD"'
want="${BASE:+$BASE:}libm.so.6:$LIB"
[ "$(cat "$TMP/keep.out")" = "$want" ] || { show "$TMP/keep.out" "$TMP/keep.err"; fail "LD_PRELOAD: '$(cat "$TMP/keep.out")', expected '$want'"; }
# another libsanswitch.so (an installed one, say) leaves: one process never maps two.
runs other env LD_PRELOAD="${BASE:+$BASE:}$TMP/elsewhere/libsanswitch.so libm.so.6" "$RUN" sh -c 'printf %s "$LD_PRELOAD"'
[ "$(cat "$TMP/other.out")" = "$want" ] || { show "$TMP/other.out"; fail "LD_PRELOAD: '$(cat "$TMP/other.out")', expected '$want'"; }
log "LD_PRELOAD: the caller's entries kept, first; another libsanswitch.so replaced"

# ------------------------------------------------------------ errors
# err NAME STATUS TEXT ARGS... — sanswitch-run ARGS exits STATUS, saying TEXT on stderr, nothing on stdout.
err() {
	local name=$1 st=$2 text=$3
	shift 3
	runs "$name" "$@"
	[ "$RC" -eq "$st" ] && grep -qF -- "$text" "$TMP/$name.err" && [ ! -s "$TMP/$name.out" ] || {
		show "$TMP/$name.out" "$TMP/$name.err"
		fail "$name: exit $RC (expected $st), stderr should say: $text"
	}
}
err noprog 2 'no program to run' "$RUN"
err noprog2 2 'no program to run' "$RUN" --log debug --
err unknown 2 "unknown option '--bogus'" "$RUN" --bogus true
err badprov 2 "--provider: 'rdma' is not one of: auto shm verbs none" "$RUN" --provider rdma true
err badlog 2 "--log: 'loud' is not one of" "$RUN" --log=loud true
err noval 2 '--log-file needs a value' "$RUN" --log-file
err badstats 2 "--stats: 'yes' is not one of: log" "$RUN" --stats=yes true
err noconf 2 "--conf $TMP/none: no such readable file" "$RUN" --conf "$TMP/none" true
err notfound 127 'no-such-program-x: command not found' "$RUN" no-such-program-x
# A copy of the script with no library beside it and none installed says where it looked.
installed=$(sed -n "s/^INSTALLED_LIB='\(.*\)'\$/\1/p" "$RUN")
[ -n "$installed" ] || fail "no INSTALLED_LIB line in $RUN"
mkdir "$TMP/alone"
sed "s|^INSTALLED_LIB=.*|INSTALLED_LIB='$TMP/nowhere/libsanswitch.so'|" "$RUN" >"$TMP/alone/sanswitch-run"
chmod +x "$TMP/alone/sanswitch-run"
err nolib 2 "libsanswitch.so not found: looked in $TMP/alone/libsanswitch.so and $TMP/nowhere/libsanswitch.so" \
	"$TMP/alone/sanswitch-run" true
log "errors: usage (2), no program (127), no library (2, says where it looked)"

# ------------------------------------------------------------ iperf3 under sanswitch-run
# iperf_pair NAME RUNNER — server and client both started by RUNNER --stats; each maps LIBPATH and
# prints a stats line with switched >= 1.
iperf_pair() {
	local name=$1 run=$2 libpath=$3 rc=0 srv_rc=0 l
	start_listener "$name.srv" none 4 env ${BASE:+LD_PRELOAD="$BASE"} "$run" --stats \
		iperf3 -s -1 -B 127.0.0.1 -p '{PORT}'
	# the listener is the script's pid, exec'd into iperf3, with the library it found
	grep -qF "$libpath" "/proc/$SERVER_PID/maps" || fail "$name: the server (pid $SERVER_PID) does not map $libpath"
	tmo 60 env ${BASE:+LD_PRELOAD="$BASE"} "$run" --stats iperf3 -c 127.0.0.1 -p "$SERVER_PORT" -n 64M \
		>"$TMP/$name.cli.out" 2>"$TMP/$name.cli.err" </dev/null || rc=$?
	wait_pid "$SERVER_PID" 20 || srv_rc=$?
	no_preload_errors "$TMP/$name.cli.err" "$TMP/$name.srv.err"
	[ "$rc" -eq 0 ] && [ "$srv_rc" -eq 0 ] ||
		{ show "$TMP/$name.cli.err" "$TMP/$name.srv.err"; fail "$name: iperf3 client exit $rc, server exit $srv_rc"; }
	for e in "$TMP/$name.cli.err" "$TMP/$name.srv.err"; do
		l=$(stats_line "$e") || exit 1
		[ "$(field "$l" switched)" -ge 1 ] || fail "$name: nothing switched: $l"
	done
	[ "$(field "$(stats_line "$TMP/$name.srv.err")" pid)" = "$SERVER_PID" ] ||
		fail "$name: the server's stats line is not of pid $SERVER_PID"
	log "$name: iperf3 both ends under $run: switched ($(field "$l" switched) connections)"
}
iperf_pair build "$RUN" "$LIB"

# ------------------------------------------------------------ installed (PREFIX, no DESTDIR)
MK=(make --no-print-directory -C "$ROOT")
[ -n "$SAN_KINDS" ] && MK+=("SANITIZE=${SAN_KINDS// /,}")
PFX=$TMP/usr
rc=0
"${MK[@]}" install PREFIX="$PFX" >"$TMP/install.out" 2>&1 || rc=$?
[ "$rc" -eq 0 ] || { show "$TMP/install.out"; fail "make install PREFIX=$PFX exited $rc"; }
[ ! -e "$PFX/bin/libsanswitch.so" ] || fail "a library beside the installed script: the test would not see the LIBDIR lookup"
iperf_pair installed "$PFX/bin/sanswitch-run" "$PFX/lib/sanswitch/libsanswitch.so"
runs inst_rc "$PFX/bin/sanswitch-run" sh -c 'exit 7'
[ "$RC" -eq 7 ] || fail "installed: sanswitch-run sh -c 'exit 7': exit $RC"
"${MK[@]}" uninstall PREFIX="$PFX" >"$TMP/uninstall.out" 2>&1 || { show "$TMP/uninstall.out"; fail "make uninstall failed"; }
[ ! -e "$PFX/bin/sanswitch-run" ] || fail "make uninstall left $PFX/bin/sanswitch-run"
