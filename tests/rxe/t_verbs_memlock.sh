#!/bin/bash
# t_verbs_memlock — a RLIMIT_MEMLOCK too small for a connection's registered slot area (about
# 520 KiB with the defaults). The guest runs as root, whose CAP_IPC_LOCK exempts it from the limit
# (ib_umem_get checks the limit only without that capability), so the enforced cases run under
# `setpriv --bounding-set -ipc_lock`: root without CAP_IPC_LOCK.
#  1. informational: `ulimit -l 16` with CAP_IPC_LOCK (not expected to be enforced)
#  2. `ulimit -l 16`, no CAP_IPC_LOCK: the client's connect fails with ENOMEM/EPERM and a clear
#     message, exit 1 (no crash); the server, never reached, then serves a normal client.
#  3. the server accepts its first connection with the soft limit at 16 KiB: that accept fails
#     cleanly (fds and VmPin as before), the client is refused (exit 2); the same listener then
#     accepts a normal client and the stream is checked.
#  4. memlock-client: a connect under 16 KiB fails cleanly (fds and VmPin as before), a normal
#     connect follows, then san_verbs_reg of 1 MiB under 16 KiB fails cleanly and works again
#     with the limit restored.
# timeout: 300
set -u
source "$(dirname -- "$0")/verbs_lib.sh"
port=18800
NOCAP=(setpriv --bounding-set -ipc_lock --inh-caps -ipc_lock)

"${NOCAP[@]}" grep CapEff /proc/self/status >"$tmp/cap" 2>&1 ||
	{ bad "setpriv cannot drop CAP_IPC_LOCK: $(cat "$tmp/cap")"; exit 1; }
capeff=$(awk '{ print $2 }' "$tmp/cap")
if (((0x$capeff >> 14) & 1)); then
	bad "CAP_IPC_LOCK still effective under setpriv: CapEff $capeff"
	exit 1
fi

# 1. With CAP_IPC_LOCK.
start_server s1 -- 1
(ulimit -l 16 && timeout 60 "$SV" client "$addr" "$port" 100 1000 1) >"$tmp/c1.out" 2>"$tmp/c1.err"
rc=$?
wait_server "$srv_pid" >/dev/null 2>&1
if [ "$rc" -eq 0 ]; then
	ok "info: ulimit -l 16 as root WITH CAP_IPC_LOCK: not enforced (connect and 100 messages ok)"
else
	ok "info: ulimit -l 16 as root WITH CAP_IPC_LOCK: client exit $rc: $(tr '\n' ' ' <"$tmp/c1.err")"
fi

# 2. ulimit -l 16 without the capability: the client cannot set up; the server stays usable.
start_server s2 -- 1
(ulimit -l 16 && timeout 60 "${NOCAP[@]}" "$SV" client "$addr" "$port" 100 1000 2) \
	>"$tmp/c2.out" 2>"$tmp/c2.err"
rc=$?
err=$(tr '\n' ' ' <"$tmp/c2.err")
if [ "$rc" -eq 1 ] && [[ $err == *"RLIMIT_MEMLOCK 16 KiB"* ]] &&
	[[ $err == *"Cannot allocate memory"* || $err == *"Operation not permitted"* ]]; then
	ok "ulimit -l 16, no CAP_IPC_LOCK: client exit 1: $err"
else
	bad "ulimit -l 16, no CAP_IPC_LOCK: client exit $rc: $err"
fi
timeout 60 "$SV" client "$addr" "$port" 1000 4112 3 >"$tmp/c2b.out" 2>"$tmp/c2b.err"
rc=$?
wait_server "$srv_pid"
src=$?
if [ "$rc" -eq 0 ] && [ "$src" -eq 0 ] && [ "$(cat "$tmp/c2b.out")" = "$(cat "$tmp/s2.out")" ]; then
	ok "then a normal client on that server: $(cat "$tmp/c2b.out")"
else
	bad "then a normal client: exit $rc, server exit $src"
	show "$tmp/c2b.out" "$tmp/c2b.err" "$tmp/s2.out" "$tmp/s2.err"
fi

# 3. The server's accept under a 16 KiB soft limit fails; its listener then serves a client.
start_server s3 "${NOCAP[@]}" -- 1 16
timeout 60 "$SV" client "$addr" "$port" 100 1000 4 >"$tmp/c3.out" 2>"$tmp/c3.err"
rc1=$?
timeout 60 "$SV" client "$addr" "$port" 2000 4112 5 >"$tmp/c3b.out" 2>"$tmp/c3b.err"
rc2=$?
wait_server "$srv_pid"
src=$?
serr=$(grep -v 'listening on' "$tmp/s3.err" | tr '\n' ' ')
if [ "$rc1" -eq 2 ] && [ "$rc2" -eq 0 ] && [ "$src" -eq 0 ] &&
	[[ $serr == *"memlock accept failed"* ]] &&
	[ "$(cat "$tmp/c3b.out")" = "$(cat "$tmp/s3.out")" ]; then
	ok "server accept under 16 KiB: refused (client exit 2), then the same listener served" \
		"$(cat "$tmp/c3b.out")"
	show "$tmp/c3.err" "$tmp/s3.err"
else
	bad "server accept under 16 KiB: first client exit $rc1 (want 2), second $rc2, server $src"
	show "$tmp/c3.out" "$tmp/c3.err" "$tmp/c3b.out" "$tmp/c3b.err" "$tmp/s3.out" "$tmp/s3.err"
fi

# 4. memlock-client: a failed connect, a good one, a failed and a good san_verbs_reg.
start_server s4 -- 1
timeout 60 "${NOCAP[@]}" "$SV" memlock-client "$addr" "$port" 16 2000 4112 6 \
	>"$tmp/c4.out" 2>"$tmp/c4.err"
rc=$?
wait_server "$srv_pid"
src=$?
cerr=$(tr '\n' ' ' <"$tmp/c4.err")
if [ "$rc" -eq 0 ] && [ "$src" -eq 0 ] && [[ $cerr == *"memlock connect failed"* ]] &&
	[[ $cerr == *"memlock reg failed"* ]] && [ "$(cat "$tmp/c4.out")" = "$(cat "$tmp/s4.out")" ]; then
	ok "memlock-client under 16 KiB: connect and san_verbs_reg failed cleanly, then" \
		"$(cat "$tmp/c4.out")"
	show "$tmp/c4.err"
else
	bad "memlock-client: exit $rc, server exit $src"
	show "$tmp/c4.out" "$tmp/c4.err" "$tmp/s4.out" "$tmp/s4.err"
fi

[ "$failed" -eq 0 ]
