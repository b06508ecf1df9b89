#!/usr/bin/env python3
"""edge_et_ring.py — edge-triggered epoll on a connection while it switches over
(t_edge_et_ring.sh): the peer's later bytes come into the ring while the reader's number is
still the TCP socket.

Each of CONNS connections (both ends in this process, after one to start with) goes through: 100 bytes, a pause of a
random 0-2 ms (the no-pause switch-over ends somewhere around here), a partial read, 50 more
bytes, 50 more, read to the end, 30 more; after each step the reader's EPOLLET registration
is polled. Prints "check edges: SEQUENCE" once per distinct sequence seen, with its count in
a '#' note (so that kernel TCP's one line is the oracle), and "# pid P".
"""
import os
import random
import select
import socket
import sys

CONNS = int(os.environ.get("ET_CONNS", "40"))


def flag(ev):
    return "IN" if ev else "none"


def recv_exact(s, n):
    got = 0
    while got < n:
        d = s.recv(n - got)
        if not d:
            raise SystemExit("unexpected EOF")
        got += len(d)


def one():
    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen(1)
    a = socket.create_connection(lst.getsockname())
    b, _ = lst.accept()
    e = select.epoll()
    e.register(b, select.EPOLLIN | select.EPOLLET)
    seq = []
    a.sendall(b"x" * 100)
    seq.append(flag(e.poll(2)))
    select.select([], [], [], random.random() * 0.002)
    seq.append(flag(e.poll(0.01)))
    recv_exact(b, 10)
    seq.append(flag(e.poll(0.01)))
    a.sendall(b"y" * 50)
    seq.append(flag(e.poll(2)))  # new bytes: an edge, with bytes unread before them
    seq.append(flag(e.poll(0.01)))
    a.sendall(b"z" * 50)
    seq.append(flag(e.poll(2)))  # (the one the no-pause switch-over lost)
    recv_exact(b, 190)
    seq.append(flag(e.poll(0.01)))
    a.sendall(b"w" * 30)
    seq.append(flag(e.poll(2)))
    recv_exact(b, 30)
    e.close()
    for s in (a, b, lst):
        s.close()
    return " ".join(seq)


def open_fds():
    return len(os.listdir("/proc/self/fd"))


def main():
    print("# pid %d" % os.getpid(), flush=True)
    seen = {}
    one()  # (the first connection starts the library's own threads and files)
    before = open_fds()
    for _ in range(CONNS):
        k = one()
        seen[k] = seen.get(k, 0) + 1
    for k in sorted(seen):
        print("check edges: %s" % k)
        print("# %d of %d connections" % (seen[k], CONNS))
    # every connection's files go with it (an engine watcher that kept its sock kept them)
    for _ in range(100):
        if open_fds() <= before:
            break
        select.select([], [], [], 0.02)
    print("check files left open: %s" % ("none" if open_fds() <= before else "some"))
    print("# %d before, %d after" % (before, open_fds()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
