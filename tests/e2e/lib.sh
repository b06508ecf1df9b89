# tests/e2e/lib.sh — shared helpers of the end-to-end tests (sourced by tests/e2e/t_*.sh and scripts/).
# shellcheck shell=bash
#
# A test sources this file, then drives real programs with or without the preload and checks the
# bytes. Everything a test starts in the background goes through spawn/start_server/start_listener,
# and the EXIT trap kills and reaps whatever is still running, then removes the test's temp dir.
# Waits are always bounded. Exit status: 0 pass, 1 fail, 77 skipped (something genuinely missing).
# Environment: SANSWITCH_BUILD (build dir, default ROOT/build), PYTHON (default python3), E2E_KEEP=1
# (keep the temp dir for inspection).

set -u

# The caller's SANSWITCH_* settings (a log level, a policy...) must not change what a test sees:
# each test sets the ones it needs on the command it runs. SANSWITCH_BUILD is ours (see above).
while IFS= read -r _v; do
	[ "$_v" = SANSWITCH_BUILD ] || unset "$_v"
done < <(compgen -e | grep '^SANSWITCH_')
unset _v
# Nor may the machine's /etc/sanswitch.conf: no file, unless a test names one (t_conf).
export SANSWITCH_CONF=none
# Most tests examine switched connections, and theirs are short (one request, one reply, or one
# stream): they switch in their first data call, as SANSWITCH_SWITCH_AFTER=0 makes them. The
# tests of the default policy (switch once a connection has shown it lives: t_shape_*,
# t_switch_policy) unset it. E2E_SWITCH_AFTER=N runs the suite with another value (default: the
# library's own default), to see the switch-over happen mid-stream.
case ${E2E_SWITCH_AFTER:-0} in
default) unset SANSWITCH_SWITCH_AFTER ;;
*) export SANSWITCH_SWITCH_AFTER=${E2E_SWITCH_AFTER:-0} ;;
esac
# E2E_PROVIDER=verbs: a test of tests/e2e run again over another provider (tests/rxe does that);
# E2E_ADDR: the address vpair's server listens on and its client connects to (verbs needs the
# RDMA device's; the default is sanverify's, the loopback).
[ -n "${E2E_PROVIDER:-}" ] && export SANSWITCH_PROVIDER=$E2E_PROVIDER
# The switch-over is the no-pause one (docs/protocol.md §16), whose switch lands wherever its
# handshake ends; the tests' connections are short and must switch at their due call, so the
# suite runs with SANSWITCH_NOPAUSE=2 (the due call waits for the handshake: the same
# protocol, the same edges, a fixed place). The tests of the default itself (t_switch_nopause,
# t_edge_et_ring, t_stats_fork_child's no-pause cases) set 1, those of the paused switch-over 0.
# E2E_NOPAUSE=N runs the suite with another value (1: as users run it; many tests then count
# short connections that did not switch).
export SANSWITCH_NOPAUSE=${E2E_NOPAUSE:-2}

E2E_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd -- "$E2E_DIR/../.." && pwd)
BUILD=${SANSWITCH_BUILD:-$ROOT/build}
SO=$BUILD/libsanswitch.so
SANVERIFY=$BUILD/sanverify
# A sanitized build (make SANITIZE=...): PRELOAD is what LD_PRELOAD must hold (the ASan runtime
# before the library), SAN_KINDS says which sanitizers (tests/sanitize.sh). Plain build: PRELOAD=$SO.
# shellcheck source=tests/sanitize.sh
. "$ROOT/tests/sanitize.sh"
san_detect "$SO"
PRELOAD=$SAN_PRELOAD
PY=${PYTHON:-python3}
TEST_NAME=$(basename -- "$0" .sh)

# Every test gets a private temp dir, removed by the EXIT trap.
TMP=$(mktemp -d "${TMPDIR:-/tmp}/sanswitch-$TEST_NAME.XXXXXX") || {
	echo "FAIL: $TEST_NAME: mktemp -d failed" >&2
	exit 1
}

