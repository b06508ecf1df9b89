#!/bin/bash
# t_verify_detects — a flipped byte (sanverify --corrupt) is caught through the preload: the
# server must exit 1 (mismatch) and the client must fail. Proves the other tests are not vacuous.
# timeout: 60
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build

for nb in block nonblock; do
	args=()
	[ "$nb" = nonblock ] && args=(-n -m epoll)
	start_server "srv.$nb" pre --conns-total 1 -t 30 "${args[@]}"
	rc=0
	as_t pre 60 "$SANVERIFY" client -p "$SERVER_PORT" -c 1 -t 30 -b 4M -s 51 --corrupt 100000 \
		"${args[@]}" >"$TMP/cli.$nb.out" 2>"$TMP/cli.$nb.err" || rc=$?
	srv_rc=0
	wait_pid "$SERVER_PID" 30 || srv_rc=$?
	show "$TMP/srv.$nb.err" "$TMP/cli.$nb.err"
	[ "$srv_rc" -eq 1 ] || fail "$nb: server exit $srv_rc on a corrupted stream, want 1 (mismatch)"
	[ "$rc" -ne 0 ] || fail "$nb: client exit 0 on a corrupted stream"
	grep -q 'client ok' "$TMP/cli.$nb.out" && fail "$nb: client printed ok on a corrupted stream"
	log "$nb: corruption detected (server exit $srv_rc, client exit $rc)"
done
