#!/bin/bash
# t_verbs_hold — held receive slots (san_verbs_hold/san_verbs_release, protocol.md §11.1
# "Freeing"): the server keeps every message in its slot, up to HOLD of them, and releases them
# newest first when HOLD are held or when nothing came for 20 ms; every message is checked on
# arrival and again on release. The client must run out of credits, sleep on the completion
# channel (credit_waits > 0) and still deliver COUNT messages, the checksums agreeing (nothing
# lost, duplicated or overwritten). Bad handles must be refused (-EINVAL/-EALREADY).
# timeout: 400
set -u
source "$(dirname -- "$0")/verbs_lib.sh"
port=18600

# hold COUNT MAXSIZE SEED HOLD MIN_WAITS
hold() {
	local count=$1 max=$2 seed=$3 k=$4 minw=$5 t0 secs crc src lc ls waits holds rels mh
	start_server s -- 
	t0=$(date +%s.%N)
	timeout 280 "$SV" client "$addr" "$port" "$count" "$max" "$seed" "$k" \
		>"$tmp/c.out" 2>"$tmp/c.err"
	crc=$?
	secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
	wait_server "$srv_pid"
	src=$?
	lc=$(cat "$tmp/c.out")
	ls=$(cat "$tmp/s.out")
	waits=$(sed -n 's/.*client .*credit_waits=\([0-9]*\).*/\1/p' "$tmp/c.err")
	holds=$(sed -n 's/.* holds=\([0-9]*\) .*/\1/p' "$tmp/s.err")
	rels=$(sed -n 's/.* releases=\([0-9]*\) .*/\1/p' "$tmp/s.err")
	mh=$(sed -n 's/.* max_held=\([0-9]*\) .*/\1/p' "$tmp/s.err")
	if [ "$crc" -eq 0 ] && [ "$src" -eq 0 ] &&
		[[ $lc =~ ^sanverbs:\ ok\ messages=$count\ bytes=[0-9]+$ ]] && [ "$lc" = "$ls" ] &&
		[ "${holds:-0}" -eq "$count" ] && [ "${rels:-0}" -eq "$count" ] &&
		[ "${waits:-0}" -ge "$minw" ] && [ "${mh:-999}" -le "$k" ]; then
		ok "hold $k: $count x 1..$max seed $seed: $lc, client credit_waits=$waits (${secs} s)"
		show "$tmp/c.err" "$tmp/s.err"
	else
		bad "hold $k: $count x 1..$max seed $seed: client exit $crc, server exit $src," \
			"credit_waits=${waits:-?} (want >= $minw), holds=${holds:-?}" \
			"releases=${rels:-?} (want $count), max_held=${mh:-?} (want <= $k)"
		for f in c.out c.err s.out s.err; do sed "s/^/       $f: /" "$tmp/$f"; done
	fi
}

# HOLD beyond what the credits allow: every batch ends with the client out of credits.
hold 3000 4112 11 1000 1
hold 2000 64 12 1000 1
# Small batches (released as soon as 5 / 40 are held): no wait required.
hold 5000 256 13 5 0
hold 3000 4112 14 40 0
hold 500 1 15 1 0

[ "$failed" -eq 0 ]
