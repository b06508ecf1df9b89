#!/usr/bin/env python3
# tests/e2e/switch_direct.py — the direct grant: a blocking receive that sleeps offers its buffer,
# and a large send writes straight into it (process_vm_writev). t_switch_direct.sh runs this under
# several SANSWITCH_BULK / SANSWITCH_FAULT settings and checks the stats line against the
# "direct N" line printed here.
#
#   switch_direct.py [enobufs]
#
# One process holds both ends of each connection (a fresh pair per case, switched by one byte each
# way). Before every send that is meant to go direct, the sender waits until the receiving thread
# is asleep in the kernel (its /proc/.../syscall is poll or ppoll: our wrapper sleeps there after
# it offered the buffer), so whether the offer is there never depends on timing. Every case checks
# every byte (sha256). Output: "case NAME: ok" lines, then "direct MIN MAX": MIN the bytes sent to
# a receiver asleep with a buffer big enough, MAX that plus the bytes that may or may not find an
# offer (case small_first): with the direct grant on, direct_tx_bytes must lie in [MIN, MAX]; off,
# it must be 0. Exit 0 if every byte arrived intact, 1 otherwise.
import hashlib
import os
import random
import select
import socket
import struct
import sys

from sockx import RecvThread, asleep, switched_pair

rnd = random.Random(20261124)
direct_expected = 0
failed = []


def mkpair():
    a, b, lst = switched_pair()
    lst.close()
    return a, b


def verdict(name, got, want, extra=""):
    if bytes(got) == want:
        print("case %s: ok%s" % (name, extra))
    else:
        failed.append(name)
        print("case %s: WRONG %d of %d bytes, sha256 %s (want %s)" % (
            name, len(got), len(want), hashlib.sha256(got).hexdigest()[:16],
            hashlib.sha256(want).hexdigest()[:16]))


def start_reader(s, n, bufsize, flags=0):
    r = RecvThread(s, n, bufsize, flags)
    r.start()
    r.ready.wait()
    if not asleep(r.tid):
        failed.append("reader never slept")
        print("# the reader never went to sleep in poll")
    return r


def c_rounds():
    """Ping-pong of large messages, both ways: each one goes into a sleeping receiver."""
    global direct_expected
    a, b = mkpair()
    for i in range(10):
        src, dst = (a, b) if i % 2 == 0 else (b, a)
        n = 256 * 1024 + rnd.randrange(256 * 1024)
        msg = rnd.randbytes(n)
        r = start_reader(dst, n, 1 << 20)
        src.sendall(msg)
        r.join(30)
        verdict("rounds.%d" % i, r.data, msg, ", %d receive(s)" % len(r.calls))
        direct_expected += n
    a.close()
    b.close()


def c_waitall():
    """MSG_WAITALL for more than one send's worth: the first send fills the buffer's start."""
    global direct_expected
    a, b = mkpair()
    msg = rnd.randbytes(3 << 20)
    r = start_reader(b, len(msg), len(msg), socket.MSG_WAITALL)
    a.sendall(msg[:1 << 20])
    a.sendall(msg[1 << 20:])
    r.join(30)
    verdict("waitall", r.data, msg, ", %d receive(s)" % len(r.calls))
    direct_expected += 1 << 20  # the rest comes while the receive is awake (no new offer)
    a.close()
    b.close()


def c_small_first():
    """A small send wakes the receiver (the offer is taken back); the large one that follows
    goes into the next offer or by the ring, whichever the receiver is doing."""
    a, b = mkpair()
    msg = rnd.randbytes(100) + rnd.randbytes(600 * 1024)
    r = start_reader(b, len(msg), 1 << 20)
    a.sendall(msg[:100])
    a.sendall(msg[100:])
    r.join(30)
    verdict("small_first", r.data, msg)
    a.close()
    b.close()
    return len(msg) - 100


def c_timeout():
    """SO_RCVTIMEO runs out with the buffer offered: EAGAIN, nothing written into it later."""
    global direct_expected
    a, b = mkpair()
    b.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 0, 200000))
    buf = bytearray(b"\xaa" * (1 << 20))
    try:
        n = b.recv_into(buf)
        print("case timeout.recv: got %d bytes, expected EAGAIN" % n)
        failed.append("timeout.recv")
    except OSError as e:
        print("case timeout.recv: %s" % ("ok" if e.errno == 11 else "errno %d" % e.errno))
    msg = rnd.randbytes(512 * 1024)
    b.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 0, 0))
    r = start_reader(b, len(msg), 1 << 20)
    a.sendall(msg)
    r.join(30)
    verdict("timeout.then", r.data, msg)
    verdict("timeout.old_buffer_untouched", buf, b"\xaa" * (1 << 20))
    direct_expected += len(msg)
    a.close()
    b.close()


def c_small_buffer():
    """A receive buffer below the threshold is never offered: the bytes come by the ring."""
    a, b = mkpair()
    msg = rnd.randbytes(200 * 1024)
    r = start_reader(b, len(msg), 16 * 1024)
    a.sendall(msg)
    r.join(30)
    verdict("small_buffer", r.data, msg)
    a.close()
    b.close()


def enobufs():
    """Under SANSWITCH_FAULT=reg_fail,alloc_fail: a blocking send of 200 KiB to a receiver asleep
    with 64 KiB moves 64 KiB directly (or 128 KiB, 192 KiB: the receiver may come back for more
    before the send's next round, depending on the scheduler; those go by a direct write again or
    by a direct read of the sender's buffer, neither needs memory), then the rest finds no
    memory (ENOBUFS): the send returns short. An EPOLLET waiter must then get an EPOLLOUT edge, as
    TCP gives one when room comes (before the fix it waited for ever); the rest goes in 4 KiB
    pieces (inline, never direct), all intact."""
    a, b = mkpair()
    ep = select.epoll()
    ep.register(a, select.EPOLLOUT | select.EPOLLET)
    ep.poll(1)  # the first edge (writable since the start)
    msg = rnd.randbytes(200 * 1024)
    r = start_reader(b, len(msg), 64 * 1024)
    n = a.send(msg)
    short_ok = 0 < n < len(msg) and n % (64 * 1024) == 0
    print("case enobufs.short_send: %s" % ("ok %d bytes" % n if short_ok else "%d bytes" % n))
    ev = ep.poll(2)
    print("case enobufs.edge: %s" % ("ok" if any(e & select.EPOLLOUT for _, e in ev)
                                     else "NO EPOLLOUT EDGE"))
    if not short_ok or not any(e & select.EPOLLOUT for _, e in ev):
        failed.append("enobufs")
    direct = n
    while n < len(msg):
        n += a.send(msg[n:n + 4096])
    r.join(30)
    verdict("enobufs.stream", r.data, msg)
    ep.close()
    a.close()
    b.close()
    print("pairs 1")
    print("direct %d %d" % (64 * 1024, direct))


def main():
    if sys.argv[1:] == ["enobufs"]:
        print("# pid %d" % os.getpid())
        enobufs()
        sys.exit(1 if failed else 0)
    print("# pid %d" % os.getpid())
    c_rounds()
    c_waitall()
    maybe = c_small_first()
    c_timeout()
    c_small_buffer()
    print("pairs 5")
    print("direct %d %d" % (direct_expected, direct_expected + maybe))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
