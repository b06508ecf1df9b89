#!/bin/bash
# t_switch_verbs_sockapi — tests/e2e/t_switch_sockapi.sh over verbs: the same socket-API checks
# (peek, FIONREAD, timeouts, shutdown, linger, readiness in every wait mode, dup, the peer's
# close...) on kernel TCP and on connections switched onto verbs (SANSWITCH_PROVIDER=verbs, the
# pairs made on the rxe device's address) must give identical results, and every pair must be
# counted in switched_verbs on both ends. Data takes a moment to cross the device, so the one
# check that polls right after a send may wait for it (SOCKAPI_ARRIVAL_MS).
# timeout: 300
SOCKAPI_ARRIVAL_MS=5000 E2E_PROVIDER=verbs SOCKX_TCP_ADDR=${RXE_VM_ADDR:?RXE_VM_ADDR is not set: run through tests/rxe/run} \
	exec bash "$(dirname -- "$0")/../e2e/t_switch_sockapi.sh"
