#!/bin/bash
# t_switch_verbs_signals — tests/e2e/t_edge_signals.sh over verbs: every call that sleeps
# (sends, receives, waits, connect, accept, close with SO_LINGER, sendfile), interrupted by a
# signal handler with and without SA_RESTART, ends as over kernel TCP (EINTR, a partial count, or
# restarted), on connections switched onto verbs (SANSWITCH_PROVIDER=verbs, the pairs made on the
# rxe device's address, build/sansig with SANSIG_ADDR). One preloaded round a case (the host's
# test runs three).
# timeout: 1500
ROUNDS=${ROUNDS:-1} SANSIG_ADDR=${RXE_VM_ADDR:?RXE_VM_ADDR is not set: run through tests/rxe/run} \
	E2E_PROVIDER=verbs exec bash "$(dirname -- "$0")/../e2e/t_edge_signals.sh"
