#!/usr/bin/env python3
"""redis_probe.py — drive a redis-server over plain sockets (RESP) and print what a program sees.

    redis_probe.py PORT CASE...      CASE: sizes pipeline multi pubsub kill sleep bgsave digest

Every line on stdout is what the program observed (replies, digests, endings), never a time, so
the run over kernel TCP and the run under the switch must print the same lines
(tests/e2e/t_app_redis.sh compares them). Times go to stderr, for a person to read. The first
line is "# pid N" (the stats line to look for). Exit status 0 unless the server misbehaved in a
way that leaves nothing to compare (a reply missing within 60 s).
"""
import hashlib
import os
import random
import socket
import sys
import time

TIMEOUT = 60


class Conn:
    """One RESP connection: commands out, replies parsed from a buffer."""

    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
        self.buf = bytearray()

    def send(self, *cmds):
        out = bytearray()
        for args in cmds:
            out += b"*%d\r\n" % len(args)
            for a in args:
                if isinstance(a, str):
                    a = a.encode()
                elif isinstance(a, int):
                    a = str(a).encode()
                out += b"$%d\r\n" % len(a) + a + b"\r\n"
        self.s.sendall(out)

    def _fill(self):
        d = self.s.recv(1 << 20)
        if not d:
            raise EOFError("end-of-file")
        self.buf += d

    def _line(self):
        while True:
            i = self.buf.find(b"\r\n")
            if i >= 0:
                line = bytes(self.buf[:i])
                del self.buf[: i + 2]
                return line
            self._fill()

    def _exact(self, n):
        while len(self.buf) < n + 2:
            self._fill()
        d = bytes(self.buf[:n])
        del self.buf[: n + 2]
        return d

    def reply(self):
        line = self._line()
        t, rest = line[:1], line[1:]
        if t in (b"+", b"-"):
            return ("ERR " if t == b"-" else "") + rest.decode()
        if t == b":":
            return int(rest)
        if t == b"$":
            n = int(rest)
            return None if n < 0 else self._exact(n)
        if t == b"*":
            n = int(rest)
            return None if n < 0 else [self.reply() for _ in range(n)]
        raise ValueError("bad reply line %r" % line)

    def cmd(self, *args):
        self.send(args)
        return self.reply()

    def close(self):
        self.s.close()


def show(v):
    """A reply as one printable word: bulk strings by length and digest."""
    if isinstance(v, bytes):
        return "bulk:%d:%s" % (len(v), hashlib.sha256(v).hexdigest()[:16]) if len(v) > 40 else repr(v)
    if isinstance(v, list):
        return "[" + ",".join(show(x) for x in v) + "]"
    return repr(v)


def value(n, seed):
    return random.Random(seed * 1000003 + n).randbytes(n)


def case_sizes(port):
    """SET then GET of values from 1 B to 50 MB on one connection, each checked by digest."""
    c = Conn(port)
    for n in (1, 100, 1460, 16384, 65535, 262144, 1 << 20, 4 << 20, 16 << 20, 50_000_000):
        v = value(n, 1)
        t = time.monotonic()
        r1 = c.cmd("SET", "size:%d" % n, v)
        got = c.cmd("GET", "size:%d" % n)
        r3 = c.cmd("STRLEN", "size:%d" % n)
        same = got == v
        print("sizes %d set=%s get_same=%s strlen=%s" % (n, r1, same, r3))
        print("  sizes %d: %.3f s" % (n, time.monotonic() - t), file=sys.stderr)
    c.close()


def case_pipeline(port):
    """2000 commands in one write, the replies read after."""
    c = Conn(port)
    cmds = []
    for i in range(1000):
        cmds.append(("SET", "p:%d" % i, value(i * 37 % 5000, 2)))
        cmds.append(("GET", "p:%d" % i))
    c.send(*cmds)
    h = hashlib.sha256()
    bad = 0
    for i in range(1000):
        if c.reply() != "OK":
            bad += 1
        h.update(c.reply())
    print("pipeline 2000 replies, bad sets %d, gets sha %s" % (bad, h.hexdigest()[:16]))
    c.close()


def case_multi(port):
    c = Conn(port)
    c.cmd("DEL", "m:n", "m:l")
    out = [c.cmd("MULTI")]
    for i in range(50):
        out.append(c.cmd("INCR", "m:n"))
        out.append(c.cmd("RPUSH", "m:l", value(i * 100, 3)))
    out.append(show(c.cmd("EXEC")))
    out.append(show(c.cmd("LRANGE", "m:l", 0, -1)))
    print("multi " + hashlib.sha256(" ".join(str(x) for x in out).encode()).hexdigest()[:16] +
          " " + out[0] + " " + out[1] + " " + out[-2][:40])
    c.close()


def case_pubsub(port):
    """A subscriber on one connection, 200 messages (up to 1 MB) published from another."""
    sub = Conn(port)
    print("pubsub subscribe " + show(sub.cmd("SUBSCRIBE", "chan")))
    pub = Conn(port)
    counts = set()
    sizes = [random.Random(i).choice((0, 1, 10, 1000, 70000, 1 << 20)) for i in range(200)]
    hp = hashlib.sha256()
    for i, n in enumerate(sizes):
        m = value(n, 4 + i)
        hp.update(m)
        counts.add(pub.cmd("PUBLISH", "chan", m))
    hs = hashlib.sha256()
    for i in range(len(sizes)):
        r = sub.reply()
        hs.update(r[2])
    print("pubsub published to %s; subscriber's digest %s" %
          (sorted(counts), "same" if hs.digest() == hp.digest() else "DIFFERENT"))
    print("pubsub unsubscribe " + show(sub.cmd("UNSUBSCRIBE", "chan")))
    print("pubsub ping after " + show(sub.cmd("PING")))
    sub.close()
    pub.close()


