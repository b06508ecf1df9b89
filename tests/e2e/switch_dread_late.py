#!/usr/bin/env python3
# tests/e2e/switch_dread_late.py — a direct-read offer that woke the receiver and was then given
# up must not vanish from its view (t_switch_dread_late.sh runs this preloaded with
# SANSWITCH_FAULT=src_late).
#
#   switch_dread_late.py ROUNDS [close|shutdown|big|odd]
#
# Each round: a switched pair in this process; the main thread sleeps in poll() for POLLIN, and
# once /proc says it does, a second thread makes one blocking 300 KiB send, which offers its
# buffer (direct read) and rings the sleeper. The main thread then takes 50 ms before it looks,
# so the sender gives its offer up after its 2 ms: it moves the bytes into the ring, and src_late
# holds it 100 ms between that move and the publication of its producer index, as a descheduled
# sender would be. With "close", a third thread closes the sending socket as soon as the receiver
# wakes, while the send waits for its offer to be taken: the close gives the offer up (the same
# move, the same 100 ms), and the receiver gets the bytes, then EOF. With "shutdown", that third
# thread calls shutdown(SHUT_WR) instead: the shutdown gives the offer up the same way before its
# DISCONNECT, the send (one send(), not sendall) returns the count moved, and the receiver gets
# exactly those bytes, then EOF. With "big", the send is of 8 MiB, more than the bulk area holds
# (the offer may not promise more than its move can take); with "odd", of 512 KiB + 1 (a region,
# a quarter of the area, and one byte that makes no region). The receiver was woken for those
# bytes, so as kernel TCP would: poll must still say POLLIN, FIONREAD must be in 1..N and not
# below what it said at the wake-up (nothing was read in between), and a MSG_DONTWAIT recv must
# return bytes (not EAGAIN, not EOF); then every byte the send reported must arrive, in order
# (sha256). Output: "round N: ok ..." or "round N: WRONG ...", and last "# sent BYTES" (what
# the sends reported, all rounds); exit 0 if every round was ok, 1 otherwise.
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
SIZES = {"big": 8 * 1024 * 1024, "odd": 512 * 1024 + 1}


def fionread(s):
    return struct.unpack("i", fcntl.ioctl(s.fileno(), termios.FIONREAD, b"\0\0\0\0"))[0]


def one_round(i, mode):
    a, b, lst = switched_pair()
    lst.close()
    size = SIZES.get(mode, N)
    ends = mode in ("close", "shutdown")  # another thread ends the stream
    data = os.urandom(size)
    me = threading.get_native_id()
    sent = {}
    woken = threading.Event()

    def ender():
        woken.wait(15)
        if mode == "close":
            a.close()
        else:
            a.shutdown(socket.SHUT_WR)

    def sender():
        if not asleep(me):
            sent["err"] = "the receiver never slept in poll"
            return
        try:
            if mode == "shutdown":
                sent["n"] = a.send(data)  # the shutdown cuts it short: what it says went
            else:
                a.sendall(data)
                sent["n"] = size
        except OSError as e:
            sent["err"] = str(e)

    t = threading.Thread(target=sender, daemon=True)
    t.start()
    if ends:
        c = threading.Thread(target=ender, daemon=True)
        c.start()
    p = select.poll()
    p.register(b, select.POLLIN)
    woke = p.poll(10000)
    at_wake = fionread(b)
    woken.set()
    time.sleep(0.05)
    ready = p.poll(0)
    avail = fionread(b)
    try:
        first = b.recv(size, socket.MSG_DONTWAIT)
        how = "%d bytes" % len(first)
    except OSError as e:
        first = b""
        how = errno.errorcode.get(e.errno, str(e.errno))
    got = bytearray(first)
    b.settimeout(10)
    eof = None
    while len(got) < size:
        more = b.recv(size)
        if not more:
            eof = True
            break
        got += more
    if ends and eof is None:
        try:
            eof = b.recv(1) == b""
        except OSError as e:
            eof = False
            how += ", then %s" % errno.errorcode.get(e.errno, str(e.errno))
    if ends:
        c.join(10)
    t.join(10)
    n = sent.get("n", 0)
    problems = []
    if not woke:
        problems.append("poll never woke")
    if not (ready and ready[0][1] & select.POLLIN):
        problems.append("POLLIN gone after the wake-up")
    if not 0 < avail <= size:
        problems.append("FIONREAD %d" % avail)
    if avail < at_wake:
        problems.append("FIONREAD went down without a read: %d at the wake-up, %d later" % (
            at_wake, avail))
    if not first:
        problems.append("MSG_DONTWAIT recv: %s" % how)
    want, have = hashlib.sha256(data[:n]).hexdigest(), hashlib.sha256(got).hexdigest()
    if have != want:
        problems.append("bytes WRONG: %d of %d sent, sha256 %.12s, sent %.12s" % (
            len(got), n, have, want))
    if "n" not in sent:
        problems.append("send: %s" % sent.get("err", "did not finish"))
    elif n <= 0 or (mode != "shutdown" and n != size):
        problems.append("send: %d of %d" % (n, size))
    if ends and not eof:
        problems.append("no EOF after the bytes")
    if mode != "close":
        a.close()
    b.close()
    print("round %d: %s (fionread %d at the wake-up, %d later, first recv %s, sent %d)" % (
        i, "WRONG: " + "; ".join(problems) if problems else "ok", at_wake, avail, how, n),
        flush=True)
    return n, not problems


print("# pid %d" % os.getpid(), flush=True)
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
mode = sys.argv[2] if len(sys.argv) > 2 else ""
if mode not in ("", "close", "shutdown") and mode not in SIZES:
    sys.exit("switch_dread_late.py: no such mode: %s" % mode)
results = [one_round(i, mode) for i in range(rounds)]
print("# sent %d" % sum(n for n, _ in results), flush=True)
sys.exit(0 if all(ok for _, ok in results) else 1)
