#!/usr/bin/env python3
# tests/e2e/switch_dread_late.py — a direct-read offer that woke the receiver and was then given
# up must not vanish from its view (t_switch_dread_late.sh runs this preloaded with
# SANSWITCH_FAULT=src_late).
#
#   switch_dread_late.py ROUNDS [close]
#
# Each round: a switched pair in this process; the main thread sleeps in poll() for POLLIN, and
# once /proc says it does, a second thread makes one blocking 300 KiB send, which offers its
# buffer (direct read) and rings the sleeper. The main thread then takes 50 ms before it looks,
# so the sender gives its offer up after its 2 ms: it moves the bytes into the ring, and src_late
# holds it 100 ms between that move and the publication of its producer index, as a descheduled
# sender would be. With "close", a third thread closes the sending socket as soon as the receiver
# wakes, while the send waits for its offer to be taken: the close gives the offer up (the same
# move, the same 100 ms), and the receiver gets the bytes, then EOF. The receiver was woken for
# those bytes, so as kernel TCP would: poll must still say POLLIN, FIONREAD must be in 1..N and a
# MSG_DONTWAIT recv must return bytes (not EAGAIN, not EOF); then every byte must arrive, in
# order (sha256). Output: "round N: ok ..." or "round N: WRONG ..."; exit 0 if every round was
# ok, 1 otherwise.
import errno
import fcntl
import hashlib
import os
import select
import socket
import struct
import sys
import termios
import threading
import time

from sockx import asleep, switched_pair

N = 300 * 1024


def fionread(s):
    return struct.unpack("i", fcntl.ioctl(s.fileno(), termios.FIONREAD, b"\0\0\0\0"))[0]


def one_round(i, close):
    a, b, lst = switched_pair()
    lst.close()
    data = os.urandom(N)
    me = threading.get_native_id()
    sent = {}
    woken = threading.Event()

    def closer():
        woken.wait(15)
        a.close()

    def sender():
        if not asleep(me):
            sent["err"] = "the receiver never slept in poll"
            return
        try:
            a.sendall(data)
            sent["ok"] = True
        except OSError as e:
            sent["err"] = str(e)

    t = threading.Thread(target=sender, daemon=True)
    t.start()
    if close:
        c = threading.Thread(target=closer, daemon=True)
        c.start()
    p = select.poll()
    p.register(b, select.POLLIN)
    woke = p.poll(10000)
    woken.set()
    time.sleep(0.05)
    ready = p.poll(0)
    avail = fionread(b)
    try:
        first = b.recv(N, socket.MSG_DONTWAIT)
        how = "%d bytes" % len(first)
    except OSError as e:
        first = b""
        how = errno.errorcode.get(e.errno, str(e.errno))
    got = bytearray(first)
    b.settimeout(10)
    while len(got) < N:
        more = b.recv(N)
        if not more:
            break
        got += more
    eof = None
    if close:
        try:
            eof = b.recv(1) == b""
        except OSError as e:
            eof = False
            how += ", then %s" % errno.errorcode.get(e.errno, str(e.errno))
        c.join(10)
    t.join(10)
    problems = []
    if not woke:
        problems.append("poll never woke")
    if not (ready and ready[0][1] & select.POLLIN):
        problems.append("POLLIN gone after the wake-up")
    if not 0 < avail <= N:
        problems.append("FIONREAD %d" % avail)
    if not first:
        problems.append("MSG_DONTWAIT recv: %s" % how)
    want, have = hashlib.sha256(data).hexdigest(), hashlib.sha256(got).hexdigest()
    if have != want:
        problems.append("bytes WRONG: %d of %d, sha256 %.12s, sent %.12s" % (
            len(got), N, have, want))
    if not sent.get("ok"):
        problems.append("send: %s" % sent.get("err", "did not finish"))
    if close and not eof:
        problems.append("no EOF after the bytes")
    if not close:
        a.close()
    b.close()
    print("round %d: %s (fionread %d, first recv %s)" % (
        i, "WRONG: " + "; ".join(problems) if problems else "ok", avail, how), flush=True)
    return not problems


print("# pid %d" % os.getpid(), flush=True)
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
close = len(sys.argv) > 2 and sys.argv[2] == "close"
ok = sum(one_round(i, close) for i in range(rounds))
sys.exit(0 if ok == rounds else 1)
