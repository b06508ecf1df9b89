#!/usr/bin/env python3
# tests/e2e/switch_exec.py — exec of a child that inherits the fd of a switched connection.
#
#   switch_exec.py OUTDIR
#
# One process holds both ends of a TCP connection over 127.0.0.1 (listen, connect, accept) and
# moves bytes both ways, so that (both ends preloaded) the connection switches. Then, for each end
# and for a child with and without the preload, it forks and execs `sh -c 'cat <&3 >FILE'` with
# that end on fd 3: cat must see EOF at once (0 bytes, never garbage) and exit 0, and afterwards
# the connection must still carry bytes both ways, every one checked (sha256).
# Then the same for the sending end of a second connection that only ever sent (a pure sender: its
# fd is still the TCP socket, and may still hold the peer's switch-over MARK, which a new program
# must not read as data either).
# Each end is handed to a child three ways: fork+exec preloaded, fork+exec plain, and through
# subprocess, which starts it with vfork() (the exec then runs in our memory).
# Prints "exec: pid=P ..." lines, one per step, and "exec: pid=P all 9 exec cases ok" at the end;
# exits 1 on any failure (3 if a step hung).
import hashlib
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time

from sockx import unix_inodes

STEP_TIMEOUT = 15  # seconds any one step may take before we call it hung
CHILD_TIMEOUT = 10.0

step = "start"


def say(msg):
    print("exec: pid=%d %s" % (os.getpid(), msg))
    sys.stdout.flush()


def die(msg, code=1):
    say("FAIL: " + msg)
    sys.exit(code)


problems = []


def problem(msg):
    """A failed check after which the remaining steps still make sense: report, go on."""
    problems.append(msg)
    say("FAIL: " + msg)


def on_alarm(signum, frame):
    say("FAIL: hung in step '%s' (no progress for %d s)" % (step, STEP_TIMEOUT))
    os._exit(3)


def begin(name):
    global step
    step = name
    signal.alarm(STEP_TIMEOUT)


def pair():
    """A connected (client, accepted, listener) TCP triple over 127.0.0.1. Both ends stay
    blocking, without a Python timeout (that would set O_NONBLOCK, which a child inherits)."""
    lst = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lst.bind(("127.0.0.1", 0))
    lst.listen(1)
    cli = socket.create_connection(lst.getsockname())
    srv, _ = lst.accept()
    return cli, srv, lst


