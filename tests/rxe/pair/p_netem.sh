#!/bin/bash
# p_netem — two hosts (the guests of scripts/rxe-vm --pair) and a delay on the link between them
# (netem on a's NIC: 0, 2, 10 and 50 ms one way). At each delay the verifier streams 8 MiB each
# way over one connection, first kernel TCP, then both ends preloaded and forced onto verbs (bulk
# by RDMA READ), with read ahead off (SANSWITCH_READ_AHEAD=0: every READ waits for the
# application) and as it is by default (auto: as deep as the pipeline asks): the crc32 must be
# the kernel run's, and each end's stats line must say switched onto verbs with READ bytes (a
# switch run that fell back is logged and run once more). Throughput (both directions,
# connection set-up included) is logged side by side with the kernel's and read ahead's against
# none, as ratios: a record of how the pipeline holds up as the RTT grows, not a pass/fail
# criterion (timing belongs to benchmarks).
# timeout: 900
set -u
# shellcheck source=tests/rxe/pair/pair_lib.sh
. "$(dirname -- "$0")/pair_lib.sh"
need_cmd tc

export SANSWITCH_STATS=1 SANSWITCH_PROVIDER=verbs
N=8M
i=0 kcrc='' krate='' orate=''
# switched LINE — the run went onto verbs (should a connect over the emulated, delayed link miss
# its 3 s budget, both sides see that and run the case once more).
switched() { [ "$(field "$1" switched_verbs)" -eq 1 ]; }
for d in 0 2 10 50; do
	for run in none off auto; do
		mode=pre
		case $run in
		none) mode=none ;;
		off) export SANSWITCH_READ_AHEAD=0 ;;
		auto) unset SANSWITCH_READ_AHEAD ;;
		esac
		for try in 1 2; do
			i=$((i + 1))
			if [ "$ROLE" = a ]; then
				tc qdisc replace dev "$RXE_VM_NETDEV" root netem delay "${d}ms" ||
					pair_fail "tc qdisc replace dev $RXE_VM_NETDEV root netem delay ${d}ms failed"
				start_server "s$i" "$mode" --conns-total 1 -t 120 -a "$ME"
				put "ready.$i" "$SERVER_PORT"
				rc=0
				wait_pid "$SERVER_PID" 180 || rc=$?
				[ "$rc" -eq 0 ] && grep -q '^sanverify: server ok conns=1 ' "$TMP/s$i.out" ||
					{ show "$TMP/s$i.out" "$TMP/s$i.err"; pair_fail "delay $d ms, $run: server exit $rc"; }
				if [ "$mode" = pre ]; then
					l=$(stats_line "$TMP/s$i.err") || pair_fail "delay $d ms: no stats line"
					if [ "$try" = 1 ] && ! switched "$l"; then
						log "delay $d ms: not switched ($l); once more"
						get "done.$i" 180 >/dev/null
						continue
					fi
					switched "$l" && [ "$(field "$l" read_tx_bytes)" -gt 0 ] ||
						pair_fail "delay $d ms: server not on verbs by READ: $l"
				fi
				log "delay $d ms, $run: server ok; b says: $(get "done.$i" 180)"
			else
				port=$(get "ready.$i" 180)
				t0=$(date +%s%N)
				rc=0
				as_t "$mode" 180 "$SANVERIFY" client -a "$PEER" -p "$port" -c 1 -b "$N" -s 40 -t 120 \
					>"$TMP/c$i.out" 2>"$TMP/c$i.err" || rc=$?
				t1=$(date +%s%N)
				line=$(grep '^sanverify: client ok ' "$TMP/c$i.out") ||
					{ show "$TMP/c$i.out" "$TMP/c$i.err"; pair_fail "delay $d ms, $run: client exit $rc"; }
				[[ $line =~ bytes=([0-9]+)\ crc32=([0-9A-Fa-f]{8}) ]] || pair_fail "cannot parse '$line'"
				bytes=${BASH_REMATCH[1]} crc=${BASH_REMATCH[2]}
				rate=$(awk -v b="$bytes" -v ns=$((t1 - t0)) 'BEGIN { printf "%.0f", 2 * b * 8 / (ns / 1e3) }')
				if [ "$mode" = none ]; then
					kcrc=$crc krate=$rate
					msg="kernel TCP $rate Mbit/s"
				else
					[ "$crc" = "$kcrc" ] || pair_fail "delay $d ms: crc32 $crc over verbs, $kcrc kernel-only"
					l=$(stats_line "$TMP/c$i.err") || pair_fail "delay $d ms: no stats line"
					if [ "$try" = 1 ] && ! switched "$l"; then
						put "done.$i" "not switched"
						log "delay $d ms: not switched ($l); once more"
						continue
					fi
					switched "$l" && [ "$(field "$l" read_tx_bytes)" -gt 0 ] ||
						pair_fail "delay $d ms: client not on verbs by READ: $l"
					ahead=$(field "$l" verbs_ahead_rx_bytes) || pair_fail "no verbs_ahead_rx_bytes"
					direct=$(field "$l" verbs_direct_rx_bytes) || pair_fail "no verbs_direct_rx_bytes"
					msg="switch, read ahead $run: $rate Mbit/s = $(awk -v a="$rate" -v b="$krate" 'BEGIN { printf "%.2f", a / b }') of kernel"
					if [ "$run" = off ]; then
						[ "$ahead" -eq 0 ] || pair_fail "delay $d ms: READ ahead with SANSWITCH_READ_AHEAD=0: $l"
						orate=$rate
					else
						msg="$msg, $(awk -v a="$rate" -v b="$orate" 'BEGIN { printf "%.2f", a / b }') of read ahead off"
					fi
					msg="$msg, crc32 as kernel (client received $((ahead >> 10)) KiB read ahead, $((direct >> 10)) KiB straight into its buffer)"
				fi
				put "done.$i" "$msg"
				log "delay $d ms, $run: $msg"
			fi
			break
		done
	done
done
[ "$ROLE" = a ] && tc qdisc del dev "$RXE_VM_NETDEV" root 2>/dev/null
log "netem runs ok ($ROLE)"
