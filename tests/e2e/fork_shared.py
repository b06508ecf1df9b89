#!/usr/bin/env python3
# tests/e2e/fork_shared.py — one TCP connection used by two processes after fork(), once it has
# switched (docs/engine.md §7.1): the library must give what kernel TCP gives.
#
#   fork_shared.py server PORTFILE CASE     (listens on 127.0.0.1, one connection, then exits)
#   fork_shared.py client PORT CASE RESULTFILE
#
# Both ends first exchange one-byte pings until each sees its fd switched (its /proc/self/fd link
# names another socket: the notification socket took the number) when preloaded, three pings
# otherwise. Then, by CASE (the client forks unless said):
#   a  the child reads 8 MiB while the parent writes 8 MiB (rsync's daemon client)
#   b  the parent closes its copy at once; the child writes 8 MiB, reads 8 MiB, closes
#   c  the child only exits (_exit, no close); the parent writes 8 MiB, reads 8 MiB, closes
#   d  the parent writes 8 MiB and exits (_exit, no close) while the child reads 8 MiB
#   e  the server forks: its child reads 8 MiB while its parent writes 8 MiB
#   g  as c, but the child execs a shell that exits (the connection's number inherited)
#   f  (SANSWITCH_FAULT=fork_die_locked) the child dies holding the connection's lock in its first
#      send: the parent's next send and the server's read must see the connection reset
# Each process that reads prints "ROLE: rx=SHA256 end=HOW" (HOW: EOF, ECONNRESET, ...) into its
# output (the client's child into RESULTFILE.child); every byte is checked against what was sent.
import hashlib
import os
import random
import socket
import sys
import threading
import time

from sockx import listen_portfile

SIZE = 8 << 20
TIMEOUT = 60.0


def data(tag):
    return random.Random(tag).randbytes(SIZE)


def link(fd):
    return os.readlink("/proc/self/fd/%d" % fd)


def preloaded():
    return "libsanswitch" in os.environ.get("LD_PRELOAD", "")


def ping(sock, first, mine, other_first):
    """One-byte pings until both ends report switched (each byte: 1 once its sender switched)."""
    for i in range(2000):
        sw = b"1" if (not preloaded() and i >= 3) or link(sock.fileno()) != first else b"0"
        if other_first:
            got = sock.recv(1)
            sock.sendall(sw)
        else:
            sock.sendall(sw)
            got = sock.recv(1)
        if not got:
            return "peer closed during the pings"
        if sw == b"1" and got == b"1":
            return None
        time.sleep(0.002)
    return "%s: the connection did not switch" % mine


def sockets_left():
    """Sockets this process still has open, waited for (at most 2 s) to be none: a close lets go
    of the library's own fds of the connection too, some of them from the engine's thread."""
    for _ in range(200):
        n = 0
        for f in os.listdir("/proc/self/fd"):
            try:
                n += os.readlink("/proc/self/fd/" + f).startswith("socket:")
            except OSError:
                pass  # (the listing's own fd, closed by now)
        if n == 0:
            break
        time.sleep(0.01)
    return n


def read_all(sock, want):
    """Read to the end; the digest of what came, how it ended, and whether it is want."""
    h, n, ok = hashlib.sha256(), 0, True
    end = "EOF"
    while True:
        try:
            b = sock.recv(1 << 20)
        except OSError as e:
            end = {104: "ECONNRESET", 32: "EPIPE"}.get(e.errno, type(e).__name__)
            break
        if not b:
            break
        ok = ok and want[n:n + len(b)] == b
        h.update(b)
        n += len(b)
    ok = ok and n == len(want)
    return "rx=%s bytes=%d match=%s end=%s" % (h.hexdigest()[:16], n, "yes" if ok else "NO", end)


def read_n(sock, n):
    buf = bytearray()
    while len(buf) < n:
        b = sock.recv(min(1 << 20, n - len(buf)))
        if not b:
            break
        buf += b
    return bytes(buf)


