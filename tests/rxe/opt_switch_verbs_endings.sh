#!/bin/bash
# opt_switch_verbs_endings — tests/e2e/t_edge_endings.sh over verbs: however a sender's process ends
# (close, exit, _exit, exit_group, shutdown then exit, SIGKILL, SIGSEGV, abort, exec, fork,
# SO_LINGER 0), the reader of a connection switched onto verbs (SANSWITCH_PROVIDER=verbs, the
# pairs made on the rxe device's address: build/sanedge with SANEDGE_ADDR) sees what it sees over
# kernel TCP, but where docs/verbs.md §3 says otherwise ("Exit": a sender killed, crashed,
# aborted or ending by a direct exit_group: a prefix, then ECONNRESET, shown as DOC; SO_LINGER
# {1, 0} gives TCP's outcome, its RST waiting for the frames before it). A smaller matrix by
# default (26 cases: every ending at delay 0 at 1 B and 3 MiB, the reader in a blocking recv and
# the rotated poll/select/epoll in turn; one preloaded round a case; 10 to 25 s a case under
# emulation on a loaded host): EDGE_DELAYS,
# EDGE_SIZES, EDGE_WAITS, EDGE_EXTRA, ROUNDS and EDGE_MODES set the matrix as in
# t_edge_endings.sh; EDGE_FULL=1 runs its full matrix (190 cases, ROUNDS 4: far longer than one
# guest run under emulation allows; raise RXE_VM_TIMEOUT).
#
# A switched run whose connection fell back to TCP during the switch-over (on a loaded host, load
# 4-5 on 2 CPUs, 2 of 3 runs once had one) is made again, twice at most (EDGE_RETRIES), and said
# so in its case's line. `make rxe-check` runs a share of it (t_switch_verbs_endings.sh: 1 B and
# 1 MiB); this one by name: scripts/rxe-vm -- tests/rxe/run opt_switch_verbs_endings.sh
# (RXE_VM_TIMEOUT=900 at least).
# timeout: 1500
d=$(dirname -- "$0")
if [ -n "${EDGE_FULL:-}" ]; then
	unset EDGE_DELAYS EDGE_SIZES EDGE_WAITS EDGE_EXTRA
else
	export EDGE_DELAYS=${EDGE_DELAYS:-0} EDGE_SIZES=${EDGE_SIZES:-1 3145728}
	export EDGE_WAITS=${EDGE_WAITS:-one} EDGE_EXTRA=${EDGE_EXTRA:-none} ROUNDS=${ROUNDS:-1}
fi
# The reader's limit counts from its start: under emulation on a busy host the two processes'
# start (the preload, rdma-core) took 6 s of the 8, and a reader still reading was cut short
# (end=TIMEOUT 2.3 s after its connection; then the sender's send failed ECONNRESET).
export EDGE_TMO=${EDGE_TMO:-30}
export SANEDGE_ADDR=${RXE_VM_ADDR:?RXE_VM_ADDR is not set: run through tests/rxe/run}
export E2E_PROVIDER=verbs
# EDGE_TEE=FILE: each line also into FILE as it comes (a path the host sees: tests/rxe/run shows
# a test's output only at its end, and nothing of a guest killed by RXE_VM_TIMEOUT)
if [ -n "${EDGE_TEE:-}" ]; then
	set -o pipefail
	bash "$d/../e2e/t_edge_endings.sh" 2>&1 | tee "$EDGE_TEE"
	exit
fi
exec bash "$d/../e2e/t_edge_endings.sh"
