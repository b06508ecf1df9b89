#!/usr/bin/env python3
"""memcached_probe.py — memcached's text protocol over plain sockets; print what a program sees.

    memcached_probe.py PORT

Cases: set/get of values from 1 B to 1 MB on one connection, each checked by digest; 40
connections at once, each storing and reading back its own keys (threads: memcached serves them
on its worker threads); a multi-key get; "quit" (the server closes: the client reads
end-of-file); a value over the item size limit (the server's error, then its close). Every line
on stdout is an observation, never a time, so runs over kernel TCP and under the switch print
the same lines (tests/e2e/t_app_memcached.sh compares them). The first line is "# pid N".
"""
import hashlib
import os
import random
import socket
import sys
import threading
import time

TIMEOUT = 60


class Conn:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
        self.buf = bytearray()

    def _fill(self):
        d = self.s.recv(1 << 20)
        if not d:
            raise EOFError
        self.buf += d

    def line(self):
        while True:
            i = self.buf.find(b"\r\n")
            if i >= 0:
                ln = bytes(self.buf[:i])
                del self.buf[: i + 2]
                return ln
            self._fill()

    def exact(self, n):
        while len(self.buf) < n + 2:
            self._fill()
        d = bytes(self.buf[:n])
        del self.buf[: n + 2]
        return d

    def set(self, key, val, flags=0):
        self.s.sendall(b"set %s %d 0 %d\r\n" % (key, flags, len(val)) + val + b"\r\n")
        return self.line()

    def get(self, *keys):
        """{key: (flags, value)} of the keys found."""
        self.s.sendall(b"get " + b" ".join(keys) + b"\r\n")
        out = {}
        while True:
            ln = self.line()
            if ln == b"END":
                return out
            parts = ln.split()
            if parts[0] != b"VALUE":
                raise ValueError("unexpected %r" % ln)
            out[parts[1]] = (int(parts[2]), self.exact(int(parts[3])))


def value(n, seed):
    return random.Random(seed * 1000003 + n).randbytes(n)


def case_sizes(port):
    c = Conn(port)
    for n in (1, 100, 1460, 16384, 65535, 262144, 500000, 1000000):
        v = value(n, 1)
        r = c.set(b"size:%d" % n, v, flags=n % 65536)
        got = c.get(b"size:%d" % n)
        f, g = got.get(b"size:%d" % n, (None, b""))
        print("sizes %d set=%s get_same=%s flags=%s" % (n, r.decode(), g == v, f))
    keys = [b"size:%d" % n for n in (1, 100, 1460, 16384, 65535)] + [b"absent"]
    got = c.get(*keys)
    print("multiget found %d of %d, digest %s" % (
        len(got), len(keys),
        hashlib.sha256(b"".join(got[k][1] for k in keys if k in got)).hexdigest()[:16]))
    c.s.close()


def case_many(port, nconn=40, rounds=30):
    results = [None] * nconn

    def worker(i):
        try:
            c = Conn(port)
            h = hashlib.sha256()
            for r in range(rounds):
                k = b"c%d:%d" % (i, r % 5)
                v = value((i * 7919 + r * 104729) % 70000, i)
                c.set(k, v)
                h.update(c.get(k)[k][1])
            c.s.sendall(b"quit\r\n")
            end = c.s.recv(10)
            c.s.close()
            results[i] = (h.hexdigest()[:12], end)
        except Exception as e:  # reported, compared like the rest
            results[i] = ("error", type(e).__name__)

    ts = [threading.Thread(target=worker, args=(i,)) for i in range(nconn)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(TIMEOUT)
    h = hashlib.sha256(repr(results).encode()).hexdigest()[:16]
    ends = sorted(set(repr(r[1]) for r in results))
    print("many %d connections x %d set+get: all answered=%s ends=%s digest %s" % (
        nconn, rounds, all(r and r[0] != "error" for r in results), ends, h))


def case_quit(port):
    c = Conn(port)
    c.set(b"q", b"x" * 10)
    c.get(b"q")
    c.s.sendall(b"get q\r\nquit\r\nget q\r\n")  # a reply, then end-of-file
    data = b""
    while True:
        d = c.s.recv(65536)
        if not d:
            break
        data += d
    print("quit read %r then end-of-file" % data)
    try:
        c.s.sendall(b"get q\r\n")
        time.sleep(0.2)
        c.s.sendall(b"get q\r\n")
        print("quit: sends after the close succeeded")
    except OSError as e:
        print("quit: a send after the close -> %s" % type(e).__name__)
    c.s.close()


def case_toolarge(port):
    c = Conn(port)
    c.set(b"t", b"y")
    c.get(b"t")
    v = value(2 << 20, 9)  # over the 1 MB item limit
    try:
        r = c.set(b"big", v)
    except EOFError:
        r = b"<end-of-file>"
    except OSError as e:
        r = type(e).__name__.encode()
    print("toolarge set -> %r" % r)
    try:
        print("toolarge then get -> %r" % (c.get(b"t"),))
    except (EOFError, OSError) as e:
        print("toolarge then get -> %s" % type(e).__name__)
    c.s.close()


def main():
    port = int(sys.argv[1])
    print("# pid %d" % os.getpid(), flush=True)
    for name in sys.argv[2:] or ("sizes", "many", "quit", "toolarge"):
        t = time.monotonic()
        globals()["case_" + name](port)
        sys.stdout.flush()
        print("  %s: %.3f s" % (name, time.monotonic() - t), file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
