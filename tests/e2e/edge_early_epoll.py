#!/usr/bin/env python3
"""edge_early_epoll.py BYTES MODE — a client that registers its socket with epoll before it
connects, as nginx does with an upstream, reads a response from a pure sender (t_edge_early_epoll.sh).

One process forks: the parent listens, accepts and sends; the child connects and reads. The
child's socket is nonblocking and registered before its connect(): EPOLLIN | EPOLLOUT |
EPOLLRDHUP | EPOLLET if MODE is "et" (nginx), EPOLLIN | EPOLLRDHUP level-triggered if "lt" (with
EPOLLOUT a level-triggered wait would return at once on any TCP socket); it waits for the connect
with poll(), sends a 16-byte request, then reads 16384 bytes at a time (to EAGAIN with EPOLLET,
once per wake-up level-triggered) until the end. The parent reads the request and then never
reads again: it sends BYTES bytes of fixed random data 65536 at a time from a nonblocking socket
registered with EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, waits for an EPOLLOUT edge at each
EAGAIN (nginx's sendfile path), shuts its side down and waits for the child. A wait of 10 s with
no event, on either side, is a stall.
Prints "# pid P" for both processes and, from the child, "got N bytes sha256 H end E" (E is "eof"
or "stall"); the parent's stall is "send stall at N". Exit 1 on a stall or a wrong count.
"""
import errno
import hashlib
import os
import random
import select
import socket
import sys

BYTES, MODE = int(sys.argv[1]), sys.argv[2]
ET = select.EPOLLET if MODE == "et" else 0

lsn = socket.socket()
lsn.bind(("127.0.0.1", 0))
lsn.listen(1)
port = lsn.getsockname()[1]
pid = os.fork()
if pid == 0:
    lsn.close()
    s = socket.socket()
    s.setblocking(False)
    ep = select.epoll()
    # level-triggered without EPOLLOUT: a TCP socket is always writable, the wait would spin
    ep.register(s.fileno(), select.EPOLLIN | select.EPOLLRDHUP | (select.EPOLLOUT | ET if ET else 0))
    e = s.connect_ex(("127.0.0.1", port))
    if e not in (0, errno.EINPROGRESS):
        os._exit(2)
    w = select.poll()
    w.register(s.fileno(), select.POLLOUT)
    if not w.poll(10000):
        print("connect stall", flush=True)
        os._exit(1)
    s.setblocking(True)
    s.sendall(b"GET /big.bin\r\n\r\n")
    s.setblocking(False)
    h = hashlib.sha256()
    n, end = 0, "stall"
    while end == "stall":
        if not ep.poll(10):
            break
        while True:
            try:
                d = s.recv(16384)
            except BlockingIOError:
                break
            if not d:
                end = "eof"
                break
            h.update(d)
            n += len(d)
            if not ET:
                break
    print("# pid %d" % os.getpid())
    print("got %d bytes sha256 %s end %s" % (n, h.hexdigest(), end), flush=True)
    os._exit(0 if end == "eof" and n == BYTES else 1)

c, _ = lsn.accept()
req = b""
while len(req) < 16:
    d = c.recv(16 - len(req))
    if not d:
        sys.exit(2)
    req += d
c.setblocking(False)
ep = select.epoll()
ep.register(c.fileno(), select.EPOLLIN | select.EPOLLOUT | select.EPOLLRDHUP | select.EPOLLET)
data = memoryview(random.Random(BYTES).randbytes(1 << 20))  # the same bytes in every run
sent, ok = 0, True
while sent < BYTES:
    at = sent % len(data)
    try:
        sent += c.send(data[at:at + min(65536, BYTES - sent, len(data) - at)])
    except BlockingIOError:
        if not ep.poll(10):
            print("send stall at %d" % sent, flush=True)
            ok = False
            break
c.shutdown(socket.SHUT_WR)
_, st = os.waitpid(pid, 0)
print("# pid %d" % os.getpid(), flush=True)
sys.exit(0 if ok and st == 0 else 1)
