#!/bin/bash
# t_fdtable — the fd table stays right where the wrappers see only part of an fd's life: a vfork()
# child (CPython's subprocess) closing fds must not untrack the parent's sockets, and fclose() of an
# fdopen()ed socket must untrack it (so a pipe that reuses the number is not taken for it).
# timeout: 60
# shellcheck source=tests/e2e/lib.sh
. "$(dirname -- "$0")/lib.sh"
need_build
FDOPS=$BUILD/fdops
[ -x "$FDOPS" ] || fail "missing $FDOPS (run make)"
# CPython's subprocess vforks (3.10+): the system python, whatever $PYTHON is.
SYSPY=/usr/bin/python3
[ -x "$SYSPY" ] || skip "no $SYSPY"

# --- (a) vfork child: subprocess.Popen (close_fds=True: close_range()/close() in the child).
rc=0
SANSWITCH_LOG=debug as_t pre 30 "$SYSPY" - >"$TMP/vfork.out" 2>"$TMP/vfork.err" <<'EOF' || rc=$?
import os, socket, subprocess
l = socket.socket()
l.bind(("127.0.0.1", 0))
l.listen(1)
c = socket.create_connection(l.getsockname())
a, _ = l.accept()
subprocess.Popen(["true"]).wait()
print(os.getpid(), l.fileno(), c.fileno(), a.fileno())
for s in (a, c, l):
    s.close()
EOF
no_preload_errors "$TMP/vfork.err"
[ "$rc" -eq 0 ] || { show "$TMP/vfork.out" "$TMP/vfork.err"; fail "vfork: python exited $rc"; }
read -r pid fds <"$TMP/vfork.out"
for fd in $fds; do
	grep -q "^sanswitch\[$pid\]: debug: fd $fd: untracked (close of " "$TMP/vfork.err" || {
		show "$TMP/vfork.out" "$TMP/vfork.err"
		fail "vfork: parent $pid's close of fd $fd found no entry (the vfork child wiped it?)"
	}
done
log "vfork: parent $pid untracked its own fds $fds at close"

# --- (a2) a fork without fork handlers (_Fork(), glibc 2.34+) whose child closes a switched
# connection: its copy of the library still names the parent as owner, and the close must not end
# the parent's connection (before the count covered _Fork, the child's close said DISCONNECT in
# the rings it shares with the parent, and the parent's next receive read end-of-file).
rc=0
SANSWITCH_STATS=1 as_t pre 30 "$SYSPY" "$E2E_DIR/fork_nohandlers.py" >"$TMP/_fork.out" 2>"$TMP/_fork.err" || rc=$?
no_preload_errors "$TMP/_fork.err"
[ "$rc" -eq 0 ] || { show "$TMP/_fork.out" "$TMP/_fork.err"; fail "_Fork: python exited $rc"; }
case $(cat "$TMP/_fork.out") in
skip) ;;
ok)
	grep -q "switched=1 " "$TMP/_fork.err" || { show "$TMP/_fork.err"; fail "_Fork: the connection did not switch"; }
	log "_Fork: the child's close of a switched connection left the parent's running" ;;
*) show "$TMP/_fork.out" "$TMP/_fork.err"; fail "_Fork: the parent's connection broke after the child's close" ;;
esac

# --- (b) fclose() of an fdopen()ed socket, then a pipe (likely on the same number) and its close.
rc=0
SANSWITCH_LOG=debug as_t pre 30 "$FDOPS" >"$TMP/fdops.out" 2>"$TMP/fdops.err" || rc=$?
no_preload_errors "$TMP/fdops.err"
[ "$rc" -eq 0 ] || { show "$TMP/fdops.err"; fail "fdops exited $rc"; }
tcp=$(sed -n 's/^fdops: tcp fd \([0-9]*\)$/\1/p' "$TMP/fdops.err")
[ -n "$tcp" ] || { show "$TMP/fdops.err"; fail "fdops: no tcp fd line"; }
# The TCP fd's entry goes between the fdopen and the end of fclose().
sed -n '/^fdops: tcp fd /,/^fdops: fclose done$/p' "$TMP/fdops.err" >"$TMP/fclose.part"
grep -Eq "^sanswitch\[[0-9]+\]: debug: fd $tcp: untracked \(close of active\)" "$TMP/fclose.part" || {
	show "$TMP/fdops.err"
	fail "fclose: fd $tcp not untracked"
}
# Nothing the pipe's close() does may find an entry.
sed -n '/^fdops: pipe fds /,/^fdops: pipe closed$/p' "$TMP/fdops.err" >"$TMP/pipe.part"
if grep -E 'untracked \(close of|stale' "$TMP/pipe.part"; then
	show "$TMP/fdops.err"
	fail "pipe: a stale entry of the fclose()d socket was still there (lines above)"
fi
log "fclose: fd $tcp untracked; pipe $(sed -n 's/^fdops: pipe fds //p' "$TMP/fdops.err") untouched"