_PIDS=()        # background processes started by this script
SPAWN_PID=      # pid of the last spawn
SERVER_PID=     # set by start_server / start_listener
SERVER_PORT=

# ---------------------------------------------------------------- messages and verdicts

log() { printf '[%s] %s\n' "$TEST_NAME" "$*"; }

# show FILE... — print files (server logs etc.) into the test's log, for diagnosis.
show() {
	local f
	for f in "$@"; do
		[ -e "$f" ] || continue
		printf -- '----- %s -----\n' "${f#"$TMP"/}"
		cat -- "$f"
	done
}

# fail MESSAGE... — the test failed: say why, and exit 1 (the EXIT trap cleans up).
fail() {
	printf 'FAIL: %s: %s\n' "$TEST_NAME" "$*" >&2
	exit 1
}

# skip REASON... — only for something genuinely unavailable on this machine.
skip() {
	printf 'SKIP: %s\n' "$*"
	exit 77
}

need_cmd() {
	local c
	for c in "$@"; do
		command -v "$c" >/dev/null 2>&1 || skip "command '$c' not installed"
	done
}

# need_build — the library and the verifier must exist: missing build output is a failure.
need_build() {
	[ -f "$SO" ] || fail "missing $SO (run make)"
	[ -x "$SANVERIFY" ] || fail "missing $SANVERIFY (run make)"
}

# ---------------------------------------------------------------- running programs

# tmo SECONDS CMD... — run CMD with a time limit (status 124 on timeout). --foreground keeps CMD in
# our process group, so the runner's per-test limit and leftover check still see it.
tmo() {
	local secs=$1
	shift
	timeout --foreground -k 5 "$secs" "$@"
}

# preload CMD... — run CMD with the switch preloaded.
preload() { env LD_PRELOAD="$PRELOAD" "$@"; }

