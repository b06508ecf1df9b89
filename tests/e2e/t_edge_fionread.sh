#!/bin/bash
# t_edge_fionread — an edge-triggered reader that reads what FIONREAD says and then waits for the
# next edge, as nginx reads a request body (EPOLLET | EPOLLRDHUP), never meets an empty ring, and
# must still be woken for every arrival (docs/protocol.md "A bounded doorbell queue").
# edge_fionread.py: a writer sends as fast as it can (64 KiB messages, moved by READ, as curl's
# upload; 200-byte ones, DATA frames in the ring), then waits for the reader's "done" before it
# closes, so every byte must come through readiness; the reader alternates slow and fast phases.
# Over kernel TCP once (the oracle: bytes by digest), then switched, several times each.
# Before: the reader never drained its doorbell socket (it never found the ring empty), the
# writer's doorbells (one per commit for an EPOLLET reader) filled its queue (278 of them), every
# one after that failed with EAGAIN, and the reader waited for an edge that never came (every
# run, 9 MB into 64 KiB messages: nginx's PUT of 50 MiB from curl hung half the time). With
# 200-byte messages FIONREAD also counted at most 256 frames, less than the ring held, and the
# reader read that much and waited with the rest in the ring.
# timeout: 300
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build
export SANSWITCH_STATS=1
RUNS=${EDGE_FIONREAD_RUNS:-3}

# case SIZE MSGS MODE
one_case() {
	local size=$1 msgs=$2 mode=$3 ksum= out rc line i
	for i in kernel $(seq "$RUNS"); do
		out=$TMP/$size.$mode.$i
		rc=0
		if [ "$i" = kernel ]; then
			as_t none 120 "$PY" "$E2E_DIR/edge_fionread.py" "$msgs" "$size" "$mode" \
				>"$out.out" 2>"$out.err" || rc=$?
		else
			as_t pre 120 "$PY" "$E2E_DIR/edge_fionread.py" "$msgs" "$size" "$mode" \
				>"$out.out" 2>"$out.err" || rc=$?
		fi
		[ "$rc" -eq 0 ] || { show "$out.out" "$out.err"; fail "$size B, $mode, run $i: exit $rc"; }
		line=$(grep '^rounds' "$out.out") || { show "$out.out"; fail "$size B, $mode, run $i: no result"; }
		set -- $line
		[ "$4" -eq $((size * msgs)) ] || fail "$size B, $mode, run $i: $4 bytes, expected $((size * msgs))"
		if [ "$i" = kernel ]; then
			ksum=$6
		else
			[ "$6" = "$ksum" ] || fail "$size B, $mode, run $i: sha256 $6, kernel TCP's $ksum"
			pids_switched "$out.out" "$out.err" 1 "$size B, $mode, run $i"
		fi
	done
	log "$((size * msgs)) bytes in $size-byte messages, reader $mode: kernel TCP and $RUNS switched runs, no stall, same digest"
}

one_case 65536 600 avail
one_case 200 20000 avail
one_case 200 20000 short
