#!/bin/bash
# t_switch_duplex — full-duplex connections switch under the default policy (docs/protocol.md
# §9.7), kernel TCP as the oracle (switch_duplex.py): 20 connections on which both ends read and
# write at once, an asyncio client (a writer task and a reader task, 1-4 MiB in writes of random
# sizes, write_eof() at the end) against an echo server whose reader and writer run at once
# (threads, then asyncio tasks), every byte's digest checked. The lines must be kernel TCP's and
# every connection switched at both ends. Before, none or only some switched: the server counted
# an exchange at each of its receives after a send while the client, whose writer ran until TCP
# pushed back, read nothing between its writes, and the server ended its window before the
# client was due (the client then heard "not owner"); and a client whose stream the kernel took
# whole shut its sends down before it was due (not_attempted at both ends).
# timeout: 600
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build
export SANSWITCH_STATS=1
N=20
RUNS=${DUPLEX_RUNS:-1}

for server in threads asyncio; do
	as_t none 120 "$PY" "$E2E_DIR/switch_duplex.py" asyncio "$server" "$N" >"$TMP/$server.none.out" \
		2>"$TMP/$server.none.err" ||
		{ show "$TMP/$server.none.out" "$TMP/$server.none.err"; fail "$server server: kernel TCP run failed"; }
	want=$(grep -v '^#' "$TMP/$server.none.out" | sort)
	[ "$(grep -c ': sent [0-9]* [0-9a-f]*, received [0-9]* ' <<<"$want")" -eq $((2 * N)) ] ||
		{ show "$TMP/$server.none.out"; fail "$server server: kernel TCP gave other lines than expected"; }
	for run in $(seq "$RUNS"); do
		out=$TMP/$server.pre.$run
		rc=0
		# the default policy (lib.sh sets the suite's: proposed before any byte)
		as_t pre 120 env -u SANSWITCH_SWITCH_AFTER "$PY" "$E2E_DIR/switch_duplex.py" asyncio "$server" \
			"$N" >"$out.out" 2>"$out.err" || rc=$?
		no_preload_errors "$out.err"
		got=$(grep -v '^#' "$out.out" | sort)
		if [ "$rc" -ne 0 ] || [ "$got" != "$want" ]; then
			show "$out.out" "$out.err"
			diff <(echo "$want") <(echo "$got") >&2 || true
			fail "$server server (run $run): the switched run differs from kernel TCP's (exit $rc)"
		fi
		pids_switched "$out.out" "$out.err" "$N" "$server server (run $run)"
	done
	log "asyncio client, $server echo server: $N full-duplex connections as kernel TCP, all switched ($RUNS runs)"
done