def case_kill(port):
    """CLIENT KILL of a connected client (switched by then): what does the victim see?"""
    victim = Conn(port)
    victim.cmd("CLIENT", "SETNAME", "victim")
    victim.cmd("SET", "k:kill", "x" * 1000)
    vid = victim.cmd("CLIENT", "ID")
    killer = Conn(port)
    killer.cmd("PING")
    print("kill killed " + show(killer.cmd("CLIENT", "KILL", "ID", vid)))
    t = time.monotonic()
    try:
        d = victim.s.recv(100)
        print("kill victim recv -> %r" % d)
    except OSError as e:
        print("kill victim recv -> %s" % type(e).__name__)
    print("  kill: the victim's recv returned after %.3f s" % (time.monotonic() - t), file=sys.stderr)
    # a write to the killed connection, then a read
    try:
        victim.s.sendall(b"*1\r\n$4\r\nPING\r\n")
        print("kill victim send ok")
    except OSError as e:
        print("kill victim send -> %s" % type(e).__name__)
    try:
        d = victim.s.recv(100)
        print("kill victim second recv -> %r" % d)
    except OSError as e:
        print("kill victim second recv -> %s" % type(e).__name__)
    print("kill killer still " + show(killer.cmd("PING")))
    victim.close()
    killer.close()


def case_sleep(port):
    """DEBUG SLEEP 1 on one connection while 8 others wait for their replies."""
    conns = [Conn(port) for _ in range(9)]
    for c in conns:
        c.cmd("PING")
        c.cmd("SET", "k:sleep", "y")  # a second exchange: switched from here on
    conns[0].send(("DEBUG", "SLEEP", "1"))
    time.sleep(0.1)
    t = time.monotonic()
    for i, c in enumerate(conns[1:]):
        c.send(("INCR", "k:sleepcount"))
    got = sorted(c.reply() for c in conns[1:])
    waited = time.monotonic() - t
    print("sleep replies " + show(conns[0].reply()) + " " + show(got))
    print("  sleep: the waiting clients had their replies %.3f s after the DEBUG SLEEP 1" % waited,
          file=sys.stderr)
    for c in conns:
        c.close()


def case_bgsave(port):
    """BGSAVE (redis forks a child that writes the dump) while 20 switched connections are open
    and busy; the child is slowed so that the traffic overlaps it, then ends with _exit."""
    conns = [Conn(port) for _ in range(20)]
    for i, c in enumerate(conns):
        c.cmd("SET", "bg:%d" % i, value(20000, 5 + i))
        c.cmd("GET", "bg:%d" % i)
    ctl = conns[0]
    ctl.cmd("CONFIG", "SET", "rdb-key-save-delay", "2000")  # 2 ms a key: the child lives a while
    before = ctl.cmd("LASTSAVE")
    print("bgsave " + show(ctl.cmd("BGSAVE")))
    rounds = 0
    t = time.monotonic()
    while True:
        for i, c in enumerate(conns):
            c.send(("SET", "bg:%d" % i, value(20000 + rounds, 6 + i)), ("GET", "bg:%d" % i))
        for i, c in enumerate(conns):
            c.reply()
            c.reply()
        rounds += 1
        info = ctl.cmd("INFO", "persistence").decode()
        if "rdb_bgsave_in_progress:0" in info and rounds >= 5:
            break
        if time.monotonic() - t > TIMEOUT:
            print("bgsave TIMEOUT")
            break
    st = [x for x in info.split("\r\n") if x.startswith("rdb_last_bgsave_status")]
    print("  bgsave: %d rounds of 20 SET+GET while the child saved" % rounds, file=sys.stderr)
    # The child is gone now: every connection must still work, and still be its own.
    ctl.cmd("CONFIG", "SET", "rdb-key-save-delay", "0")
    for i, c in enumerate(conns):
        c.cmd("SET", "bg:%d" % i, value(30000, 7 + i))
    same = all(c.cmd("GET", "bg:%d" % i) == value(30000, 7 + i) for i, c in enumerate(conns))
    print("bgsave %s lastsave_changed=%s, after the child: all 20 connections read back their own "
          "value: %s" % (st, ctl.cmd("LASTSAVE") != before, same))
    for c in conns:
        c.close()


def case_digest(port):
    """The dataset's digest (DEBUG DIGEST) and size: to compare a replica with its master."""
    c = Conn(port)
    print("digest dbsize=%s %s" % (c.cmd("DBSIZE"), show(c.cmd("DEBUG", "DIGEST"))))
    c.close()


CASES = {
    "sizes": case_sizes, "pipeline": case_pipeline, "multi": case_multi, "pubsub": case_pubsub,
    "kill": case_kill, "sleep": case_sleep, "bgsave": case_bgsave, "digest": case_digest,
}


def main():
    port = int(sys.argv[1])
    print("# pid %d" % os.getpid(), flush=True)
    for name in sys.argv[2:]:
        t = time.monotonic()
        CASES[name](port)
        sys.stdout.flush()
        print("  %s: %.3f s" % (name, time.monotonic() - t), file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
