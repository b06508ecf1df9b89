#!/usr/bin/env python3
"""eagain_echo.py — an event loop that reads until EAGAIN, as memcached's and nginx's keep-alive
reads do (t_spin_eagain.sh).

  eagain_echo.py server PORTFILE WAIT   echo server: nonblocking connections, each readable
                                        one read until EAGAIN (or EOF), then echoed. WAIT:
                                        lt  epoll_wait, level-triggered
                                        et  epoll_wait, edge-triggered
                                        mixed  epoll_wait and poll() in turn (a loop whose
                                            waits are not always the same kind)
                                        raw  epoll_wait as a raw system call, which the
                                            library cannot see; every 500th time also one
                                            through the library (it then watches the ring)
                                        Prints "# pid P" first; ends on SIGTERM.
  eagain_echo.py client PORT ROUNDS     ROUNDS request/reply exchanges of 1 to 300 seeded
                                        pseudo-random bytes, each reply read whole; prints
                                        "rounds N bytes B sha256 H" of what came back, then
                                        "# seconds S" (the time they took).
"""
import ctypes
import hashlib
import os
import random
import select
import signal
import socket
import sys
import time

SYS_EPOLL_WAIT = 232  # x86_64


def raw_epoll_wait(libc, epfd, buf):
    """epoll_wait by syscall(2): a wait the library does not see. Returns the number of events."""
    while True:
        n = libc.syscall(SYS_EPOLL_WAIT, epfd, buf, 16, -1)
        if n >= 0:
            return n
        if ctypes.get_errno() != 4:  # EINTR
            sys.exit("eagain_echo: raw epoll_wait failed, errno %d" % ctypes.get_errno())


def raw_ready(buf, n):
    """The fds of n struct epoll_event (packed: 4-byte events, 8-byte data) in buf."""
    return [(int.from_bytes(buf.raw[12 * i + 4:12 * i + 8], "little"), 0) for i in range(n)]


def server(portfile, wait):
    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen(8)
    lst.setblocking(False)
    print("# pid %d" % os.getpid(), flush=True)
    with open(portfile + ".tmp", "w") as f:
        f.write("%d\n" % lst.getsockname()[1])
    os.rename(portfile + ".tmp", portfile)
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
    ep = select.epoll()
    ep.register(lst.fileno(), select.EPOLLIN)
    conn_ev = select.EPOLLIN | (select.EPOLLET if wait == "et" else 0)
    conns = {}
    turn = 0
    libc = ctypes.CDLL(None, use_errno=True)
    buf = ctypes.create_string_buffer(12 * 16)
    while True:
        turn += 1
        if wait == "raw":
            ready = raw_ready(buf, raw_epoll_wait(libc, ep.fileno(), buf))
            if turn % 500 == 0:
                ready += ep.poll(0.1)
        elif wait == "mixed" and turn % 2 == 0:
            p = select.poll()
            p.register(lst.fileno(), select.POLLIN)
            for fd in conns:
                p.register(fd, select.POLLIN)
            ready = p.poll()
        else:
            ready = ep.poll()
        for fd, _ in ready:
            if fd == lst.fileno():
                try:
                    c, _ = lst.accept()
                except BlockingIOError:
                    continue
                c.setblocking(False)
                conns[c.fileno()] = c
                ep.register(c.fileno(), conn_ev)
                continue
            c = conns.get(fd)
            if c is None:
                continue
            data, end = b"", False
            while True:
                try:
                    d = c.recv(65536)
                except BlockingIOError:
                    break
                if not d:
                    end = True
                    break
                data += d
            if data:
                c.setblocking(True)
                c.sendall(data)
                c.setblocking(False)
            if end:
                ep.unregister(fd)
                del conns[fd]
                c.close()


def client(port, rounds):
    rng = random.Random(17)
    s = socket.create_connection(("127.0.0.1", port))
    h = hashlib.sha256()
    total = 0
    t0 = time.monotonic()
    for _ in range(rounds):
        msg = bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 300)))
        s.sendall(msg)
        got = b""
        while len(got) < len(msg):
            d = s.recv(len(msg) - len(got))
            if not d:
                sys.exit("eagain_echo: the server ended the connection")
            got += d
        h.update(got)
        total += len(got)
    s.close()
    print("rounds %d bytes %d sha256 %s" % (rounds, total, h.hexdigest()[:16]))
    print("# seconds %.3f" % (time.monotonic() - t0))


if __name__ == "__main__":
    if sys.argv[1] == "server":
        server(sys.argv[2], sys.argv[3])
    else:
        client(int(sys.argv[2]), int(sys.argv[3]))
