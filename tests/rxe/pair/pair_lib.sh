#!/bin/bash
# tests/rxe/pair/pair_lib.sh — sourced by tests/rxe/pair/p_*.sh, which run in both guests of
# `scripts/rxe-vm --pair` at once: ROLE (a or b), ME and PEER (the two rxe addresses), and
# put/get, through which the two sides of a test meet: files in the directory both guests see
# (RXE_VM_SHARED, on the host), written whole (a rename) so a reader never sees half of one.
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "${BASH_SOURCE[0]}")/../../e2e/lib.sh"
need_build
ROLE=${RXE_VM_ROLE:?not in a guest of scripts/rxe-vm --pair}
# shellcheck disable=SC2034 # for the tests that source this
ME=${RXE_VM_ADDR:?}
# shellcheck disable=SC2034
PEER=${RXE_VM_PEER:?}
SHARED=${RXE_VM_SHARED:?}/${PAIR_TEST:-test}
mkdir -p "$SHARED"

# put KEY VALUE — publish VALUE under KEY for the other side.
put() {
	printf '%s\n' "$2" >"$SHARED/$1.tmp.$ROLE" && mv "$SHARED/$1.tmp.$ROLE" "$SHARED/$1"
}

# get KEY SECS — the value the other side published under KEY, waiting for it up to SECS; a
# side that gave up publishes "abort" under any key the other waits for (fail then).
get() {
	local i
	for ((i = 0; i < $2 * 10; i++)); do
		if [ -f "$SHARED/$1" ]; then
			cat "$SHARED/$1"
			return 0
		fi
		[ -f "$SHARED/abort" ] && fail "the other side gave up: $(cat "$SHARED/abort")"
		_nap 0.1
	done
	fail "no '$1' from the other side within $2 s"
}

# pair_fail MSG — fail, and tell the other side not to wait for us.
pair_fail() {
	put abort "$ROLE: $*"
	fail "$@"
}
