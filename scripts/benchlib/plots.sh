# scripts/benchlib/plots.sh — the bench's plots (gnuplot, PNG), from the medians (MED, results.sh):
# ping-pong latency against message size, throughput against write size (with the reference
# copies), applications' requests/s as bars. A plot is drawn only when its family ran.
# Sourced by scripts/bench.
# shellcheck shell=bash

# Each mode's title and colour in the plots (kernel TCP grey).
declare -A PLOT_TITLE=([none]="kernel TCP" [pass]="pass-through" [pre]="switched (shm)")
declare -A PLOT_COLOR=([none]="#777777" [pass]="#e69f00" [pre]="#0072b2")

# med_or_missing KEY MODE — the median, or "-" (gnuplot's missing value here).
med_or_missing() { echo "${MED[$1,$2]:--}"; }

# plot_modes KEY... — the modes of BENCH_MODES that have a median for any of the keys.
plot_modes() {
	local m k
	for m in "${BENCH_MODES[@]}"; do
		for k in "$@"; do
			[ -n "${MED[$k,$m]:-}" ] && { echo "$m"; break; }
		done
	done
}

# gp PNG SIZE TITLE SETTINGS PLOT — run gnuplot: a PNG of SIZE (w,h) titled TITLE, SETTINGS (more
# set commands, one a line), then the plot command's argument PLOT.
gp() {
	gnuplot <<EOF || fail "gnuplot failed on $1"
set terminal pngcairo size $2 font ',10' noenhanced
set output '$1'
set title '$3'
set datafile missing '-'
$4
plot $5
EOF
}

