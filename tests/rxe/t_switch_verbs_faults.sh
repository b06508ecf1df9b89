#!/bin/bash
# t_switch_verbs_faults — tests/e2e/t_switch_faults.sh over verbs (SANSWITCH_PROVIDER=verbs, the
# verifier's pairs on the rxe device's address): with registration failing (reg_fail: no bulk
# area, so no READ or GRANT, everything by copy), with copy memory failing too
# (reg_fail,alloc_fail: a large send fails with ENOBUFS, nothing sent, the connection usable, the
# verifier retries smaller) and with only copy memory failing (alloc_fail: large sends by READ),
# the bytes must be those of kernel TCP and the counters must say so at both ends.
# timeout: 400
E2E_PROVIDER=verbs E2E_ADDR=${RXE_VM_ADDR:?RXE_VM_ADDR is not set: run through tests/rxe/run} \
	exec bash "$(dirname -- "$0")/../e2e/t_switch_faults.sh"
