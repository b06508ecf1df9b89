# scripts/benchlib/ref.sh — the bench's reference points, measured in the same run: a UNIX-domain
# socket's ping-pong and stream bandwidth, and the raw copies a same-host transport is made of
# (memcpy, process_vm_readv), by tests/tools/sanref.c. No TCP and no preload: mode "ref".
# Sourced by scripts/bench.
# shellcheck shell=bash

# bench_sanref TEST SIZE SECONDS — one sanref run; prints its result line.
bench_sanref() {
	local out
	out=$(tmo $((${3%.*} + 30)) env -u LD_PRELOAD "$BUILD/sanref" "$@" 2>&1) ||
		fail "sanref $* failed: $out"
	echo "$out"
}

# bench_ref ROUND SECONDS — every reference point once, recorded as round ROUND.
bench_ref() {
	local round=$1 secs=$2 out s
	out=$(bench_sanref unix-pp 64 "$secs") || exit 1
	rec ref.unix.p50 ref "$round" "$(sed -n 's/.*p50_us=\([0-9.]*\).*/\1/p' <<<"$out")"
	rec ref.unix.p99 ref "$round" "$(sed -n 's/.*p99_us=\([0-9.]*\).*/\1/p' <<<"$out")"
	for s in "${BW_SIZES[@]}"; do
		out=$(bench_sanref unix-bw "$s" "$secs") || exit 1
		rec "ref.unixbw.$s" ref "$round" "${out#gbps=}"
		out=$(bench_sanref memcpy "$s" "$secs") || exit 1
		rec "ref.memcpy.$s" ref "$round" "${out#gbps=}"
		out=$(bench_sanref vm-readv "$s" "$secs") || exit 1
		rec "ref.vmreadv.$s" ref "$round" "${out#gbps=}"
	done
}
