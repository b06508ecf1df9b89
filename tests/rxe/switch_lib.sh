#!/bin/bash
# tests/rxe/switch_lib.sh — sourced by the t_switch_verbs* tests: the verifier over the verbs
# provider, both processes in this guest, paired on the rxe device's address.
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "${BASH_SOURCE[0]}")/../e2e/lib.sh"
need_build
addr=${RXE_VM_ADDR:?RXE_VM_ADDR is not set: run through tests/rxe/run}

export SANSWITCH_STATS=1 SANSWITCH_PROVIDER=verbs

declare -A KBASE
# vcase NAME CONNS SERVER_ARGS -- CLIENT_ARGS: kernel-only once per NAME (or per VBASE, when
# cases differ only in how they wait, not in the bytes they move), then both ends preloaded under
# the current SANSWITCH_BULK. The crc32 must be the kernel-only run's, every
# connection switched onto verbs at both ends with the byte counts the verifier moved, and the
# bulk counters must show the path: read: read_tx_bytes > 0, grant_tx_bytes = 0; grant: the
# reverse; inline: both 0 (auto: either, by size and the peer's offer).
vcase() {
	local name=$1 conns=$2 l rd gr
	shift 2
	local -a sa=() ca=()
	while [ $# -gt 0 ] && [ "$1" != -- ]; do sa+=("$1"); shift; done
	shift
	ca=("$@")
	local base=${VBASE:-$name}
	if [ -z "${KBASE[$base]:-}" ]; then
		vpair "$name.none" none none "$conns" -a "$addr" "${sa[@]}" -- -a "$addr" "${ca[@]}"
		KBASE[$base]=$VCRC
	fi
	vpair "$name.$SANSWITCH_BULK" pre pre "$conns" -a "$addr" "${sa[@]}" -- -a "$addr" "${ca[@]}"
	[ "$VCRC" = "${KBASE[$base]}" ] ||
		fail "$name.$SANSWITCH_BULK: crc32 $VCRC over verbs, ${KBASE[$base]} kernel-only"
	vswitched "$name.$SANSWITCH_BULK" "$conns"
	for l in "$VCL" "$VSL"; do
		field_is "$l" switched_verbs
		[ "$FIELD" -eq "$conns" ] || fail "$name.$SANSWITCH_BULK: not switched onto verbs: $l"
		field_is "$l" read_tx_bytes
		rd=$FIELD
		field_is "$l" grant_tx_bytes
		gr=$FIELD
		case $SANSWITCH_BULK in
		read) [ "$rd" -gt 0 ] && [ "$gr" -eq 0 ] ;;
		grant) [ "$gr" -gt 0 ] && [ "$rd" -eq 0 ] ;;
		inline) [ "$rd" -eq 0 ] && [ "$gr" -eq 0 ] ;;
		esac || fail "$name.$SANSWITCH_BULK: read_tx_bytes=$rd grant_tx_bytes=$gr: $l"
	done
}
