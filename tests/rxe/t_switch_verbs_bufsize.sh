#!/bin/bash
# t_switch_verbs_bufsize — SO_SNDBUF / SO_RCVBUF set by both applications bound what a
# connection switched onto verbs holds, as they bound TCP's queues (tests/e2e/edge_bufsize.py,
# both ends at 4 KiB; on shm: tests/e2e/t_edge_bufsize.sh). The receiver tells the sender its
# window and how much its application has read in RCV_WINDOW messages (docs/verbs.md §1,
# "Socket buffer sizes"): a sender whose reader closes after 1 KiB gets TCP's error (send:
# ECONNRESET; sendfile: EPIPE) instead of seeing its 256 KiB vanish into the private rings and
# the receive slots; a nonblocking sender meets EAGAIN after as few KiB as over TCP (compared
# in 16 KiB steps); a slow reader (4 KiB reads, 1 ms apart) still gets every byte of 1 MiB in
# order. Each case over kernel TCP, then twice with both ends preloaded (switched onto verbs on
# both sides), the lines compared.
# timeout: 300
set -u
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/../e2e/lib.sh"
need_build
addr=${RXE_VM_ADDR:?RXE_VM_ADDR is not set: run through tests/rxe/run}
PYX=/usr/bin/python3 # not a wrapper script: its own process must be the one preloaded

# shellcheck source=tests/e2e/bufsize_lib.sh
. "$E2E_DIR/bufsize_lib.sh"
export SANSWITCH_STATS=1 SANSWITCH_PROVIDER=verbs
bufsize_compare 2 "$PYX" switched_verbs "$addr"
