#!/bin/bash
# t_edge_signal_stale — a signal handler that ran while one connection's upgrade slept ends only
# the call that ran that upgrade (docs/engine.md §9 "Signals"), never a later call on another
# connection. build/sansigstale (tests/tools/sansigstale.c): connection 1's nonblocking receive
# proposes to a stopped peer and a SIGUSR1 handler runs meanwhile; then connection 2, left on TCP,
# makes a blocking receive that only SIGALRM ends, 2 s later. Its line ("c2: -1 EINTR, at the
# alarm, handler 0x" over kernel TCP) must be the kernel's under the preload (SANSWITCH_SWITCH_AFTER=0,
# so that connection 1 proposes in that receive), and the preloaded connection 1 must say its
# handler ran in the call, or the case tested nothing. Found in review of 7350c1e, where the
# note outlived its call and connection 2's receive failed EINTR at once. Three rounds.
# timeout: 120
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build

T=$BUILD/sansigstale
[ -x "$T" ] || fail "missing $T (run make)"
as_t none 20 "$T" >"$TMP/k.out" 2>"$TMP/k.err" || { show "$TMP/k.out" "$TMP/k.err"; fail "kernel run failed"; }
want=$(grep '^c2: ' "$TMP/k.out") || { show "$TMP/k.out"; fail "kernel run: no c2 line"; }
log "kernel TCP: $(grep '^c1: ' "$TMP/k.out"); $want"
for r in 1 2 3; do
	SANSWITCH_SWITCH_AFTER=0 as_t pre 20 "$T" >"$TMP/p$r.out" 2>"$TMP/p$r.err" ||
		{ show "$TMP/p$r.out" "$TMP/p$r.err"; fail "round $r: preloaded run failed"; }
	grep -q '^c1: .*, handler 1x in the call$' "$TMP/p$r.out" ||
		{ show "$TMP/p$r.out" "$TMP/p$r.err"; fail "round $r: connection 1's handler did not run in its call (tested nothing)"; }
	got=$(grep '^c2: ' "$TMP/p$r.out") || { show "$TMP/p$r.out"; fail "round $r: no c2 line"; }
	[ "$got" = "$want" ] || { show "$TMP/p$r.out" "$TMP/p$r.err"; fail "round $r: c2 differs: switch '$got', kernel TCP '$want'"; }
	log "round $r: as kernel TCP: $got"
done
log "a handler noted during connection 1's upgrade never ended connection 2's receive (3 rounds)"
