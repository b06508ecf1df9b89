# scripts/benchlib/tcp.sh — the bench's TCP measurements, one run each, both ends as MODE (none:
# kernel TCP, pass: preloaded with SANSWITCH_PROVIDER=none, pre: preloaded): sockperf ping-pong,
# iperf3, the connection loop, an idle connection's CPU time; and the check that a preloaded
# run went the way its mode says. Sourced by scripts/bench (and scripts/demo through it).
# shellcheck shell=bash

# not_attempted LINE — its fallback_not_attempted count (0 when the line has none)
not_attempted() {
	if [[ " $1 " == *" fallback_not_attempted="* ]]; then field "$1" fallback_not_attempted; else echo 0; fi
}

# bench_check_mode MODE FILE WHAT — the client's stats line (SANSWITCH_STATS=1) says the run was
# what MODE claims: pre switched its connections, pass switched none. A benchmark that measured
# the wrong thing must not print a number. (pre: one fallback at most, of a connection that
# ended before its switch was done, fallback_not_attempted: iperf3's control connection, whose
# few exchanges after the 17th end before the engines' handshake does.)
bench_check_mode() {
	local l sw fb na
	[ "$1" = none ] && return 0
	l=$(grep -E "$STATS_LINE_RE" "$2" | tail -n 1)
	[ -n "$l" ] || { show "$2"; fail "$3 ($1): no stats line from the client"; }
	sw=$(field "$l" switched) || exit 1
	fb=$(field "$l" fallback) || exit 1
	na=$(not_attempted "$l")
	case $1 in
	pre) [ "$sw" -gt 0 ] && [ "$fb" -eq "$na" ] && [ "$fb" -le 1 ] ;;
	pass) [ "$sw" -eq 0 ] && [ "$fb" -gt 0 ] ;;
	esac || fail "$3 ($1): the client's connections did not go as the mode says: $l"
}

# bench_sockperf MODE SECONDS [SIZE] — one sockperf TCP ping-pong run of SIZE-byte messages
# (default 64), both ends as MODE. Sets BS_P50 and BS_P99, in microseconds (one-way latency,
# sockperf's convention). --mps: with its default ("max") sockperf 3.7 sizes its sequence
# table for about 700k messages a second and aborts past it ("_seqN > m_maxSequenceNo", exit
# 6), which the switch's ping-pong reaches since 2026-12-02; 2M a second is never reached (a
# 0.25 us round trip), so it only sizes the table (about 145 MB for 3 s).
BS_P50='' BS_P99=''
bench_sockperf() {
	local mode=$1 secs=$2 size=${3:-64} rc=0 p50 p99 out=$TMP/sp.$1.out
	start_listener "sp.$mode" "$mode" 4 "${PIN_SRV[@]}" sockperf sr --tcp -i 127.0.0.1 -p '{PORT}'
	as_t "$mode" $((secs + 30)) "${PIN_CLI[@]}" sockperf pp --tcp -i 127.0.0.1 -p "$SERVER_PORT" --mps=2000000 \
		-t "$secs" -m "$size" >"$out" 2>&1 || rc=$?
	stop "$SERVER_PID"
	[ "$rc" -eq 0 ] || { show "$out"; fail "sockperf ping-pong $size B ($mode) exited $rc"; }
	p50=$(sed -n 's/.*percentile 50\.000 = *\([0-9.]*\).*/\1/p' "$out")
	p99=$(sed -n 's/.*percentile 99\.000 = *\([0-9.]*\).*/\1/p' "$out")
	if [ -z "$p50" ] || [ -z "$p99" ]; then
		show "$out"
		fail "no percentiles from sockperf"
	fi
	bench_check_mode "$mode" "$out" "sockperf $size B"
	BS_P50=$p50 BS_P99=$p99
}