# plot_latency FILE — p50 (solid) and p99 (dashed) against message size, one colour per mode,
# the UNIX socket's 64 B ping-pong as a reference point.
plot_latency() {
	local png=$1 d=$TMP/plot.lat.dat s m col=2 plot='' sep='' k
	local -a keys=() modes
	for s in "${SP_SIZES[@]}"; do keys+=("sp.$s.p50"); done
	mapfile -t modes < <(plot_modes "${keys[@]}")
	[ ${#modes[@]} -gt 0 ] || return 0
	for s in "${SP_SIZES[@]}"; do
		printf '%s' "$s"
		for m in "${modes[@]}"; do printf ' %s %s' "$(med_or_missing "sp.$s.p50" "$m")" "$(med_or_missing "sp.$s.p99" "$m")"; done
		echo
	done >"$d"
	for m in "${modes[@]}"; do
		plot+="$sep'$d' using 1:$col with linespoints lw 2 pt 7 lc rgb '${PLOT_COLOR[$m]}' title '${PLOT_TITLE[$m]} p50'"
		sep=', '
		plot+="$sep'$d' using 1:$((col + 1)) with linespoints lw 1 dt 2 pt 6 lc rgb '${PLOT_COLOR[$m]}' title '${PLOT_TITLE[$m]} p99'"
		col=$((col + 2))
	done
	k=${MED[ref.unix.p50,ref]:-}
	[ -n "$k" ] && plot+="$sep'+' using (64):($k) every ::0::0 with points pt 5 ps 1.5 lc rgb '#009e73' title 'UNIX socket 64 B p50'"
	gp "$png" 960,600 'TCP ping-pong latency on the loopback (sockperf, one-way, medians)' "
set xlabel 'message size'
set ylabel 'latency (µs)'
set logscale x 2
set logscale y
set xtics ('16 B' 16, '64 B' 64, '1 KiB' 1024, '16 KiB' 16384, '64 KiB' 65507)
set grid
set key top left" "$plot"
}

# plot_throughput FILE — Gbit/s against write size: iperf3 per mode, -P 4 as lone points, and
# the reference copies (UNIX socket stream, memcpy, process_vm_readv).
plot_throughput() {
	local png=$1 d=$TMP/plot.bw.dat d4=$TMP/plot.bw4.dat s m col=2 plot='' sep='' k t c
	local -a keys=() modes
	for s in "${BW_SIZES[@]}"; do keys+=("ip.$s" "ref.unixbw.$s"); done
	mapfile -t modes < <(plot_modes "${keys[@]}" ip.p4)
	[ ${#modes[@]} -gt 0 ] || [ -n "${MED[ref.memcpy.${BW_SIZES[0]},ref]:-}" ] || return 0
	for s in "${BW_SIZES[@]}"; do
		printf '%s' "$s"
		for m in "${modes[@]}"; do printf ' %s' "$(med_or_missing "ip.$s" "$m")"; done
		for k in unixbw memcpy vmreadv; do printf ' %s' "$(med_or_missing "ref.$k.$s" ref)"; done
		echo
	done >"$d"
	{
		printf '131072'
		for m in "${modes[@]}"; do printf ' %s' "$(med_or_missing ip.p4 "$m")"; done
		echo
	} >"$d4"
	for m in "${modes[@]}"; do
		plot+="$sep'$d' using 1:$col with linespoints lw 2 pt 7 lc rgb '${PLOT_COLOR[$m]}' title 'iperf3 ${PLOT_TITLE[$m]}'"
		sep=', '
		[ -n "${MED[ip.p4,$m]:-}" ] &&
			plot+="$sep'$d4' using 1:$col with points pt 9 ps 2 lc rgb '${PLOT_COLOR[$m]}' title 'iperf3 -P 4 ${PLOT_TITLE[$m]}'"
		col=$((col + 1))
	done
	for t in 'unixbw:UNIX socket stream:#009e73' 'memcpy:memcpy:#cc79a7' 'vmreadv:process_vm_readv:#d55e00'; do
		k=${t%%:*} t=${t#*:}
		c=${t##*:}
		[ -n "${MED[ref.$k.${BW_SIZES[0]},ref]:-}" ] &&
			plot+="$sep'$d' using 1:$col with linespoints lw 1 dt 3 pt 4 lc rgb '$c' title '${t%:*} (reference)'" &&
			sep=', '
		col=$((col + 1))
	done
	gp "$png" 960,600 'Throughput on one host by write size (medians)' "
set xlabel 'write size'
set ylabel 'Gbit/s'
set logscale x 2
set logscale y
set xrange [12000:1400000]
set xtics ('16 KiB' 16384, '128 KiB' 131072, '1 MiB' 1048576)
set grid
set key outside right" "$plot"
}

# plot_apps FILE — requests/s per application test, a bar per mode.
plot_apps() {
	local png=$1 d=$TMP/plot.app.dat k m col=2 plot='' sep=''
	local -a keys=() modes
	for k in "${M_KEYS[@]}"; do [ "${M_FAM[$k]}" = app ] && keys+=("$k"); done
	mapfile -t modes < <(plot_modes "${keys[@]}")
	[ ${#modes[@]} -gt 0 ] || return 0
	for k in "${keys[@]}"; do
		[ -n "${MED[$k,${modes[0]}]:-}" ] || continue
		printf '"%s"' "${M_LABEL[$k]/, /\\n}"
		for m in "${modes[@]}"; do printf ' %s' "$(med_or_missing "$k" "$m")"; done
		echo
	done >"$d"
	for m in "${modes[@]}"; do
		plot+="$sep'$d' using $col$([ "$col" -eq 2 ] && echo ':xtic(1)') lc rgb '${PLOT_COLOR[$m]}' title '${PLOT_TITLE[$m]}'"
		sep=', '
		col=$((col + 1))
	done
	gp "$png" 1200,640 'Applications on the loopback: requests/s (medians)' "
set bmargin 5
set xtics font ',9'
set ylabel 'requests/s'
set yrange [0:*]
set style data histogram
set style histogram cluster gap 1
set style fill solid 0.9 border -1
set boxwidth 0.9
set grid ytics
set key top right" "$plot"
}

# bench_plots PREFIX — PREFIX-latency.png, PREFIX-throughput.png, PREFIX-apps.png (those whose
# families ran); prints the paths written.
bench_plots() {
	local p
	command -v gnuplot >/dev/null 2>&1 || { echo "bench: no gnuplot, no plots" >&2; return 0; }
	for p in latency throughput apps; do
		rm -f "$1-$p.png"
		"plot_$p" "$1-$p.png"
		[ -f "$1-$p.png" ] && echo "$1-$p.png"
	done
	return 0
}
