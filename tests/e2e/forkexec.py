#!/usr/bin/env python3
# tests/e2e/forkexec.py — TCP sockets held across fork() and exec(): children write to, read from
# and echo through inherited socket fds while the parent checks every byte.
#
#   forkexec.py DATAFILE
#
# Prints "forkexec: CASE ok bytes=N" per case; exits 1 on any mismatch or failed child.
import hashlib
import os
import socket
import subprocess
import sys
import threading

TIMEOUT = 30.0


def pair():
    """A connected (client, accepted) TCP pair over 127.0.0.1; the listener is closed."""
    lst = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lst.bind(("127.0.0.1", 0))
    lst.listen(1)
    # No timeout on the client end: Python implements timeouts with O_NONBLOCK, which children
    # would inherit with the fd.
    cli = socket.create_connection(lst.getsockname())
    srv, _ = lst.accept()
    lst.close()
    srv.settimeout(TIMEOUT)
    return cli, srv


def read_all(s):
    buf = bytearray()
    while True:
        chunk = s.recv(1 << 20)
        if not chunk:
            return bytes(buf)
        buf += chunk


def read_exact(s, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(min(1 << 20, n - len(buf)))
        if not chunk:
            break
        buf += chunk
    return bytes(buf)


def check(case, got, want):
    if got != want:
        print("forkexec: %s: MISMATCH: got %d bytes, want %d" % (case, len(got), len(want)))
        sys.exit(1)
    print("forkexec: %s ok bytes=%d" % (case, len(want)))
    sys.stdout.flush()


def reap(case, pid):
    _, status = os.waitpid(pid, 0)
    if not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0:
        print("forkexec: %s: child failed, wait status %#x" % (case, status))
        sys.exit(1)


def spawn_sh(sock, script, *args):
    """fork, put sock on fd 3 in the child, exec `sh -c SCRIPT sh ARGS...`."""
    pid = os.fork()
    if pid == 0:
        try:
            os.dup2(sock.fileno(), 3)  # dup2 makes fd 3 inheritable
            os.execvp("sh", ["sh", "-c", script, "sh"] + list(args))
        finally:
            os._exit(127)
    return pid


def main():
    path = sys.argv[1]
    data = open(path, "rb").read()
    outdir = os.path.dirname(os.path.abspath(path))

    # 1. exec'd shell writes the file into the inherited socket; the parent reads it.
    cli, srv = pair()
    pid = spawn_sh(cli, 'cat -- "$1" >&3', path)
    cli.close()
    got = read_all(srv)
    reap("exec-writer", pid)
    srv.close()
    check("exec-writer", got, data)

    # 2. exec'd shell reads the inherited socket into sha256sum; the parent writes.
    cli, srv = pair()
    out = os.path.join(outdir, "exec-reader.sha")
    pid = spawn_sh(cli, 'sha256sum <&3 >"$1"', out)
    cli.close()
    srv.sendall(data)
    srv.shutdown(socket.SHUT_WR)
    reap("exec-reader", pid)
    srv.close()
    want = hashlib.sha256(data).hexdigest()
    got = open(out).read().split()[0]
    check("exec-reader", got.encode(), want.encode())

    # 3. exec'd cat echoes on the inherited socket (reads and writes the same fd).
    cli, srv = pair()
    pid = spawn_sh(cli, "cat <&3 >&3")
    cli.close()
    err = []

    def sender():
        try:
            srv.sendall(data)
            srv.shutdown(socket.SHUT_WR)
        except Exception as e:
            err.append(e)

    t = threading.Thread(target=sender)
    t.start()
    got = read_all(srv)
    t.join()
    reap("exec-echo", pid)
    srv.close()
    if err:
        raise err[0]
    check("exec-echo", got, data)

    # 4. fork without exec: the child writes, exits; the parent's copy still works both ways.
    cli, srv = pair()
    pid = os.fork()
    if pid == 0:
        try:
            cli.sendall(data)
            os._exit(0)
        except BaseException:
            os._exit(1)
    got = read_exact(srv, len(data))
    reap("fork-writer", pid)
    check("fork-writer", got, data)
    cli.sendall(b"parent after fork")
    check("fork-parent-send", read_exact(srv, 17), b"parent after fork")
    srv.sendall(b"and back")
    check("fork-parent-recv", read_exact(cli, 8), b"and back")
    cli.close()
    srv.close()

    # 5. subprocess (posix_spawn/vfork paths) with pass_fds and a pipeline writing to the socket.
    cli, srv = pair()
    fd = cli.fileno()
    p = subprocess.Popen(["sh", "-c", 'cat -- "$1" | cat >&"$2"', "sh", path, str(fd)],
                         pass_fds=(fd,), close_fds=True)
    cli.close()
    got = read_all(srv)
    if p.wait(TIMEOUT) != 0:
        print("forkexec: popen-pipeline: child exited %d" % p.returncode)
        sys.exit(1)
    srv.close()
    check("popen-pipeline", got, data)


if __name__ == "__main__":
    main()