# bench_iperf3 MODE SECONDS [IPERF3_ARGS...] — one iperf3 run (default: 1 stream, iperf3's
# 128 KiB writes), both ends as MODE; sets BI_GBPS (received).
BI_GBPS=
bench_iperf3() {
	local mode=$1 secs=$2 rc=0 gbps
	shift 2
	start_listener "ip.$mode" "$mode" 4 "${PIN_SRV[@]}" iperf3 -s -1 -B 127.0.0.1 -p '{PORT}'
	as_t "$mode" $((secs + 30)) "${PIN_CLI[@]}" iperf3 -c 127.0.0.1 -p "$SERVER_PORT" -t "$secs" -J "$@" \
		>"$TMP/ip.$mode.json" 2>"$TMP/ip.$mode.err" || rc=$?
	wait_pid "$SERVER_PID" 20 >/dev/null || true
	[ "$rc" -eq 0 ] || { show "$TMP/ip.$mode.json" "$TMP/ip.$mode.err"; fail "iperf3 $* ($mode) exited $rc"; }
	gbps=$("$PY" -c 'import json, sys
print("%.2f" % (json.load(open(sys.argv[1]))["end"]["sum_received"]["bits_per_second"] / 1e9))' \
		"$TMP/ip.$mode.json") || fail "cannot parse iperf3 JSON"
	bench_check_mode "$mode" "$TMP/ip.$mode.err" "iperf3 $*"
	BI_GBPS=$gbps
}

# bench_connrate MODE SECONDS [REQS] — sanconnrate: connections in a loop (connect, REQS 10-byte
# requests (default 1), each reply, close), both ends as MODE; sets BC_RATE (connections/s),
# BC_FIRST (µs from connect() to the first reply, p50), BC_SECOND and BC_THIRD (the second and third
# request, p50). A connection of REQS requests up to SANSWITCH_SWITCH_AFTER (default 16) is too
# short to be proposed: the preloaded run must show them all on TCP (switched=0), each having cost
# only the bookkeeping; a longer one switches at the send of its request SANSWITCH_SWITCH_AFTER + 1
# (docs/protocol.md §9.7): every one must have. BC_WANT=any: no count asked (a connection due to
# switch without a pause may end before its handshake does).
BC_RATE='' BC_FIRST='' BC_SECOND='' BC_THIRD=''
bench_connrate() {
	local mode=$1 secs=$2 reqs=${3:-1} rc=0 out l want
	# spread over 200 loopback destinations: one would measure the kernel's supply of ports
	# (tests/tools/sanconnrate.c), about 14,000 a second here, for every mode alike
	start_pf "cr.$mode" "$mode" "${PIN_SRV[@]}" "$BUILD/sanconnrate" server '{PORTFILE}' any
	as_t "$mode" $((secs + 30)) "${PIN_CLI[@]}" "$BUILD/sanconnrate" client "$SERVER_PORT" "$secs" 10 \
		"$reqs" 200 >"$TMP/cr.$mode.out" 2>&1 || rc=$?
	stop "$SERVER_PID"
	[ "$rc" -eq 0 ] || { show "$TMP/cr.$mode.out"; fail "sanconnrate ($mode) exited $rc"; }
	out=$(grep '^conns=' "$TMP/cr.$mode.out") || { show "$TMP/cr.$mode.out"; fail "no result from sanconnrate"; }
	if [ "$mode" != none ]; then
		local least sw fb
		l=$(grep -E "$STATS_LINE_RE" "$TMP/cr.$mode.out" | tail -n 1)
		[ -n "$l" ] || { show "$TMP/cr.$mode.out"; fail "sanconnrate ($mode, $reqs requests): no stats line"; }
		sw=$(field "$l" switched) || exit 1
		fb=$(field "$l" fallback) || exit 1
		want=0
		[ "$mode" = pre ] && [ "$reqs" -gt "${SANSWITCH_SWITCH_AFTER:-16}" ] &&
			want=$(sed -n 's/^conns=\([0-9]*\) .*/\1/p' <<<"$out")
		# (no pause, the default: the switch lands when the engines' handshake ends, and a
		# connection whose last request comes first ends on TCP, not_attempted: at least one
		# in four switch, every other one so, and the count is shown; BC_WANT=any: no count
		# asked of them. On 2026-12-01 morning the 64-request loop switched 45 to 100 in 100 of
		# its connections run by run, c939de6's as much as the tree after it: the engines'
		# handshake waits for a CPU the two loops keep busy (issue 16's notes); 95 in 100, asked
		# since the night before, failed the bench)
		least=$want
		[ "${SANSWITCH_NOPAUSE:-1}" = 1 ] && least=$((want / 4))
		[ "$want" -gt 0 ] && log "sanconnrate ($mode, $reqs requests): $sw of $want connections switched"
		[ "$mode" = pre ] && [ "${BC_WANT:-}" = any ] && least=0
		if [ "$sw" -lt "$least" ] || [ "$sw" -gt "$want" ] ||
			{ [ "$want" -gt 0 ] && [ "$fb" -ne "$(not_attempted "$l")" ]; }; then
			fail "sanconnrate ($mode, $reqs requests): expected $least to $want connections switched, the others not attempted: $l"
		fi
	fi
	BC_RATE=$(sed -n 's/.* rate=\([0-9.]*\).*/\1/p' <<<"$out")
	BC_FIRST=$(sed -n 's/.* first_p50_us=\([0-9.]*\).*/\1/p' <<<"$out")
	BC_SECOND=$(sed -n 's/.* second_p50_us=\([0-9.]*\).*/\1/p' <<<"$out")
	BC_THIRD=$(sed -n 's/.* third_p50_us=\([0-9.]*\).*/\1/p' <<<"$out")
}

# bench_idle MODE SECONDS — sanidle: a connection of 20 exchanges (the default policy switches it
# at its 17th), then SECONDS idle; sets BD_MS, the CPU time (user + system, ms) both processes
# spent in the idle time. The client's stats line must confirm the mode.
BD_MS=
bench_idle() {
	local mode=$1 secs=$2 rc=0 out=$TMP/idle.$1.out
	start_pf "idle.$mode" "$mode" "${PIN_SRV[@]}" "$BUILD/sanidle" server '{PORTFILE}'
	as_t "$mode" $((secs + 30)) "${PIN_CLI[@]}" "$BUILD/sanidle" client "$SERVER_PORT" 20 "$secs" \
		>"$out" 2>&1 || rc=$?
	wait_pid "$SERVER_PID" 10 >/dev/null || true
	[ "$rc" -eq 0 ] || { show "$out"; fail "sanidle ($mode) exited $rc"; }
	BD_MS=$(sed -n 's/^idle_secs=.* total_ms=\([0-9]*\)$/\1/p' "$out")
	[ -n "$BD_MS" ] || { show "$out"; fail "no result from sanidle"; }
	bench_check_mode "$mode" "$out" sanidle
}
