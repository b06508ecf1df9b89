#!/bin/bash
# t_sig_handlers — the library's trampoline between the kernel and the program's signal handlers
# (core/san_sig.c: it counts handler runs so that a call of ours ends or restarts as the
# kernel's would, docs/engine.md §9 "Signals") is invisible to the program. build/sansigact
# prints what a program sees of its handlers: signal(), sigaction(), siginterrupt(),
# sysv_signal(), sigset() read back, and the handler each returns when it replaces one;
# SA_SIGINFO arguments; SA_RESETHAND, SA_NODEFER, sa_mask, SA_ONSTACK; siglongjmp out of a
# handler; a blocking read interrupted (EINTR) and restarted; an action read raw and installed
# for another signal; a vfork child's sigaction; two threads installing at once; a fork child's
# handlers; exec. Every line preloaded must be the plain run's, three rounds (the read cases are
# timed). At 07482c6 (the first trampoline, before its review) 7 lines differ: the handler a
# replacement returned was the new one (a handler that chained to it called itself), ssignal's
# was ours; a raw copy, and the parent after a vfork child's sigaction, read back another
# handler.
# timeout: 120
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build

T=$BUILD/sansigact
[ -x "$T" ] || fail "missing $T (run make)"
as_t none 30 "$T" >"$TMP/k.out" 2>"$TMP/k.err" || { show "$TMP/k.out" "$TMP/k.err"; fail "plain run failed"; }
[ "$(tail -n1 "$TMP/k.out")" = "exec: status 0" ] || { show "$TMP/k.out" "$TMP/k.err"; fail "plain run: not every case ran"; }
log "plain: $(wc -l <"$TMP/k.out") lines"
for r in 1 2 3; do
	as_t pre 30 "$T" >"$TMP/p$r.out" 2>"$TMP/p$r.err" ||
		{ show "$TMP/p$r.out" "$TMP/p$r.err"; fail "round $r: preloaded run failed"; }
	diff -u "$TMP/k.out" "$TMP/p$r.out" >"$TMP/d$r" ||
		{ show "$TMP/d$r" "$TMP/p$r.err"; fail "round $r: preloaded, the program sees other handlers"; }
done
log "3 rounds preloaded: every line as in the plain run"
