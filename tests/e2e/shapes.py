#!/usr/bin/env python3
"""shapes.py — one server shape and its client, for t_shape_*.sh.

  shapes.py server SHAPE PORTFILE CONNS     serve CONNS connections in SHAPE, then exit 0
  shapes.py client PORT CONNS SIZE          CONNS connections in turn: connect, send SIZE bytes,
                                            read the reply (the bytes back, reversed), close

Shapes: single (one process accepts and serves), workers (the parent listens; two forked
workers accept on the inherited listener, nginx style; the parent never accepts).
Each request is a 8-byte length and the bytes; the reply is the bytes reversed. The client
prints one line per connection: "conn I ok first_ms=T" (T: connect to the whole reply), or
exits 1 at the first wrong byte. Every process prints "# pid P role" so that the test can pick
its stats line.
"""
import os
import socket
import struct
import sys
import time


def recv_exact(s, n):
    buf = bytearray()
    while len(buf) < n:
        d = s.recv(n - len(buf))
        if not d:
            raise EOFError("EOF after %d of %d bytes" % (len(buf), n))
        buf += d
    return bytes(buf)


def serve_one(c):
    n = struct.unpack("!Q", recv_exact(c, 8))[0]
    data = recv_exact(c, n)
    c.sendall(data[::-1])
    c.close()


def say(role):
    print("# pid %d %s" % (os.getpid(), role), flush=True)


def server(shape, portfile, conns):
    lst = socket.socket()
    lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lst.bind(("127.0.0.1", 0))
    lst.listen(64)
    say("listener")
    with open(portfile + ".tmp", "w") as f:
        f.write("%d\n" % lst.getsockname()[1])
    os.rename(portfile + ".tmp", portfile)
    if shape == "single":
        for _ in range(conns):
            c, _ = lst.accept()
            serve_one(c)
        return 0
    if shape == "workers":
        # The parent counts what its workers served: each writes a byte per connection.
        r, w = os.pipe()
        kids = []
        for _ in range(2):
            pid = os.fork()
            if pid == 0:
                os.close(r)
                say("worker")
                try:
                    while True:
                        c, _ = lst.accept()
                        serve_one(c)
                        os.write(w, b"x")
                except Exception as e:  # the parent's kill ends us; anything else is a failure
                    print("worker: %r" % e, file=sys.stderr, flush=True)
                    os._exit(1)
            kids.append(pid)
        os.close(w)
        served = 0
        while served < conns:
            d = os.read(r, 64)
            if not d:
                break
            served += len(d)
        for pid in kids:
            os.kill(pid, 15)
        for pid in kids:
            os.waitpid(pid, 0)
        return 0 if served == conns else 1
    print("unknown shape %s" % shape, file=sys.stderr)
    return 2


def client(port, conns, size):
    say("client")
    data = os.urandom(size)
    worst = 0.0
    for i in range(conns):
        t0 = time.monotonic()
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(struct.pack("!Q", size) + data)
        back = recv_exact(s, size)
        ms = (time.monotonic() - t0) * 1000
        if s.recv(1) != b"":
            print("conn %d: bytes after the reply" % i, flush=True)
            return 1
        s.close()
        if back != data[::-1]:
            print("conn %d: WRONG reply" % i, flush=True)
            return 1
        worst = max(worst, ms)
        print("conn %d ok first_ms=%.3f" % (i, ms), flush=True)
    print("client ok conns=%d worst_ms=%.3f" % (conns, worst), flush=True)
    return 0


if __name__ == "__main__":
    a = sys.argv
    if a[1] == "server":
        sys.exit(server(a[2], a[3], int(a[4])))
    sys.exit(client(int(a[2]), int(a[3]), int(a[4])))