# _menv MODE [CMD] — set MENV to the env(1) prefix for MODE: "pre" (preloaded) or "none" (plain);
# CMD, the program about to run, only matters to a sanitized build.
MENV=()
_menv() {
	case $1 in
	pre) MENV=(env "LD_PRELOAD=$PRELOAD") ;;
	none) MENV=(env -u LD_PRELOAD) ;;
	# preloaded, but no provider may carry a connection: every call takes the interposed
	# path and every connection falls back to TCP (the cost of the interposition alone)
	pass) MENV=(env "LD_PRELOAD=$PRELOAD" SANSWITCH_PROVIDER=none) ;;
	*) fail "bad mode '$1' (want pre, pass or none)" ;;
	esac
	# ASan: our own tools (built with it) are checked for leaks too, foreign programs are not
	# (tests/sanitize.sh: san_options); the last setting of a flag wins, the caller's own last.
	if [[ $SAN_KINDS == *address* && ${2:-} == "$BUILD"/* ]]; then
		MENV+=("ASAN_OPTIONS=${ASAN_OPTIONS:-}:detect_leaks=1${SAN_USER_ASAN_OPTIONS:+:$SAN_USER_ASAN_OPTIONS}")
	fi
}

# as MODE CMD... — run the external command CMD as MODE.
as() {
	_menv "$1" "${2:-}"
	shift
	"${MENV[@]}" "$@"
}

# as_t MODE SECONDS CMD... — the same, with a time limit (the timeout tool is never preloaded).
as_t() {
	_menv "$1" "${3:-}"
	local secs=$2
	shift 2
	# (removing an LD_PRELOAD that this shell does not have is a no-op: timeout(1) then runs CMD
	# itself, one program less per kernel-only run; see _now)
	[ "${MENV[*]}" = "env -u LD_PRELOAD" ] && [ -z "${LD_PRELOAD+x}" ] && MENV=()
	tmo "$secs" "${MENV[@]}" "$@"
}

# _exec_menv CMD... — in a subshell: make MENV's settings there and exec CMD, as `"${MENV[@]}" CMD`
# would without running env(1) first (see _now: a program less each time a server starts).
_exec_menv() {
	local a u=
	for a in "${MENV[@]:1}"; do
		if [ -n "$u" ]; then
			unset "$a"
			u=
			continue
		fi
		case $a in
		-u) u=1 ;;
		*=*) export "${a?}" ;;
		*) echo "_exec_menv: '$a' in MENV" >&2; exit 127 ;;
		esac
	done
	exec "$@"
}

# spawn NAME MODE CMD... — start CMD in the background (stdout/stderr to $TMP/NAME.out/.err), as
# MODE. The subshell execs CMD, so SPAWN_PID is CMD's own pid.
spawn() {
	local name=$1
	_menv "$2" "${3:-}"
	shift 2
	(_exec_menv "$@") >"$TMP/$name.out" 2>"$TMP/$name.err" </dev/null &
	SPAWN_PID=$!
	_PIDS+=("$SPAWN_PID")
}

# The polling loops below (and the helpers they call) run no program: each turn reads the clock
# (_now), /proc (_stat) and sleeps (_nap) in bash itself. In the emulated guest of tests/rxe a
# fork and exec costs a tenth of a second or more, so a turn that ran cat, date and sleep took
# half a second or more whatever interval it asked for, and each run of a test waited that long
# again and again for a server to start or to end.

# _now — the time in whole seconds since the epoch, in NOW (date +%s).
NOW=
_now() { printf -v NOW '%(%s)T' -1; }

# _nap SECONDS — sleep: a read that times out on a FIFO nothing writes to (opened read-write, so
# the open does not wait for a writer). sleep(1) if the FIFO cannot be made.
_nap() {
	[ -p "$TMP/.nap" ] || mkfifo "$TMP/.nap" 2>/dev/null
	if [ -p "$TMP/.nap" ]; then
		read -rt "$1" <>"$TMP/.nap"
	else
		sleep "$1"
	fi
	return 0
}

# _stat PID — /proc/PID/stat after "pid (comm) " ("state ppid ..."; comm may contain spaces) in
# STAT; false when there is no such process.
STAT=
_stat() {
	STAT=
	{ IFS= read -r -d '' STAT <"/proc/$1/stat" || :; } 2>/dev/null
	[ -n "$STAT" ] || return 1
	STAT=${STAT##*) }
}

# alive PID — PID is a child of this shell and has not exited. Checking the parent means a pid that
# was reaped and then reused by some other process is never mistaken for ours (nor killed).
alive() {
	local state ppid
	_stat "$1" || return 1
	read -r state ppid _ <<<"$STAT"
	[ "$ppid" = "$BASHPID" ] && [ "$state" != Z ] && [ "$state" != X ]
}

# running PID — PID exists and is not a zombie (whoever its parent is).
running() {
	_stat "$1" || return 1
	[ "${STAT%% *}" != Z ] && [ "${STAT%% *}" != X ]
}

# wait_pid PID SECONDS — wait at most SECONDS for a background child; return its exit status,
# or 124 after killing it if it did not finish in time.
wait_pid() {
	local pid=$1 secs=$2 end rc=0
	_now
	end=$((NOW + secs))
	while alive "$pid"; do
		_now
		if [ "$NOW" -ge "$end" ]; then
			kill -KILL "$pid" 2>/dev/null
			wait "$pid" 2>/dev/null
			return 124
		fi
		_nap 0.05
	done
	wait "$pid" || rc=$?
	return "$rc"
}

# stop PID — terminate a background child (TERM, then KILL after 3 s) and reap it. Does nothing
# to a pid that is no longer our running child.
stop() {
	local pid=$1 i
	if alive "$pid"; then
		kill -TERM "$pid" 2>/dev/null
		for ((i = 0; i < 60; i++)); do
			alive "$pid" || break
			sleep 0.05
		done
		alive "$pid" && kill -KILL "$pid" 2>/dev/null
	fi
	wait "$pid" 2>/dev/null
	return 0
}

# ---------------------------------------------------------------- ports and servers

# free_port [4|6] — an ephemeral port that was free a moment ago (bound, then released). Callers
# retry on a bind failure: start_listener does.
free_port() {
	local fam=${1:-4}
	env -u LD_PRELOAD "$PY" - "$fam" <<'EOF'
import socket, sys
v6 = sys.argv[1] == "6"
s = socket.socket(socket.AF_INET6 if v6 else socket.AF_INET, socket.SOCK_STREAM)
s.bind(("::1" if v6 else "127.0.0.1", 0))
print(s.getsockname()[1])
s.close()
EOF
}

# v6_ok WHAT — IPv6 loopback works here (bind, listen and connect on ::1; probed once). If not,
# print a note that WHAT is skipped and return 1: containers and CI hosts often run without ::1.
_V6=
v6_ok() {
	if [ -z "$_V6" ]; then
		_V6=no
		env -u LD_PRELOAD "$PY" - <<'EOF' >/dev/null 2>&1 && _V6=yes
import socket
l = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
l.bind(("::1", 0))
l.listen(1)
c = socket.create_connection(("::1", l.getsockname()[1]), timeout=5)
l.accept()[0].close()
c.close()
EOF
	fi
	[ "$_V6" = yes ] && return 0
	log "note: IPv6 loopback (::1) unavailable, skipping $*"
	return 1
}

# listening PORT — some TCP socket listens on PORT (either family).
listening() {
	[ -n "$(ss -Hltn "sport = :$1" 2>/dev/null)" ]
}

# wait_listen PORT PID SECONDS — wait until PORT is listened on while PID stays alive.
wait_listen() {
	local port=$1 pid=$2 secs=$3 end
	_now
	end=$((NOW + secs))
	until listening "$port"; do
		alive "$pid" || return 1
		_now
		[ "$NOW" -lt "$end" ] || return 1
		_nap 0.05
	done
	alive "$pid"
}

# start_listener NAME MODE FAMILY CMD... — start a server that takes its port on the command line:
# every literal {PORT} in CMD is replaced by a free port; retried with another port if the server
# dies (bind race). Sets SERVER_PORT and SERVER_PID.
start_listener() {
	local name=$1 mode=$2 fam=$3 try port a
	shift 3
	local -a cmd
	for try in 1 2 3 4 5; do
		port=$(free_port "$fam") || fail "free_port failed"
		cmd=()
		for a in "$@"; do cmd+=("${a//\{PORT\}/$port}"); done
		spawn "$name" "$mode" "${cmd[@]}"
		if wait_listen "$port" "$SPAWN_PID" "${LISTEN_WAIT:-15}"; then
			SERVER_PORT=$port
			SERVER_PID=$SPAWN_PID
			[ "$mode" != none ] && assert_preloaded "$SERVER_PID"
			return 0
		fi
		stop "$SPAWN_PID"
		log "start_listener $name: try $try on port $port failed"
	done
	show "$TMP/$name.out" "$TMP/$name.err"
	fail "could not start $name: ${*}"
}

# start_pf NAME MODE CMD... — start a server that writes its port to a file once listening: every
# literal {PORTFILE} in CMD is replaced by the file's path. Waits (bounded: PF_WAIT seconds, 15
# unless set) for the port; sets SERVER_PORT and SERVER_PID.
start_pf() {
	local name=$1 mode=$2 pf end a
	shift 2
	pf=$TMP/$name.port
	[ ! -e "$pf" ] || rm -f "$pf"
	local -a cmd=()
	for a in "$@"; do cmd+=("${a//\{PORTFILE\}/$pf}"); done
	spawn "$name" "$mode" "${cmd[@]}"
	_now
	end=$((NOW + ${PF_WAIT:-15}))
	until [ -s "$pf" ]; do
		_now
		if ! alive "$SPAWN_PID" || [ "$NOW" -ge "$end" ]; then
			stop "$SPAWN_PID"
			show "$TMP/$name.out" "$TMP/$name.err"
			fail "server $name did not write its port file: ${cmd[*]}"
		fi
		_nap 0.02
	done
	SERVER_PORT=
	IFS= read -r SERVER_PORT <"$pf" || :
	SERVER_PID=$SPAWN_PID
	case $SERVER_PORT in
	'' | *[!0-9]*) fail "$name: bad port file content: '$SERVER_PORT'" ;;
	esac
	[ "$mode" = pre ] && assert_preloaded "$SERVER_PID"
	return 0
}

# start_server NAME MODE ARGS... — start `sanverify server --port-file F ARGS...` (see start_pf).
start_server() {
	local name=$1 mode=$2
	shift 2
	start_pf "$name" "$mode" "$SANVERIFY" server --port-file '{PORTFILE}' "$@"
}

# assert_preloaded PID — the running process has the library mapped (LD_PRELOAD really took).
assert_preloaded() {
	local -a maps=()
	# (mapfile, not grep: see _now; this runs once a server)
	mapfile -t maps 2>/dev/null <"/proc/$1/maps"
	[[ ${maps[*]} == *libsanswitch.so* ]] ||
		fail "process $1 ($(tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null)) does not map libsanswitch.so"
}

# no_preload_errors FILE... — the dynamic loader did not refuse the library.
# same_as_kernel SCRIPT — run the Python SCRIPT (it prints "check NAME: RESULT" lines and '#'
# notes) on kernel TCP and then preloaded, into $TMP/kernel.out and $TMP/pre.out (.err); fail
# unless both ran to the end and their outputs, notes left out, are identical. The caller may
# filter $TMP/pre.err before a failure shows it (SAME_ERR_FILTER: an extended regex of lines to
# leave out), and leave checks out of the comparison (SAME_EXEMPT: an extended regex of check
# names) that it then judges itself (a documented difference).
same_as_kernel() {
	local script=$1 krc=0 prc=0 n
	as_t none 50 "$PY" "$script" >"$TMP/kernel.out" 2>"$TMP/kernel.err" || krc=$?
	if [ "$krc" -ne 0 ]; then
		show "$TMP/kernel.out" "$TMP/kernel.err"
		fail "${script##*/} exited $krc on kernel TCP (no preload): the test itself is broken"
	fi
	as_t pre 60 "$PY" "$script" >"$TMP/pre.out" 2>"$TMP/pre.err" || prc=$?
	no_preload_errors "$TMP/pre.err"
	grep -Ev "^#|^check (${SAME_EXEMPT:-\$}):" "$TMP/kernel.out" >"$TMP/kernel.cmp"
	grep -Ev "^#|^check (${SAME_EXEMPT:-\$}):" "$TMP/pre.out" >"$TMP/pre.cmp"
	n=$(grep -c '^check ' "$TMP/kernel.cmp")
	if ! diff -u --label kernel --label preloaded "$TMP/kernel.cmp" "$TMP/pre.cmp" >"$TMP/diff"; then
		cat "$TMP/diff"
		grep -Ev "${SAME_ERR_FILTER:-^\$}" "$TMP/pre.err" >"$TMP/pre.err.shown"
		show "$TMP/pre.err.shown"
		fail "the preloaded run differs from kernel TCP in $(grep -c '^+check' "$TMP/diff") of $n checks" \
			"(lines above: - kernel, + preloaded; preloaded exit $prc)"
	fi
	[ "$prc" -eq 0 ] || { show "$TMP/pre.out" "$TMP/pre.err"; fail "preloaded run exited $prc"; }
	log "all $n checks give the same results preloaded as on kernel TCP"
}

