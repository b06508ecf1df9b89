#!/bin/bash
# t_switch_verbs_faults — tests/e2e/t_switch_faults.sh over verbs (SANSWITCH_PROVIDER=verbs, the
# verifier's pairs on the rxe device's address): with registration failing (reg_fail: no bulk
# area, so no READ or GRANT, everything by copy), with copy memory failing too
# (reg_fail,alloc_fail: a large send fails with ENOBUFS, nothing sent, the connection usable, the
# verifier retries smaller) and with only copy memory failing (alloc_fail: large sends by READ),
# the bytes must be those of kernel TCP and the counters must say so at both ends.
# 4 MiB a connection, not the host's 8 (FAULT_BYTES): what the cases need is sends above the
# inline size (ENOBUFS from the first) and a stream that wraps the 1 MiB bulk area and the
# 256 KiB rings several times; 4 MiB does both, and each of the 15 runs moves half as much
# under emulation.
# timeout: 400
FAULT_BYTES=4M E2E_PROVIDER=verbs E2E_ADDR=${RXE_VM_ADDR:?RXE_VM_ADDR is not set: run through tests/rxe/run} \
	exec bash "$(dirname -- "$0")/../e2e/t_switch_faults.sh"
