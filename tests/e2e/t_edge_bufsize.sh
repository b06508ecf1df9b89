#!/bin/bash
# t_edge_bufsize — SO_SNDBUF / SO_RCVBUF set by both applications bound what a switched
# connection holds, as they bound TCP's queues (edge_bufsize.py, both ends at 4 KiB): a sender
# whose reader closes after 1 KiB gets TCP's error (send: ECONNRESET; sendfile: EPIPE) instead
# of seeing its 256 KiB vanish into the ring; a nonblocking sender meets EAGAIN after as few
# KiB as over TCP (compared in 16 KiB steps); a slow reader still gets every byte. Each case
# over kernel TCP, then three times with both preloaded (both ends switched), lines compared.
# Before: the ring took the whole 256 KiB and the sender saw success.
# timeout: 180
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build
# shellcheck source=tests/e2e/bufsize_lib.sh
. "$E2E_DIR/bufsize_lib.sh"
export SANSWITCH_STATS=1
bufsize_compare 3 "$PY" switched