# _small FILE — FILE holds at most 64 KiB: its text in TEXT (else false). Such a file (most: a
# run's stderr) is read by the shell itself (see _now); a larger one, a debug log, by grep, faster
# there than a loop of the shell over every line.
TEXT=
_small() {
	TEXT=
	IFS= read -r -d '' -N 65537 TEXT 2>/dev/null <"$1"
	[ ${#TEXT} -le 65536 ]
}

no_preload_errors() {
	local f
	local -a big=()
	# (the large files by one grep for all, which names the files that have it, in order; its
	# status is 2 when a file is missing, match or not)
	for f in "$@"; do
		[ -s "$f" ] || continue
		if ! _small "$f"; then
			big+=("$f")
		elif [[ $TEXT == *'cannot be preloaded'* ]]; then
			show "$f"
			fail "ld.so refused LD_PRELOAD (see $f)"
		fi
	done
	[ ${#big[@]} -gt 0 ] || return 0
	f=$(grep -l 'cannot be preloaded' -- "${big[@]}" 2>/dev/null)
	[ -n "$f" ] || return 0
	f=${f%%$'\n'*}
	show "$f"
	fail "ld.so refused LD_PRELOAD (see $f)"
}

sha() { sha256sum <"$1" | cut -d' ' -f1; }

# ---------------------------------------------------------------- the stats line (SANSWITCH_STATS=1)

STATS_LINE_RE='^sanswitch: pid=[0-9]+ switched=[0-9]+ fallback=[0-9]+ san_tx_bytes=[0-9]+ san_rx_bytes=[0-9]+ tcp_tx_bytes=[0-9]+ tcp_rx_bytes=[0-9]+( [a-z_]+=[0-9]+)*$'

# _one_line FILE PREFIX WHAT — the one line of FILE that begins with PREFIX, which must match
# STATS_LINE_RE (fails unless there is exactly one, well formed). In bash alone but for a large
# file (_small): these run several times per case (see _now).
_one_line() {
	local l n=0 ok=
	local -a all=()
	if [ ! -r "$1" ]; then
		:
	elif _small "$1"; then
		mapfile -t all <<<"$TEXT"
	else
		mapfile -t all < <(grep -F -- "$2" "$1")
	fi
	for l in "${all[@]}"; do
		[[ $l == "$2"* ]] || continue
		n=$((n + 1))
		[[ $l =~ $STATS_LINE_RE ]] && ok=$l
	done
	[ "$n" -eq 1 ] || { show "$1"; fail "$(basename -- "$1"): $n stats lines$3, expected exactly 1"; }
	[ -n "$ok" ] || { show "$1"; fail "$(basename -- "$1"): malformed stats line$3"; }
	echo "$ok"
}

# stats_line FILE — the one stats line in FILE (fails unless there is exactly one, well formed).
stats_line() { _one_line "$1" 'sanswitch: pid=' ''; }

# field LINE KEY — the value of KEY=... in a stats line (one per line if KEY is there more than
# once). (Callers in $(...) add "|| exit 1": a fail there only leaves the subshell.)
field() {
	field_is "$1" "$2"
	echo "$FIELD"
}

# field_is LINE KEY — the same into FIELD, for a check that runs several times a case: no
# subshell, whose fork alone costs a few hundredths of a second in the emulated guest (see _now).
FIELD=
field_is() {
	local w
	local -a words
	FIELD=
	IFS=$' \n' read -r -d '' -a words <<<"$1" || :
	for w in "${words[@]}"; do
		[[ $w == "$2="* ]] && FIELD+=${FIELD:+$'\n'}${w#"$2="}
	done
	[ -n "$FIELD" ] || fail "no field $2 in: $1"
}

# pid_line FILE PID — the one stats line of PID in FILE (a python3 that is a wrapper script, like
# a pyenv shim, runs processes of its own that print lines too: only PID's is looked at).
pid_line() { _one_line "$1" "sanswitch: pid=$2 " " for pid $2"; }

# same_as_tcp NONE_OUT PRE_OUT WHAT — a probe's observations (its stdout, but for the "# pid N"
# line) under the switch are the ones of its run over kernel TCP.
same_as_tcp() {
	diff <(grep -v '^# pid' "$1") <(grep -v '^# pid' "$2") ||
		fail "$3 under the switch saw something else than over kernel TCP (above: < TCP, > switched)"
}

# probe_line OUT ERR — the stats line of the process that printed "# pid N" as its OUT's first line.
probe_line() {
	local pid
	pid=$(sed -n '1s/^# pid //p' "$1")
	[ -n "$pid" ] || { show "$1"; fail "$(basename -- "$1"): no '# pid' line"; }
	pid_line "$2" "$pid"
}

# pids_switched OUT ERR N WHAT — each process that printed "# pid P" in OUT has one stats line in
# ERR saying switched=N.
pids_switched() {
	local pid l
	for pid in $(sed -n 's/^# pid \([0-9]*\)$/\1/p' "$1"); do
		l=$(pid_line "$2" "$pid") || exit 1
		[ "$(field "$l" switched)" -eq "$3" ] || fail "$4: not all $3 switched: $l"
	done
}

# moved LINE KEY — san_KEY_bytes + tcp_KEY_bytes of a stats line (KEY: tx or rx).
moved() {
	moved_is "$1" "$2"
	echo "$MOVED"
}

# moved_is LINE KEY — the same into MOVED (see field_is).
MOVED=
moved_is() {
	field_is "$1" "san_$2_bytes"
	MOVED=$FIELD
	field_is "$1" "tcp_$2_bytes"
	MOVED=$((MOVED + FIELD))
}

# vswitched NAME CONNS — after `vpair NAME pre pre CONNS ...`: on both sides every connection was
# switched and none fell back; the client opened CONNS, the server accepted CONNS; and the byte
# counts are the application's payload exactly: the client sent a 32-byte header and the stream
# on each connection, the server echoed the stream (VBYTES, over all connections). Sets VCL and
# VSL, the client's and the server's stats lines.
VCL=
VSL=
vswitched() {
	local name=$1 conns=$2 l up down sw
	VCL=$(stats_line "$TMP/$name.cli.err") || exit 1
	VSL=$(stats_line "$TMP/$name.srv.err") || exit 1
	for l in "$VCL" "$VSL"; do
		field_is "$l" switched
		sw=$FIELD
		field_is "$l" fallback
		[ "$sw" -eq "$conns" ] && [ "$FIELD" -eq 0 ] || {
			show "$TMP/$name.cli.err" "$TMP/$name.srv.err"
			fail "$name: not all $conns connections switched: $l"
		}
	done
	field_is "$VCL" connects
	[ "$FIELD" -eq "$conns" ] || fail "$name: client connects != $conns: $VCL"
	field_is "$VSL" accepts
	[ "$FIELD" -eq "$conns" ] || fail "$name: server accepts != $conns: $VSL"
	up=$((VBYTES + 32 * conns))
	down=$VBYTES
	moved_is "$VCL" tx
	[ "$MOVED" -eq "$up" ] || fail "$name: client sent $up bytes, its line says $MOVED: $VCL"
	moved_is "$VSL" rx
	[ "$MOVED" -eq "$up" ] || fail "$name: server received $up bytes, its line says $MOVED: $VSL"
	moved_is "$VSL" tx
	[ "$MOVED" -eq "$down" ] || fail "$name: server sent $down bytes, its line says $MOVED: $VSL"
	moved_is "$VCL" rx
	[ "$MOVED" -eq "$down" ] || fail "$name: client received $down bytes, its line says $MOVED: $VCL"
}

# ---------------------------------------------------------------- the verifier

# lines_with FILE PREFIX — the lines of a short FILE that begin with PREFIX (a fixed string), in
# LINES (one per line); false when there is none. grep '^PREFIX' without running grep (see _now).
LINES=
lines_with() {
	local l
	LINES=
	[ -r "$1" ] || return 1
	while IFS= read -r l || [ -n "$l" ]; do
		[[ $l == "$2"* ]] && LINES+=${LINES:+$'\n'}$l
	done <"$1"
	[ -n "$LINES" ]
}

# vpair NAME SMODE CMODE CONNS SERVER_ARGS -- CLIENT_ARGS — one sanverify server/client run:
# server as SMODE, client as CMODE (pre|none), CONNS connections. Both must report "ok" with the
# right counts. Sets VCRC (client crc32) and VBYTES (client byte total).
VCRC=
VBYTES=
vpair() {
	local name=$1 smode=$2 cmode=$3 conns=$4 rc=0 srv_rc=0 line
	shift 4
	local -a sargs=() cargs=()
	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		sargs+=("$1")
		shift
	done
	[ $# -gt 0 ] && shift
	cargs=("$@")
	if [ -n "${E2E_ADDR:-}" ]; then
		sargs=(-a "$E2E_ADDR" "${sargs[@]}")
		cargs=(-a "$E2E_ADDR" "${cargs[@]}")
	fi
	start_server "$name.srv" "$smode" --conns-total "$conns" -t 60 "${sargs[@]}"
	as_t "$cmode" 90 "$SANVERIFY" client -p "$SERVER_PORT" -c "$conns" -t 60 "${cargs[@]}" \
		>"$TMP/$name.cli.out" 2>"$TMP/$name.cli.err" || rc=$?
	wait_pid "$SERVER_PID" 30 || srv_rc=$?
	no_preload_errors "$TMP/$name.cli.err" "$TMP/$name.srv.err"
	if [ "$rc" -ne 0 ] || [ "$srv_rc" -ne 0 ]; then
		show "$TMP/$name.cli.out" "$TMP/$name.cli.err" "$TMP/$name.srv.out" "$TMP/$name.srv.err"
		fail "$name: client exit $rc, server exit $srv_rc (server=$smode client=$cmode," \
			"server args: ${sargs[*]}; client args: ${cargs[*]})"
	fi
	lines_with "$TMP/$name.cli.out" 'sanverify: client ok ' ||
		{ show "$TMP/$name.cli.out"; fail "$name: no 'client ok' line"; }
	line=$LINES
	lines_with "$TMP/$name.srv.out" "sanverify: server ok conns=$conns " ||
		{ show "$TMP/$name.srv.out"; fail "$name: no 'server ok conns=$conns' line"; }
	[[ $line =~ conns=([0-9]+)\ bytes=([0-9]+)\ crc32=([0-9A-Fa-f]{8}) ]] ||
		fail "$name: cannot parse '$line'"
	[ "${BASH_REMATCH[1]}" -eq "$conns" ] || fail "$name: client verified ${BASH_REMATCH[1]} of $conns conns"
	VBYTES=${BASH_REMATCH[2]}
	VCRC=${BASH_REMATCH[3]}
	log "$name: server=$smode client=$cmode ok bytes=$VBYTES crc32=$VCRC"
}

# ---------------------------------------------------------------- cleanup

# Kill every process this script started that is still running (its whole descendant tree, found
# in the live process table, so a reaped pid reused by someone else is never hit), reap, and remove
# the temp dir. Runs on every exit path.
_descendants() {
	# Runs in a command substitution: leave out that subshell's own subtree (ps, awk).
	ps -e -o pid= -o ppid= 2>/dev/null | awk -v root="$1" -v skip="$BASHPID" '
		$1 != skip { kids[$2] = kids[$2] " " $1 }
		END {
			n = split(kids[root], q, " ")
			for (i = 1; i <= n; i++) {
				print q[i]
				m = split(kids[q[i]], more, " ")
				for (j = 1; j <= m; j++) q[++n] = more[j]
			}
		}'
}

_cleanup() {
	local rc=$? pid i left me=$BASHPID
	local -a victims=()
	trap - EXIT INT TERM
	# shellcheck disable=SC2207 # pids are plain numbers
	victims=($(_descendants "$me"))
	if [ ${#victims[@]} -gt 0 ]; then
		kill -TERM "${victims[@]}" 2>/dev/null
		for ((i = 0; i < 60; i++)); do
			left=0
			for pid in "${victims[@]}"; do
				running "$pid" && left=1 && break
			done
			[ "$left" -eq 0 ] && break
			sleep 0.05
		done
		[ "$left" -eq 1 ] && kill -KILL "${victims[@]}" 2>/dev/null
	fi
	for pid in "${_PIDS[@]}"; do
		alive "$pid" && kill -KILL "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	done
	if [ -n "${E2E_KEEP:-}" ]; then
		echo "[$TEST_NAME] E2E_KEEP: files kept in $TMP" >&2
	else
		rm -rf -- "$TMP"
	fi
	exit "$rc"
}
trap _cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT
