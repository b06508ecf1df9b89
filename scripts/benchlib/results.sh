# scripts/benchlib/results.sh — the bench's results: which metrics there are, each run's number,
# the medians, and their output (terminal table, markdown, CSV). Sourced by scripts/bench.
# shellcheck shell=bash
#
# A metric has a key (sp.64.p50), a family (the plot and BENCH_ONLY group it belongs to), a unit,
# which way is better (low or high, for the reader of a ratio) and a label. Every run appends
# "key,mode,round,value" to $RESULTS; mode is none (kernel TCP), pass, pre (switched) or ref (a
# reference point that involves no TCP and no preload).

M_KEYS=()
declare -A M_FAM M_UNIT M_BETTER M_LABEL
RESULTS=$TMP/results.csv
: >"$RESULTS"

# metric KEY FAMILY UNIT BETTER LABEL — declare a metric (the table keeps this order).
metric() {
	M_KEYS+=("$1")
	M_FAM[$1]=$2 M_UNIT[$1]=$3 M_BETTER[$1]=$4 M_LABEL[$1]=$5
}

# The message sizes of the ping-pong (65507: sockperf's largest message) and the write sizes of
# the bulk transfers, in bytes; size_name gives their short names.
SP_SIZES=(16 64 1024 16384 65507)
BW_SIZES=(16384 131072 1048576)
size_name() {
	case $1 in
	65507) echo "64 KiB" ;; # sockperf's maximum, 29 bytes short of it
	*) awk -v b="$1" 'BEGIN { if (b >= 1048576 && b % 1048576 == 0) printf "%d MiB", b / 1048576
		else if (b >= 1024 && b % 1024 == 0) printf "%d KiB", b / 1024; else printf "%d B", b }' ;;
	esac
}

bench_metrics() {
	local s n
	for s in "${SP_SIZES[@]}"; do
		n=$(size_name "$s")
		metric "sp.$s.p50" sockperf us low "sockperf TCP $n ping-pong p50"
		metric "sp.$s.p99" sockperf us low "sockperf TCP $n ping-pong p99"
	done
	for s in "${BW_SIZES[@]}"; do
		metric "ip.$s" iperf3 Gbit/s high "iperf3 1 stream, -l $(size_name "$s")"
	done
	metric ip.p4 iperf3 Gbit/s high "iperf3 -P 4, -l 128 KiB"
	metric cr.rate conn conn/s high "new connections, 10 B request"
	metric cr.first conn us low "new connection's first request p50"
	metric cr.rate16 conn conn/s high "connections of 16 requests (stay TCP)"
	metric cr.rate64 conn conn/s high "connections of 64 requests (switch from the 17th)"
	metric cr.second conn us low "2nd request p50, due to switch (SWITCH_AFTER=1)"
	metric cr.third conn us low "3rd request p50, the handshake on (SWITCH_AFTER=1)"
	metric cr.second0 conn us low "2nd request p50, the paused switch (NOPAUSE=0)"
	metric cr.third0 conn us low "3rd request p50, switched (NOPAUSE=0)"
	metric app.redis.get.1 app req/s high "redis GET, 1 client"
	metric app.redis.set.1 app req/s high "redis SET, 1 client"
	metric app.redis.get.20 app req/s high "redis GET, 20 clients"
	metric app.redis.set.20 app req/s high "redis SET, 20 clients"
	metric app.nginx app req/s high "nginx 2 workers, wrk -t2 -c20"
	metric app.memcached.get app req/s high "memcached get, memcslap 4 threads"
	metric app.memcached.set app req/s high "memcached set, memcslap 4 threads"
	metric idle.cpu idle ms low "idle connection, CPU of both ends in 10 s"
	metric ref.unix.p50 ref us low "UNIX socket 64 B ping-pong p50"
	metric ref.unix.p99 ref us low "UNIX socket 64 B ping-pong p99"
	for s in "${BW_SIZES[@]}"; do
		metric "ref.unixbw.$s" ref Gbit/s high "UNIX socket stream, $(size_name "$s") writes"
	done
	for s in "${BW_SIZES[@]}"; do
		metric "ref.memcpy.$s" ref Gbit/s high "memcpy, $(size_name "$s")"
	done
	for s in "${BW_SIZES[@]}"; do
		metric "ref.vmreadv.$s" ref Gbit/s high "process_vm_readv, $(size_name "$s")"
	done
}
bench_metrics

# rec KEY MODE ROUND VALUE — one run's number (BENCH_VERBOSE: also printed as it comes).
rec() {
	[ -n "${M_FAM[$1]:-}" ] || fail "rec: unknown metric $1"
	[[ $4 =~ ^[0-9]+(\.[0-9]+)?$ ]] || fail "rec: $1 ($2): not a number: '$4'"
	printf '%s,%s,%s,%s\n' "$1" "$2" "$3" "$4" >>"$RESULTS"
	[ -n "${BENCH_VERBOSE:-}" ] &&
		printf '  #%-2s %-4s %-46s %12s %s\n' "$3" "$2" "${M_LABEL[$1]}" "$4" "${M_UNIT[$1]}"
	return 0
}

# medians_of [ratio] — "KEY,MODE,ROUND,VALUE" lines on stdin: "KEY,MODE,MEDIAN" for each key and
# mode (the mean of the middle two for an even count): whole numbers as they are, others to
# three significant digits (at least the units); with "ratio", two decimals.
medians_of() {
	sort -t, -k1,1 -k2,2 -k4,4g | awk -F, -v ratio="${1:-}" '
		function flush() {
			if (n == 0) return
			m = (n % 2) ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
			printf "%s,%s,%s\n", key, mode, fmt(m)
		}
		function fmt(x) {
			if (ratio) return sprintf("%.2f", x)
			if (x == int(x) || x >= 100) return sprintf("%.0f", x) # counts (ms, req/s) stay whole
			return x >= 10 ? sprintf("%.1f", x) : sprintf("%.2f", x)
		}
		$1 != key || $2 != mode { flush(); key = $1; mode = $2; n = 0 }
		{ v[++n] = $4 }
		END { flush() }'
}

# bench_medians — MED[KEY,MODE]: the median of each metric's runs in each mode (medians_of).
declare -A MED
bench_medians() {
	local k m v
	MED=()
	while IFS=, read -r k m v; do
		MED[$k,$m]=$v
	done < <(medians_of <"$RESULTS")
}

# bench_ratios — RAT[KEY,MODE]: the median, over the rounds that measured both, of each round's
# own ratio of MODE's run to kernel TCP's (none) in that round, two decimals. Why not the ratio of
# the medians: on these shared VMs a mode's runs drift by 10 % and more from round to round
# (neighbours, the host), and the runs of one round, taken seconds apart, drift together; a
# round's ratio cancels that drift, the median of the rounds' ratios then takes out the rounds a
# burst hit one run of. Seen on 2026-12-01 (sanconnrate, 1-request connections, 20 rounds in turn):
# kernel TCP's runs spread over 14,000-20,500 a second, the rounds' ratios mostly over 0.95-1.07.
declare -A RAT
bench_ratios() {
	local k m v
	RAT=()
	while IFS=, read -r k m v; do
		RAT[$k,$m]=$v
	done < <(awk -F, '
		$2 == "none" { base[$1 "," $3] = $4; next }
		$2 != "ref" { val[$1 "," $2 "," $3] = $4 }
		END {
			for (x in val) {
				split(x, f, ",")
				b = base[f[1] "," f[3]]
				if (b > 0) printf "%s,%s,%s,%.17g\n", f[1], f[2], f[3], val[x] / b
			}
		}' "$RESULTS" | medians_of ratio)
}

# bench_rows FORMAT — one line per measured TCP metric: label (unit), kernel, pass-through,
# switched (medians), the two ratios (bench_ratios; FORMAT: a printf format for six strings).
bench_rows() {
	local f=$1 k n p s
	for k in "${M_KEYS[@]}"; do
		n=${MED[$k,none]:-} p=${MED[$k,pass]:-} s=${MED[$k,pre]:-}
		[ -n "$n$p$s" ] || continue
		# shellcheck disable=SC2059 # the format is the caller's
		printf "$f" "${M_LABEL[$k]} (${M_UNIT[$k]})" "${n:--}" "${p:--}" "${s:--}" \
			"${RAT[$k,pass]:--}" "${RAT[$k,pre]:--}"
	done
}

# ref_rows FORMAT — one line per measured reference point: label (unit), value.
ref_rows() {
	local f=$1 k
	for k in "${M_KEYS[@]}"; do
		[ -n "${MED[$k,ref]:-}" ] || continue
		# shellcheck disable=SC2059
		printf "$f" "${M_LABEL[$k]} (${M_UNIT[$k]})" "${MED[$k,ref]}"
	done
}

# bench_table — the result tables as plain text (computes the medians and the ratios).
bench_table() {
	local f='%-52s %10s %13s %10s %12s %16s\n'
	bench_medians
	bench_ratios
	# shellcheck disable=SC2059
	printf "$f" metric "kernel" "pass-through" "switched" "pass/kernel" "switched/kernel"
	bench_rows "$f"
	if [ -n "$(ref_rows '%s')" ]; then
		echo
		printf '%-52s %10s\n' "reference point (no TCP, no preload)" value
		ref_rows '%-52s %10s\n'
	fi
}

# bench_csv FILE — every run, the medians (round "median") and the ratios to kernel TCP (round and
# unit "ratio", bench_ratios), one row per metric, mode, round; better: which way is better (low:
# latency, CPU; high: rates).
bench_csv() {
	local k m r v
	{
		echo "family,metric,label,unit,better,mode,round,value"
		while IFS=, read -r k m r v; do
			printf '%s,%s,"%s",%s,%s,%s,%s,%s\n' "${M_FAM[$k]}" "$k" "${M_LABEL[$k]}" "${M_UNIT[$k]}" \
				"${M_BETTER[$k]}" "$m" "$r" "$v"
		done <"$RESULTS"
		for k in "${M_KEYS[@]}"; do
			for m in none pass pre ref; do
				[ -n "${MED[$k,$m]:-}" ] || continue
				printf '%s,%s,"%s",%s,%s,%s,median,%s\n' "${M_FAM[$k]}" "$k" "${M_LABEL[$k]}" "${M_UNIT[$k]}" \
					"${M_BETTER[$k]}" "$m" "${MED[$k,$m]}"
			done
			for m in pass pre; do
				[ -n "${RAT[$k,$m]:-}" ] || continue
				printf '%s,%s,"%s",ratio,%s,%s,ratio,%s\n' "${M_FAM[$k]}" "$k" "${M_LABEL[$k]}" \
					"${M_BETTER[$k]}" "$m" "${RAT[$k,$m]}"
			done
		done
	} >"$1"
}
