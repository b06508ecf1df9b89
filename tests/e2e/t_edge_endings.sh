#!/bin/bash
# t_edge_endings — the kernel is the oracle for how a SENDER's process ends ("Kernel TCP's contract
# at every edge", items 1, 2 and 5). build/sanedge sends N bytes of a pattern and then ends its
# process one way or another (close, exit without close, _exit, exit_group, shutdown then _exit,
# shutdown WR then RDWR then exit, SIGKILL, SIGSEGV, abort, exec with the fd inherited, fork with
# the parent or the child going first, SO_LINGER 0); the reader (sanedge read) checks every byte
# and prints one line: bytes, first bad offset, how the stream ended (EOF or an errno), FNV-1a.
# Each case runs over kernel TCP (no preload on either side) and with both processes preloaded
# (their connection switched onto shm: the reader's stats line must say switched=1, or the case
# tested nothing), and the reader's lines must be the same. Nothing is hard-coded: the kernel run
# of the same case is the expectation. Only where the kernel run itself lost bytes to a reset
# (SO_LINGER 0 drops what is still queued at the sender, an amount that is timing) are bytes and
# fnv left out and first_bad and the end compared; when the kernel delivered every byte before
# its reset, the switched reader must too. ms= (when the end came) is shown, not compared.
#
# Matrix (190 cases): every ending x reader delay 0 / 500 ms x 1 B, 64 KiB, 3 MiB (8 KiB sends)
# x the reader waiting in a blocking recv / in poll, select or epoll (rotated), the sender
# connecting; the sender accepting (the reader connects and sends one byte first, sanedge
# --hello, so the switch is proposed before the sender can be gone) for every ending at delay 0,
# 1 B and 3 MiB; a slow reader (4 KiB reads 200 us apart, 3 MiB) for 7 endings; 300 MiB with
# shutdown WR, RDWR, exit (the file-copy pattern) to a fast reader. Cases at delay 0 (the sender
# ends while the reader reads or waits) run ROUNDS times switched (default 4: 32 switched runs at
# delay 0 per ending, where a 1-in-20 failure shows 4 times in 5; each round costs about 35 s,
# raise E2E_TIMEOUT above ROUNDS=6) and KROUNDS times over the kernel (default 1): a switched
# line that any kernel round gave passes. Runs that mostly wait (delay 500; exec and
# fork_parent_exit, whose holder keeps the connection 1 to 1.5 s) are started staggered, each once
# the previous one's sender has reported its sends. EDGE_MODES="close kill" limits the endings
# (EDGE_DELAYS, EDGE_SIZES, EDGE_WAITS and EDGE_EXTRA the rest of the matrix, below);
# E2E_VERBOSE=1 shows every run's files. One summary line per case; the test fails if any case
# differs, or a sender did not report all its sends, or a switched run did not switch: such a run
# is made again first, EDGE_RETRIES times at most (default 2; said in the case's line, its reader
# still held to TCP's outcome), and only one still not switched then fails. About 3 min on 2 cores.
# timeout: 360
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build

EDGE=$BUILD/sanedge
[ -x "$EDGE" ] || fail "missing $EDGE (run make)"
export SANSWITCH_STATS=1 # read by the preloaded processes only
ROUNDS=${ROUNDS:-4}
KROUNDS=${KROUNDS:-1}
# A switched run whose connection did not switch is made again, this many times at most.
RETRIES=${EDGE_RETRIES:-2}
# shellcheck disable=SC2207 # one name a line
ALL_MODES=($("$EDGE" modes))
# shellcheck disable=SC2206 # a list of names
MODES=(${EDGE_MODES:-${ALL_MODES[@]}})
# A smaller matrix (tests/rxe's run over verbs): EDGE_DELAYS (default "0 500"), EDGE_SIZES
# (default "1 65536 3145728"), EDGE_WAITS (block: a blocking recv, rot: the rotated poll, select
# or epoll; default both; one: a single case, the two taken in turn), EDGE_EXTRA (sacc: the
# sender accepting, slow: the slow reader, big: 300 MiB, none: neither; default all three),
# EDGE_ROT (the waits "rot" takes in turn; default "poll select epoll"). EDGE_TMO: the reader's
# limit in s (default 8; its alarm starts before the sender has connected, so a slow start, as
# an emulated guest's, eats into it).
DELAYS=${EDGE_DELAYS:-0 500}
SIZES=${EDGE_SIZES:-1 65536 3145728}
WAITS=${EDGE_WAITS:-block rot}
EXTRA=${EDGE_EXTRA:-sacc slow big}
TMO=${EDGE_TMO:-8}
# shellcheck disable=SC2206 # a list of names
ROT=(${EDGE_ROT:-poll select epoll})
rot_i=0 one_i=0
KB64=65536
MB3=3145728