def server(portfile, case):
    lst = listen_portfile(portfile)
    c, _ = lst.accept()
    lst.close()
    c.settimeout(TIMEOUT)
    first = link(c.fileno())
    err = ping(c, first, "server", True)
    if err:
        print("server: " + err)
        return 1
    up, down = data("up"), data("down")
    if case == "e":
        pid = os.fork()
        if pid == 0:
            print("server child: " + read_all(c, up))
            sys.stdout.flush()
            c.close()
            os._exit(0)
        c.sendall(down)
        c.shutdown(socket.SHUT_WR)
        c.close()
        _, st = os.waitpid(pid, 0)
        return 0 if st == 0 else 1
    if case == "a":
        t = threading.Thread(target=lambda: (c.sendall(down), c.shutdown(socket.SHUT_WR)))
        t.start()
        print("server: " + read_all(c, up))
        t.join()
    elif case == "f":
        print("server: " + read_all(c, b""))
    else:
        # b, c, d, g: the client's side sends first, then reads what we send back
        got = read_n(c, SIZE)
        print("server: got %d bytes, match=%s" % (len(got), "yes" if got == up else "NO"))
        sys.stdout.flush()
        c.sendall(down)
        print("server: then " + read_all(c, b""))
    c.close()
    return 0


def client(port, case, result):
    c = socket.create_connection(("127.0.0.1", int(port)))
    c.settimeout(TIMEOUT)
    first = link(c.fileno())
    err = ping(c, first, "client", False)
    if err:
        print("client: " + err)
        return 1
    up, down = data("up"), data("down")

    def child_says(line):
        with open(result + ".child", "w") as f:
            f.write("client child: " + line + "\n")

    if case == "e":
        t = threading.Thread(target=lambda: (c.sendall(up), c.shutdown(socket.SHUT_WR)))
        t.start()
        print("client: " + read_all(c, down))
        t.join()
        c.close()
        return 0
    pid = os.fork()
    if case == "a":
        if pid == 0:
            child_says(read_all(c, down))
            c.close()
            os._exit(0)
        c.sendall(up)
        c.shutdown(socket.SHUT_WR)
        _, st = os.waitpid(pid, 0)
        c.close()
        return 0 if st == 0 else 1
    if case == "b":
        if pid == 0:
            c.sendall(up)
            got = read_n(c, SIZE)
            c.close()
            child_says("got %d bytes, match=%s, sockets left open %d" %
                       (len(got), "yes" if got == down else "NO", sockets_left()))
            os._exit(0)
        c.close()
        _, st = os.waitpid(pid, 0)
        return 0 if st == 0 else 1
    if case in ("c", "g"):
        if pid == 0:
            if case == "g":
                # the connection's number is inherited (not close-on-exec) by a program that
                # never touches it
                os.set_inheritable(c.fileno(), True)
                os.execvp("sh", ["sh", "-c", "exit 0"])
            os._exit(0)
        _, st = os.waitpid(pid, 0)
        c.sendall(up)
        got = read_n(c, SIZE)
        c.close()
        print("client: got %d bytes, match=%s, sockets left open %d" %
              (len(got), "yes" if got == down else "NO", sockets_left()))
        return 0 if st == 0 else 1
    if case == "f":
        # SANSWITCH_FAULT=fork_die_locked: the child dies in its first send, the lock held
        if pid == 0:
            c.sendall(b"x" * 1000)
            os._exit(0)
        _, st = os.waitpid(pid, 0)
        print("client: child %s" % ("killed by signal %d" % os.WTERMSIG(st)
                                    if os.WIFSIGNALED(st) else "exit %d" % os.WEXITSTATUS(st)))
        try:
            c.sendall(b"y" * 1000)
            print("client: a send after it: ok")
        except OSError as e:
            print("client: a send after it: " + {104: "ECONNRESET", 32: "EPIPE"}.get(e.errno, str(e)))
        c.close()
        return 0
    if case == "d":
        if pid == 0:
            got = read_n(c, SIZE)
            c.close()
            child_says("got %d bytes, match=%s, sockets left open %d" %
                       (len(got), "yes" if got == down else "NO", sockets_left()))
            os._exit(0)
        c.sendall(up)
        sys.stdout.flush()
        os._exit(0)
    return 2


def main():
    if sys.argv[1] == "server":
        sys.exit(server(sys.argv[2], sys.argv[3]))
    sys.exit(client(sys.argv[2], sys.argv[3], sys.argv[4]))


main()
