#!/bin/bash
# t_switch_verbs_endings — `make rxe-check`'s share of opt_switch_verbs_endings.sh: every ending of
# tests/e2e/t_edge_endings.sh once over verbs, at 1 B and at 1 MiB (four times the private ring:
# the sender's last sends wait for room, and its ending finds frames still queued), the reader
# reading at once (delay 0) in a blocking recv or the rotated poll, select and epoll in turn; one
# switched run a case, made again (twice at most, said in the case's line) when its connection
# fell back to TCP during the switch-over. The reader must see what it sees over kernel TCP, but
# where docs/verbs.md §3 says otherwise (a sender killed, crashed, aborted, or ending by a direct
# exit_group: a prefix, then ECONNRESET, shown as DOC). The comparison's self-check here is
# documented()'s alone (its runs' part is make check's, every time). 282 to 400 s in the guest
# on a 2-core host loaded 5 to 6 by other work (10 to 15 s a case: the switched pair's start with
# rdma-core, its connection's set-up and teardown under emulation; the kernel pair's 1 to 3 s);
# the full matrix, and 3 MiB: opt_switch_verbs_endings.sh, by name.
# timeout: 900
d=$(dirname -- "$0")
export EDGE_DELAYS=0 EDGE_SIZES="1 1048576" EDGE_WAITS=one EDGE_EXTRA=none ROUNDS=1
export EDGE_SELFCHECK=pure
unset EDGE_FULL
exec bash "$d/opt_switch_verbs_endings.sh"