def recv_exact(s, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(min(1 << 20, n - len(buf)))
        if not chunk:
            break
        buf += chunk
    return bytes(buf)


def xfer(name, src, dst, data):
    """src sends data (in a thread), dst reads exactly that many bytes; compare by sha256."""
    begin(name)
    err = []

    def sender():
        try:
            src.sendall(data)
        except Exception as e:
            err.append(e)

    t = threading.Thread(target=sender)
    t.start()
    got = recv_exact(dst, len(data))
    t.join()
    if err:
        die("%s: send failed: %r" % (name, err[0]))
    want = hashlib.sha256(data).hexdigest()
    have = hashlib.sha256(got).hexdigest()
    if have != want:
        die("%s: got %d bytes sha256=%s, want %d bytes sha256=%s"
            % (name, len(got), have, len(data), want))
    say("%s ok bytes=%d sha256=%s" % (name, len(data), have))


def sock_inode(fd):
    link = os.readlink("/proc/self/fd/%d" % fd)
    if not link.startswith("socket:["):
        die("fd %d is %s, not a socket" % (fd, link))
    return link[len("socket:["):-1]


def exec_child(name, sock, outfile, preload):
    """fork; in the child put sock on fd 3 and exec sh -c 'cat <&3 >OUTFILE; echo cat=$?'.
    Returns (wait status, the child's stdout); the status is None if the child did not finish
    within CHILD_TIMEOUT (it was killed). With preload "vfork", subprocess starts the child
    (CPython starts it with vfork(): the child execs in our memory, where the switch may look
    only at its fd table)."""
    begin(name)
    if preload == "vfork":
        fd = sock.fileno()
        try:
            p = subprocess.run(["sh", "-c", 'cat <&%d >"$1"; echo "cat=$?"' % fd, "sh", outfile],
                               pass_fds=[fd], stdout=subprocess.PIPE, timeout=CHILD_TIMEOUT)
            return p.returncode << 8, p.stdout
        except subprocess.TimeoutExpired:
            return None, b""
    r, w = os.pipe()
    env = dict(os.environ)
    if not preload:
        env.pop("LD_PRELOAD", None)
    pid = os.fork()
    if pid == 0:
        try:
            os.setpgid(0, 0)  # its own group: on a hang we kill sh and cat together
            os.close(r)
            os.dup2(w, 1)
            os.dup2(sock.fileno(), 3)  # dup2 makes fd 3 inheritable
            os.execvpe("sh", ["sh", "-c", 'cat <&3 >"$1"; echo "cat=$?"', "sh", outfile], env)
        finally:
            os._exit(127)
    try:
        os.setpgid(pid, pid)  # (also here: whichever runs first)
    except OSError:
        pass
    os.close(w)
    out = bytearray()
    end = time.monotonic() + CHILD_TIMEOUT
    os.set_blocking(r, False)
    status = None
    while True:
        try:
            chunk = os.read(r, 4096)
            if chunk:
                out += chunk
        except BlockingIOError:
            pass
        if status is None:
            p, st = os.waitpid(pid, os.WNOHANG)
            if p == pid:
                status = st
        if status is not None:
            # drain what is left in the pipe, then done
            try:
                while True:
                    chunk = os.read(r, 4096)
                    if not chunk:
                        break
                    out += chunk
            except BlockingIOError:
                pass
            break
        if time.monotonic() > end:
            # Hung: kill sh and cat, report, and go on (the parent's connection is checked next).
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.waitpid(pid, 0)
            break
        time.sleep(0.01)
    os.close(r)
    return status, bytes(out)


def main():
    outdir = sys.argv[1]
    signal.signal(signal.SIGALRM, on_alarm)
    rnd = random.Random(77)

    begin("connect")
    cli, srv, lst = pair()
    # Both ends send and both receive: each end swaps its fd when it reads (A proposes in its
    # first data call, the swap happens in a receive). The listener stays open until then: the
    # upgrade goes through the side channel that lives as long as the listener.
    xfer("warmup c->s", cli, srv, rnd.randbytes(256 * 1024))
    xfer("warmup s->c", srv, cli, rnd.randbytes(256 * 1024))
    lst.close()

    unix = unix_inodes()
    for end, sock in (("client", cli), ("server", srv)):
        if sock_inode(sock.fileno()) not in unix:
            die("the %s end (fd %d) is still the TCP socket after bytes moved both ways: the"
                " connection did not switch, so there is no switched fd to hand to exec"
                % (end, sock.fileno()))
    say("both ends switched (their fds are the notification sockets)")

    # A pure sender: the client only sends, so it never reads the server's MARK.
    begin("connect pure sender")
    pcli, psrv, plst = pair()
    xfer("pure c->s", pcli, psrv, rnd.randbytes(256 * 1024))
    plst.close()

    n = 0
    for end, sock in (("client", cli), ("server", srv), ("pure-sender", pcli)):
        for preload in (True, False, "vfork"):
            n += 1
            name = "exec.%s.%s" % (end, {True: "preloaded", False: "plain"}.get(preload, preload))
            outfile = os.path.join(outdir, name + ".bytes")
            status, out = exec_child(name, sock, outfile, preload)
            got = open(outfile, "rb").read() if os.path.exists(outfile) else b""
            if status is None:
                problem("%s: the exec'd child (sh -c 'cat <&3') did not finish within %.0f s,"
                        " having read %d bytes (%r): it blocks on the inherited switched fd"
                        % (name, CHILD_TIMEOUT, len(got), got[:32]))
            elif got:
                problem("%s: the exec'd cat read %d bytes from the inherited switched fd, expected"
                        " EOF (0 bytes): first bytes %r" % (name, len(got), got[:32]))
            elif not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0:
                problem("%s: sh exited with wait status %#x" % (name, status))
            elif out.strip() != b"cat=0":
                problem("%s: cat read 0 bytes but failed instead of seeing EOF: its shell printed"
                        " %r (cat's message is on stderr)" % (name, out))
            else:
                say("%s: cat read EOF (0 bytes), exit 0" % name)
            # The parent's connection still works both ways, every byte checked.
            if sock is pcli:
                xfer("%s after: c->s" % name, pcli, psrv, rnd.randbytes(64 * 1024 + n))
                continue
            xfer("%s after: c->s" % name, cli, srv, rnd.randbytes(64 * 1024 + n))
            xfer("%s after: s->c" % name, srv, cli, rnd.randbytes(64 * 1024 + 2 * n))

    begin("close")
    pcli.close()
    if psrv.recv(1) != b"":
        die("pure sender's peer: data where EOF was expected after the sender closed")
    psrv.close()
    cli.shutdown(socket.SHUT_WR)
    if srv.recv(1) != b"":
        die("server end: data where EOF was expected after the client's shutdown")
    srv.close()
    if cli.recv(1) != b"":
        die("client end: data where EOF was expected after the server closed")
    cli.close()
    signal.alarm(0)
    if problems:
        die("%d of %d exec cases failed (above)" % (len(problems), n))
    say("all %d exec cases ok" % n)


if __name__ == "__main__":
    main()