T0=$EPOCHSECONDS
ncases=0 nok=0 nbad=0 ndoc=0 nretry=0
BAD=() # one line per failed case, for the closing table

# run_start ID ENV ROLE MODE SIZE DELAY WAIT RSIZE SLOW CHUNK TMO [SENDER_ARG...] — start one run:
# the reader and the sender both as ENV (none|pre; or READER_ENV:SENDER_ENV); ROLE sconn (the
# sender connects) or sacc (it accepts). Its files are $TMP/ID.r.* and $TMP/ID.s.*; run_finish ID
# collects it.
declare -A RPID SPID RSIZE_ RENV RTMO
run_start() {
	local id=$1 env=$2 role=$3 mode=$4 size=$5 delay=$6 wait=$7 rsize=$8 slow=$9 chunk=${10} tmo=${11}
	shift 11
	local -a rargs=(--delay "$delay" --wait "$wait" --rsize "$rsize" --slow-us "$slow"
		--timeout "$tmo")
	local -a sargs=(--bytes "$size" --chunk "$chunk" --end "$mode" --timeout $((tmo + 20)) "$@")
	local a
	local renv=${env%:*} senv=${env#*:}
	# The sender runs under sh, which waits for it: a sender killed by a signal (kill, crash,
	# abort) is reported by sh into the sender's .err, not by this shell into the test's log.
	local -a sender=(sh -c '"$@"; exit $?' sh "$EDGE" send)
	# (emptied by the shell, not rm: see lines() below; run_sent looks at the sender's .out)
	for a in r.out r.err s.out s.err; do : >"$TMP/$id.$a"; done
	if [ "$role" = sconn ]; then
		start_pf "$id.r" "$renv" "$EDGE" read --port-file '{PORTFILE}' "${rargs[@]}"
		RPID[$id]=$SERVER_PID
		spawn "$id.s" "$senv" "${sender[@]}" --port "$SERVER_PORT" "${sargs[@]}"
		SPID[$id]=$SPAWN_PID
	else
		start_pf "$id.s" "$senv" "${sender[@]}" --listen-port-file '{PORTFILE}' --hello "${sargs[@]}"
		SPID[$id]=$SERVER_PID
		spawn "$id.r" "$renv" "$EDGE" read --connect "$SERVER_PORT" --hello "${rargs[@]}"
		RPID[$id]=$SPAWN_PID
	fi
	RSIZE_[$id]=$size
	RENV[$id]=$renv
	RTMO[$id]=$tmo
}

# ours PID — PID is still a running sanedge (a fork child of one of our senders).
ours() {
	local prog
	running "$1" && read -r -d '' prog 2>/dev/null <"/proc/$1/cmdline"
	[[ ${prog:-} == *sanedge* ]]
}

# lines FILE PREFIX — set LINES to FILE's lines that begin with PREFIX (none: an empty array), and
# ALL to the whole file on one line. The shell's own builtins, here and below, rather than grep,
# sed or date: in the emulated guest of tests/rxe every command a run's check starts is a fork and
# an exec, seconds of a case in all, taken from the very processes being tested.
LINES=() ALL=''
lines() {
	local -a all=()
	local l
	LINES=()
	[ -f "$1" ] && mapfile -t all <"$1"
	for l in "${all[@]}"; do
		[[ $l == "$2"* ]] && LINES+=("$l")
	done
	ALL=${all[*]}
}

# run_sent ID — wait (at most 20 s) until the sender of run ID has reported its sends or is gone.
run_sent() {
	local i
	for ((i = 0; i < 400; i++)); do
		[ -s "$TMP/$1.s.out" ] && return 0
		alive "${SPID[$1]}" || return 0
		_nap 0.05
	done
}

# run_finish ID — wait for run ID's processes (the sender's fork child too) and set R_LINE (the
# reader's line without "read " and " ms=..."), R_MS, and R_ERR (empty, or what else was wrong: no
# line, no switch, a sender that did not report all its sends, a process that would not go).
R_LINE='' R_ERR='' R_MS=''
run_finish() {
	local id=$1 rrc=0 src=0 n l sw child i f=$TMP/$1
	local rpid=${RPID[$1]} spid=${SPID[$1]} size=${RSIZE_[$1]} tmo=${RTMO[$1]}
	R_ERR=
	wait_pid "$rpid" $((tmo + 10)) || rrc=$?
	wait_pid "$spid" $((tmo + 30)) || src=$?
	# fork_parent_exit: the child outlives the sender; wait for it (not ours: poll /proc)
	lines "$f.s.out" child=
	child=${LINES[0]:-}
	child=${child#child=}
	if [[ $child =~ ^[0-9]+$ ]]; then
		# (30 s: its run holds the connection 1 to 1.5 s, then ends; an emulated guest on a
		# loaded host can take many times that to end a preloaded process)
		_now
		i=$((NOW + 30))
		while ours "$child" && [ "$NOW" -lt "$i" ]; do
			_nap 0.05
			_now
		done
		if ours "$child"; then
			kill -KILL "$child" 2>/dev/null
			R_ERR+=" sender's child $child still running after 30 s;"
		fi
	fi
	no_preload_errors "$f.r.err" "$f.s.err"
	lines "$f.r.out" 'read '
	n=${#LINES[@]}
	if [ "$n" -eq 1 ]; then
		l=${LINES[0]#read }
		R_MS=${l##* ms=}
		R_LINE=${l% ms=*}
	else
		R_LINE="no-line"
		R_MS=
		lines "$f.r.err" ''
		R_ERR+=" reader: exit $rrc, $n lines: ${ALL:0:200};"
	fi
	lines "$f.s.out" "sent=$size"
	[[ " ${LINES[*]} " == *" sent=$size "* ]] ||
		R_ERR+=" sender: '$ALL' (exit $src, expected sent=$size);"
	if [ "${RENV[$id]}" = pre ]; then
		lines "$f.r.err" "sanswitch: pid=$rpid "
		n=${#LINES[@]}
		if [ "$n" -ne 1 ]; then
			R_ERR+=" reader: $n stats lines;"
		else
			sw=
			[[ " ${LINES[0]} " =~ \ switched=([^ ]*)\  ]] && sw=${BASH_REMATCH[1]}
			[ "$sw" = 1 ] || R_ERR+=" not switched: ${LINES[0]};"
		fi
	else
		# over kernel TCP the reader must have come to an end
		case $R_LINE in *end=TIMEOUT*) R_ERR+=" the kernel run timed out;" ;; esac
	fi
	if [ -n "${E2E_VERBOSE:-}" ]; then show "$f.r.out" "$f.r.err" "$f.s.out" "$f.s.err"; fi
	return 0
}

# run_pair ARGS... — run_start and run_finish of one run (ID "x").
run_pair() {
	run_start x "$@"
	run_finish x
}

# key LOOSE LINE — what must be equal: the whole line; with LOOSE, first_bad and the end only.
# LOOSE is for a case where the kernel run itself lost bytes to a reset (SO_LINGER 0 discards what
# is still queued at the sender: how much is timing), decided from the kernel's own lines.
# Sets KEY.
KEY=''
key() {
	KEY=$2
	[ "$1" = 1 ] || return 0
	[[ $KEY =~ ^(.*)bytes=[0-9]*\ (.*)$ ]] && KEY=${BASH_REMATCH[1]}${BASH_REMATCH[2]}
	[[ $KEY =~ ^(.*)\ fnv=[0-9a-f]*(.*)$ ]] && KEY=${BASH_REMATCH[1]}${BASH_REMATCH[2]}
	return 0
}

# differ LOOSE A B — lines A and B differ in what key LOOSE compares.
differ() {
	local a
	key "$1" "$2"
	a=$KEY
	key "$1" "$3"
	[ "$a" != "$KEY" ]
}

# timing MODE DELAY — a case whose outcome could depend on timing: repeated. At delay 500 the
# sender has ended (or its holder has) long before the reader looks; at delay 0 it ends while the
# reader reads or waits.
timing() {
	[ "$2" = 0 ]
}

# held MODE — an ending after which another process holds the connection for a while (the exec'd
# program, the fork child).
held() {
	case $1 in exec | fork_parent_exit) return 0 ;; esac
	return 1
}

# documented MODE SIZE LINE — over verbs, LINE is the outcome docs/verbs.md §3 "Exit" gives a
# sender that ends without running any code of ours (killed by a signal, or the exit_group system
# call made directly, which skips the C library's exit and _exit): the frames still queued in its
# memory, and the bulk regions the reader had not READ yet, are lost with it, so the reader gets
# a prefix of the stream (every byte checked: first_bad=-1), possibly all of it, then ECONNRESET
# (a reset, never an end-of-file that would pass a cut stream off as whole). Kernel TCP's buffer
# is the kernel's: it sends it all, then the FIN. Not SO_LINGER {1, 0}: over verbs its RST waits
# for the frames before its ABORT (docs/verbs.md §3 "Close"), and the reader gets TCP's outcome.
documented() {
	local n
	[ "${E2E_PROVIDER:-}" = verbs ] || return 1
	case $1 in kill | crash | abort | exit_group) ;; *) return 1 ;; esac
	[[ $3 =~ ^bytes=([0-9]+)\ first_bad=-1\ end=ECONNRESET\ fnv=[0-9a-f]+$ ]] || return 1
	n=${BASH_REMATCH[1]}
	[ "$n" -le "$2" ]
}

# kmatch LINE — LINE is one a kernel run of the case gave (case_'s kkeys and loose).
kmatch() {
	local k
	key "$loose" "$1"
	for k in "${kkeys[@]}"; do
		[ "$k" = "$KEY" ] && return 0
	done
	return 1
}

# case_ ROLE MODE SIZE DELAY WAIT [RSIZE SLOW CHUNK TMO] — one case: KROUNDS kernel runs, then
# ROUNDS (or 1) switched runs; each switched line must be one a kernel run gave. When the runs
# mostly wait (the reader sleeps first, or the ending leaves a holder behind) they are started
# staggered, each once the previous one's sender has reported its sends, so that only their idle
# waits overlap; otherwise one after the other.
case_() {
	local role=$1 mode=$2 size=$3 delay=$4 wait=$5 rsize=${6:-65536} slow=${7:-0} chunk=${8:-8192}
	local tmo=${9:-$TMO} r rounds=1 kr=$KROUNDS verdict=ok ms_k ms_s note='' sline k ok t0 stag=0
	local loose=0 id ndoc_lines=0 a l
	local -a klines=() kkeys=() errs=() args ids=()
	local -A count=()
	t0=${EPOCHREALTIME/./}
	timing "$mode" "$delay" && rounds=$ROUNDS
	[ "$kr" -gt "$rounds" ] && kr=$rounds
	{ [ "$delay" != 0 ] || held "$mode"; } && stag=1
	args=("$role" "$mode" "$size" "$delay" "$wait" "$rsize" "$slow" "$chunk" "$tmo")
	for ((r = 0; r < kr; r++)); do ids+=("k$r"); done
	for ((r = 0; r < rounds; r++)); do ids+=("s$r"); done
	if [ "$stag" = 1 ]; then
		for id in "${ids[@]}"; do
			run_start "$id" "$([ "${id:0:1}" = k ] && echo none || echo pre)" "${args[@]}"
			run_sent "$id"
		done
	fi
	for id in "${ids[@]}"; do
		[ "$stag" = 1 ] || run_start "$id" "$([ "${id:0:1}" = k ] && echo none || echo pre)" "${args[@]}"
		run_finish "$id"
		if [ "${id:0:1}" = k ]; then
			klines+=("$R_LINE")
			ms_k=$R_MS
			[ -n "$R_ERR" ] && errs+=("tcp:$R_ERR")
			# the kernel lost bytes to a reset: how many is timing
			[[ $R_LINE == *" end=EOF "* || $R_LINE == "bytes=$size "* ]] || loose=1
			continue
		fi
		if [ ${#kkeys[@]} -eq 0 ]; then
			for k in "${klines[@]}"; do
				key "$loose" "$k"
				kkeys+=("$KEY")
			done
		fi
		# A connection that fell back to TCP during the switch-over (it happens on a loaded
		# host, under emulation above all) tested nothing: the run is made again, RETRIES
		# times at most (said in the case's line). Still not switched after that: the case
		# fails (run_finish's R_ERR). The unswitched run was kernel TCP's, whose bytes before a
		# reset are timing (SO_LINGER 0 discards what is still queued): its line is shown when
		# it is not the kernel round's, as kernel rounds that differ are, but a wrong byte in it,
		# or any other problem its run had, fails the case.
		for ((a = 1; a <= RETRIES; a++)); do
			[[ $R_ERR =~ ^(.*)\ not\ switched:\ [^\;]*\;(.*)$ ]] || break
			l=${BASH_REMATCH[1]}${BASH_REMATCH[2]}
			[ -z "$l" ] || errs+=("switch: $id (not switched):$l")
			kmatch "$R_LINE" || note+=" ($id, not switched, read <$R_LINE>)"
			[[ $R_LINE == *" first_bad=-1 "* ]] ||
				errs+=("switch: $id, not switched, read a wrong byte: <$R_LINE>;")
			note+=" ($id did not switch: run again, $a of $RETRIES)"
			nretry=$((nretry + 1))
			run_start "$id.$a" pre "${args[@]}"
			run_finish "$id.$a"
		done
		ms_s=$R_MS
		[ -n "$R_ERR" ] && errs+=("switch:$R_ERR")
		ok=0
		kmatch "$R_LINE" && ok=1
		if [ "$ok" = 0 ] && documented "$mode" "$size" "$R_LINE"; then
			ok=1
			ndoc_lines=$((ndoc_lines + 1))
		fi
		[ "$ok" = 1 ] || verdict=DIFF
		count[$R_LINE]=$((${count[$R_LINE]:-0} + 1))
	done
	if [ "$verdict" = ok ] && [ "$ndoc_lines" -gt 0 ]; then
		verdict=DOC
		note+=" ($ndoc_lines switched run(s): the documented outcome over verbs of a sender that"
		note+=" runs no code of ours at its end: a prefix, then ECONNRESET; docs/verbs.md §3)"
	fi
	[ ${#errs[@]} -gt 0 ] && [ "$verdict" != DIFF ] && verdict=FAIL
	# (the kernel's own lines disagreeing is worth seeing, it is not a failure)
	for k in "${klines[@]}"; do
		[ "$k" = "${klines[0]}" ] || note+=" (kernel rounds differ: ${klines[*]})"
	done
	[ "$loose" = 1 ] && note+=" (the kernel lost bytes to the reset: bytes and fnv not compared)"
	# informative: when the end came (ms from the connection), if far from the kernel's
	if [ -n "$ms_k" ] && [ -n "$ms_s" ] && ((ms_s - ms_k > 700 || ms_k - ms_s > 700)); then
		note+=" (end at ${ms_s} ms switched, ${ms_k} ms tcp)"
	fi
	sline=
	for k in "${!count[@]}"; do sline+="${sline:+ | }<$k>x${count[$k]}"; done
	ncases=$((ncases + 1))
	local desc="$mode size=$size delay=$delay wait=$wait role=$role"
	[ "$slow" = 0 ] || desc+=" slow=${slow}us rsize=$rsize"
	t0=$(((${EPOCHREALTIME/./} - t0) / 1000))
	log "$desc: tcp=<${klines[0]}> switch=$sline $verdict${note} [${t0} ms]"
	if [ ${#errs[@]} -gt 0 ]; then log "    problems: ${errs[*]}"; fi
	if [ "$verdict" = ok ]; then
		nok=$((nok + 1))
	elif [ "$verdict" = DOC ]; then
		ndoc=$((ndoc + 1))
	else
		nbad=$((nbad + 1))
		BAD+=("$verdict $desc: tcp=<${klines[0]}> switch=$sline${errs[*]:+ [${errs[*]}]}")
	fi
}

rot() {
	RW=${ROT[rot_i % ${#ROT[@]}]}
	rot_i=$((rot_i + 1))
}

# ---------------------------------------------------------------- the comparison can fail

# A wrong byte, a missing byte and a reset must each be told from the plain case (kernel runs),
# and a connection that did not switch must be seen (reader preloaded, sender not).
# EDGE_SELFCHECK=pure: only documented()'s part, which starts no process (tests/rxe's share of
# make rxe-check: the runs' part is provider-independent, and make check makes it every time).
selfcheck() {
	local base l
	[ "${EDGE_SELFCHECK:-}" = pure ] && selfcheck_documented && return
	run_pair none sconn close $KB64 0 block 65536 0 8192 8
	base=$R_LINE
	[[ $base == "bytes=$KB64 first_bad=-1 end=EOF fnv="* ]] && [ -z "$R_ERR" ] ||
		fail "self-check: plain run gave <$base>$R_ERR"
	run_pair none sconn close $KB64 0 block 65536 0 8192 8 --corrupt 40000
	[[ $R_LINE == "bytes=$KB64 first_bad=40000 end=EOF fnv="* ]] &&
		differ 0 "$R_LINE" "$base" ||
		fail "self-check: a flipped byte at 40000 gave <$R_LINE> (plain <$base>)"
	run_pair none sconn close $((KB64 - 1)) 0 block 65536 0 8192 8
	differ 0 "$R_LINE" "$base" ||
		fail "self-check: one byte less was not told from the plain case: <$R_LINE>"
	run_pair none sconn linger0 1 0 block 65536 0 8192 8
	l=$R_LINE
	run_pair none sconn close 1 0 block 65536 0 8192 8
	differ 1 "$l" "$R_LINE" ||
		fail "self-check: a reset was not told from an EOF: <$l> <$R_LINE>"
	# reader preloaded, sender not: the same bytes, but no switch, and run_finish must say so
	run_pair pre:none sconn close $KB64 0 block 65536 0 8192 8
	[ "$R_LINE" = "$base" ] && [[ $R_ERR == *"not switched: sanswitch: pid="*" switched=0 "* ]] ||
		fail "self-check: a connection that did not switch was not seen: <$R_LINE>$R_ERR"
	# ... and a case whose switched run never switches is made again RETRIES times, then fails
	l=$(
		export SANSWITCH_PROVIDER=none
		ROUNDS=1 ncases=0 nok=0 nbad=0 ndoc=0 nretry=0 BAD=()
		case_ sconn close 1 0 block >/dev/null 2>&1
		echo "$nbad $nretry"
	)
	[ "$l" = "1 $RETRIES" ] ||
		fail "self-check: a case that never switched gave <failed, runs made again: $l>," \
			"not <1 $RETRIES>"
	log "self-check: a flipped byte, one byte less, a reset and a connection that did not switch" \
		"are all seen; a run that did not switch is made again $RETRIES times, then fails"
	selfcheck_documented
}

# The documented outcome over verbs is that and nothing wider, and over any other provider
# nothing (a pure function: checked in every run, make check's too).
selfcheck_documented() {
	local l
	for l in "bytes=7 first_bad=-1 end=EOF fnv=1" "bytes=7 first_bad=3 end=ECONNRESET fnv=1" \
		"bytes=9 first_bad=-1 end=ECONNRESET fnv=1" "bytes=7 first_bad=-1 end=EPIPE fnv=1"; do
		! E2E_PROVIDER=verbs documented kill 8 "$l" ||
			fail "self-check: <$l> passed as documented for kill"
	done
	E2E_PROVIDER=verbs documented kill 8 "bytes=8 first_bad=-1 end=ECONNRESET fnv=1" &&
		E2E_PROVIDER=verbs documented exit_group 8 "bytes=0 first_bad=-1 end=ECONNRESET fnv=1" &&
		! E2E_PROVIDER=verbs documented linger0 8 "bytes=0 first_bad=-1 end=ECONNRESET fnv=1" &&
		! E2E_PROVIDER=verbs documented close 8 "bytes=8 first_bad=-1 end=ECONNRESET fnv=1" &&
		! E2E_PROVIDER=verbs documented exec 8 "bytes=8 first_bad=-1 end=ECONNRESET fnv=1" &&
		! E2E_PROVIDER=shm documented kill 8 "bytes=8 first_bad=-1 end=ECONNRESET fnv=1" ||
		fail "self-check: documented() does not tell the killed endings over verbs alone"
	log "self-check: documented() passes a prefix then ECONNRESET for the killed endings over" \
		"verbs alone (not linger0, not close, not exec, not over shm)"
}
selfcheck

# ---------------------------------------------------------------- the matrix

# has LIST WORD — WORD is one of LIST's (space-separated) words.
has() {
	case " $1 " in *" $2 "*) return 0 ;; esac
	return 1
}

for mode in "${MODES[@]}"; do
	for delay in $DELAYS; do
		for size in $SIZES; do
			if has "$WAITS" block; then case_ sconn "$mode" "$size" "$delay" block; fi
			rot
			if has "$WAITS" rot; then case_ sconn "$mode" "$size" "$delay" "$RW"; fi
			if has "$WAITS" one; then
				[ $((one_i++ % 2)) = 0 ] && RW=block
				case_ sconn "$mode" "$size" "$delay" "$RW"
			fi
		done
	done
	one_i=$((one_i + 1)) # (the next ending starts with the other wait)
	# the sender accepting
	has "$EXTRA" sacc || continue
	rot
	case_ sacc "$mode" 1 0 "$RW"
	case_ sacc "$mode" $MB3 0 block
done

# a slow reader: 4 KiB reads 200 us apart, 3 MiB, in a blocking recv or the rotated wait
slow_i=0
for mode in close exit _exit kill shutwr_rdwr_exit fork_child_close linger0; do
	has "$EXTRA" slow || break
	has "${MODES[*]}" "$mode" || continue
	RW=block
	[ $((slow_i++ % 2)) = 1 ] && rot
	case_ sconn "$mode" $MB3 0 "$RW" 4096 200 8192 20
done

# the file-copy pattern at 300 MiB, a fast reader (once each way: not repeated)
case " ${MODES[*]} :$EXTRA: " in
*" shutwr_rdwr_exit "*:*big*)
	save=$ROUNDS
	ROUNDS=1
	case_ sconn shutwr_rdwr_exit $((300 << 20)) 0 block 262144 0 131072 90
	ROUNDS=$save
	;;
esac

secs=$((EPOCHSECONDS - T0))
log "$ncases cases in ${secs}s (ROUNDS=$ROUNDS KROUNDS=$KROUNDS): $nok ok, $ndoc documented" \
	"differences (DOC), $nbad differ or failed; $nretry run(s) made again (not switched)"
if [ "$nbad" -gt 0 ]; then
	log "cases that differ from kernel TCP:"
	for l in "${BAD[@]}"; do log "  $l"; done
	fail "$nbad of $ncases cases: the reader saw something else than over kernel TCP"
fi
if [ "$ndoc" -gt 0 ]; then
	log "every case: the reader saw what it sees over kernel TCP, or ($ndoc cases) the outcome" \
		"docs/verbs.md §3 documents"
else
	log "every case: the reader saw what it sees over kernel TCP"
fi
