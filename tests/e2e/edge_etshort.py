#!/usr/bin/env python3
"""edge_etshort.py BYTES CHUNK EXCHANGES — an edge-triggered reader that takes a short read for a
drained socket, as nginx does with EPOLLRDHUP (t_edge_etshort.sh).

One process forks: the parent accepts and reads, the child connects and sends. The child makes
EXCHANGES request/reply exchanges of 5 and 2 bytes first (so that under the library's policy the
connection switches during the stream that follows, or at its start with none), then sends BYTES
bytes of random data in one sendall and shuts its side down. The parent's socket is nonblocking
and registered with EPOLLIN | EPOLLRDHUP | EPOLLET; at each edge it receives CHUNK bytes at a time
and stops at the first receive that returns less than CHUNK (the socket is then taken as
drained until the next edge), unless the peer's end (EPOLLRDHUP) was seen, or at EAGAIN. An edge
that does not come within 10 s is a stall: over kernel TCP a receive returns all that is queued,
so a short receive means the next bytes will bring an edge.
Prints "# pid P" for both processes, then "got N bytes sha256 H end E" where E is "eof" or
"stall"; exit 1 on a stall or a wrong count.
"""
import hashlib
import os
import random
import select
import socket
import sys

BYTES, CHUNK, EXCH = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])

lsn = socket.socket()
lsn.bind(("127.0.0.1", 0))
lsn.listen(1)
port = lsn.getsockname()[1]
pid = os.fork()
if pid == 0:
    lsn.close()
    s = socket.create_connection(("127.0.0.1", port))
    for _ in range(EXCH):
        s.sendall(b"HELLO")
        got = b""
        while len(got) < 2:
            d = s.recv(2 - len(got))
            if not d:
                os._exit(2)
            got += d
    data = random.Random(BYTES).randbytes(1 << 20)  # the same bytes in every run
    left = BYTES
    while left:
        k = min(left, len(data))
        s.sendall(data[:k])
        left -= k
    s.shutdown(socket.SHUT_WR)
    s.close()
    print("# pid %d" % os.getpid(), flush=True)
    os._exit(0)

c, _ = lsn.accept()
for _ in range(EXCH):
    got = b""
    while len(got) < 5:
        d = c.recv(5 - len(got))
        if not d:
            sys.exit(2)
        got += d
    c.sendall(b"OK")
c.setblocking(False)
ep = select.epoll()
ep.register(c.fileno(), select.EPOLLIN | select.EPOLLRDHUP | select.EPOLLET)
h = hashlib.sha256()
n, end, rdhup = 0, "stall", False
while end == "stall":
    ev = ep.poll(10)
    if not ev:
        break
    rdhup = rdhup or any(e & (select.EPOLLRDHUP | select.EPOLLHUP) for _, e in ev)
    while True:
        try:
            d = c.recv(CHUNK)
        except BlockingIOError:
            break
        if not d:
            end = "eof"
            break
        h.update(d)
        n += len(d)
        if len(d) < CHUNK and not rdhup:
            break
_, st = os.waitpid(pid, 0)
print("# pid %d" % os.getpid())
print("got %d bytes sha256 %s end %s" % (n, h.hexdigest(), end), flush=True)
sys.exit(0 if end == "eof" and n == BYTES and st == 0 else 1)
