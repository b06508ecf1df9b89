#!/usr/bin/env python3
"""edge_fionread.py — an edge-triggered reader that trusts FIONREAD, as nginx does (t_edge_fionread.sh).

  edge_fionread.py MSGS SIZE MODE

One connection between a parent (accepting, the reader) and a forked child (connecting, the
writer). Two request/reply exchanges first (so that under the switch it is switched), then the
child sends MSGS messages of SIZE bytes as fast as it can, then waits for the reader's "done"
before it closes: every byte must reach the reader through readiness, none through the end of
the stream.

The reader registers its socket with EPOLLIN | EPOLLRDHUP | EPOLLET and reads 8 KiB at a time,
as nginx reads a request body. MODE avail: after an edge, the first full read asks FIONREAD how
much is queued, then it reads exactly that much and waits for the next edge (nginx with
EPOLLRDHUP); a short read also ends the round. MODE short: it reads until a short read. It
alternates slow phases (1 ms after each read: the writer gets ahead and the stream never runs
dry) with fast ones. A wait of 10 s with no edge is a stall: "STALL" and exit 3.

Prints "# pid P" for both processes, then "rounds R bytes B sha256 H". Exit 1 on a wrong byte.
"""
import fcntl
import hashlib
import os
import select
import socket
import struct
import sys
import termios
import time

READ = 8192


def queued(s):
    return struct.unpack("i", fcntl.ioctl(s.fileno(), termios.FIONREAD, b"\0\0\0\0"))[0]


def writer(port, msgs, size):
    c = socket.create_connection(("127.0.0.1", port))
    for _ in range(2):
        c.sendall(b"request")
        if c.recv(10) != b"ok":
            os._exit(1)
    for i in range(msgs):
        c.sendall(bytes([i % 251]) * size)
    if c.recv(10) != b"done":
        os._exit(1)
    c.close()
    os._exit(0)


def main():
    msgs, size, mode = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen(4)
    print("# pid %d" % os.getpid(), flush=True)
    pid = os.fork()
    if pid == 0:
        print("# pid %d" % os.getpid(), flush=True)
        writer(lst.getsockname()[1], msgs, size)
    s, _ = lst.accept()
    for _ in range(2):
        if s.recv(10) != b"request":
            print("WRONG request", flush=True)
            return 1
        s.sendall(b"ok")
    s.setblocking(False)
    ep = select.epoll()
    ep.register(s.fileno(), select.EPOLLIN | select.EPOLLRDHUP | select.EPOLLET)
    h = hashlib.sha256()
    total = msgs * size
    got = rounds = reads = 0
    while got < total:
        if not ep.poll(10):
            print("STALL no edge for 10 s, got %d of %d bytes, FIONREAD says %d" %
                  (got, total, queued(s)), flush=True)
            os.kill(pid, 9)
            return 3
        rounds += 1
        avail = -1  # nginx's rev->available after an edge: unknown
        while avail != 0 and got < total:
            want = min(READ, total - got)
            try:
                d = s.recv(want)
            except BlockingIOError:
                break
            if not d:
                print("EOF at %d" % got, flush=True)
                return 1
            for k in range(0, len(d), size):
                if d[k] != ((got + k) // size) % 251:
                    print("WRONG byte at %d" % (got + k), flush=True)
                    return 1
            h.update(d)
            got += len(d)
            reads += 1
            if (reads // 200) % 2 == 0:
                time.sleep(0.001)  # a slow phase: the writer gets ahead
            if len(d) < want:
                break
            if mode == "avail":
                if avail < 0:
                    avail = queued(s)
                else:
                    avail = max(avail - len(d), 0)
    s.setblocking(True)
    s.sendall(b"done")
    _, st = os.waitpid(pid, 0)
    print("rounds %d bytes %d sha256 %s" % (rounds, got, h.hexdigest()), flush=True)
    return 0 if st == 0 and got == total else 1


if __name__ == "__main__":
    sys.exit(main())
