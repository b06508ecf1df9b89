#!/usr/bin/env python3
# tests/e2e/switch_dread.py — the direct read (docs/protocol.md, "Direct read on shm"): a blocking
# send of a large buffer to a peer whose application waits for data offers that buffer, and the
# peer reads it with process_vm_readv straight into its receive buffer. t_switch_dread.sh runs this
# under several settings and checks the stats line against the "dread" line printed here.
#
#   switch_dread.py
#
# Cases (every byte checked, sha256 or against the seeded stream):
#   stream     16 x 1 MiB blocking sends, each made while the receiving thread sleeps in poll()
#              (its /proc/.../syscall says so: no timing decides whether it waits)
#   partial    4 MiB sends read 100000 bytes at a time: an offer read in parts, the rest offered
#   peek       FIONREAD and MSG_PEEK while a send's buffer is offered, then the bytes themselves
#   both_send  both ends send 384 KiB before reading: an offer nobody takes is withdrawn after a
#              moment and the bytes go through the shared area or the ring (TCP completes this
#              too; the size fits the ring alone, for SANSWITCH_BULK=inline)
#   kill       a child process streams a seeded sequence and is SIGKILLed mid-stream; every byte
#              the parent got must be the sequence's (a dead sender's memory is never read)
# Output: "# pid N", "case NAME: ok ..." lines, then "switched N" (the connection ends this
# process switched: both ends of each pair, our end of kill's) and "dread N" (the bytes sent to a
# receiver asleep in poll, case stream). Exit 0 if every byte arrived intact, 1 otherwise.
import fcntl
import hashlib
import os
import random
import select
import signal
import socket
import struct
import sys
import termios
import threading

from sockx import RecvThread, asleep, switched_pair


failed = []
pairs = 0


def mkpair():
    global pairs
    a, b, lst = switched_pair()
    lst.close()
    pairs += 1
    return a, b


def check(name, ok, detail=""):
    if ok:
        print("case %s: ok %s" % (name, detail))
    else:
        print("case %s: FAILED %s" % (name, detail))
        failed.append(name)
    sys.stdout.flush()


def case_stream():
    a, b = mkpair()
    chunk, rounds = 1 << 20, 16
    r = RecvThread(b, chunk * rounds, chunk, poll_first=True)
    r.start()
    r.ready.wait()
    want = hashlib.sha256()
    for i in range(rounds):
        data = random.Random(i).randbytes(chunk)
        if not asleep(r.tid):
            check("stream", False, "the reader never slept in poll")
            return 0
        a.sendall(data)
        want.update(data)
    r.join(30)
    check("stream", r.err is None and hashlib.sha256(r.data).digest() == want.digest(),
          "bytes=%d" % len(r.data))
    a.close()
    b.close()
    return chunk * rounds


def case_partial():
    a, b = mkpair()
    n = 4 << 20
    data = os.urandom(n)
    r = RecvThread(b, 2 * n, 100000, poll_first=True)
    r.start()
    a.sendall(data)
    a.sendall(data[::-1])
    r.join(30)
    check("partial", r.err is None and bytes(r.data) == data + data[::-1], "bytes=%d" % len(r.data))
    a.close()
    b.close()


def case_peek():
    a, b = mkpair()
    n = 1 << 20
    data = os.urandom(n)
    p = select.poll()
    p.register(b, select.POLLIN)
    t = threading.Thread(target=a.sendall, args=(data,))
    t.start()
    p.poll(10000)
    avail = struct.unpack("i", fcntl.ioctl(b, termios.FIONREAD, b"\0\0\0\0"))[0]
    pk = b.recv(100, socket.MSG_PEEK)
    got = bytearray()
    while len(got) < n:
        c = b.recv(n)
        if not c:
            break
        got += c
    t.join(30)
    check("peek", 0 < avail <= n and pk == data[: len(pk)] and len(pk) > 0 and bytes(got) == data,
          "fionread=%d peek=%d" % (avail, len(pk)))
    a.close()
    b.close()


def case_both_send():
    a, b = mkpair()
    n = 384 << 10
    da, db = os.urandom(n), os.urandom(n)
    res = {}

    def side(s, d, name):
        s.sendall(d)
        buf = bytearray()
        while len(buf) < n:
            c = s.recv(1 << 20)
            if not c:
                break
            buf += c
        res[name] = bytes(buf)

    ts = [threading.Thread(target=side, args=(a, da, "a"), daemon=True),
          threading.Thread(target=side, args=(b, db, "b"), daemon=True)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(30)
    check("both_send", res.get("a") == db and res.get("b") == da)
    a.close()
    b.close()


def seeded(seed, n):
    return random.Random(seed).randbytes(n)


def case_kill():
    global pairs
    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen(1)
    block = 1 << 20
    pid = os.fork()
    if pid == 0:
        try:
            c = socket.create_connection(lst.getsockname())
            c.sendall(b"x")
            c.recv(1)
            i = 0
            while True:
                c.sendall(seeded(i, block))
                i += 1
        finally:
            os._exit(0)
    s, _ = lst.accept()
    lst.close()
    s.recv(1)
    s.sendall(b"y")
    got = 0
    bad = None
    p = select.poll()
    p.register(s, select.POLLIN)
    expect = seeded(0, block)
    killed = False
    while True:
        if not killed and got >= 8 * block:
            os.kill(pid, signal.SIGKILL)
            killed = True
        p.poll(10000)
        try:
            c = s.recv(block)
        except ConnectionResetError:
            break
        if not c:
            break
        # compare against the sequence, block by block
        pos = 0
        while pos < len(c):
            k = got % block
            take = min(len(c) - pos, block - k)
            if c[pos:pos + take] != expect[k:k + take]:
                bad = got
                break
            pos += take
            got += take
            if got % block == 0:
                expect = seeded(got // block, block)
        if bad is not None:
            break
    os.waitpid(pid, 0)
    s.close()
    check("kill", bad is None and killed, "bytes=%d%s" % (got, "" if bad is None else " BAD at %d" % bad))


print("# pid %d" % os.getpid())
sys.stdout.flush()
dread = case_stream()
case_partial()
case_peek()
case_both_send()
case_kill()
print("switched %d" % (2 * pairs + 1))
print("dread %d" % dread)
sys.exit(1 if failed else 0)
