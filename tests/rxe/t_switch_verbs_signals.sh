#!/bin/bash
# t_switch_verbs_signals — tests/e2e/t_edge_signals.sh over verbs: calls that sleep (sends,
# receives, waits, sendfile, close with SO_LINGER, and A's first data call, which runs the
# upgrade), interrupted by a signal handler with and without SA_RESTART, end as over kernel TCP
# (EINTR, a partial count, or restarted), on connections switched onto verbs
# (SANSWITCH_PROVIDER=verbs, the pairs made on the rxe device's address, build/sansig with
# SANSIG_ADDR). One preloaded round a case (the host's test runs three), and by default the cases
# whose sleep is the provider's own (about 2 min under emulation): SIG_CASES="..." names others,
# SIG_CASES= (empty) runs all 62 (about 9 min).
# timeout: 1500
SIG_CASES=${SIG_CASES-"recv_first recv_first_restart recv_block recv_block_restart recv_waitall
	send_block send_block_restart send_full send_full_timeo sendfile_full poll_out_restart
	epoll_restart close_linger"} \
ROUNDS=${ROUNDS:-1} SANSIG_ADDR=${RXE_VM_ADDR:?RXE_VM_ADDR is not set: run through tests/rxe/run} \
	E2E_PROVIDER=verbs exec bash "$(dirname -- "$0")/../e2e/t_edge_signals.sh"
